"""The skinny GEMM tier (decode, M <= 8) on a GPU: each way of combining the K splits.

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
from tilefoundry.dsl import ConstTensor, DimVar, Tensor, bf16, f16, func, tf

sys.path.insert(0, os.path.dirname(__file__))
import catalogue_programs as cat

M = DimVar("M", 1, 17)
TOLERANCE = {torch.bfloat16: 3e-2, torch.float16: 4e-3, torch.float32: 2e-4}


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


def _t(w):
    return tf.transpose(w, (1, 0))


@func
def projections(
    x: Tensor[(M, 1024), bf16],
    wq: ConstTensor[(2048, 1024), bf16],
    wk: ConstTensor[(512, 1024), bf16],
    wv: ConstTensor[(520, 1024), bf16],
):
    # Three Linear weights (out, in) read by one activation: one grouped call (ir.plan.gemm_groups).
    return x @ _t(wq), x @ _t(wk), x @ _t(wv)


def _make_projections(n: int, gen: torch.Generator) -> tuple:
    x = torch.randn(n, 1024, generator=gen).to(torch.bfloat16).cuda()
    ws = ((torch.randn(o, 1024, generator=gen) / 32).to(torch.bfloat16).cuda() for o in (2048, 512, 520))
    return (x, *ws)


def _built(fn) -> tuple[tilefoundry.LinkedModule, str]:
    """`fn` built for cuda, and its generated source (shared by the CI check and the GPU run)."""
    cat.require_nvcc()
    stages: dict[str, str] = {}
    linked = tilefoundry.compile(fn, target="cuda", dump=stages.__setitem__)
    (source,) = (text for stage, text in stages.items() if stage.startswith("generate source"))
    return linked, source


@pytest.fixture(scope="module")
def grouped() -> tuple[tilefoundry.LinkedModule, str]:
    return _built(projections)


def test_gemms_sharing_a_are_one_grouped_call(grouped) -> None:
    """The three projections of x are one gemm_group call; the module builds with nvcc."""
    _, source = grouped
    assert source.count("gemm_group<GemmLayout::rcr>(") == 1
    assert "gemm<GemmLayout::rcr>(" not in source


@pytest.mark.gpu
def test_grouped_projections_match_evaluator_on_gpu(grouped) -> None:
    """M = 1..8 run all three members in one skinny launch (rows end to end); 9 and 16 one GEMM each."""
    cat.check_compiled(grouped[0], projections, (1, 2, 3, 5, 8, 9, 16), device="cuda", tolerance=TOLERANCE,
                       make=_make_projections)


@func
def gated_mlp(
    x: Tensor[(M, 1024), bf16],
    gate: ConstTensor[(768, 1024), bf16],
    up: ConstTensor[(768, 1024), bf16],
    down: ConstTensor[(1024, 768), bf16],
):
    # silu(gate) * up is the epilogue of the gate/up group; the residual add that of the down GEMM.
    return x + (tf.silu(x @ _t(gate)) * (x @ _t(up))) @ _t(down)


def _make_mlp(n: int, gen: torch.Generator) -> tuple:
    x = torch.randn(n, 1024, generator=gen).to(torch.bfloat16).cuda()
    shapes = ((768, 1024), (768, 1024), (1024, 768))
    ws = ((torch.randn(*s, generator=gen) / 32).to(torch.bfloat16).cuda() for s in shapes)
    return (x, *ws)


@pytest.fixture(scope="module")
def mlp_epilogues() -> tuple[tilefoundry.LinkedModule, str]:
    return _built(gated_mlp)


def test_pointwise_consumers_are_gemm_epilogues(mlp_epilogues) -> None:
    """silu(gate) * up and the residual add become the epilogues of their GEMM calls; their own
    kernels launch only when the atom did not apply them (the tiled tiers); nvcc builds it."""
    _, source = mlp_epilogues
    assert source.count("gemm_epilogue<GemmLayout::rcr, 2>(") == 1
    assert source.count("gemm_epilogue<GemmLayout::rcr, 1>(") == 1
    assert source.count("_applied_) {") == 2
    assert "struct k4_mul_epilogue {" in source and "struct k7_add_epilogue {" in source


@pytest.mark.gpu
def test_gemm_epilogues_match_evaluator_on_gpu(mlp_epilogues) -> None:
    """M = 1..8 apply both epilogues inside the skinny launches; 9 and 16 write C and run the kernels."""
    linked, _ = mlp_epilogues
    sizes = (1, 2, 3, 5, 8, 9, 16)
    cat.check_compiled(linked, gated_mlp, sizes, device="cuda", tolerance=TOLERANCE, make=_make_mlp)
