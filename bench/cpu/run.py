"""CPU benchmark: compiled TileFoundry vs torch eager and torch.compile, measured in one run.

    uv run python bench/cpu/run.py [--iters 10] [--warmup 3]

Each case is first checked against the evaluator, then timed: `--warmup` calls of each contender,
then `--iters` rounds that call every contender once, in rotating order, so a burst of load on
this shared machine hits all of them alike; the median of each is reported. "ours" allocates its
output per call as torch does ("pre-alloc" passes one in: the kernel alone). Cold compile time
uses a fresh build cache; cache-hit time compiles again in the same process after clearing jit's
in-process cache. Not a test: it prints a table and writes the rows to
bench/results/cpu-<date>.json.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import torch

import tilefoundry
from tilefoundry.check import allclose, check
from tilefoundry.dsl import ConstTensor, Tensor, bf16, f32, func, tf

N = 4096
M = K = NN = 1024


@func
def chain(x: Tensor[(N, N), f32], y: Tensor[(N, N), f32]):
    return tf.silu(x * y + 1.0) - tf.tanh(y) * 0.5


@func
def rms(x: Tensor[(N, N), f32], w: ConstTensor[(N,), f32]):
    return tf.rms_norm(x, w)


@func
def softmax(x: Tensor[(N, N), f32]):
    return tf.softmax(x, -1)


@func
def gemm(a: Tensor[(M, K), f32], b: Tensor[(K, NN), f32]):
    return a @ b


@func
def gemm_half(a: Tensor[(M, K), bf16], b: Tensor[(K, NN), bf16]):
    return a @ b


def _chain_torch(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.silu(x * y + 1.0) - torch.tanh(y) * 0.5


def _rms_torch(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return x * torch.rsqrt(x.square().mean(-1, keepdim=True) + 1e-6) * w


CASES: list[tuple[str, object, Callable[..., torch.Tensor], Callable[[torch.Generator], tuple], float]] = [
    (
        "pointwise chain (6 ops)",
        chain,
        _chain_torch,
        lambda g: (torch.randn(N, N, generator=g), torch.randn(N, N, generator=g)),
        0.0,
    ),
    (
        "rms_norm",
        rms,
        _rms_torch,
        lambda g: (torch.randn(N, N, generator=g), torch.randn(N, generator=g)),
        0.0,
    ),
    ("softmax", softmax, lambda x: torch.softmax(x, -1), lambda g: (torch.randn(N, N, generator=g),), 0.0),
    (
        "gemm f32",
        gemm,
        torch.matmul,
        lambda g: (torch.randn(M, K, generator=g), torch.randn(K, NN, generator=g)),
        2.0 * M * K * NN,
    ),
    (
        "gemm bf16",
        gemm_half,
        torch.matmul,
        lambda g: (torch.randn(M, K, generator=g).bfloat16(), torch.randn(K, NN, generator=g).bfloat16()),
        2.0 * M * K * NN,
    ),
]


def _time(contenders: dict[str, Callable[[], object]], warmup: int, iters: int) -> dict[str, float]:
    """Median seconds per contender, measured in interleaved rounds."""
    for fn in contenders.values():
        for _ in range(warmup):
            fn()
    samples: dict[str, list[float]] = {name: [] for name in contenders}
    names = list(contenders)
    for i in range(iters):
        for name in names[i % len(names) :] + names[: i % len(names)]:
            t = time.perf_counter()
            contenders[name]()
            samples[name].append(time.perf_counter() - t)
    return {name: statistics.median(v) for name, v in samples.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=3)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="tilefoundry-bench-") as cache:
        os.environ["TILEFOUNDRY_CACHE_DIR"] = cache  # cold builds, so the cold column means what it says
        _bench(args)


def _bench(args: argparse.Namespace) -> None:
    """Time every case against eager and torch.compile; print the table and write results/cpu-DATE.json."""
    cpu = platform.processor() or platform.machine()
    print(
        f"# cpu: {cpu}, {os.cpu_count()} cores, torch {torch.__version__}, "
        f"threads {torch.get_num_threads()}, load average {os.getloadavg()[0]:.1f}, "
        f"warmup {args.warmup}, iters {args.iters}"
    )
    header = (
        "case | shape | ours ms | pre-alloc ms | eager ms | compile ms | vs eager | vs compile | GFLOP/s "
        "| cold s | hit s"
    )
    print(header)
    print("-" * len(header))
    rows = []
    g = torch.Generator().manual_seed(0)
    for name, fn, ref, make, flops in CASES:
        inputs = make(g)
        t0 = time.perf_counter()
        ours = tilefoundry.jit(fn, target="cpu")
        cold = time.perf_counter() - t0
        tilefoundry.jit.cache_clear()
        t0 = time.perf_counter()
        ours = tilefoundry.jit(fn, target="cpu")
        hit = time.perf_counter() - t0
        tol = 2e-2 if inputs[0].dtype == torch.bfloat16 else 1e-3
        report = check(ours, fn, inputs, expect={"output": [allclose(atol=tol, rtol=tol)]})
        assert report.passed, f"{name}:\n{report}"
        compiled_ref = torch.compile(ref)
        out = ours(*inputs)
        t = _time(
            {
                "ours": lambda: ours(*inputs),  # noqa: B023
                "pre-alloc": lambda: ours(*inputs, out),  # noqa: B023
                "eager": lambda: ref(*inputs),  # noqa: B023
                "compile": lambda: compiled_ref(*inputs),  # noqa: B023
            },
            args.warmup,
            args.iters,
        )
        shape = "x".join(str(s) for s in inputs[0].shape)
        gf = f"{flops / t['ours'] / 1e9:.0f}" if flops else "-"
        row = dict(
            case=name,
            shape=shape,
            ours_ms=t["ours"] * 1e3,
            prealloc_ms=t["pre-alloc"] * 1e3,
            eager_ms=t["eager"] * 1e3,
            compile_ms=t["compile"] * 1e3,
            speedup_eager=t["eager"] / t["ours"],
            speedup_compile=t["compile"] / t["ours"],
            cold_s=cold,
            hit_s=hit,
        )
        rows.append(row)
        ms = " | ".join(f"{t[k] * 1e3:.1f}" for k in ("ours", "pre-alloc", "eager", "compile"))
        ratios = f"{t['eager'] / t['ours']:.2f}x | {t['compile'] / t['ours']:.2f}x"
        print(f"{name} | {shape} | {ms} | {ratios} | {gf} | {cold:.1f} | {hit:.3f}")
    out_path = Path(__file__).resolve().parents[1] / "results" / f"cpu-{datetime.date.today()}.json"
    out_path.parent.mkdir(parents=True, exist_ok=True)
    out_path.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
