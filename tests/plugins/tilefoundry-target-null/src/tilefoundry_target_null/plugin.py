"""Target plugin hooks for the null target."""
