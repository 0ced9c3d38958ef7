"""bf16 GEMM cases: square products and the projection shapes of Qwen3-1.7B and Qwen3-8B.

A projection multiplies activations (M, K) by a weight stored as nn.Linear stores it, (N, K),
transposed in the product exactly as the models of `tilefoundry.models` write it. M is a DimVar,
so one compiled kernel serves M = 1, 16, 128, 2048 (the cases share its build). The peer is
cuBLAS through torch.matmul. Goals (issue 7): >= 0.95x cuBLAS on every shape, and >= 85% of
HBM bandwidth where M <= 16 (those shapes only stream the weight).
"""

import torch

from tilefoundry.dsl import ConstTensor, DimVar, Tensor, bf16, func, tf

from ..floors import gemm_work
from ..goals import AtLimit, BeatsPeer, Goal
from . import PEERS, KernelCase, Peer, generator, randn

BF16 = torch.bfloat16
MAX_M = 8192

# The decoder shapes of each model, as its config.json gives them.
QWEN3 = {
    "qwen3-1.7b": {
        "hidden": 2048,
        "intermediate": 6144,
        "heads": 16,
        "kv_heads": 8,
        "head_dim": 128,
        "vocab": 151936,
    },
    "qwen3-8b": {
        "hidden": 4096,
        "intermediate": 12288,
        "heads": 32,
        "kv_heads": 8,
        "head_dim": 128,
        "vocab": 151936,
    },
}


def projections(model: str) -> dict[str, tuple[int, int]]:
    """Each distinct projection of `model` as (K, N): q, k/v, o, gate/up, down, LM head."""
    s = QWEN3[model]
    h, q, kv = s["hidden"], s["heads"] * s["head_dim"], s["kv_heads"] * s["head_dim"]
    return {
        "q": (h, q),
        "kv": (h, kv),
        "o": (q, h),
        "gate_up": (h, s["intermediate"]),
        "down": (s["intermediate"], h),
        "lm_head": (h, s["vocab"]),
    }


def _gemm_goals(m: int) -> tuple[Goal, ...]:
    cublas = BeatsPeer(PEERS["cublas"], 0.95)
    return (cublas, AtLimit(0.85)) if m <= 16 else (cublas,)


def _linear_torch(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return torch.matmul(x, w.t())


def linear(model: str, proj: str, m: int) -> KernelCase:
    """x (m, K) @ w (N, K)^T for one projection of `model`."""
    k, n = projections(model)[proj]

    def ours():
        M = DimVar("M", 1, MAX_M + 1)

        @func
        def linear(x: Tensor[(M, k), bf16], w: ConstTensor[(n, k), bf16]):
            return x @ tf.transpose(w, (1, 0))

        return linear

    def make(device: torch.device, seed: int) -> tuple:
        g = generator(device, seed)
        return randn(g, (m, k), BF16, device), randn(g, (n, k), BF16, device) * k**-0.5

    return KernelCase(
        id=f"gemm/{model}/{proj}/m{m}",
        shape=f"{m}x{k}x{n}",
        dtype="bf16",
        work=gemm_work(m, k, n),
        kernel=f"linear/{k}x{n}",
        ours=ours,
        inputs=make,
        peers=(Peer("cublas", lambda: _linear_torch),),
        goals=_gemm_goals(m),
    )


def square(n: int) -> KernelCase:
    """a (n, n) @ b (n, n), both row-major activations."""

    def ours():
        @func
        def gemm(a: Tensor[(n, n), bf16], b: Tensor[(n, n), bf16]):
            return a @ b

        return gemm

    def make(device: torch.device, seed: int) -> tuple:
        g = generator(device, seed)
        return randn(g, (n, n), BF16, device), randn(g, (n, n), BF16, device) * n**-0.5

    return KernelCase(
        id=f"gemm/square/{n}",
        shape=f"{n}x{n}x{n}",
        dtype="bf16",
        work=gemm_work(n, n, n),
        kernel=f"gemm/{n}",
        ours=ours,
        inputs=make,
        peers=(Peer("cublas", lambda: torch.matmul),),
        goals=_gemm_goals(n),
    )
