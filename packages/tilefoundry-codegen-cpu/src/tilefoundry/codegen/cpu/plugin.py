"""Hooks of the cpu target."""
