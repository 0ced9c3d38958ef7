"""Registers, spills and shared memory of our side of the bench's cases, read off the builds: no GPU.

    python -m bench.gpu.resources --cases rope,head_norm_rope,pointwise
    python -m bench.gpu.resources --cases head_norm_rope --option grid_ctas_per_sm=6
    python -m bench.gpu.resources --cases model/qwen3-1.7b/decode_step --json decode.json
    python -m bench.gpu.resources --cases head_norm_rope --sass

Builds the selected cases for the cuda target as bench.gpu.run does (a fresh build cache unless
--cache-dir names one; cold builds side by side in --jobs processes), then prints each library's
kernels as ptxas built them (tilefoundry.codegen.cuda.resources): registers, the CTA size the
source declares, the CTAs an SM those registers leave room for, spill and stack bytes, and static
shared memory. --sass adds what cuobjdump reads off the machine code (tilefoundry.codegen.cuda.sass):
its instructions, the global loads before the PDL wait, the instructions from that wait to the
first global load after it and the subroutine calls among them (CALL: a 64-bit division's slow
path, mostly), local-memory accesses and convergence tests (MATCH). A library several
cases reach is printed once. Exits 1 when a build fails.
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
    ap.add_argument("--sass", action="store_true", help="add figures read off the SASS (needs cuobjdump)")
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


SASS_HEAD = f" {'sass':>5} {'pre-wait ld':>11} {'wait->ld':>8} {'CALL':>4} {'LDL/STL':>7} {'MATCH':>5}"


def sass_columns(s: Any) -> str:
    """The --sass columns of one kernel ('-' where cuobjdump listed none of that symbol)."""
    if s is None:
        return f" {'-':>5} {'-':>11} {'-':>8} {'-':>4} {'-':>7} {'-':>5}"
    to_load = "-" if s.wait_to_load is None else str(s.wait_to_load)
    pre = str(s.loads_before_wait) if s.waits else "no wait"
    calls = "-" if s.wait_to_load is None else str(s.calls_to_load)
    tail = f"{s.local_accesses:>7} {s.convergence_tests:>5}"
    return f" {s.instructions:>5} {pre:>11} {to_load:>8} {calls:>4} {tail}"


def render(rows: Sequence[tuple[str, str, Any]], sass: dict[tuple[str, str], Any] | None = None) -> str:
    """The table: one line a kernel, grouped by library; `sass` (by symbol and arch) adds its columns."""
    head = (
        f"{'library':<28} {'kernel':<72} {'regs':>4} {'CTA':>5} {'CTAs/SM':>7} {'spill st/ld':>11} "
        f"{'stack':>5} {'smem':>6}"
    ) + (SASS_HEAD if sass is not None else "")
    lines = [head, "-" * len(head)]
    for _, lib, k in rows:
        ctas = str(k.ctas_per_sm()) if k.threads else "-"
        threads = str(k.threads) if k.threads else "-"
        spill = f"{k.spill_store_bytes}/{k.spill_load_bytes}" + (" SPILL" if k.spills else "")
        extra = sass_columns(sass.get((k.symbol, k.arch))) if sass is not None else ""
        lines.append(
            f"{lib:<28} {short_name(k.name):<72} {k.registers:>4} {threads:>5} {ctas:>7} {spill:>11} "
            f"{k.stack_bytes:>5} {k.shared_bytes:>6}{extra}"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    from tilefoundry.codegen.cuda.resources import kernel_resources, libraries_of
    from tilefoundry.codegen.cuda.sass import kernel_sass

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
    sass: dict[tuple[str, str], Any] | None = {} if args.sass else None
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
                    if sass is not None:
                        sass.update({(k.symbol, k.arch): k for k in kernel_sass(lib)})
    print(render(rows, sass))
    spilled = [k for _, _, k in rows if k.spills]
    print(f"\nkernels: {len(rows)}, libraries: {len(reached)}, spilling: {len(spilled)}")
    if args.json is not None:
        doc = [{"kernel_of": c, "library": lib, **asdict(k)} for c, lib, k in rows]
        if sass is not None:
            for entry in doc:
                found = sass.get((entry["symbol"], entry["arch"]))
                entry["sass"] = asdict(found) if found is not None else None
        args.json.write_text(json.dumps(doc, indent=1) + "\n")
    return status


if __name__ == "__main__":
    raise SystemExit(main())
