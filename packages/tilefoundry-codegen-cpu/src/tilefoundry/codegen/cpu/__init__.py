"""The cpu target plugin."""
