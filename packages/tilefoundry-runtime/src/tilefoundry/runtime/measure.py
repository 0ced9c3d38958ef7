"""measure.check: the spec's name (seed 000 §1.6) for tilefoundry.check.check, the same function."""

from tilefoundry.check import check

__all__ = ["check"]
