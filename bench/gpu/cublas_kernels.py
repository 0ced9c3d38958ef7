"""Which cuBLAS kernel torch.matmul runs for each projection shape, and its time.

cuBLAS names its kernels after their configuration (tile size, cluster, split-K or stream-K), so
the profiler's kernel names say what the peer our GEMM rows are held to does on this GPU:

    python -m bench.gpu.cublas_kernels --m 16 128 2048

prints, for every Qwen3 projection at each M, the kernels one call launched and their summed
device time (median of `--repeats` profiled calls). The calls repeat on one weight, which stays in
L2 when it fits there (up to ~50 MB), so those times run below bench.gpu's rows (which rotate
weights past L2); the names are the point. cuBLAS computes column-major, so in a name's tile
("nvjet_sm90_tst_96x64_...") the first extent runs along our N and the second along our M.
"""

import argparse
import statistics

import torch
from torch.profiler import ProfilerActivity, profile

from .cases.gemm import QWEN3, projections


def kernels_of(x: torch.Tensor, w: torch.Tensor, repeats: int) -> tuple[list[str], float]:
    """The kernel names of one `x @ w.t()` and the median device microseconds of a call."""
    for _ in range(3):
        torch.matmul(x, w.t())
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(repeats):
            torch.matmul(x, w.t())
        torch.cuda.synchronize()
    events = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    per_call = len(events) // repeats
    names = [e.name for e in events[:per_call]]
    totals = [sum(e.device_time for e in events[i * per_call : (i + 1) * per_call]) for i in range(repeats)]
    return names, statistics.median(totals)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--m", type=int, nargs="+", default=[1, 16, 128, 2048], help="rows of the activations"
    )
    parser.add_argument("--repeats", type=int, default=20, help="profiled calls per shape")
    args = parser.parse_args()
    torch.manual_seed(0)
    for model in QWEN3:
        for proj, (k, n) in projections(model).items():
            w = torch.randn(n, k, device="cuda", dtype=torch.bfloat16) * k**-0.5
            for m in args.m:
                x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
                names, us = kernels_of(x, w, args.repeats)
                print(f"{model} {proj} M={m} N={n} K={k}: {us:.2f} us  {' + '.join(names)}", flush=True)


if __name__ == "__main__":
    main()
