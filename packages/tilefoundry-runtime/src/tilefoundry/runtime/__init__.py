"""tilefoundry.runtime."""
