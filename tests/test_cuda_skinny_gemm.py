"""The skinny GEMM tier's decode-shaped calls (M <= 8; B (N, K) up to M = 16 on tensor cores) on a GPU.

Grouped projections, pointwise epilogues, norms as prologues and the tensor-core rows, built as
one module (one translation unit) whose source the CI checks read too. Each is checked against
the evaluator on fresh random inputs at every M the tier takes, plus the first M past it. The
K-split reductions are in test_cuda_skinny_splits.py and the bulk-copy GEMV in
test_cuda_skinny_bulk.py: separate files, so that the `gpu` suite's workers build them in
parallel.
"""

from __future__ import annotations

import os
import sys

import pytest
import torch

import tilefoundry
from tilefoundry.codegen.cuda.resources import kernel_resources
from tilefoundry.codegen.cuda.sass import kernel_sass
from tilefoundry.dsl import ConstTensor, DimVar, Tensor, bf16, func, module, tf

sys.path.insert(0, os.path.dirname(__file__))
import catalogue_programs as cat

M = DimVar("M", 1, 17)
TOLERANCE = {torch.bfloat16: 3e-2, torch.float16: 4e-3, torch.float32: 2e-4}


@func
def projections(
    x: Tensor[(M, 1024), bf16],
    wq: ConstTensor[(2048, 1024), bf16],
    wk: ConstTensor[(512, 1024), bf16],
    wv: ConstTensor[(520, 1024), bf16],
):
    # Three Linear weights (out, in) read by one activation: one grouped call (ir.plan.gemm_groups).
    return x @ wq.T, x @ wk.T, x @ wv.T


def _make_projections(n: int, gen: torch.Generator) -> tuple:
    x = torch.randn(n, 1024, generator=gen).to(torch.bfloat16).cuda()
    ws = ((torch.randn(o, 1024, generator=gen) / 32).to(torch.bfloat16).cuda() for o in (2048, 512, 520))
    return (x, *ws)


@pytest.fixture(scope="module")
def built() -> tuple[tilefoundry.LinkedModule, str]:
    """The module of the decode-shaped functions below built for cuda once (one translation unit),
    and its generated source (shared by the CI checks and the GPU runs)."""
    cat.require_nvcc()
    stages: dict[str, str] = {}
    # "all": prologues too (the default leaves the norms as kernels)
    options = {"gemm_fusion": "all"}
    linked = tilefoundry.compile(SkinnyCalls, target="cuda", options=options, dump=stages.__setitem__)
    source = stages["generate source (SkinnyCalls.cu)"]  # the main source; the collectives' follow
    return linked, source


def _entry(source: str, fn: str) -> str:
    """The host entry of function `fn` in a module's source."""
    start = source.index(f"void {fn}_entry(")
    return source[start : source.index("\n}\n", start)]


def test_the_skinny_kernels_keep_their_row_tables_out_of_local_memory(built) -> None:
    """A grouped call's member table (pointers and row ends) is read where the launch put it, the
    parameter space (`__grid_constant__`): indexed by a runtime member, a by-value copy went to each
    thread's stack (104-208 bytes, up to 26 stores before the first weight load). Nor does any
    skinny kernel spill (resources.py reads ptxas's report)."""
    linked, _ = built
    skinny = [k for k in kernel_resources(linked) if k.identifier.startswith("gemm_skinny")]
    assert {k.identifier for k in skinny} >= {"gemm_skinny_nk", "gemm_skinny_tc"}
    assert [(k.name, k.stack_bytes) for k in skinny if k.stack_bytes or k.spills] == []


def test_the_skinny_kernels_reach_their_first_load_without_a_subroutine_call(built) -> None:
    """No 64-bit division by a run-time value between a skinny kernel's PDL wait and its first load:
    the bulk-copy GEMV counts its ring's stage and phase, where `it % stages` and `it / stages` by
    the run-time stage count were range tests and subroutine calls each iteration (read off the
    SASS with cuobjdump)."""
    cat.require_cuobjdump()
    skinny = [k for k in kernel_sass(built[0].library) if "gemm_skinny" in k.symbol]
    kinds = {kind for k in skinny for kind in ("nk", "tc", "bulk") if f"gemm_skinny_{kind}" in k.symbol}
    assert kinds == {"nk", "tc", "bulk"}
    assert [(k.symbol, k.calls_to_load) for k in skinny if k.calls_to_load or k.wait_to_load is None] == []


def test_gemms_sharing_a_are_one_grouped_call(built) -> None:
    """The three projections of x are one gemm_group call; the module builds with nvcc."""
    entry = _entry(built[1], "projections")
    assert entry.count("gemm_group<GemmLayout::rcr>(") == 1
    assert "gemm<GemmLayout::rcr>(" not in entry


@pytest.mark.gpu
def test_grouped_projections_match_evaluator_on_gpu(built) -> None:
    """M = 1 runs all three members in one skinny launch (rows end to end), as M = 2..8 do where the
    module has no swapped collective; on sm_90, q's 2Mi elements of B run it swapped there and k
    and v one skinny launch each. 9, 12 and 16 run one GEMM each (v's 520 rows are not whole 16-row
    tiles: q and k run the tensor-core kernel, v the tiled tier)."""
    cat.check_compiled(built[0], projections, (1, 2, 3, 5, 8, 9, 12, 16), device="cuda", tolerance=TOLERANCE,
                       make=_make_projections)


@func
def gated_mlp(
    x: Tensor[(M, 1024), bf16],
    gate: ConstTensor[(768, 1024), bf16],
    up: ConstTensor[(768, 1024), bf16],
    down: ConstTensor[(1024, 768), bf16],
):
    # silu(gate) * up is the epilogue of the gate/up group; the residual add that of the down GEMM.
    return x + (tf.silu(x @ gate.T) * (x @ up.T)) @ down.T


def _make_mlp(n: int, gen: torch.Generator) -> tuple:
    x = torch.randn(n, 1024, generator=gen).to(torch.bfloat16).cuda()
    shapes = ((768, 1024), (768, 1024), (1024, 768))
    ws = ((torch.randn(*s, generator=gen) / 32).to(torch.bfloat16).cuda() for s in shapes)
    return (x, *ws)


def test_pointwise_consumers_are_gemm_epilogues(built) -> None:
    """silu(gate) * up and the residual add become the epilogues of their GEMM calls; their own
    kernels launch only when the atom did not apply them (the tiled tiers); nvcc builds it."""
    source = built[1]
    entry = _entry(source, "gated_mlp")
    assert entry.count("gemm_epilogue<GemmLayout::rcr, 2>(") == 1
    assert entry.count("gemm_epilogue<GemmLayout::rcr, 1>(") == 1
    assert entry.count("_applied_) {") == 2
    assert "struct gated_mlp__k4_mul_epilogue {" in source and "struct gated_mlp__k7_add_epilogue {" in source


def _functor(source: str, name: str) -> str:
    start = source.index(f"struct {name} {{")
    return source[start : source.index("\n};\n", start)]


def test_an_add_epilogue_reads_its_residual_early(built) -> None:
    """The residual add's read of x needs no GEMM result, so its functor hands it out through
    `early(m, n)` (the register kernel calls that right after its PDL wait, skinny_early) and the
    four-argument form adds the early value; silu(gate) * up reads nothing but its results."""
    add = _functor(built[1], "gated_mlp__k7_add_epilogue")
    assert "struct Early { bf16 e0; };" in add
    assert "__device__ Early early(int64_t i0, int64_t i1) const { return {b_x[" in add
    assert "const Early& pre) const {" in add and "add_rn(pre.e0, c[0])" in add
    assert "(*this)(i0, i1, c, early(i0, i1));" in add
    mul = _functor(built[1], "gated_mlp__k4_mul_epilogue")
    assert "Early" not in mul and "early" not in mul


def test_only_the_down_projection_reads_settled_weights(built) -> None:
    """down's A is the gate/up call's output, so the launch before it is this function's own and
    writes no weight: its B is settled (its first packs are read before the PDL wait). gate/up
    reads the entry's x: the launch before it may be the caller's, so its B waits."""
    entry = _entry(built[1], "gated_mlp")
    assert entry.count("B settled") == 1
    assert entry.count("GemmGroup<bf16> g_{{b_down}, {b_t6}, {int64_t(1024LL)}, 1, true};") == 1
    gate_up = "GemmGroup<bf16> g_{{b_gate, b_up}, {b_t1, b_t3}, {int64_t(768LL), int64_t(768LL)}, 2};"
    assert entry.count(gate_up) == 2  # the chain's block ("all" chains gate/up with down) and the call's own


@pytest.mark.gpu
def test_gemm_epilogues_match_evaluator_on_gpu(built) -> None:
    """M = 1..16 apply both epilogues inside the skinny launches (down's weights read before the PDL
    wait; past M = 8 on tensor cores, gate/up as G = 2 members side by side)."""
    linked, _ = built
    sizes = (1, 2, 3, 5, 8, 9, 13, 16)
    cat.check_compiled(linked, gated_mlp, sizes, device="cuda", tolerance=TOLERANCE, make=_make_mlp)


@func
def normed_projections(
    x: Tensor[(M, 4096), bf16],
    norm_x: ConstTensor[(4096,), bf16],
    w_gate: ConstTensor[(512, 4096), bf16],
    w_up: ConstTensor[(512, 4096), bf16],
    y: Tensor[(M, 1024), bf16],
    norm_y: ConstTensor[(1024,), bf16],
    w_q: ConstTensor[(256, 1024), bf16],
    w_k: ConstTensor[(136, 1024), bf16],
):
    # Each RMS norm is the prologue of the projections reading it: gate/up (with its silu * up
    # epilogue) and q/k (a plain group).
    h = tf.rms_norm(x, norm_x, eps=1e-6)
    g = tf.rms_norm(y, norm_y, eps=1e-6)
    return tf.silu(h @ w_gate.T) * (h @ w_up.T), g @ w_q.T, g @ w_k.T


def _make_normed(n: int, gen: torch.Generator, offset: int = 0) -> tuple:
    def act(k: int) -> torch.Tensor:
        flat = torch.randn(n * k + offset, generator=gen).to(torch.bfloat16).cuda()
        return flat[offset:].view(n, k)  # offset 1: a base 2 bytes off 16-byte alignment

    def weight(*shape: int, scale: float = 1 / 64) -> torch.Tensor:
        return (torch.randn(*shape, generator=gen) * scale).to(torch.bfloat16).cuda()

    norm_x, norm_y = weight(4096, scale=1.0), weight(1024, scale=1.0)
    return (act(4096), norm_x, weight(512, 4096), weight(512, 4096), act(1024), norm_y, weight(256, 1024),
            weight(136, 1024))


@func
def short_group(x: Tensor[(M, 96), bf16], wa: ConstTensor[(48, 96), bf16], wb: ConstTensor[(32, 96), bf16]):
    # One grouped call whose members both fit the tensor-core kernel past M = 8: 3 + 2 CTAs of 16
    # rows, member b's first at row 48; K = 96 is 3 blocks of 32 for the CTA's 8 warps.
    return x @ wa.T, x @ wb.T


def _make_short(n: int, gen: torch.Generator) -> tuple:
    x = torch.randn(n, 96, generator=gen).to(torch.bfloat16).cuda()
    ws = ((torch.randn(o, 96, generator=gen) / 8).to(torch.bfloat16).cuda() for o in (48, 32))
    return (x, *ws)


@func
def layer_normed(
    x: Tensor[(M, 1024), bf16],
    g: ConstTensor[(1024,), bf16],
    b: ConstTensor[(1024,), bf16],
    w: ConstTensor[(256, 1024), bf16],
):
    # Layer norm subtracts the row's mean before scaling: not a row scale times an element map, so
    # its prologue stages the normalized rows in each CTA instead of folding into the K loop.
    return tf.layer_norm(x, g, b, eps=1e-5) @ w.T


def _make_layer_normed(n: int, gen: torch.Generator) -> tuple:
    x = (torch.randn(n, 1024, generator=gen) + 0.5).to(torch.bfloat16).cuda()
    g, b = (1 + 0.1 * torch.randn(2, 1024, generator=gen)).to(torch.bfloat16).cuda()
    return x, g, b, (torch.randn(256, 1024, generator=gen) / 32).to(torch.bfloat16).cuda()


@module
class SkinnyCalls:
    """The decode-shaped GEMM calls above as one module: one nvcc build serves every test."""

    projections = projections
    gated_mlp = gated_mlp
    normed_projections = normed_projections
    layer_normed = layer_normed
    short_group = short_group


@pytest.mark.gpu
def test_tensor_core_skinny_rows_match_evaluator_on_gpu(built) -> None:
    """Every M past the CUDA-core kernel's 8 runs the tensor-core one (rows 8 + g past M read as
    zeros, results past M dropped), over two members laid end to end and fewer K blocks than warps."""
    assert _entry(built[1], "short_group").count("gemm_group<GemmLayout::rcr>(") == 1
    cat.check_compiled(built[0], short_group, tuple(range(8, 17)), device="cuda", tolerance=TOLERANCE,
                       make=_make_short)


def test_row_norms_are_gemm_prologues_folded_into_the_k_loop(built) -> None:
    """Both RMS norms become the prologues of the GEMM calls reading them, folded: each functor
    gives A's element map (x * g) a 16-byte pack at a time with the row's sum of squares, and the
    row's scale from that sum; each norm kernel launches only when its call will not fold it
    (unaligned bases, or a tier that reads A from memory); nvcc builds it."""
    source = built[1]
    entry = _entry(source, "normed_projections")
    functor = source[source.index("struct normed_projections__k0_rms_norm_prologue {") :]
    functor = functor[: functor.index("\n};\n")]
    assert "static constexpr int kFolds = 1;" in functor
    assert "bf16 (&a_)[8], float (&f_)[1]) const {" in functor and "operator()" not in functor
    assert "load_pack<8>(b_x + (i0) * int64_t(4096LL) + jb_, gl0_);" in functor
    assert "return rsqrt(((f_[0] / 4096.0f) + 1e-06f));" in functor
    assert source.count("_prologue {") == 3 and source.count("static constexpr int kFolds = 1;") == 2
    assert entry.count("_staged_) {") == 2
    gate = "_staged_ = aligned16({{{}}}) && gemm_stages_prologue<GemmLayout::rcr, {}>("
    assert entry.count(gate.format("b_x, b_norm_x", 2)) == 1
    assert entry.count(gate.format("b_y, b_norm_y", 0)) == 1


def test_a_norm_that_is_no_row_scale_stages_its_rows(built) -> None:
    """Layer norm's element subtracts the row mean: its prologue is the staged functor, a warp
    writing each normalized row into shared memory before the K loop."""
    source = built[1]
    functor = source[source.index("struct layer_normed__k0_layer_norm_prologue {") :]
    functor = functor[: functor.index("\n};\n")]
    assert "operator()(int64_t i0, bf16* b_arow_) const {" in functor and "kFolds" not in functor
    assert _entry(source, "layer_normed").count("_staged_ = gemm_stages_prologue<GemmLayout::rcr, 0>(") == 1


@pytest.mark.gpu
def test_a_staged_layer_norm_prologue_matches_evaluator_on_gpu(built) -> None:
    """M = 1..8 stage the layer-normed rows in each CTA; 9 and 16 run the norm kernel first."""
    cat.check_compiled(built[0], layer_normed, (1, 2, 5, 8, 9, 16), device="cuda", tolerance=TOLERANCE,
                       make=_make_layer_normed)


@pytest.mark.gpu
@pytest.mark.parametrize("offset", [0, 1])
def test_gemm_prologues_match_evaluator_on_gpu(built, offset: int) -> None:
    """M = 1..8 fold each norm into the skinny kernel's K loop (K = 4096 only up to M = 6, the
    rows a CTA could stage: then the norm kernel runs and the skinny launch reads A), but for
    gate/up on sm_90 past M = 1: its members' 2Mi elements of B run the swapped collective behind
    the norm kernel, with the epilogue as a kernel of its own. 9 and 16 run the norm kernels, then
    the tensor-core skinny kernel (k's 136 rows, not whole 16-row tiles: the tiled tier). offset 1:
    the activations sit off 16-byte alignment, so the norm kernels run."""
    linked, _ = built
    sizes = (1, 2, 3, 5, 6, 7, 8, 9, 16)
    cat.check_compiled(linked, normed_projections, sizes, device="cuda", tolerance=TOLERANCE,
                       make=lambda n, gen: _make_normed(n, gen, offset))
