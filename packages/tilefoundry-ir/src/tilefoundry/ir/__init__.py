"""tilefoundry.ir."""
