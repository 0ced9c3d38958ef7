"""Hooks of the cuda target."""
