"""x @ w.T with w stored (N, K), as every HF-layout linear layer writes it: one K-major GEMM atom.

Planning drops the transpose copy of w when the target has a GEMM atom reading B K-major (cuda
has one per tier; the cpu target has none, so its program is unchanged). nvcc builds the module
here (one translation unit with the sm90 collective, cached for the module); on a GPU every tier
of the K-major atom is checked against torch: the sm90 collective (swapped at short M) and skinny
(M = 1 with B settled or an epilogue on the launch) in the default build, mma.sync and skinny in
an sm_80 build, SIMT for K off 8 and for f32. `wide` (N = 4096, K = 8192) makes the default build
hold the sm90 collective's 128 x 256 tile and its stream-K scheduler too (gemm_tile="auto"), so the
one nvcc build covers all three, and the GPU test sees each call take the kernel it asks for.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from typing import Any

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

    @func
    def wide(xw: Tensor[(M, 8192), bf16], ww: ConstTensor[(4096, 8192), bf16]):
        # N of 4096, K of 8192: under gemm_tile="auto" the module holds the 128 x 256 collective
        # and stream-K too.
        return xw @ tf.transpose(ww, (1, 0))

    @func
    def normed(
        xn: Tensor[(M, 2048), bf16], gn: ConstTensor[(2048,), bf16], wn: ConstTensor[(6144, 2048), bf16]
    ):
        # The norm's kernel writes A, so B is settled: read before the PDL wait on the skinny tier.
        return tf.rms_norm(xn, gn, eps=1e-6) @ tf.transpose(wn, (1, 0))

    @func
    def gated(
        xg: Tensor[(M, 2048), bf16],
        gate: ConstTensor[(1024, 2048), bf16],
        up: ConstTensor[(1024, 2048), bf16],
    ):
        # silu(gate) * up: the epilogue of one grouped call, 2Mi elements of B a member.
        return tf.silu(xg @ tf.transpose(gate, (1, 0))) * (xg @ tf.transpose(up, (1, 0)))

    @func
    def ragged_tiles(xo: Tensor[(M, 2048), bf16], wo: ConstTensor[(1096, 2048), bf16]):
        # 18 tiles of 64 rows of B: the swapped tile's 4 x 1 clusters end past the last one.
        return xo @ tf.transpose(wo, (1, 0))


LINEAR = Linears.functions["linear"]


pytestmark = pytest.mark.usefixtures("fresh_build_cache")


@pytest.fixture(scope="module")
def built() -> tuple[Any, str]:
    """`Linears` compiled once for cuda (the GPU's arch, else sm_90a), and the source it generated."""
    cat.require_nvcc()
    stages: dict[str, str] = {}
    linked = tilefoundry.compile(Linears, target="cuda", dump=stages.__setitem__)
    source = stages["generate source (Linears.cu)"]  # the main source; the collectives' follow
    return linked, source


@pytest.fixture(scope="module")
def linked(built: tuple[Any, str]) -> Any:
    return built[0]


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


def test_the_k_major_gemm_compiles_with_nvcc(built: tuple[Any, str]) -> None:
    """nvcc builds every tier of the K-major atom (sm90 collective at both of "auto"'s tiles, the
    wide one as a 2 x 1 cluster, with stream-K and swapped, skinny, mma.sync, SIMT) into one .so."""
    linked, source = built
    assert linked.library.is_file() and linked.library.stat().st_size > 0
    assert set(linked.entries) == {"linear", "ragged", "wide", "normed", "gated", "ragged_tiles"}
    assert "#define TILEFOUNDRY_SM90_WIDE_PAIR 1\n" in source
    assert "#define TILEFOUNDRY_SM90_STREAM_K 1\n" in source
    assert "#define TILEFOUNDRY_SM90_SMALL_TILE 1\n" in source
    assert "#define TILEFOUNDRY_SM90_SMALL_WIDE 1\n" in source
    assert "#define TILEFOUNDRY_SM90_SWAPPED 1\n" in source
    assert "#define TILEFOUNDRY_SM90_SWAPPED_QUAD_ONLY 1\n" in source
    # Each collective is built in a slot source (joined into as many units as the build took) and
    # the main source only calls it: the library must define every one it calls.
    undefined = subprocess.run(
        ["nm", "-C", "--undefined-only", str(linked.library)], capture_output=True, text=True, check=True
    ).stdout
    assert "Sm90Ops" not in undefined


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
    """x @ w.T at M = 1, 2, 7, 12 and 16 (on sm_90 the swapped collective, C^T = W . x^T; elsewhere
    the skinny tier up to 8), 64, 128 and 300 (sm90 collective, B ColumnMajor)."""
    _check(linked, "linear", (1, 2, 7, 12, 16, 64, 128, 300), _make_linear)


@pytest.mark.gpu
def test_linear_sm80_build_matches_torch_on_gpu(tmp_path, monkeypatch) -> None:
    """An sm_80 build runs the mma.sync tier (B K-major in smem, plain ldmatrix) past M = 8."""
    monkeypatch.setenv("TILEFOUNDRY_CACHE_DIR", str(tmp_path))
    linked = tilefoundry.compile(Linears, target="cuda", options={"arch": "sm_80"})
    _check(linked, "linear", (1, 7, 64, 300), _make_linear)


def _cutlass_kernels(linked, name: str, rows: int, k: int, n: int) -> set[str]:
    """The CUTLASS kernels one call of `name` at M = `rows` launches, after checking its result."""
    body = CompiledFunction(load_linked_module(linked, name), False)
    gen = torch.Generator().manual_seed(13 + rows)
    w = (torch.randn(n, k, generator=gen) / 90).to(torch.bfloat16).cuda()
    x = torch.randn(rows, k, generator=gen).to(torch.bfloat16).cuda()
    body(x, w)
    torch.cuda.synchronize()
    y, names = cat.launched(body, x, w)
    torch.testing.assert_close(y.float(), _torch_linear(x, w).float(), rtol=2e-2, atol=2e-2)
    return {k for k in names if "cutlass" in k}


@pytest.mark.gpu
def test_auto_tile_runs_the_collective_each_call_asks_for_on_gpu(linked) -> None:
    """`wide` runs 128 x 256 at M = 2048 (256 such tiles fill the SMs), as a 2 x 1 cluster under the
    default gemm_cluster "auto", and stream-K at M = 200 (not even its 64 tiles of 128 x 128 would);
    `linear` runs 64 x 64 ping-pong at M = 64 (48 tiles of 128 x 128, 96 of 64 x 64), 64 x 96
    ping-pong at M = 128 (192 tiles of 64 x 64 would be more than one wave: sm90_small_wide_pays)
    and 128 x 128 at M = 300: five CUTLASS kernels, each matching torch."""
    if torch.cuda.get_device_capability()[0] != 9:
        pytest.skip("the sm90 collective runs on sm_90 only")
    wide = [_cutlass_kernels(linked, "wide", m, 8192, 4096) for m in (2048, 200)]
    linear = [_cutlass_kernels(linked, "linear", m, 2048, 6144) for m in (64, 128, 300)]
    kernels = [*wide, *linear]
    assert all(len(k) == 1 for k in kernels) and len(set.union(*kernels)) == 5
    small, small_wide, square = (next(iter(k)) for k in linear)
    assert "Pingpong" in small and "Pingpong" in small_wide and "Pingpong" not in square
    # The mainloop's (stages, ClusterShape) as mangled: cute::tuple<C<2>, C<1>, C<1>> for the pair.
    paired = re.compile(r"MainloopSm90TmaGmmaWarpSpecializedILi\d+ENS\d*_IJNS\d*_1CILi2EEE")
    assert paired.search(next(iter(wide[0]))) and not any(paired.search(next(iter(k))) for k in kernels[1:])


def _kernels(linked, fn, n: int) -> list[str]:
    """The CUDA kernels one call of `fn` at M = `n` launches, after checking it against the evaluator."""
    cat.check_compiled(linked, fn, (n,), device="cuda", tolerance={torch.bfloat16: 3e-2})
    body = CompiledFunction(load_linked_module(linked, fn.name), fn.returns_tuple)
    _, names = cat.launched(body, *cat.inputs(fn, n, torch.Generator().manual_seed(n), "cuda"))
    return [k for k in names if "Memset" not in k]


@pytest.mark.gpu
def test_short_m_runs_the_swapped_collective_on_gpu(linked) -> None:
    """`linear` (B 6144 x 2048, 12Mi elements, N >= K) runs one ping-pong CUTLASS kernel at M = 1
    (a lone call whose B is not settled), 2, 8, 12 and 16, the same at each and not the 64 x 64 one
    M = 64 runs, each call matching torch (gemm.cuh, sm90_swapped_pays). `ragged_tiles` (B 1096 x
    2048: 18 tiles of 64 rows, so the last 4 x 1 cluster of the module's one swapped form runs past
    B's rows) takes the same kernel at M = 2, 5 and 8 and matches torch."""
    if torch.cuda.get_device_capability()[0] != 9:
        pytest.skip("the sm90 collective runs on sm_90 only")
    short = [_cutlass_kernels(linked, "linear", m, 2048, 6144) for m in (1, 2, 8, 12, 16)]
    assert all(len(k) == 1 for k in short) and all(k == short[0] for k in short)
    assert "Pingpong" in next(iter(short[0])) and "gemm_skinny" not in next(iter(short[0]))
    assert short[0] != _cutlass_kernels(linked, "linear", 64, 2048, 6144)
    for m in (2, 5, 8):
        assert _cutlass_kernels(linked, "ragged_tiles", m, 2048, 1096) == short[0], m


@pytest.mark.gpu
def test_settled_and_fused_calls_keep_the_skinny_tier_at_one_row_on_gpu(linked) -> None:
    """At M = 1 a call whose B is settled (`normed`: the norm's kernel writes A) or whose launch
    carries an epilogue (`gated`) stays on the skinny tier, as the decode step runs it; from M = 2
    both run the swapped collective, `gated` with its epilogue as a kernel of its own. Each call
    matches the evaluator."""
    if torch.cuda.get_device_capability()[0] != 9:
        pytest.skip("the sm90 collective runs on sm_90 only")
    for name, launches in (("normed", 2), ("gated", 1)):
        fn = Linears.functions[name]
        one = _kernels(linked, fn, 1)
        assert len(one) == launches and sum("gemm_skinny_nk<" in k for k in one) == 1, (name, one)
        for n in (2, 5, 8):
            rows = _kernels(linked, fn, n)
            swapped = [k for k in rows if "Pingpong" in k]
            assert not any("gemm_skinny" in k for k in rows), (name, n, rows)
            assert len(swapped) == (1 if name == "normed" else 2), (name, n, rows)
            assert len(rows) == len(swapped) + 1, (name, n, rows)


@pytest.mark.gpu
def test_mid_m_runs_the_swapped_collective_where_its_tiles_are_one_wave_on_gpu(linked) -> None:
    """`gated` (two 1024 x 2048 members) at M = 32 and 128 runs each member on the 64 x 32 swapped
    tile (16 x 4 = 64 tiles at M = 128, sm90_swapped_mid_pays) and its epilogue as a kernel of its
    own, matching the evaluator: one ping-pong CUTLASS kernel, not the 64 x 16 one `linear` runs at
    M = 16 nor the 64 x 96 one it runs at M = 128, where 64 x 32 tiles would be 384 (three waves)."""
    if torch.cuda.get_device_capability()[0] != 9:
        pytest.skip("the sm90 collective runs on sm_90 only")
    gated = Linears.functions["gated"]
    mid = []
    for n in (32, 128):
        names = _kernels(linked, gated, n)
        assert len(names) == 3 and sum("Pingpong" in k for k in names) == 2, (n, names)
        mid.append({k for k in names if "Pingpong" in k})
    assert len(mid[0]) == 1 and mid[0] == mid[1]
    for m in (16, 128):
        other = _cutlass_kernels(linked, "linear", m, 2048, 6144)
        assert len(other) == 1 and "Pingpong" in next(iter(other)) and other != mid[0], m


@pytest.mark.gpu
def test_an_activation_off_16_bytes_takes_the_simt_tier_on_gpu(linked) -> None:
    """x a view 2 bytes past a 16-byte boundary: no TMA box may start there, so M = 4 and 64 (the
    swapped and the 64 x 64 collective when aligned) run the K-major SIMT tier, matching torch."""
    body = CompiledFunction(load_linked_module(linked, "linear"), False)
    gen = torch.Generator().manual_seed(17)
    w = (torch.randn(6144, 2048, generator=gen) / 45).to(torch.bfloat16).cuda()
    for n in (4, 64):
        flat = torch.randn(n * 2048 + 1, generator=gen).to(torch.bfloat16).cuda()
        x = flat[1:].view(n, 2048)
        y, names = cat.launched(body, x, w)
        assert names and not any("Pingpong" in k or "gemm_skinny" in k for k in names), (n, names)
        torch.testing.assert_close(y.float(), _torch_linear(x, w).float(), rtol=2e-2, atol=2e-2)


@pytest.mark.gpu
def test_k_off_eight_and_f32_take_the_k_major_simt_tier_on_gpu(linked) -> None:
    """K = 20 (bf16) and f32 run the ordered FFMA tier reading B (N, K), ragged M included."""
    _check(linked, "ragged", (1, 7, 64, 300), _make_ragged)
