"""Registers, spills and shared memory of our side of the bench's cases, read off the builds: no GPU.

    python -m bench.gpu.resources --cases rope,head_norm_rope,pointwise
    python -m bench.gpu.resources --cases head_norm_rope --option grid_ctas_per_sm=6
    python -m bench.gpu.resources --cases model/qwen3-1.7b/decode_step --json decode.json

Builds the selected cases for the cuda target as bench.gpu.run does (a fresh build cache unless
--cache-dir names one; cold builds side by side in --jobs processes), then prints each library's
kernels as ptxas built them (tilefoundry.codegen.cuda.resources): registers, the CTA size the
source declares, the CTAs an SM those registers leave room for, spill and stack bytes, and static
shared memory. A library several cases reach is printed once. Exits 1 when a build fails.
"""

import argparse
import json
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    # Run as a file (python bench/gpu/resources.py): make the repository root importable.
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.compile_options import compile_option

from .builds import BuildFailed, Builds, build_cache
from .cases import select
from .cases.plans import PLANS

TARGET = "cuda"


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python -m bench.gpu.resources", description=__doc__.split("\n\n")[0])
    ap.add_argument("--cases", default="", help="comma-separated ids, leading segments or globs")
    ap.add_argument("--plan", choices=sorted(PLANS), default="full", help="the case list (default: full)")
    ap.add_argument("--option", type=compile_option, action="append", default=[], help="KEY=VALUE of ours")
    ap.add_argument("--jobs", type=int, default=2, help="cold builds side by side (0: in this process)")
    ap.add_argument("--budget-s", type=float, default=3600.0, help="time the cold builds may take")
    ap.add_argument("--cache-dir", type=Path, help="build cache to use (default: a fresh one)")
    ap.add_argument("--json", type=Path, help="also write every kernel's figures here")
    return ap.parse_args(argv)


def short_name(name: str, width: int = 72) -> str:
    """A demangled kernel name without its parameter list or anonymous namespaces, cut to `width`."""
    text = name.replace("(anonymous namespace)::", "")
    depth = 0
    for i, ch in enumerate(text):
        depth += (ch == "<") - (ch == ">")
        if ch == "(" and depth == 0:
            text = text[:i]
            break
    return text if len(text) <= width else text[: width - 3] + "..."


def render(rows: Sequence[tuple[str, str, Any]]) -> str:
    """The table: one line a kernel, grouped by library."""
    head = (
        f"{'library':<28} {'kernel':<72} {'regs':>4} {'CTA':>5} {'CTAs/SM':>7} {'spill st/ld':>11} "
        f"{'stack':>5} {'smem':>6}"
    )
    lines = [head, "-" * len(head)]
    for _, lib, k in rows:
        ctas = str(k.ctas_per_sm()) if k.threads else "-"
        threads = str(k.threads) if k.threads else "-"
        spill = f"{k.spill_store_bytes}/{k.spill_load_bytes}" + (" SPILL" if k.spills else "")
        lines.append(
            f"{lib:<28} {short_name(k.name):<72} {k.registers:>4} {threads:>5} {ctas:>7} {spill:>11} "
            f"{k.stack_bytes:>5} {k.shared_bytes:>6}"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    from tilefoundry.codegen.cuda.resources import kernel_resources, libraries_of

    args = parse_args(argv)
    try:
        cases = select(PLANS[args.plan](), [p for p in args.cases.split(",") if p])
    except ValueError as err:
        print(f"bench.gpu.resources: {err}", file=sys.stderr)
        return 2
    firsts: dict[str, Any] = {}
    for c in cases:
        firsts.setdefault(c.kernel, c)
    status = 0
    rows: list[tuple[str, str, Any]] = []
    reached: set[Path] = set()
    with build_cache(args.cache_dir):
        builds = Builds(TARGET, args.plan, options=dict(args.option))
        if args.jobs > 0:
            builds.prebuild(cases, args.jobs, time.time() + args.budget_s)
        for case in firsts.values():
            try:
                compiled, _ = builds.get(case)
            except BuildFailed as err:
                print(f"bench.gpu.resources: {case.id}: not built: {err}", file=sys.stderr)
                status = 1
                continue
            for lib in libraries_of(compiled):
                if lib not in reached:
                    reached.add(lib)
                    rows += [(case.kernel, lib.stem, k) for k in kernel_resources(lib)]
    print(render(rows))
    spilled = [k for _, _, k in rows if k.spills]
    print(f"\nkernels: {len(rows)}, libraries: {len(reached)}, spilling: {len(spilled)}")
    if args.json is not None:
        doc = [{"kernel_of": c, "library": lib, **asdict(k)} for c, lib, k in rows]
        args.json.write_text(json.dumps(doc, indent=1) + "\n")
    return status


if __name__ == "__main__":
    raise SystemExit(main())
