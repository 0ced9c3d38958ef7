"""Timing: CUDA events after warm-up, median of many, CUDA-graph replays for short calls.

    t = time_calls(fn, [args0, args1, ...], device, TimingPlan())   # cycles the input sets
    t.ms, t.p20_ms, t.p80_ms, t.mode                                 # per call

On a GPU, `time_calls` captures a batch of calls into a CUDA graph and times its replays, so
launch gaps between short kernels do not count (METHOD.md); it checks that the graph really
wrote the last call's outputs (they are poisoned with NaN before a replay) and otherwise times
plain batches between events. `time_each` times one call per sample, Python included, for a
model step. On a CPU both use the wall clock. The spread (p20..p80) says what is noise.
"""

import math
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch


@dataclass(frozen=True)
class TimingPlan:
    """How long to warm up and measure.

    Attributes:
        warmup_ms: calls before measuring (first calls compile, load and allocate).
        rep_ms: wall time of the samples together.
        min_reps, max_reps: bounds on the number of samples.
        sample_ms: the length one sample aims for (a graph replay or a batch of calls).
        max_calls: the most calls in one sample.
        graphs: whether to try CUDA-graph capture.
    """

    warmup_ms: float = 30.0
    rep_ms: float = 150.0
    min_reps: int = 5
    max_reps: int = 200
    sample_ms: float = 2.0
    max_calls: int = 256
    graphs: bool = True


QUICK_TIMING = TimingPlan(warmup_ms=10.0, rep_ms=50.0, min_reps=3, max_reps=60)


@dataclass(frozen=True)
class Timing:
    """Per-call time of one callable.

    Attributes:
        ms: the median over samples.
        p20_ms, p80_ms: the spread.
        samples: how many samples.
        calls: calls per sample.
        mode: "graph" (CUDA-graph replays), "events" (batches between CUDA events) or "wall".
    """

    ms: float
    p20_ms: float
    p80_ms: float
    samples: int
    calls: int
    mode: str

    def to_json(self) -> dict[str, Any]:
        return {
            "ms": self.ms,
            "p20_ms": self.p20_ms,
            "p80_ms": self.p80_ms,
            "samples": self.samples,
            "calls": self.calls,
            "mode": self.mode,
        }


def quantile(values: Sequence[float], q: float) -> float:
    """The q-quantile by linear interpolation between order statistics."""
    ordered = sorted(values)
    pos = q * (len(ordered) - 1)
    lo, hi = math.floor(pos), math.ceil(pos)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def summarize(per_call_ms: Sequence[float], calls: int, mode: str) -> Timing:
    """Median and p20/p80 of per-call samples.

    Raises:
        ValueError: no samples.
    """
    if not per_call_ms:
        raise ValueError("summarize: no samples")
    return Timing(
        statistics.median(per_call_ms),
        quantile(per_call_ms, 0.2),
        quantile(per_call_ms, 0.8),
        len(per_call_ms),
        calls,
        mode,
    )


def calls_per_sample(est_ms: float, sets: int, plan: TimingPlan) -> int:
    """Whole cycles over the input sets filling about `plan.sample_ms`, at most `plan.max_calls`.

    calls_per_sample(0.01, 4, TimingPlan())   # -> 200: 50 cycles of 4 sets
    calls_per_sample(5.0, 1, TimingPlan())    # -> 1
    """
    cycles = max(1, round(plan.sample_ms / max(est_ms * sets, 1e-6)))
    return max(sets, min(cycles * sets, plan.max_calls // sets * sets))


def sample_count(est_ms: float, calls: int, plan: TimingPlan) -> int:
    """Samples that fill about `plan.rep_ms`, within [min_reps, max_reps]."""
    wanted = plan.rep_ms / max(est_ms * calls, 1e-6)
    return int(max(plan.min_reps, min(plan.max_reps, wanted)))


def _leaves(value: Any) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, tuple | list):
        return [t for v in value for t in _leaves(v)]
    return []


class GraphNotWritten(RuntimeError):
    """A captured graph left its outputs unwritten: the work ran outside the capture."""


# ---------------------------------------------------------------- CUDA


def _warm(fn: Callable[..., Any], sets: Sequence[tuple], plan: TimingPlan, sync: Callable[[], None]) -> float:
    """Call until warmed up; returns the estimated ms of one call."""
    start, n = time.perf_counter(), 0
    while n < len(sets) + 1 or (time.perf_counter() - start) * 1e3 < plan.warmup_ms:
        fn(*sets[n % len(sets)])
        n += 1
        sync()
    t = time.perf_counter()
    for i in range(len(sets)):
        fn(*sets[i])
    sync()
    return (time.perf_counter() - t) * 1e3 / len(sets)


def _event_samples(run: Callable[[], None], count: int) -> list[float]:
    pairs = []
    for _ in range(count):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        run()
        end.record()
        pairs.append((start, end))
    torch.cuda.synchronize()
    return [s.elapsed_time(e) for s, e in pairs]


def _capture(fn: Callable[..., Any], sets: Sequence[tuple], calls: int) -> torch.cuda.CUDAGraph:
    # torch's recipe: one call on a side stream first, so lazy per-stream state (library
    # handles, workspaces) exists before capture begins.
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        fn(*sets[0])
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for i in range(calls):
            out = fn(*sets[i % len(sets)])
    poisoned = [t for t in _leaves(out) if t.is_floating_point()]
    for t in poisoned:
        t.fill_(float("nan"))
    graph.replay()
    torch.cuda.synchronize()
    if any(bool(t.isnan().all()) for t in poisoned):
        raise GraphNotWritten("the captured graph did not write the outputs")
    return graph


def _cuda_calls(fn: Callable[..., Any], sets: Sequence[tuple], plan: TimingPlan) -> Timing:
    est = _warm(fn, sets, plan, torch.cuda.synchronize)
    calls = calls_per_sample(est, len(sets), plan)
    count = sample_count(est, calls, plan)
    if plan.graphs:
        try:
            graph = _capture(fn, sets, calls)
        except Exception:  # any capture failure falls back to plain launches
            torch.cuda.synchronize()
        else:
            return summarize([ms / calls for ms in _event_samples(graph.replay, count)], calls, "graph")

    def batch() -> None:
        for i in range(calls):
            fn(*sets[i % len(sets)])

    return summarize([ms / calls for ms in _event_samples(batch, count)], calls, "events")


def _cuda_each(step: Callable[[], Any], reset: Callable[[], None] | None, plan: TimingPlan) -> Timing:
    est = _warm(lambda: (step(), reset and reset()), [()], plan, torch.cuda.synchronize)
    samples = []
    for _ in range(sample_count(est, 1, plan)):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        step()
        end.record()
        if reset is not None:
            reset()
        samples.append((start, end))
    torch.cuda.synchronize()
    return summarize([s.elapsed_time(e) for s, e in samples], 1, "events")


# ---------------------------------------------------------------- CPU


def _wall_calls(fn: Callable[..., Any], sets: Sequence[tuple], plan: TimingPlan) -> Timing:
    est = _warm(fn, sets, plan, lambda: None)
    calls = calls_per_sample(est, len(sets), plan)
    samples = []
    for _ in range(sample_count(est, calls, plan)):
        t = time.perf_counter()
        for i in range(calls):
            fn(*sets[i % len(sets)])
        samples.append((time.perf_counter() - t) * 1e3 / calls)
    return summarize(samples, calls, "wall")


def _wall_each(step: Callable[[], Any], reset: Callable[[], None] | None, plan: TimingPlan) -> Timing:
    est = _warm(lambda: (step(), reset and reset()), [()], plan, lambda: None)
    samples = []
    for _ in range(sample_count(est, 1, plan)):
        t = time.perf_counter()
        step()
        samples.append((time.perf_counter() - t) * 1e3)
        if reset is not None:
            reset()
    return summarize(samples, 1, "wall")


# Device type -> (time_calls, time_each) implementation.
_CLOCKS = {"cuda": (_cuda_calls, _cuda_each), "cpu": (_wall_calls, _wall_each)}


def _clock(device: torch.device) -> tuple:
    if device.type not in _CLOCKS:
        raise ValueError(f"timing: no clock for device type {device.type!r}; known: {', '.join(_CLOCKS)}")
    return _CLOCKS[device.type]


def time_calls(
    fn: Callable[..., Any], sets: Sequence[tuple], device: torch.device, plan: TimingPlan
) -> Timing:
    """Per-call time of `fn`, cycling through the argument tuples `sets`."""
    if not sets:
        raise ValueError("time_calls: no input sets")
    return _clock(device)[0](fn, sets, plan)


def time_each(
    step: Callable[[], Any], device: torch.device, plan: TimingPlan, reset: Callable[[], None] | None = None
) -> Timing:
    """Time of one `step()` per sample, host work included; `reset()` runs between, untimed."""
    return _clock(device)[1](step, reset, plan)


def time_once(run: Callable[[], Any], device: torch.device) -> tuple[Any, float]:
    """(result, seconds) of one synchronized run: for whole generations."""
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    sync()
    t = time.perf_counter()
    result = run()
    sync()
    return result, time.perf_counter() - t


def copy_bandwidth(device: torch.device, nbytes: int, plan: TimingPlan) -> tuple[float, Timing]:
    """Device-to-device copy rate in bytes/s, counting bytes read plus bytes written.

    The faster of a memcpy and an SM copy kernel: inside a CUDA graph a device-to-device memcpy
    may run on the copy engines, which stream well below what kernels reach (2.7 against about
    4.1 TB/s on an H200), and a floor taken from it would flatter every memory-bound row.
    """
    gen = torch.Generator(device=device).manual_seed(0)
    src = torch.randn(nbytes // 2, generator=gen, device=device, dtype=torch.float32).to(torch.bfloat16)
    dst = torch.empty_like(src)
    ways = (lambda s, d: d.copy_(s), lambda s, d: torch.mul(s, 1, out=d))
    timing = min((time_calls(way, [(src, dst)], device, plan) for way in ways), key=lambda t: t.ms)
    return 2 * nbytes / (timing.ms / 1e3), timing
