"""x @ w.T with w stored (N, K), as every HF-layout linear layer writes it: one K-major GEMM atom.

Planning drops the transpose copy of w when the target has a GEMM atom reading B K-major (cuda
has one per tier; the cpu target has none, so its program is unchanged). nvcc builds the module
here (one translation unit with the sm90 collective, cached for the module); on a GPU every
tier of the K-major atom is checked against torch: sm90 collective and skinny (M <= 8) in the
default build, mma.sync and skinny in an sm_80 build, SIMT for K off 8 and for f32.
"""

from __future__ import annotations

import os
import sys

import pytest
import torch

import tilefoundry
from tilefoundry.codegen.cuda.catalog import arch_catalog
from tilefoundry.dsl import ConstTensor, DimVar, Tensor, bf16, f32, func, module, tf
from tilefoundry.ir.pipeline import schedule_function
from tilefoundry.ir.target import get_target
from tilefoundry.runtime.loader import CompiledFunction, load_linked_module

sys.path.insert(0, os.path.dirname(__file__))
import catalogue_programs as cat

M = DimVar("M", 1, 4097)


@module
class Linears:
    @func
    def linear(x: Tensor[(M, 2048), bf16], w: ConstTensor[(6144, 2048), bf16]):
        return x @ tf.transpose(w, (1, 0))

    @func
    def ragged(
        xr: Tensor[(M, 20), bf16],
        wr: ConstTensor[(12, 20), bf16],
        xf: Tensor[(M, 64), f32],
        wf: ConstTensor[(48, 64), f32],
    ):
        # K = 20 is off the 16-byte packs: the SIMT tier; f32 always runs SIMT.
        return xr @ tf.transpose(wr, (1, 0)), xf @ tf.transpose(wf, (1, 0))


LINEAR = Linears.functions["linear"]


pytestmark = pytest.mark.usefixtures("fresh_build_cache")


@pytest.fixture(scope="module")
def linked():
    """`Linears` compiled once for cuda (the GPU's arch, else sm_90a)."""
    cat.require_nvcc()
    return tilefoundry.compile(Linears, target="cuda")


def test_cuda_reads_the_weight_in_place_with_one_k_major_atom() -> None:
    """sm_90a: one kernel, the sm90 collective with B (N, K); no transpose copy, no temp."""
    p = schedule_function(LINEAR, arch_catalog("sm_90a"), {})
    assert [(k.name, k.body.atom) for k in p.kernels] == [
        ("k1_matmul", "sm90_gemm_tma_wgmma_128x128x64_bf16_rcr")
    ]
    assert p.temps == ()
    assert "t0 read in place as w transposed" in p.kernels[0].decisions[-1]


def test_cpu_keeps_the_copy_and_its_row_major_atom() -> None:
    """The cpu catalog has no K-major GEMM atom: the transpose kernel and its temp stay as they were."""
    p = schedule_function(LINEAR, get_target("cpu").catalog, {})
    assert [k.name for k in p.kernels] == ["k0_transpose", "k1_matmul"]
    assert [t.name for t in p.temps] == ["t0"]
    assert not any("read in place" in d for k in p.kernels for d in k.decisions)


def test_the_k_major_gemm_compiles_with_nvcc(linked) -> None:
    """nvcc builds every tier of the K-major atom (sm90 collective, skinny, mma.sync, SIMT) into one .so."""
    assert linked.library.is_file() and linked.library.stat().st_size > 0
    assert set(linked.entries) == {"linear", "ragged"}


# ---------------------------------------------------------------- on a GPU


def _torch_linear(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return (x.float() @ w.float().T).to(x.dtype)


def _check(linked, name: str, sizes: tuple[int, ...], make) -> None:
    fn = Linears.functions[name]
    body = CompiledFunction(load_linked_module(linked, name), fn.returns_tuple)
    gen = torch.Generator().manual_seed(11)
    for n in sizes:
        args = make(n, gen)
        got = body(*args)
        got = got if isinstance(got, tuple) else (got,)
        pairs = list(zip(args[::2], args[1::2], strict=True))
        for i, ((x, w), out) in enumerate(zip(pairs, got, strict=True)):
            ref = _torch_linear(x, w)
            tol = 2e-4 if x.dtype == torch.float32 else 2e-2
            where = f"{name} out{i} at M={n}"
            torch.testing.assert_close(
                out.float(), ref.float(), rtol=tol, atol=tol, msg=lambda m, where=where: f"{where}: {m}"
            )


def _make_linear(n: int, gen: torch.Generator) -> tuple:
    return (
        torch.randn(n, 2048, generator=gen).to(torch.bfloat16).cuda(),
        (torch.randn(6144, 2048, generator=gen) / 45).to(torch.bfloat16).cuda(),
    )


def _make_ragged(n: int, gen: torch.Generator) -> tuple:
    return (
        torch.randn(n, 20, generator=gen).to(torch.bfloat16).cuda(),
        (torch.randn(12, 20, generator=gen) / 4).to(torch.bfloat16).cuda(),
        torch.randn(n, 64, generator=gen).cuda(),
        (torch.randn(48, 64, generator=gen) / 8).cuda(),
    )


@pytest.mark.gpu
def test_linear_matches_torch_on_gpu(linked) -> None:
    """x @ w.T at M = 1, 7 (skinny, B (N, K) rows streamed), 64 and 300 (sm90 collective, B ColumnMajor)."""
    _check(linked, "linear", (1, 7, 64, 300), _make_linear)


@pytest.mark.gpu
def test_linear_sm80_build_matches_torch_on_gpu(tmp_path, monkeypatch) -> None:
    """An sm_80 build runs the mma.sync tier (B K-major in smem, plain ldmatrix) past M = 8."""
    monkeypatch.setenv("TILEFOUNDRY_CACHE_DIR", str(tmp_path))
    linked = tilefoundry.compile(Linears, target="cuda", options={"arch": "sm_80"})
    _check(linked, "linear", (1, 7, 64, 300), _make_linear)


@pytest.mark.gpu
def test_k_off_eight_and_f32_take_the_k_major_simt_tier_on_gpu(linked) -> None:
    """K = 20 (bf16) and f32 run the ordered FFMA tier reading B (N, K), ragged M included."""
    _check(linked, "ragged", (1, 7, 64, 300), _make_ragged)
