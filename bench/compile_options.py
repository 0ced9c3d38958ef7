"""`--option KEY=VALUE` on the bench scripts' command lines: compile options for our side."""

import argparse
import ast


def compile_option(text: str) -> tuple[str, object]:
    """KEY=VALUE, the value a Python literal (False, 4, 'x')."""
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"--option {text!r}: expected KEY=VALUE")
    try:
        return key, ast.literal_eval(value)
    except (ValueError, SyntaxError):
        raise argparse.ArgumentTypeError(f"--option {text!r}: the value is not a Python literal") from None
