"""List the installed targets: whether each can compile and run here, why not, their catalogs and options."""

from __future__ import annotations

import argparse
import dataclasses
import json
from typing import Any

HELP = "list installed targets, their availability and catalogs"


def configure(parser: argparse.ArgumentParser) -> None:
    """Add the command's arguments."""
    parser.add_argument("--json", action="store_true", help="print one JSON object per target, in a list")


def _report(name: str) -> dict[str, Any]:
    from tilefoundry.ir.errors import TargetUnavailable
    from tilefoundry.ir.target import get_target

    try:
        target = get_target(name)
    except TargetUnavailable as e:
        return {"name": name, "loaded": False, "can_compile": False, "can_run": False, "reasons": [e.message]}
    a = target.availability
    options = [dataclasses.asdict(o) for o in target.accepted_options.values()]
    return {"name": name, "loaded": True, "can_compile": a.can_compile, "can_run": a.can_run,
            "reasons": list(a.reasons), "facts": a.facts, "catalog": target.catalog.model_dump(mode="json"),
            "options": options, "summary": target.catalog.summary()}


def _options(r: dict[str, Any]) -> str:
    """The option names a compile for the target accepts: its own, then the planner's."""
    own = sorted(o["name"] for o in r["options"] if o["owner"] == r["name"])
    planner = sorted(o["name"] for o in r["options"] if o["owner"] != r["name"])
    return f"{', '.join(own) or 'none of its own'}; the planner's {', '.join(planner)}"


def _status(r: dict[str, Any]) -> str:
    if not r["loaded"]:
        return "failed to load"
    if r["can_compile"] and r["can_run"]:
        return "available"
    return "compiles here, cannot run" if r["can_compile"] else "unavailable"


def _yes(flag: bool) -> str:
    return "yes" if flag else "no"


def _text(reports: list[dict[str, Any]]) -> str:
    if not reports:
        return "no targets installed (no entry points in the group tilefoundry.targets)"
    lines = []
    for r in reports:
        can = f"compile: {_yes(r['can_compile'])}, run: {_yes(r['can_run'])}"
        lines.append(f"{r['name']}: {_status(r)} ({can})")
        lines += [f"  why:     {reason}" for reason in r["reasons"]]
        if r["loaded"]:
            if r["facts"]:
                lines.append("  found:   " + ", ".join(f"{k}={v}" for k, v in r["facts"].items()))
            lines.append(f"  catalog: {r['summary']}")
            lines.append(f"  options: {_options(r)}")
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    """Print every installed target; a target that fails to load is listed with its error."""
    from tilefoundry.ir.target import installed_targets

    reports = [_report(name) for name in installed_targets()]
    if args.json:
        print(json.dumps([{k: v for k, v in r.items() if k != "summary"} for r in reports], indent=2))
    else:
        print(_text(reports))
    return 0
