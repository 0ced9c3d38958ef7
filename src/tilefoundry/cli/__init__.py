"""The `tilefoundry` command line: one subcommand per module of this package.

A command module holds `HELP` (one line for the command list), `configure(parser)` (adds its
arguments) and `run(args) -> int` (the exit status); its docstring is the command's
description. Modules import what they need inside `run`, so listing the commands stays cheap.
"""

from __future__ import annotations

import argparse
import importlib

# Subcommands, in the order `tilefoundry --help` lists them; each is a module of this package.
COMMANDS = ("targets", "generate", "embed", "demo")
DESCRIPTION = "TileFoundry: a tile-based kernel compiler and model runtime."


def build_parser() -> argparse.ArgumentParser:
    """The argument parser with every command's subparser."""
    parser = argparse.ArgumentParser(prog="tilefoundry", description=DESCRIPTION)
    sub = parser.add_subparsers(dest="command", required=True, metavar="command")
    for name in COMMANDS:
        command = importlib.import_module(f"{__name__}.{name}")
        p = sub.add_parser(
            name,
            help=command.HELP,
            description=command.__doc__,
            # Keep the docstring's own line breaks: command docstrings show example invocations.
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        command.configure(p)
        p.set_defaults(run=command.run)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the command line; returns the exit status."""
    args = build_parser().parse_args(argv)
    return args.run(args)
