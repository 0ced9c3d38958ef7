"""What the model commands (generate, embed, demo) share: the --target option and error output."""

from __future__ import annotations

import argparse
import sys

TARGET_CHOICES = ("cpu", "cuda", "reference", "torch")


def add_target_argument(parser: argparse.ArgumentParser) -> None:
    """Add --target: cpu / cuda compiled, reference (the evaluator) or torch (the torch twin)."""
    parser.add_argument(
        "--target",
        choices=TARGET_CHOICES,
        help="cpu / cuda: compiled; reference: the evaluator; torch: the torch twin "
        "(default: cuda where it runs, else cpu)",
    )


def fail(command: str, message: object) -> int:
    """Print `tilefoundry COMMAND: error: MESSAGE` on stderr; returns the exit status 1."""
    print(f"tilefoundry {command}: error: {message}", file=sys.stderr)
    return 1
