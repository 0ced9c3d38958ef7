"""Lowering of shape and data movement: every op is an index map (`Compute`), never a copy.

transpose(x, (1, 0))[i, j]       = x[j, i]
slice(x, 1, 8, 40, 2)[i, j]      = x[i, 8 + 2*j]
reshape(x: (T, 4096), (T, 32, 128))[t, h, d] = x[t, h*128 + d]      (grouped, no div/mod)
index_select(x, ids, 0)[i, d]    = x[ids[i], d]                      (ids validated first)
cache_update(c, pos, new)[.., i, ..] = new[.., i - pos, ..] if pos <= i < pos + S else c[.., i, ..]
                                   (pos validated first; the rule names c, the axis, pos and S)
"""

from __future__ import annotations

from ..dims import Dim, dims_equal
from ..dtypes import i64
from ..ops.indexing import CacheUpdate, Gather, IndexSelect
from ..ops.movement import BroadcastTo, Concat, RepeatInterleave, Reshape, Slice, Stack, Transpose
from ..ops.operands import element_count
from ..tile.expr import Const, Expr, Select, binary, cast, dim_expr, floordiv, mod
from ..types import TensorType
from .core import Compute, Index, IndexCheck, Operand, Update, broadcast_index, lower


def _groups(out: tuple[Dim, ...], inp: tuple[Dim, ...]) -> list[tuple[list[int], list[int]]]:
    """Split both shapes into consecutive groups with equal element counts (row-major reshape).

    Any common prefix product is a legal cut, so the earliest match is taken:
    `(T, 32, 128) vs (T, 4096)` -> `[([0], [0]), ([1, 2], [1])]`.
    """
    groups: list[tuple[list[int], list[int]]] = []
    a0 = b0 = 0
    for a in range(1, len(out)):
        p = element_count(out[:a])
        for b in range(b0 + 1, len(inp)):
            if dims_equal(element_count(inp[:b]), p):
                groups.append((list(range(a0, a)), list(range(b0, b))))
                a0, b0 = a, b
                break
    groups.append((list(range(a0, len(out))), list(range(b0, len(inp)))))
    return groups


@lower.register(Reshape)
def _lower_reshape(op: Reshape, t: TensorType, x: Operand) -> Compute:
    groups = _groups(t.shape, x.shape)

    def element(idx: Index) -> Expr:
        in_idx: list[Expr] = [Const(0)] * x.type.rank
        for outs, ins in groups:
            linear: Expr = Const(0)
            for a in outs:
                linear = linear * dim_expr(t.shape[a]) + idx[a]
            for pos, b in enumerate(ins):
                inner = element_count(x.shape[b + 1 : ins[-1] + 1])
                v = floordiv(linear, dim_expr(inner))
                in_idx[b] = v if pos == 0 else mod(v, dim_expr(x.shape[b]))
        return x.at(tuple(in_idx))

    return Compute(element)


@lower.register(Transpose)
def _lower_transpose(op: Transpose, t: TensorType, x: Operand) -> Compute:
    perm = [p % x.type.rank for p in op.perm]

    def element(idx: Index) -> Expr:
        in_idx: list[Expr] = [Const(0)] * x.type.rank
        for i, p in enumerate(perm):
            in_idx[p] = idx[i]
        return x.at(tuple(in_idx))

    return Compute(element)


@lower.register(Slice)
def _lower_slice(op: Slice, t: TensorType, x: Operand) -> Compute:
    axis = op.axis % x.type.rank

    def element(idx: Index) -> Expr:
        moved = dim_expr(op.start) + idx[axis] * op.step
        return x.at((*idx[:axis], moved, *idx[axis + 1 :]))

    return Compute(element)


def _joined(xs: tuple[Operand, ...], axis: int, offsets: list[Dim], stacked: bool) -> Compute:
    def element(idx: Index) -> Expr:
        i = idx[axis]
        # Built from the last piece backwards; Select reads only the taken branch.
        out: Expr | None = None
        for k in range(len(xs) - 1, -1, -1):
            local = (
                (*idx[:axis], *idx[axis + 1 :])
                if stacked
                else (*idx[:axis], i - dim_expr(offsets[k]), *idx[axis + 1 :])
            )
            value = xs[k].at(local)
            if out is None:
                out = value
            else:
                bound = dim_expr(offsets[k + 1])
                out = Select(binary("lt", i, bound), value, out)
        assert out is not None
        return out

    return Compute(element)


@lower.register(Concat)
def _lower_concat(op: Concat, t: TensorType, *xs: Operand) -> Compute:
    axis = op.axis % t.rank
    offsets: list[Dim] = [0]
    for x in xs:
        offsets.append(offsets[-1] + x.shape[axis])
    return _joined(xs, axis, offsets, stacked=False)


@lower.register(Stack)
def _lower_stack(op: Stack, t: TensorType, *xs: Operand) -> Compute:
    axis = op.axis % t.rank
    return _joined(xs, axis, list(range(len(xs) + 1)), stacked=True)


@lower.register(RepeatInterleave)
def _lower_repeat_interleave(op: RepeatInterleave, t: TensorType, x: Operand) -> Compute:
    axis = op.axis % t.rank
    return Compute(lambda idx: x.at((*idx[:axis], floordiv(idx[axis], op.repeats), *idx[axis + 1 :])))


@lower.register(BroadcastTo)
def _lower_broadcast_to(op: BroadcastTo, t: TensorType, x: Operand) -> Compute:
    return Compute(lambda idx: x.at(broadcast_index(idx, t.shape, x.shape)))


@lower.register(IndexSelect)
def _lower_index_select(op: IndexSelect, t: TensorType, x: Operand, index: Operand) -> Compute:
    axis = op.axis % x.type.rank
    n = x.shape[axis]
    check = IndexCheck(index, 0, n, "index_select: index holds a value outside [0, extent of x's axis): ")

    def element(idx: Index) -> Expr:
        picked = cast(index.at((idx[axis],)), i64)
        return x.at((*idx[:axis], picked, *idx[axis + 1 :]))

    return Compute(element, (check,))


@lower.register(Gather)
def _lower_gather(op: Gather, t: TensorType, x: Operand, index: Operand) -> Compute:
    axis = op.axis % x.type.rank
    check = IndexCheck(
        index, 0, x.shape[axis], "gather: index holds a value outside [0, extent of x's axis): "
    )

    def element(idx: Index) -> Expr:
        picked = cast(index.at(idx), i64)
        return x.at((*idx[:axis], picked, *idx[axis + 1 :]))

    return Compute(element, (check,))


@lower.register(CacheUpdate)
def _lower_cache_update(
    op: CacheUpdate, t: TensorType, cache: Operand, pos: Operand, new: Operand
) -> Compute:
    axis = op.axis % t.rank
    length = new.shape[axis]
    check = IndexCheck(
        pos,
        0,
        cache.shape[axis] - length + 1,
        "cache_update: pos + new's extent does not fit the cache; pos = ",
    )

    start = cast(pos.at(()), i64)

    def element(idx: Index) -> Expr:
        i = idx[axis]
        inside = binary("and", binary("ge", i, start), binary("lt", i, start + dim_expr(length)))
        return Select(inside, new.at((*idx[:axis], i - start, *idx[axis + 1 :])), cache.at(idx))

    return Compute(element, (check,), Update(cache, axis, start, length))
