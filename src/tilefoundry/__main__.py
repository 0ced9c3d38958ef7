"""`python -m tilefoundry` and the `tilefoundry` console script."""

from tilefoundry.cli import main

__all__ = ["main"]

if __name__ == "__main__":
    raise SystemExit(main())
