"""Run the GPU benchmark: ours against torch eager, torch.compile, cuBLAS, sdpa and transformers.

    python -m bench.gpu.run                       # every case of issue 7 (H200 shapes)
    python -m bench.gpu.run --quick               # one or two of each family
    python -m bench.gpu.run --cases gemm/qwen3-1.7b,rms_norm --out $OUT
    python -m bench.gpu.run --list                # the case ids, measuring nothing
    python -m bench.gpu.run --cases gemm/square --option "gemm_tile='128x256'"   # our side built so

One run: build our kernels (cold, in parallel worker processes), measure the copy bandwidth,
then measure each case in a child process (check against the evaluator, then time ours and
the peers). A child that dies, hangs past --case-timeout-s or loses the device is replaced
and the case says so in its row. Prints the header and the table last, and writes
<out>/gpu-<device>-<date>.{json,md,png}. docs/performance.md says how to run it on the H200.
"""

import argparse
import multiprocessing
import os
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import torch

if __package__ in (None, ""):
    # Run as a file (python bench/gpu/run.py): make the repository root importable.
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    __package__ = "bench.gpu"

from bench.compile_options import compile_option

from .builds import CACHE_VARIABLES, Builds, build_cache
from .cases import PEERS, Case, select
from .cases.plans import PLANS
from .floors import Limits
from .machine import REPO, Machine, header
from .report import Row, goal_summary, render_table, result_stem, write_json, write_plot
from .timing import QUICK_TIMING, TimingPlan
from .worker import WorkerSettings, measure_cases, skipped, worker_main

# Of the time budget, the share the parallel cold builds may take before they are stopped.
COMPILE_SHARE = 0.5
MAX_RESTARTS = 8


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The command line; see --help."""
    ap = argparse.ArgumentParser(prog="python -m bench.gpu.run", description=__doc__.splitlines()[0])
    size = ap.add_mutually_exclusive_group()
    size.add_argument("--quick", action="store_true", help="one or two cases of each family")
    size.add_argument("--tiny", action="store_true", help="toy shapes, for a CPU smoke run")
    ap.add_argument("--cases", default="", help="comma-separated ids, leading segments or globs")
    ap.add_argument("--peers", default="", help=f"comma-separated peer keys to run: {', '.join(PEERS)}")
    ap.add_argument("--list", action="store_true", help="print the selected case ids and exit")
    ap.add_argument("--device", default="cuda", help="torch device (cpu for a smoke run)")
    ap.add_argument("--target", default="cuda", help="TileFoundry target our side is built for")
    ap.add_argument("--out", type=Path, default=REPO / "bench" / "results", help="where the files go")
    ap.add_argument("--budget-s", type=float, default=420.0, help="wall budget; later cases are skipped")
    ap.add_argument("--case-timeout-s", type=float, default=180.0, help="a case running longer is killed")
    ap.add_argument(
        "--jobs", type=int, default=min(8, os.cpu_count() or 1), help="parallel cold builds; 0: none"
    )
    ap.add_argument("--cache-dir", type=Path, help="build cache to use (default: a fresh one, cold)")
    ap.add_argument("--copy-mib", type=int, default=2048, help="buffer of the copy-bandwidth measurement")
    ap.add_argument("--no-graphs", action="store_true", help="time plain launches, no CUDA graphs")
    ap.add_argument("--in-process", action="store_true", help="measure in this process (no isolation)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--option", type=compile_option, action="append", default=[], help="KEY=VALUE of ours")
    args = ap.parse_args(argv)
    unknown = sorted(set(_split(args.peers)) - set(PEERS))
    if unknown:
        ap.error(f"--peers: unknown {', '.join(unknown)}; known: {', '.join(PEERS)}")
    return args


def _split(text: str) -> list[str]:
    return [p.strip() for p in text.split(",") if p.strip()]


def plan_name(args: argparse.Namespace) -> str:
    """The PLANS key the flags select."""
    return "quick" if args.quick else "tiny" if args.tiny else "full"


def timing_plan(args: argparse.Namespace) -> TimingPlan:
    """Quick plans time shorter; --no-graphs turns graph capture off."""
    plan = QUICK_TIMING if args.quick or args.tiny else TimingPlan()
    return replace(plan, graphs=not args.no_graphs)


class _Child:
    """One measuring child process and its pipe."""

    def __init__(self, settings: WorkerSettings) -> None:
        ctx = multiprocessing.get_context("spawn")
        self.conn, child_end = ctx.Pipe(duplex=False)
        self.process = ctx.Process(target=worker_main, args=(child_end, settings), daemon=True)
        self.process.start()
        child_end.close()

    def messages(self, timeout_s: float) -> Iterator[tuple]:
        """The child's messages; stops at its end, or raises TimeoutError when one takes too long."""
        while True:
            if not self.conn.poll(timeout_s):
                raise TimeoutError(f"no word from the measuring process in {timeout_s:g} s")
            try:
                yield self.conn.recv()
            except EOFError:
                return

    def end(self) -> str:
        """Stop the child; how it ended ("exit code -11", ...)."""
        self.process.join(timeout=5)
        if self.process.is_alive():
            self.process.kill()
            self.process.join()
        return f"exit code {self.process.exitcode}"


class Run:
    """The parent side: hands the cases to measuring processes and collects their rows."""

    def __init__(self, cases: Sequence[Case], settings: WorkerSettings, args: argparse.Namespace) -> None:
        self.cases = {c.id: c for c in cases}
        self.settings = settings
        self.args = args
        self.rows: dict[str, list[Row]] = {}
        self.limits: Limits | None = None
        self.machine: Machine | None = None
        self.peak_source = ""
        self.notes: list[str] = []
        self.lost = False

    def _take(self, message: tuple) -> str | None:
        """Record one message; returns the id of a case that started, if it is a start."""
        kind = message[0]
        if kind == "limits":
            _, self.limits, self.machine, self.peak_source = message
        elif kind == "start":
            return message[1]
        elif kind == "rows":
            rows = [Row(**r) for r in message[2]]
            self.rows[message[1]] = rows
            _progress(len(self.rows), len(self.cases), rows)
        elif kind == "lost":
            self.lost = True
            self.notes.append(
                f"the device was lost after {message[1]} ({message[2]}); later cases ran in a new process"
            )
        return None

    def _fail(self, case_id: str, reason: str) -> None:
        assert self.limits is not None, "rows are made only once the limits are measured"
        self.rows[case_id] = [Row(**r) for r in skipped(self.cases[case_id], reason, self.limits)]
        _progress(len(self.rows), len(self.cases), self.rows[case_id])

    def measure(self) -> None:
        """Measure every case, restarting a child after each one it could not survive."""
        if self.args.in_process:
            for message in measure_cases(self.settings):
                self._take(message)
            return
        restarts = 0
        while len(self.rows) < len(self.cases) and restarts <= MAX_RESTARTS:
            todo = tuple(i for i in self.cases if i not in self.rows)
            settings = replace(self.settings, case_ids=todo, limits=self.limits, machine=self.machine)
            child, current, self.lost, killed = _Child(settings), None, False, None
            try:
                for message in child.messages(self.args.case_timeout_s):
                    current = self._take(message) or current
            except TimeoutError as err:
                killed = f"killed: {err}"
            ended = child.end()
            how = f"{killed or 'the measuring process died'}; {ended}"
            if self.limits is None:
                self.notes.append(f"no measuring process got as far as the limits ({how})")
                return
            if current is not None and current not in self.rows:
                self._fail(current, f"not measured ({how})")
                restarts += 1
            elif len(self.rows) < len(self.cases):
                restarts += 1
                if not self.lost:
                    self.notes.append(f"a measuring process ended early ({ended}); started another")
        for case_id in self.cases:
            if case_id not in self.rows:
                self._fail(case_id, "not measured: too many measuring processes failed")

    def ordered_rows(self) -> list[Row]:
        return [r for case_id in self.cases for r in self.rows.get(case_id, [])]


def _progress(done: int, total: int, rows: Sequence[Row]) -> None:
    first = rows[0]
    parts = [f"ours {_ms(first.ours_ms, first.ours_error)} ({first.ours_check})"]
    parts += [f"{r.peer} {_ms(r.peer_ms, r.peer_error)}" for r in rows if r.peer]
    print(f"[{done:>3}/{total}] {first.case}: " + " | ".join(parts), file=sys.stderr, flush=True)


def _ms(ms: float | None, error: str | None) -> str:
    return f"{ms:.4g} ms" if ms is not None else f"error: {error}" if error else "-"


def _write(run: Run, args: argparse.Namespace, settings: dict[str, Any]) -> str:
    """Write the JSON, Markdown and PNG files; returns the printable header and table."""
    assert run.machine is not None and run.limits is not None
    rows = run.ordered_rows()
    head = header(run.machine, run.limits, run.peak_source)
    stem = args.out / result_stem(run.machine.device, run.machine.date)
    note = write_plot(stem.with_suffix(".png"), rows, head.splitlines()[0])
    built = [f"our side built with the options {settings['options']}"] if settings["options"] else []
    notes = [*built, *run.notes, *([note] if note else [])]
    meta = {
        "machine": run.machine.to_json(),
        "limits": asdict(run.limits),
        "peak_source": run.peak_source,
        "settings": settings,
        "notes": notes,
    }
    write_json(stem.with_suffix(".json"), meta, rows)
    text = "\n".join([head, "", render_table(rows), *(f"note: {n}" for n in notes), goal_summary(rows)])
    stem.with_suffix(".md").write_text(text + "\n")
    return text + f"\n\nwrote {stem}.json, .md" + ("" if note else ", .png")


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark; returns the exit status (2 for a usage error)."""
    args = parse_args(argv)
    plan = plan_name(args)
    try:
        cases = select(PLANS[plan](), _split(args.cases))
    except ValueError as err:
        print(f"bench.gpu: {err}", file=sys.stderr)
        return 2
    if args.list:
        print("\n".join(c.id for c in cases))
        return 0
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        print(
            "bench.gpu: --device cuda, but torch sees no CUDA device (a CPU smoke run: --tiny --device cpu "
            "--target cpu)",
            file=sys.stderr,
        )
        return 2
    with build_cache(args.cache_dir) as cache:
        return _bench(args, plan, cases, cache)


def _shared_objects(cache: Path) -> int:
    """The cuda target's shared objects (sm90 collectives, each compiled once) in the run's cache."""
    return len(list((cache / dict(CACHE_VARIABLES)["TILEFOUNDRY_CUDA_OBJECT_DIR"]).glob("*.o")))


def _bench(args: argparse.Namespace, plan: str, cases: Sequence[Case], cache: Path) -> int:
    """Build, measure and report the selected cases with `cache` as the build cache."""
    start = time.time()
    deadline = start + args.budget_s
    builds = Builds(args.target, plan, options=dict(args.option))
    compile_wall = None
    if args.jobs > 0:
        compile_wall = builds.prebuild(cases, args.jobs, start + COMPILE_SHARE * args.budget_s)
        print(
            f"bench.gpu: cold builds of {len({c.kernel for c in cases})} kernels in {compile_wall:.1f} s "
            f"({args.jobs} jobs; {_shared_objects(cache)} shared cuda objects in the cache)",
            file=sys.stderr,
            flush=True,
        )
    settings = WorkerSettings(
        plan=plan,
        case_ids=tuple(c.id for c in cases),
        device=args.device,
        target=args.target,
        timing=timing_plan(args),
        peers=frozenset(_split(args.peers)) or None,
        seed=args.seed,
        copy_bytes=args.copy_mib * 2**20,
        deadline=deadline,
        cold=builds.cold,
        build_errors=builds.errors,
        options=builds.options,
    )
    run = Run(cases, settings, args)
    run.measure()
    if run.machine is None:
        print(f"bench.gpu: nothing to report: {'; '.join(run.notes)}", file=sys.stderr)
        return 1
    record = {
        "plan": plan,
        "cases": args.cases,
        "peers": args.peers,
        "device": args.device,
        "target": args.target,
        "timing": asdict(settings.timing),
        "jobs": args.jobs,
        "cold_build_wall_s": compile_wall,
        "cuda_shared_objects": _shared_objects(cache),
        "cache_dir": str(args.cache_dir) if args.cache_dir else f"{cache} (fresh, removed after the run)",
        "seed": args.seed,
        "options": builds.options,
        "budget_s": args.budget_s,
        "wall_s": time.time() - start,
    }
    print(_write(run, args, record))
    return 0


if __name__ == "__main__":
    sys.exit(main())
