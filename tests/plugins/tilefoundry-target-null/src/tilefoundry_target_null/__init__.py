"""A do-nothing TileFoundry target, installed in the test environment."""
