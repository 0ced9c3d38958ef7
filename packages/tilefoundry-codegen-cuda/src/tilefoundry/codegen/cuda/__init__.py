"""The cuda target plugin."""
