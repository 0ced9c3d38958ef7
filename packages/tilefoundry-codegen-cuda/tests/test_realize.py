"""realize.py: which realization each kernel gets, and why; explicit placements that fail closed."""

from __future__ import annotations

import dataclasses

import pytest

from tilefoundry.codegen.cuda.catalog import arch_catalog
from tilefoundry.codegen.cuda.group import ReduceChain, argmax_scan, reduce_chain
from tilefoundry.codegen.cuda.realize import STATIC_SMEM_BYTES, realize_kernel
from tilefoundry.dsl import ConstTensor, DimVar, Mesh, Tensor, Topology, bf16, f32, func, tf
from tilefoundry.ir.errors import PlanError
from tilefoundry.ir.tile.expr import Un
from tilefoundry.ir.tile.stmt import For, seq, statements, walk_stmts

T = DimVar("T", 1, 65)
CATALOG = arch_catalog("sm_90a")


def _realize(program, options=None):
    return [r for k in program.kernels for r in realize_kernel(program.name, k, CATALOG, dict(options or {}))]


@func
def pointwise(x: Tensor[(T, 64), f32], y: Tensor[(64,), f32]):
    return tf.exp(x) + y, x * 2.0


@func
def norms(x: Tensor[(T, 512), bf16], g: ConstTensor[(512,), bf16], wide: Tensor[(T, 4096), f32]):
    return tf.rms_norm(x, g), tf.softmax(wide, -1)


@func
def sums(x: Tensor[(T, 64), f32]):
    return tf.sum(x, -1)


@func
def picks(logits: Tensor[(T, 151936), bf16], short: Tensor[(T, 96), f32]):
    return tf.argmax(logits, -1), tf.argmax(short, -1)


def test_pointwise_graph_is_one_flat_grid_with_packs(sched) -> None:
    """seed 003, Automatic GPU pointwise graphs: fused outputs run as one flat grid, 16-byte packs proved."""
    (r,) = _realize(sched(pointwise))
    assert r.kind == "grid" and [c.var for c in r.chain] == ["i0", "i1"]
    assert r.packs is not None and r.packs.lanes == 4
    assert sorted(b.name for b in r.packs.buffers) == ["out0", "out1", "x", "y"]


def test_rows_take_a_warp_or_a_cta_by_extent(sched) -> None:
    """Rows up to 1024 wide take a warp per row, wider ones a CTA sized by the extent."""
    narrow, wide = _realize(sched(norms))
    assert (narrow.kind, narrow.group, narrow.threads) == ("rows", 32, 128)
    assert (wide.kind, wide.group, wide.threads) == ("rows", 256, 256)
    assert "a CTA of 256 threads per instance" in wide.notes[0]


def test_ordered_sum_keeps_one_thread_per_row(sched) -> None:
    """A sum whose op forbids reassociation is not shared out: each row's loop runs in order."""
    (r,) = _realize(sched(sums))
    assert r.kind == "grid" and r.packs is None
    assert _realize(sched(sums), {"reassociate": True})[0].kind == "rows"


def test_vectorize_false_keeps_scalar_accesses(sched) -> None:
    """Option vectorize=False: no 16-byte packs."""
    (r,) = _realize(sched(pointwise, {"vectorize": False}), {"vectorize": False})
    assert r.kind == "grid" and r.packs is None


def test_explicit_placement_on_warp_fails_closed(sched) -> None:
    """seed 003: an explicit request the target cannot honor fails closed, naming what blocked it."""
    p = sched(pointwise)
    p.kernels[0].request = ("warp",)
    message = (
        r"cuda: kernel k0_mul \(.*\): explicit placement on 'warp' refused: the CUDA realization maps a "
        r"kernel's instance loops onto cta and thread only"
    )
    with pytest.raises(PlanError, match=message):
        _realize(p)


def test_placement_on_cta_is_honored(sched) -> None:
    """A Mesh scope on cta is what the grid does: accepted."""
    p = sched(pointwise)
    p.kernels[0].request = ("cta",)
    assert _realize(p)[0].kind == "grid"


def test_shared_memory_budget_over_keeps_the_ordered_path(sched, monkeypatch) -> None:
    """seed 003: scratch over the shared-memory budget keeps one thread per instance, and says why."""

    @func
    def attend(q: Tensor[(1, 2, T, 8), f32], k: Tensor[(1, 2, T, 8), f32], v: Tensor[(1, 2, T, 8), f32]):
        return tf.attention(q, k, v, causal=True)

    p = sched(attend, {"attention": "loop"})
    (kernel,) = p.kernels
    monkeypatch.setattr("tilefoundry.codegen.cuda.realize.STATIC_SMEM_BYTES", 64)
    (r,) = realize_kernel(p.name, kernel, CATALOG, {"attention": "loop"})
    assert r.kind == "grid"
    assert any(
        "rows refused: group scratch needs 128 B of shared memory, over the 64 B static budget" in d
        for d in kernel.decisions
    )
    assert STATIC_SMEM_BYTES == 48 * 1024


def test_atom_kernel_is_realized_by_its_atom(sched) -> None:
    """A GEMM region the planner replaced by a catalog atom runs as that atom."""

    @func
    def mm(x: Tensor[(T, 64), bf16], w: ConstTensor[(64, 128), bf16]):
        return x @ w

    (r,) = _realize(sched(mm))
    assert r.kind == "atom" and r.body.atom == "sm90_gemm_tma_wgmma_128x128x64_bf16_rrr"
    (k80,) = sched(mm, arch="sm_80").kernels
    (r80,) = realize_kernel("mm", k80, arch_catalog("sm_80"), {})
    assert r80.body.atom == "sm80_gemm_mma_128x128x32_bf16_rrr"


def test_kernel_without_instance_loops_is_one_instance(sched) -> None:
    """A full reduction has no instance loop: one instance, a CTA when the reduction may be reassociated."""

    @func
    def total(x: Tensor[(T, 64), f32]):
        return tf.max(x)

    (r,) = _realize(sched(total))
    assert r.kind == "rows" and r.chain == () and r.group == r.threads == 128


def test_realization_decisions_are_recorded_on_the_kernel(sched) -> None:
    """Every realization leaves its reasons on the kernel, printed above it in the source."""
    p = sched(pointwise)
    _realize(p)
    decisions = p.kernels[0].decisions
    assert "cuda: flat grid over i0, i1, one thread per instance, body in order" in decisions
    assert any(d.startswith("cuda: 16-byte packs of 4 along i1") for d in decisions)
    assert dataclasses.is_dataclass(_realize(sched(sums))[0])


def _placed(*topologies: tuple[str, int]):
    mesh = Mesh(tuple(Topology(n, s) for n, s in topologies), tuple(s for _, s in topologies))

    @func
    def placed(x: Tensor[(T, 8), f32]):
        with mesh:
            y = x + 1.0
        return y

    return placed


def test_mesh_scope_the_catalog_lacks_fails_closed(cuda_source) -> None:
    """seed 003: a Mesh scope on a level the cuda catalog has no axis for is refused by planning, by name."""
    with pytest.raises(
        PlanError,
        match=r"cuda: kernel k0_add .*explicit placement on 'wavefront' refused: the "
        r"target's execution axes are cluster, cta, thread, warp, lane",
    ):
        cuda_source(_placed(("cta", 4), ("wavefront", 64)))


def test_mesh_scope_on_warp_fails_closed_and_on_cta_compiles(cuda_source) -> None:
    """A warp placement the realization cannot factor is refused; a cta placement is the grid itself."""
    with pytest.raises(PlanError, match=r"explicit placement on 'warp' refused"):
        cuda_source(_placed(("warp", 4)))
    assert "launch_kernel(placed__k0_add, grid_blocks(work_, 256), 256" in cuda_source(_placed(("cta", 4)))


def test_execution_bridge_mesh_over_thread_is_realized_as_placed(sched) -> None:
    """seed 003, Execution bridge: a Mesh over cta x thread takes the placed realization, its
    launch exactly the mesh (4 CTAs of 128 threads), whatever the other realizers would pick."""
    p = sched(_placed(("cta", 4), ("thread", 128)))
    (r,) = _realize(p)
    assert (r.kind, r.threads, r.placed.ctas, r.placed.threads) == ("placed", 128, 4, 128)
    assert [[c.axis for c in cuts] for cuts in r.placed.cuts] == [["cta"], ["thread"]]
    assert "cuda: placed on the Mesh: <<<4, 128>>>" in r.notes[0]


def test_explicit_gemm_atom_and_thread_placement_conflict(sched) -> None:
    """seed 003: two explicit requests that cannot both hold fail closed; an automatically chosen
    atom gives way to the placement instead."""
    mesh = Mesh((Topology("cta", 2), Topology("thread", 64)), (2, 64))

    @func
    def mm(x: Tensor[(64, 32), f32], w: ConstTensor[(32, 64), f32]):
        with mesh:
            y = x @ w
        return y

    (r,) = _realize(sched(mm))
    assert r.kind == "placed"
    assert "keeps the loop the atom cuda_gemm_simt_64x64x16_f32_rrr replaced" in r.notes[0]
    with pytest.raises(
        PlanError,
        match=r"explicit GEMM atom and placement on 'thread' refused: the atom "
        r"cuda_gemm_simt_64x64x16_f32_rrr chooses its own launch geometry",
    ):
        _realize(sched(mm, {"gemm": "atom"}), {"gemm": "atom"})


@func
def odd_norm(x: Tensor[(T, 63), f32], g: ConstTensor[(63,), f32]):
    return tf.rms_norm(x, g)


def test_rows_record_their_pack_plans_and_buffers(sched) -> None:
    """A rows realization plans its shared loops' 16-byte packs up front: the host guards those buffers."""
    narrow, wide = _realize(sched(norms))
    assert [p.lanes for p in narrow.row_packs] == [8, 8] and narrow.variant == "_v8"
    assert sorted(b.name for b in narrow.packed_buffers) == ["g", "out0", "x"]
    assert (
        "(x, g, out0); the host launches the scalar variant when a base address is not 16-byte"
        in (narrow.notes[1])
    )
    assert wide.variant == "_v4" and sorted(b.name for b in wide.packed_buffers) == ["out1", "wide"]


def test_rows_without_packable_loops_have_no_packed_variant(sched) -> None:
    """Rows of 63 f32 (not a multiple of 4), or option vectorize=False: no pack plans, one variant."""
    (odd,) = _realize(sched(odd_norm))
    assert odd.kind == "rows" and odd.row_packs == () and odd.packed_buffers == ()
    narrow, wide = _realize(sched(norms, {"vectorize": False}), {"vectorize": False})
    assert narrow.row_packs == () and wide.row_packs == ()


def test_argmax_scans_are_shared_by_a_row_group(sched, cuda_source) -> None:
    """An argmax is exact in any order, so its scan is shared out like a max even without
    reassociation: a vocabulary row takes a CTA of 1024 (one thread per row read 151936 values
    alone), a short row a warp, and the lanes' (value, index) candidates meet in group_reduce."""
    wide, short = _realize(sched(picks))
    assert (wide.kind, wide.group, wide.threads) == ("rows", 1024, 1024)
    assert [p.lanes for p in wide.row_packs] == [8]
    assert wide.smem_bytes == 32 * 16  # one IndexedValue<float> a warp to combine the CTA's warps
    assert (short.kind, short.group, short.smem_bytes) == ("rows", 32, 0)
    src = cuda_source(picks)
    assert "__shared__ IndexedValue<float> ws_iv_float_[32];" in src
    assert "group_reduce<1024>(argmax_combine{}, IndexedValue<float>{" in src
    assert "group_reduce<32>(argmax_combine{}, IndexedValue<float>{" in src
    assert "static_cast<IndexedValue<float>*>(nullptr)" in src  # a warp needs no workspace


def test_argmax_loop_in_another_form_stays_ordered(sched) -> None:
    """Only the scan lowering writes is shared: with the two updates on different conditions the
    loop is not an argmax scan, and the realization keeps it ordered (one thread per row)."""
    program = sched(picks)
    loop = next(
        s for k in program.kernels for s in walk_stmts(k.body) if isinstance(s, For) and s.kind == "reduce"
    )
    assert isinstance(reduce_chain(loop, False), ReduceChain)
    take_best = statements(loop.body)[-1]
    cond = take_best.value.cond
    other = dataclasses.replace(take_best.value, cond=Un("not", cond, cond.dtype))
    changed = dataclasses.replace(
        loop, body=seq(*statements(loop.body)[:-1], dataclasses.replace(take_best, value=other))
    )
    assert not argmax_scan(changed)
    assert "not in the scan form" in reduce_chain(changed, True)
