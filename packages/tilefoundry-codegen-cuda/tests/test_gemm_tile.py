"""Option gemm_tile: the sm90 GEMM collective's CTA tile, a compile-time knob for the autotuner."""

from __future__ import annotations

import pytest

import tilefoundry
from tilefoundry.codegen.cuda.options import GEMM_TILE
from tilefoundry.dsl import ConstTensor, DimVar, Tensor, bf16, f32, func, tf
from tilefoundry.ir.errors import PlanError
from tilefoundry.ir.target import get_target

T = DimVar("T", 1, 4097)


@func
def proj(x: Tensor[(T, 256), bf16], w: ConstTensor[(512, 256), bf16]):
    return x @ tf.transpose(w, (1, 0))


@func
def scale(x: Tensor[(T, 8), f32]):
    return x * 2.0


def test_a_non_default_tile_defines_the_collectives_tile_shape(cuda_source) -> None:
    """gemm_tile=256x128 reaches the sm90 collective as its TileShape macros; the default defines none."""
    text = cuda_source(proj, {"gemm_tile": "256x128"})
    assert "#define TILEFOUNDRY_SM90_TILE_M 256\n#define TILEFOUNDRY_SM90_TILE_N 128\n" in text
    assert "TILEFOUNDRY_SM90_TILE_M" not in cuda_source(proj)
    assert GEMM_TILE.values[0] == GEMM_TILE.default == "128x128"


def test_the_tile_only_matters_where_the_collective_is_built(cuda_source) -> None:
    """A module without the sm90 collective gets no tile macros, and sm_80 builds ignore the knob."""
    assert "TILEFOUNDRY_SM90_TILE" not in cuda_source(scale, {"gemm_tile": "128x256"})
    assert "TILEFOUNDRY_SM90_TILE" not in cuda_source(proj, {"gemm_tile": "128x256"}, "sm_80")


def test_an_unknown_tile_is_refused_naming_the_choices(cuda_source) -> None:
    """A tile the collective is not offered with fails closed before any code is written."""
    message = r"option gemm_tile must be one of 128x128, 128x256, 256x128, got '64x64'"
    with pytest.raises(PlanError, match=message):
        cuda_source(scale, {"gemm_tile": "64x64"})


def test_every_offered_tile_builds_with_nvcc(tmp_path, monkeypatch) -> None:
    """The non-default tiles instantiate the CUTLASS collective cleanly (one nvcc build of both)."""
    if not get_target("cuda").availability.can_compile:
        pytest.skip("cuda cannot compile here: " + "; ".join(get_target("cuda").availability.reasons))
    monkeypatch.setenv("TILEFOUNDRY_CACHE_DIR", str(tmp_path))
    for tile in GEMM_TILE.values[1:]:
        linked = tilefoundry.compile(proj, target="cuda", options={"gemm_tile": tile, "arch": "sm_90a"})
        assert linked.library.is_file()
