"""The `tilefoundry` command line."""

import sys


def main(argv: list[str] | None = None) -> int:
    """Run the command line; returns the exit status."""
    args = sys.argv[1:] if argv is None else argv
    print(f"tilefoundry: no command yet ({args})", file=sys.stderr)
    return 2


if __name__ == "__main__":
    raise SystemExit(main())
