"""Where a decode step's time goes: the compiled CUDA twin's kernels under torch.profiler.

Writes (or reuses) the Qwen3-1.7B-shaped checkpoint of generate_qwen3.py, opens it on the cuda
target, runs a few eager decode steps (no CUDA graph, so every launch is traced) and prints each
kernel's total and per-step time, its launches per step, and the step's kernel time against
its weight-streaming floor at the given bandwidth; then, for graph-replayed steps, each kernel's
marginal time, the chain of launches in step order (what each launch adds to the step's end) and
the stretch from the LM head to the next step's first kernels:

    python bench/models/profile_decode.py --out /tmp/qwen3 [--steps 8] [--top 25] [--tb-s 4.1] [--no-pdl]
        [--option batch_launches=False] [--option "gemm_fusion='epilogues'"] [--compile-only]

With programmatic dependent launch (the default on Hopper) a kernel is launched while its
predecessor runs and waits for it, so the profiler charges it part of its predecessor's time;
--no-pdl turns PDL off for the whole run (TILEFOUNDRY_CUDA_PDL=0), so each kernel is timed alone.
--option passes a compile option (a Python literal value) for an A/B of one realization;
--compile-only fills the on-disk build cache and stops, so builds can run side by side before
the timed runs.
"""

from __future__ import annotations

import argparse
import itertools
import os
import statistics
import time
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

import torch

from bench.compile_options import compile_option
from bench.models.generate_qwen3 import write_checkpoint

# Namespaces that fill a kernel's name before its template arguments say which call it is.
_NOISE = (
    ("void ", ""),
    ("tilefoundry::atoms::detail::", ""),
    ("tilefoundry::atoms::", ""),
    ("(anonymous namespace)::", ""),
    ("cutlass::bfloat16_t", "bf16"),
    ("at::native::", ""),
)


def short(name: str, width: int) -> str:
    """A kernel's name without namespaces, cut at `width`: the epilogue functor naming the call
    (mlp__k8_..., attention__k11_...) survives the cut."""
    for noise, by in _NOISE:
        name = name.replace(noise, by)
    return name[:width]


def kernel_table(prof: torch.profiler.profile, steps: int) -> list[tuple[str, float, int]]:
    """(kernel name, microseconds per step, launches per step), largest first."""
    total: dict[str, float] = defaultdict(float)
    count: dict[str, int] = defaultdict(int)
    for ev in prof.events():
        if ev.device_type == torch.autograd.DeviceType.CUDA:
            total[ev.name] += ev.device_time_total if hasattr(ev, "device_time_total") else ev.cuda_time_total
            count[ev.name] += 1
    rows = [(name, us / steps, count[name] // steps) for name, us in total.items()]
    return sorted(rows, key=lambda r: -r[1])


Step = tuple[float, float, list[tuple[str, float, float]]]


def replayed_steps(prof: torch.profiler.profile) -> list[Step]:
    """The replayed decode steps: (start, next step's start, kernels and copies as (name, start, end)), in us.

    Steps are cut at the LM head (the longest kernel on average of those launched at least 8
    times, once a step); periods over 20 ms (warm-up, capture) are left out.
    """
    events = sorted(
        (ev.time_range.start, ev.time_range.end, ev.name)
        for ev in prof.events()
        if ev.device_type == torch.autograd.DeviceType.CUDA
    )
    mean: dict[str, list[float]] = defaultdict(list)
    for a, b, name in events:
        mean[name].append(b - a)
    # a prefill kernel can outlast the LM head, but runs once: the head is launched every step
    head = max((n for n in mean if len(mean[n]) >= 8), key=lambda n: sum(mean[n]) / len(mean[n]))
    starts = [a for a, _, name in events if name == head]
    return [
        (lo, hi, [(name, a, b) for a, b, name in events if lo <= a < hi])
        for lo, hi in itertools.pairwise(starts)
        if hi - lo <= 20_000
    ]


def step_busy(steps: list[Step]) -> tuple[float, float]:
    """Median microseconds per replayed step, and of them the GPU was busy (some kernel or copy ran)."""
    periods, busy = [], []
    for lo, hi, step in steps:
        covered, end = 0.0, lo
        for _, a, b in step:
            a, b = max(a, end), min(b, hi)
            if b > a:
                covered += b - a
                end = b
        periods.append(hi - lo)
        busy.append(covered)
    return statistics.median(periods), statistics.median(busy)


def _marginals(step: Step) -> Iterator[tuple[str, float, float, float]]:
    """Each launch of one step as (name, start, end, marginal): how far its end moves the step's
    latest end so far (with PDL a kernel starts while its predecessor runs, so its duration
    overstates what it adds; the marginal times sum to the step's span)."""
    lo, _, events = step
    end = lo
    for name, a, b in events:
        yield name, a, b, max(0.0, b - end)
        end = max(end, b)


def _median_step(steps: list[Step]) -> Step:
    """The step of median span."""
    return sorted(steps, key=lambda s: s[1] - s[0])[len(steps) // 2]


def marginal_table(steps: list[Step]) -> list[tuple[str, float, float, int]]:
    """(kernel, marginal us, duration us, launches) per replayed step, largest marginal first
    (_marginals says what a marginal time is)."""
    marginal: dict[str, float] = defaultdict(float)
    duration: dict[str, float] = defaultdict(float)
    count: dict[str, int] = defaultdict(int)
    for step in steps:
        for name, a, b, added in _marginals(step):
            marginal[name] += added
            duration[name] += b - a
            count[name] += 1
    n = len(steps)
    rows = [(name, marginal[name] / n, duration[name] / n, count[name] // n) for name in marginal]
    return sorted(rows, key=lambda r: -r[1])


def launch_chain(steps: list[Step]) -> list[tuple[str, float, int]]:
    """(kernel, median marginal us a launch, launches a step), in the order the median step first
    launches each: a decoder layer's chain, read off once (as in marginal_table, but per launch
    and in step order)."""
    per_launch: dict[str, list[float]] = defaultdict(list)
    for step in steps:
        for name, _, _, added in _marginals(step):
            per_launch[name].append(added)
    order = list(dict.fromkeys(name for name, _, _ in _median_step(steps)[2]))
    n = len(steps)
    return [(name, statistics.median(per_launch[name]), len(per_launch[name]) // n) for name in order]


def step_boundary(steps: list[Step], first: int = 20) -> list[tuple[str, float, float, float]]:
    """The median step's first `first` events (the LM head, the pick, the next step's inputs, the
    graph's first kernels) as (name, start us from the step's start, duration us, idle us before)."""
    lo, _, events = _median_step(steps)
    out, end = [], lo
    for name, a, b in events[:first]:
        out.append((name, a - lo, b - a, max(0.0, a - end)))
        end = max(end, b)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--top", type=int, default=30)
    ap.add_argument("--tb-s", type=float, default=4.1, help="bandwidth of the floor, TB/s")
    ap.add_argument("--context", type=int, default=2048)
    ap.add_argument("--no-pdl", action="store_true", help="launch without programmatic dependent launch")
    ap.add_argument("--option", type=compile_option, action="append", default=[], help="KEY=VALUE")
    ap.add_argument("--compile-only", action="store_true", help="build (or find) the model and stop")
    args = ap.parse_args()
    if args.no_pdl:
        os.environ["TILEFOUNDRY_CUDA_PDL"] = "0"  # read by each module at its first launch
    from tilefoundry.models import open_model
    from tilefoundry.runtime import generate

    ckpt = args.out / "qwen3-1.7b-random"
    if not (ckpt / "config.json").is_file():
        args.out.mkdir(parents=True, exist_ok=True)
        ckpt = write_checkpoint(args.out, 28)
    t0 = time.perf_counter()
    print(f"opening {ckpt} on cuda (compile + load) ...", flush=True)
    opened = open_model(ckpt, target="cuda", context=args.context, options=dict(args.option))
    print(f"open_model (compile + load): {time.perf_counter() - t0:.1f} s", flush=True)
    if args.compile_only:
        return 0
    ids = torch.arange(16, device="cuda")
    generate(opened.model, ids, max_new_tokens=4, cuda_graph=False)  # warm-up
    steps = args.steps
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        generate(opened.model, ids, max_new_tokens=steps + 1, cuda_graph=False, prefill=True)
    # steps + 1 tokens: the prefill makes the first, `steps` decode steps make the rest; the
    # prefill's kernels are in the table too (small next to `steps` decode steps at 16 tokens).
    rows = kernel_table(prof, steps)
    # Tied embeddings: the lm_head streams the table once per step, the gather reads one row.
    weights = sum(f.stat().st_size for f in ckpt.glob("*.safetensors"))
    step_us = sum(us for _, us, _ in rows)
    launches = sum(n for _, _, n in rows)
    print(
        f"kernel time per step {step_us:.0f} us over {launches} launches; weights {weights / 1e9:.2f} GB, "
        f"floor {weights / (args.tb_s * 1e12) * 1e6:.0f} us at {args.tb_s} TB/s"
    )
    for name, us, n in rows[: args.top]:
        print(f"{us:9.1f} us {n:5d}x  {short(name, 150)}")
    graphed = generate(opened.model, ids, max_new_tokens=128, cuda_graph=True)
    g = graphed
    print(f"graph replay {g.replay_tokens_per_s:.0f} tok/s, decode {g.decode_tokens_per_s:.0f} tok/s")
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        g = generate(opened.model, ids, max_new_tokens=48, cuda_graph=True)
    steps_seen = replayed_steps(prof)
    period, busy = step_busy(steps_seen)
    print(
        f"graphed generate under the profiler: {g.replay_tokens_per_s:.0f} tok/s replayed; a step every "
        f"{period:.0f} us, the GPU busy {busy:.0f} us of it ({100 * busy / period:.0f}%); the rest waits on "
        f"the host between steps"
    )
    print("replayed step, per kernel: marginal us (how far it moves the step's end), duration us, launches")
    for name, us, dur, n in marginal_table(steps_seen)[: args.top]:
        print(f"{us:9.1f} {dur:9.1f} us {n:5d}x  {short(name, 150)}")
    print("a step's chain, in launch order: median us a launch adds to the step's end, launches a step")
    for name, us, n in launch_chain(steps_seen):
        print(f"{us:9.1f} us {n:5d}x  {short(name, 150)}")
    print("the median step from the LM head on: start us, duration us, idle us before, event")
    for name, at, dur, idle in step_boundary(steps_seen):
        print(f"{at:9.1f} {dur:9.1f} {idle:9.1f}  {short(name, 110)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
