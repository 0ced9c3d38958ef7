"""tilefoundry.check."""
