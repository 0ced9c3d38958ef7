"""plan/partition.py: a norm over a short row is recomputed by its element-wise readers.

RmsNorm's rule offers `Nest.recompute` for rows of at most `RECOMPUTED_ROW` elements. The
partition takes it when every path from the norm ends in an element-grid output: the norm then
has no kernel, each reading element folds its row's sum of squares (a `Fold`), and the kernel
that absorbs it says so. A norm that is a result, feeds an anchor, or spans a long row keeps its
row kernel.
"""

from __future__ import annotations

from tilefoundry.dsl import ConstTensor, DimVar, Tensor, bf16, f32, func, i64, tf
from tilefoundry.ir.lower import inline_calls, lower_to_tile
from tilefoundry.ir.lower.nn import RECOMPUTED_ROW
from tilefoundry.ir.plan.partition import partition_kernels
from tilefoundry.ir.tile.expr import Fold, Load, Select, Var, walk
from tilefoundry.ir.tile.stmt import Let, Program, stmt_exprs, walk_stmts
from tilefoundry.ir.tile.values import hoist_shared_values

T = DimVar("T", 1, 17)
HEADS = Tensor[(1, 4, T, 64), bf16]
G = ConstTensor[(64,), bf16]
TABLE = Tensor[(32, 64), bf16]
CACHE = Tensor[(1, 4, 32, 64), bf16]


def _program(fn) -> Program:
    return lower_to_tile(partition_kernels(inline_calls(fn)))


def _folds(p: Program) -> dict[str, list[Fold]]:
    """Each kernel's Folds, by kernel name."""
    return {
        k.name: [x for s in walk_stmts(k.body) for e in stmt_exprs(s) for x in walk(e) if isinstance(x, Fold)]
        for k in p.kernels
    }


@func
def norm_rope(x: HEADS, g: G, cos: TABLE, sin: TABLE, positions: Tensor[(T,), i64]):
    return tf.rope(tf.rms_norm(x, g), cos, sin, positions)


@func
def norm_into_cache(cache: CACHE, pos: Tensor[(), i64], x: HEADS, g: G):
    return tf.cache_update(cache, pos, tf.rms_norm(x, g) * 2.0)


@func
def norm_result(x: HEADS, g: G):
    y = tf.rms_norm(x, g)
    return y, tf.exp(y)


@func
def norm_matmul(x: Tensor[(T, 64), f32], g: ConstTensor[(64,), f32], w: Tensor[(64, 32), f32]):
    return tf.matmul(tf.rms_norm(x, g), w)


@func
def norm_and_sum(x: Tensor[(T, 64), f32], g: ConstTensor[(64,), f32]):
    y = tf.rms_norm(x, g)
    return tf.exp(y), tf.sum(y, -1)


@func
def long_row(x: Tensor[(T, 2 * RECOMPUTED_ROW), f32], g: ConstTensor[(2 * RECOMPUTED_ROW,), f32]):
    return tf.exp(tf.rms_norm(x, g))


def test_a_head_norm_read_by_rope_has_no_kernel_of_its_own() -> None:
    """rope(rms_norm(x)): one element grid folding each head's sum of squares, once per row."""
    p = _program(norm_rope)
    assert [k.form for k in p.kernels if k.form != "index check"] == ["element grid"]
    (grid,) = [k for k in p.kernels if k.form == "element grid"]
    assert any("rms_norm" in d and "recomputed here" in d for d in grid.decisions)
    folds = _folds(p)[grid.name]
    # rope reads the normalized row at j and j +- 32: one Fold object, read by both
    assert len({id(f) for f in folds}) == 1 and folds[0].extent.value == 64
    assert not p.temps


def test_a_norm_stored_by_a_cache_update_is_folded_inside_the_region_branch() -> None:
    """The cache update's new rows are the norm's: the Fold sits in the region branch of its Select."""
    p = _program(norm_into_cache)
    kinds = [k.form for k in p.kernels if k.form != "index check"]
    assert kinds == ["element grid"]
    (grid,) = [k for k in p.kernels if k.updates]
    assert _folds(p)[grid.name]


def test_a_norm_that_is_a_result_an_anchor_operand_or_a_long_row_keeps_its_row_kernel() -> None:
    """Recomputing would store it anyway, or put a Fold inside an anchor's loops, or multiply a long
    row's reads: each keeps the row kernel, and no kernel folds."""
    for fn in (norm_result, norm_matmul, norm_and_sum, long_row):
        p = _program(fn)
        assert "row" in [k.form for k in p.kernels], fn.name
        assert not any(_folds(p).values()), fn.name
        assert not any("recomputed here" in d for k in p.kernels for d in k.decisions), fn.name


def _branch_folds(p: Program) -> list[Fold]:
    """The Folds inside Select branches of any kernel (where hoisting must leave them)."""
    out = []
    for k in p.kernels:
        for s in walk_stmts(k.body):
            for e in stmt_exprs(s):
                for x in walk(e):
                    if isinstance(x, Select):
                        out += [f for b in (x.a, x.b) for f in walk(b) if isinstance(f, Fold)]
    return out


def test_a_fold_computed_anyway_is_named_once_and_its_branch_reads_use_the_name() -> None:
    """rope reads the norm at j outside any branch and at j +- 32 inside rotate-half's branches:
    hoisting binds the row's inverse RMS (its Fold) once, and the branches read that name. The cache
    update reads the norm only inside its region branch, so its Fold stays there."""
    rope = hoist_shared_values(_program(norm_rope))
    (grid,) = [k for k in rope.kernels if k.form == "element grid"]
    lets = [s for s in walk_stmts(grid.body) if isinstance(s, Let)]
    assert sum(any(isinstance(x, Fold) for x in walk(s.value)) for s in lets) == 1
    assert not _branch_folds(rope)
    cache = hoist_shared_values(_program(norm_into_cache))
    assert _branch_folds(cache)


def test_a_row_kernel_keeps_its_element_with_the_row_sum_as_a_fold() -> None:
    """A norm over a long row keeps its kernel, and the kernel carries the element it stores: the
    same expression the short rows are recomputed with, its sum of squares one Fold over the whole
    row. Layer norm offers none (its lowering has no such form)."""
    p = _program(long_row)
    (row,) = [k for k in p.kernels if k.form == "row"]
    assert row.element is not None
    (i, j) = row.element.index
    folds = [x for x in walk(row.element.expr) if isinstance(x, Fold)]
    assert len({id(f) for f in folds}) == 1 and folds[0].op == "add"
    assert folds[0].extent.value == 2 * RECOMPUTED_ROW
    loads = {(ld.buffer.name, ld.index) for ld in walk(row.element.expr) if isinstance(ld, Load)}
    assert ("x", (i, j)) in loads and ("g", (j,)) in loads
    assert ("x", (i, Var(folds[0].var))) in loads  # the Fold reads the row it scales

    @func
    def layer(x: Tensor[(T, 64), f32], g: ConstTensor[(64,), f32], b: ConstTensor[(64,), f32]):
        return tf.exp(tf.layer_norm(x, g, b))

    (ln,) = [k for k in _program(layer).kernels if k.form == "row"]
    assert ln.element is None
