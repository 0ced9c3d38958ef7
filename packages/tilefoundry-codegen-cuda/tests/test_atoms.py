"""atoms.py: whole-region atoms are re-proved on the final body, then called with their macros."""

from __future__ import annotations

import dataclasses

import pytest

from tilefoundry.codegen.cuda import atoms, gemm_atom
from tilefoundry.codegen.cuda.catalog import arch_catalog
from tilefoundry.codegen.cuda.realize import realize_kernel
from tilefoundry.dsl import ConstTensor, DimVar, Tensor, bf16, f32, f64, func, tf
from tilefoundry.ir.errors import PlanError
from tilefoundry.ir.tile.cexpr import CExpr

T = DimVar("T", 1, 65)


@func
def mm(x: Tensor[(2, T, 64), bf16], w: ConstTensor[(64, 128), bf16]):
    return x @ w


def _atom(sched, fn, arch: str = "sm_90a", **options):
    p = sched(fn, options, arch)
    (r,) = realize_kernel(p.name, p.kernels[0], arch_catalog(arch), options)
    return p, r


def test_catalog_lists_whole_gemm_atoms_best_first() -> None:
    """sm_90a offers the sm90 collective first; sm_80 the mma.sync mainloop; every arch the f32 SIMT atom.

    Each comes with B (K, N) N-major ("rrr") and B stored (N, K) K-major ("rcr").
    """
    names = [a.name for a in arch_catalog("sm_90a").atoms_of("mma") if a.a_storage == "gmem"]
    assert names == [
        "sm90_gemm_tma_wgmma_128x128x64_bf16_rrr",
        "sm90_gemm_tma_wgmma_128x128x64_f16_rrr",
        "sm90_gemm_tma_wgmma_128x128x64_bf16_rcr",
        "sm90_gemm_tma_wgmma_128x128x64_f16_rcr",
        "sm80_gemm_mma_128x128x32_bf16_rrr",
        "sm80_gemm_mma_128x128x32_f16_rrr",
        "sm80_gemm_mma_128x128x32_bf16_rcr",
        "sm80_gemm_mma_128x128x32_f16_rcr",
        "cuda_gemm_simt_64x64x16_f32_rrr",
        "cuda_gemm_simt_64x64x16_f32_rcr",
    ]
    assert [a.name for a in arch_catalog("sm_80").atoms_of("mma") if a.a_storage == "gmem"] == names[4:]
    majors = {
        a.name[-3:]: (a.a_major, a.b_major)
        for a in arch_catalog("sm_90a").atoms_of("mma")
        if a.a_storage == "gmem"
    }
    assert majors == {"rrr": ("K", "N"), "rcr": ("K", "K")}


def test_gemm_atom_call_folds_batch_into_m_and_sizes_its_workspace(sched) -> None:
    """The host calls the atom's one entry with extents; the batch of x folded into M; workspace first."""
    p, r = _atom(sched, mm)
    lines = atoms.launch(p, r, CExpr({"T": "d_T"}))
    dims = "int64_t(1LL), (int64_t(2LL) * d_T), int64_t(128LL), int64_t(64LL)"
    rrr = "GemmLayout::rrr"
    assert lines[1] == f"  const size_t ws_bytes_ = gemm_workspace_bytes<{rrr}>(b_x, b_w, b_out0, {dims});"
    assert lines[3].startswith(f"  e.cuda(gemm<{rrr}>(b_x, b_w, b_out0, {dims}, ws_.ptr, stream_)")


def test_sm90_gemm_is_compiled_only_into_modules_that_use_it(sched, cuda_source) -> None:
    """The CUTLASS sm90 collective compiles slowly: only a source using the sm90 atom defines its macro."""
    assert atoms.features(_atom(sched, mm)[1]) == (gemm_atom.SM90_GEMM_MACRO,)
    assert atoms.features(_atom(sched, mm, "sm_80")[1]) == ()
    assert cuda_source(mm).splitlines()[1] == "#define TILEFOUNDRY_CUDA_GEMM_SM90 1"
    assert "#define" not in cuda_source(mm, arch="sm_80")


def test_stale_gemm_atom_is_refused_on_the_final_body(sched) -> None:
    """seed 003: the atom's contract is re-checked on the body, so stale metadata cannot change what runs."""
    p, r = _atom(sched, mm)
    a, b, c = r.body.operands
    r.body = dataclasses.replace(r.body, operands=(b, a, c))
    with pytest.raises(
        PlanError,
        match=r"cuda: kernel k0_matmul: atom sm90_gemm_tma_wgmma_128x128x64_bf16_rrr "
        r"no longer matches its region: the atom's operands are not the region's A, B and C",
    ):
        atoms.emit_device(p, r)


def test_f64_matmul_keeps_the_checked_loop_and_explicit_atom_fails_closed(sched) -> None:
    """No catalog atom takes f64: the checked loop stays, and an explicit gemm='atom' refuses."""

    @func
    def wide(x: Tensor[(T, 8), f64], w: ConstTensor[(8, 8), f64]):
        return x @ w

    p, r = _atom(sched, wide)
    assert r.kind == "grid"
    assert "kept the checked contraction loop: the catalog has no GEMM atom for f64" in p.kernels[0].decisions
    with pytest.raises(
        PlanError,
        match=r"cuda: kernel k0_matmul \(matmul@.*\): explicit GEMM atom refused: "
        r"the catalog has no GEMM atom for f64",
    ):
        sched(wide, {"gemm": "atom"})


def test_f32_gemm_takes_the_simt_atom_never_tensor_cores(sched) -> None:
    """DESIGN §3: f32 work stays f32 (no TF32): an f32 GEMM region runs the ordered FFMA tier."""

    @func
    def single(x: Tensor[(T, 64), f32], w: ConstTensor[(64, 32), f32]):
        return tf.relu(x) @ w

    assert _atom(sched, single)[1].kind == "grid"  # relu(x) is an inlined producer: no memory operand

    @func
    def stored(x: Tensor[(T, 64), f32], w: ConstTensor[(64, 32), f32]):
        return x @ w

    assert _atom(sched, stored)[1].body.atom == "cuda_gemm_simt_64x64x16_f32_rrr"


@func
def linear(x: Tensor[(T, 64), bf16], w: ConstTensor[(128, 64), bf16]):
    return x @ tf.transpose(w, (1, 0))


@pytest.mark.parametrize(
    ("arch", "atom"),
    [("sm_90a", "sm90_gemm_tma_wgmma_128x128x64_bf16_rcr"), ("sm_80", "sm80_gemm_mma_128x128x32_bf16_rcr")],
)
def test_x_times_w_transposed_is_one_k_major_atom_reading_w(sched, arch: str, atom: str) -> None:
    """x @ w.T: no transpose kernel; the atom reads w (N, K) as stored and the launch names the layout."""
    p, r = _atom(sched, linear, arch)
    assert [k.name for k in p.kernels] == ["k1_matmul"] and p.temps == ()
    assert r.body.atom == atom and [b.name for b in r.body.operands] == ["x", "w", "out0"]
    lines = atoms.launch(p, r, CExpr({"T": "d_T"}))
    dims = "int64_t(1LL), d_T, int64_t(128LL), int64_t(64LL)"
    rcr = "GemmLayout::rcr"
    assert lines[1] == f"  const size_t ws_bytes_ = gemm_workspace_bytes<{rcr}>(b_x, b_w, b_out0, {dims});"
    assert lines[3].startswith(f"  e.cuda(gemm<{rcr}>(b_x, b_w, b_out0, {dims}, ws_.ptr, stream_)")


def test_f32_x_times_w_transposed_takes_the_k_major_simt_atom(sched) -> None:
    """f32 stays on the ordered FFMA tier, reading the weight (N, K) in place too."""

    @func
    def single(x: Tensor[(T, 64), f32], w: ConstTensor[(48, 64), f32]):
        return x @ tf.transpose(w, (1, 0))

    assert _atom(sched, single)[1].body.atom == "cuda_gemm_simt_64x64x16_f32_rcr"


def test_the_emitted_module_calls_the_k_major_gemm_and_no_transpose(cuda_source) -> None:
    """The translation unit launches one atom with GemmLayout::rcr and has no copy kernel of w."""
    source = cuda_source(linear)
    assert "gemm<GemmLayout::rcr>(b_x, b_w, b_out0" in source
    assert "// kernel k0_transpose" not in source and "b_t0" not in source
    assert "//   t0 read in place as w transposed" in source


def test_an_atom_whose_layout_is_not_the_regions_is_refused(sched) -> None:
    """seed 003: the rrr atom standing for a region that reads w (N, K) would multiply by w, not w.T."""
    p, r = _atom(sched, linear)
    r.body = dataclasses.replace(r.body, atom="sm90_gemm_tma_wgmma_128x128x64_bf16_rrr")
    with pytest.raises(
        PlanError,
        match=r"cuda: kernel k1_matmul: atom sm90_gemm_tma_wgmma_128x128x64_bf16_rrr no longer matches its "
        r"region: the region's operands are rcr \(A K-major, B K-major\), not the atom's",
    ):
        atoms.emit_device(p, r)


@func
def normed_linear(x: Tensor[(T, 64), bf16], g: ConstTensor[(64,), bf16], w: ConstTensor[(128, 64), bf16]):
    return tf.rms_norm(x, g, eps=1e-6) @ tf.transpose(w, (1, 0))


@func
def normed_activation(x: Tensor[(T, 64), bf16], g: ConstTensor[(64,), bf16], y: Tensor[(128, 64), bf16]):
    return tf.rms_norm(x, g, eps=1e-6) @ tf.transpose(y, (1, 0))


@func
def scaled_weight(x: Tensor[(T, 64), bf16], g: ConstTensor[(64,), bf16], w: ConstTensor[(128, 64), bf16]):
    return tf.rms_norm(x, g, eps=1e-6) @ tf.transpose(w * 2.0, (1, 0))


def test_a_weight_after_the_program_s_own_kernel_is_settled(cuda_source) -> None:
    """A written by the norm before it, w an entry parameter nothing writes: the launch before the
    GEMM is the program's own and writes no B, so the call marks B settled (read before the PDL wait)."""
    source = cuda_source(normed_linear)
    call = "gemm<GemmLayout::rcr>(b_t0, b_w, b_out0, int64_t(1LL), d_T, int64_t(128LL), int64_t(64LL), "
    assert call + "ws_.ptr, stream_, true)" in source
    assert "// B settled (weights no kernel here writes; A written here): read before the PDL wait" in source


@pytest.mark.parametrize(
    ("fn", "options", "why"),
    [
        (linear, {}, "A is the entry's x: the launch before the call may be the caller's, writing w"),
        (scaled_weight, {}, "B is a temporary the program writes"),
        (normed_linear, {"gemm_fusion": "all"}, "a prologue stages A: the norm may not launch"),
        (normed_activation, {}, "B is a plain Tensor: another module still running may be writing it"),
    ],
)
def test_b_is_not_settled_where_a_running_kernel_may_write_it(cuda_source, fn, options, why: str) -> None:
    """Each case keeps every read of B behind the PDL wait."""
    source = cuda_source(fn, options)
    assert "e.cuda(gemm" in source
    assert "B settled" not in source, why
    assert "stream_, true)" not in source and ", true};" not in source, why


def test_settled_buffers_are_unwritten_weights_behind_a_launch_of_the_program(sched) -> None:
    """settled.py: w and g are ConstTensor entry parameters no kernel writes; x is an entry
    parameter too but a plain Tensor, and the normed x and w * 2 (the transposed copy that reads w)
    are temporaries; every kernel but the first has one of the program's own before it."""
    from tilefoundry.codegen.cuda.settled import launches_before, settled_weights

    p = sched(scaled_weight)
    weights = [b for b in p.params if b.name in ("w", "g")]
    assert len(weights) == 2 and len(p.temps) == 2 and p.constants == {"w", "g"}
    assert settled_weights(p, weights)
    assert not any(settled_weights(p, [*weights, b]) for b in (*p.temps, *p.params) if b not in weights)
    first, *rest = p.kernels
    assert not launches_before(p, first) and all(launches_before(p, k) for k in rest)
