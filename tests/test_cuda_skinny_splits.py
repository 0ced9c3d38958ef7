"""The skinny GEMM tier's K splits on a GPU (decode, M <= 8).

On a Hopper build the splits of a column slab are one thread-block cluster reduced through
distributed shared memory; a module built for sm_80 takes the two-kernel workspace path; a
wide N needs no split. Each is checked against the evaluator on fresh random inputs at every
M the tier takes, plus the first M past it (the tiled tiers).
"""

from __future__ import annotations

import os
import sys

import pytest
import torch

import tilefoundry
from tilefoundry.dsl import ConstTensor, DimVar, Tensor, bf16, f16, func

sys.path.insert(0, os.path.dirname(__file__))
import catalogue_programs as cat

M = DimVar("M", 1, 17)
TOLERANCE = {torch.bfloat16: 3e-2, torch.float16: 4e-3}


@func
def skinny(
    x: Tensor[(M, 4096), bf16],
    w_split: ConstTensor[(4096, 1024), bf16],
    h: Tensor[(M, 512), f16],
    w_wide: ConstTensor[(512, 8200), f16],
):
    # 1024 columns over K = 4096: eight K splits per slab. 8200 columns: the slabs fill the device.
    return x @ w_split, h @ w_wide


def _make(n: int, gen: torch.Generator) -> tuple:
    return (
        torch.randn(n, 4096, generator=gen).to(torch.bfloat16).cuda(),
        (torch.randn(4096, 1024, generator=gen) / 64).to(torch.bfloat16).cuda(),
        torch.randn(n, 512, generator=gen).to(torch.float16).cuda(),
        (torch.randn(512, 8200, generator=gen) / 32).to(torch.float16).cuda(),
    )


@pytest.mark.gpu
@pytest.mark.parametrize("arch", [None, "sm_80"])
def test_skinny_gemm_splits_match_evaluator_on_gpu(arch: str | None, tmp_path, monkeypatch) -> None:
    """M = 1..8 on the skinny tier (cluster reduction on sm_90, workspace on sm_80), 9 and 16 past it."""
    monkeypatch.setenv("TILEFOUNDRY_CACHE_DIR", str(tmp_path))
    linked = tilefoundry.compile(skinny, target="cuda", options={"arch": arch} if arch else None)
    cat.check_compiled(linked, skinny, (1, 2, 3, 5, 8, 9, 16), device="cuda", tolerance=TOLERANCE, make=_make)
