"""The bulk-copy skinny GEMV (gemm_skinny_bulk) on a GPU: B of 128 MiB or more streamed through
shared memory at M = 1, each cut as the atom cuts it, and what an LM head behind its norm runs
under prologues. Each A of the cuts is written by a kernel of the program, so B is settled and
M = 1 keeps the skinny tier (a lone call with B not settled runs the sm90 collective swapped there;
test_cuda_linear.py).

Its weights (up to 512 MiB) run only on a GPU, so CI builds none of it.
"""

from __future__ import annotations

import os
import sys

import pytest
import torch

import tilefoundry
from tilefoundry.dsl import ConstTensor, DimVar, Tensor, bf16, func, tf
from tilefoundry.runtime.loader import CompiledFunction, load_linked_module

sys.path.insert(0, os.path.dirname(__file__))
import catalogue_programs as cat

M = DimVar("M", 1, 17)
TOLERANCE = {torch.bfloat16: 3e-2}


@func
def bulk_cuts(
    x: Tensor[(M, 256), bf16],
    wide: ConstTensor[(262144, 256), bf16],
    y: Tensor[(M, 6144), bf16],
    tall: ConstTensor[(10924, 6144), bf16],
    z: Tensor[(M, 2048), bf16],
    four: ConstTensor[(32772, 2048), bf16],
    v: Tensor[(M, 1024), bf16],
    odd: ConstTensor[(65537, 1024), bf16],
):
    # Each B reaches the bulk kernel's 128 MiB. At M = 1 each GEMM takes that kernel cut its own
    # way: `wide` in units of 8 rows of 512 bytes, eight stages, each refilled many times; `tall`
    # (K = 6144) in units of 2 rows, four warps a row; `four` (32772 rows) in units of 4, two warps
    # a row. `odd` (65537 rows) has no cut. Each A is a kernel's result (B settled).
    return (x * 2.0) @ wide.T, (y * 2.0) @ tall.T, (z * 2.0) @ four.T, (v * 2.0) @ odd.T


_BULK_SHAPES = ((262144, 256), (10924, 6144), (32772, 2048), (65537, 1024))


def _make_bulk(n: int, gen: torch.Generator) -> tuple:
    def pair(rows: int, k: int) -> tuple[torch.Tensor, torch.Tensor]:
        a = torch.randn(n, k, generator=gen).to(torch.bfloat16).cuda()
        return a, (torch.randn(rows, k, generator=gen) / k**0.5).to(torch.bfloat16).cuda()

    return tuple(t for rows, k in _BULK_SHAPES for t in pair(rows, k))


@pytest.fixture(scope="module")
def bulk_built() -> tilefoundry.LinkedModule:
    """bulk_cuts alone (its 512 MiB of weights run only on a GPU, so CI does not build it)."""
    cat.require_nvcc()
    return tilefoundry.compile(bulk_cuts, target="cuda")


@pytest.mark.gpu
def test_bulk_copy_gemv_cuts_match_evaluator_on_gpu(bulk_built) -> None:
    """M = 1 streams a long B through shared memory by bulk copies (gemm_skinny_bulk) wherever a cut
    of whole rows fits the ring: three of the four GEMMs; the 65537-row one keeps the
    register-streaming kernel. Both match the evaluator, and so does M = 2 (`wide` on the sm90
    collective swapped, the others, whose N is off 8, on the register kernel)."""
    cat.check_compiled(bulk_built, bulk_cuts, (1, 2), device="cuda", tolerance=TOLERANCE, make=_make_bulk)
    body = CompiledFunction(load_linked_module(bulk_built, "bulk_cuts"), True)
    args = _make_bulk(1, torch.Generator().manual_seed(1))
    _, names = cat.launched(body, *args)
    assert sum("gemm_skinny_bulk<" in name for name in names) == 3, names
    assert sum("gemm_skinny_nk<" in name for name in names) == 1, names


@func
def normed_head(
    x: Tensor[(M, 1024), bf16], g: ConstTensor[(1024,), bf16], table: ConstTensor[(65536, 1024), bf16]
):
    # An LM head's shape (128 MiB of B, the bulk kernel's threshold) behind its final RMS norm.
    return tf.rms_norm(x, g, eps=1e-6) @ table.T


def _make_normed_head(n: int, gen: torch.Generator) -> tuple:
    x = torch.randn(n, 1024, generator=gen).to(torch.bfloat16).cuda()
    g = (1 + 0.1 * torch.randn(1024, generator=gen)).to(torch.bfloat16).cuda()
    return x, g, (torch.randn(65536, 1024, generator=gen) / 32).to(torch.bfloat16).cuda()


@pytest.mark.gpu
def test_a_head_behind_its_norm_runs_the_norm_kernel_and_the_swapped_gemm_under_prologues_on_gpu() -> None:
    """With prologues asked for (gemm_fusion="all"), the 128 MiB head never folds its norm into the
    register kernel: at M = 1 gemm_stages_prologue declines (that launch would stream B by bulk
    copies), so the norm runs as its own kernel, and the head, whose B the code generator cannot
    prove settled (the prologue is the program's first kernel), is a lone call that runs the sm90
    collective swapped, as at M = 2. Both match the evaluator."""
    cat.require_nvcc()
    if torch.cuda.get_device_capability()[0] != 9:
        pytest.skip("the bulk-copy GEMV and the sm90 collective run on sm_90 only")
    linked = tilefoundry.compile(normed_head, target="cuda", options={"gemm_fusion": "all"})
    cat.check_compiled(linked, normed_head, (1, 2), device="cuda", tolerance=TOLERANCE,
                       make=_make_normed_head)
    body = CompiledFunction(load_linked_module(linked, "normed_head"), True)
    for n in (1, 2):
        args = _make_normed_head(n, torch.Generator().manual_seed(n))
        _, names = cat.launched(body, *args)
        assert not any("gemm_skinny" in name for name in names), (n, names)
        assert sum("Pingpong" in name for name in names) == 1, (n, names)
        assert sum("rms_norm" in name and "prologue" not in name for name in names) == 1, (n, names)
