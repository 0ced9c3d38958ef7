"""Lowering of reductions: reduce kinds, argmax, softmax, log_softmax as explicit loop nests.

Each output element owns an accumulator in the compute dtype; the reduced axes are `reduce`
loops in index order. max/min/absmax are exact under any order, so they are marked
reassociable; a sum keeps its order unless the op allows otherwise (softmax's row sum does:
its definition is numerically stable, not order-exact).

    reduce(x: (T, 64), -1, sum)[t] :
      var acc: f32 = 0.0
      for r in 0..64 reduce(acc:add):
        acc = acc + x[t, r]
      out[t] = acc
"""

from __future__ import annotations

from collections.abc import Callable

from ..dims import Dim
from ..dtypes import DType, i64
from ..ops.operands import element_count, normalize_axes
from ..ops.reduction import Argmax, LogSoftmax, Reduce, Softmax
from ..tile.expr import Expr, Select, Var, binary, cast, compute_dtype, const, dim_expr, identity, unary
from ..tile.stmt import Assign, For, Let, Stmt, Store, seq
from ..types import TensorType
from .core import Index, Nest, NestContext, Operand, loop_nest, lower


def reduce_loops(
    ctx: NestContext,
    shape: tuple[Dim, ...],
    carries: list[tuple[str, str]],
    update: Callable[[Index], list[Stmt]],
    reassociable: bool,
) -> Stmt:
    """Nested `reduce` loops over `shape`, innermost carrying `carries`; `update(idx)` is the body."""
    names = [ctx.fresh("r") for _ in shape]
    stmt: Stmt = seq(*update(tuple(Var(n) for n in names)))
    for name, d in reversed(list(zip(names, shape, strict=True))):
        stmt = For(name, dim_expr(d), stmt, "reduce", reassociable, tuple(carries))
    return stmt


def row_reduce(
    ctx: NestContext,
    shape: tuple[Dim, ...],
    combiner: str,
    dtype: DType,
    value: Callable[[Index], Expr],
    reassociable: bool,
) -> tuple[Stmt, Var]:
    """Declare an accumulator and fold `value(idx)` into it over `shape`; returns (stmt, acc var)."""
    acc = ctx.fresh("acc")
    var = Var(acc, dtype)
    loops = reduce_loops(
        ctx, shape, [(acc, combiner)], lambda r: [Assign(acc, binary(combiner, var, value(r)))], reassociable
    )
    return seq(Let(acc, identity(combiner, dtype), mutable=True), loops), var


def _split(shape: tuple[Dim, ...], axes: tuple[int, ...]) -> tuple[tuple[Dim, ...], tuple[Dim, ...]]:
    kept = tuple(d for i, d in enumerate(shape) if i not in axes)
    return kept, tuple(shape[i] for i in axes)


def _merge(rank: int, axes: tuple[int, ...], kept: Index, reduced: Index) -> Index:
    it_k, it_r = iter(kept), iter(reduced)
    return tuple(next(it_r) if i in axes else next(it_k) for i in range(rank))


@lower.register(Reduce)
def _lower_reduce(op: Reduce, t: TensorType, x: Operand) -> Nest:
    axes = normalize_axes("reduce", op.axes, x.type.rank)
    kept, reduced = _split(x.shape, axes)
    acc_t = compute_dtype(x.dtype)
    combiner = {"sum": "add", "mean": "add", "max": "max", "min": "min", "absmax": "max"}[op.kind]
    exact = op.kind in ("max", "min", "absmax")

    def value(idx: Index, r: Index) -> Expr:
        v = cast(x.at(_merge(x.type.rank, axes, idx, r)), acc_t)
        return unary("abs", v) if op.kind == "absmax" else v

    def build(out, ctx: NestContext) -> Stmt:
        def element(idx: Index) -> Stmt:
            fold, acc = row_reduce(ctx, reduced, combiner, acc_t, lambda r: value(idx, r), exact)
            result: Expr = acc
            if op.kind == "mean":
                result = binary("div", acc, cast(dim_expr(element_count(reduced)), acc_t))
            out_idx = _kept_index(idx, axes, x.type.rank) if op.keepdim else idx
            return seq(fold, Store(out, out_idx, cast(result, t.dtype)))

        return loop_nest(ctx, kept, element)

    return Nest(build, "reduction")


def _kept_index(idx: Index, axes: tuple[int, ...], rank: int) -> Index:
    """Result index with keepdim: reduced axes read 0."""
    zeros = tuple(dim_expr(0) for _ in axes)
    return _merge(rank, axes, idx, zeros)


@lower.register(Argmax)
def _lower_argmax(op: Argmax, t: TensorType, x: Operand) -> Nest:
    axis = op.axis % x.type.rank
    kept, (n,) = _split(x.shape, (axis,))
    acc_t = compute_dtype(x.dtype)

    def build(out, ctx: NestContext) -> Stmt:
        def element(idx: Index) -> Stmt:
            best, at = ctx.fresh("best"), ctx.fresh("at")
            bv, av = Var(best, acc_t), Var(at, i64)
            j = ctx.fresh("r")
            v = cast(x.at(_merge(x.type.rank, (axis,), idx, (Var(j),))), acc_t)
            # First maximum wins; NaN counts as the maximum (the first NaN is kept).
            take = binary("or", binary("gt", v, bv), binary("and", binary("ne", v, v), binary("eq", bv, bv)))
            body = seq(Assign(at, Select(take, Var(j), av)), Assign(best, Select(take, v, bv)))
            loop = For(j, dim_expr(n), body, "reduce", False, ((best, "argmax"), (at, "argmax")))
            first = cast(x.at(_merge(x.type.rank, (axis,), idx, (dim_expr(0),))), acc_t)
            out_idx = _kept_index(idx, (axis,), x.type.rank) if op.keepdim else idx
            return seq(
                Let(best, first, mutable=True),
                Let(at, dim_expr(0), mutable=True),
                loop,
                Store(out, out_idx, av),
            )

        return loop_nest(ctx, kept, element)

    return Nest(build, "reduction")


@lower.register(Softmax)
def _lower_softmax(op: Softmax, t: TensorType, x: Operand) -> Nest:
    axis = op.axis % x.type.rank
    kept, (n,) = _split(x.shape, (axis,))
    acc_t = compute_dtype(x.dtype)
    log = isinstance(op, LogSoftmax)

    def build(out, ctx: NestContext) -> Stmt:
        def element(idx: Index) -> Stmt:
            def at(r: Index) -> Index:
                return _merge(x.type.rank, (axis,), idx, r)

            def xv(r: Index) -> Expr:
                return cast(x.at(at(r)), acc_t)

            find_max, m = row_reduce(ctx, (n,), "max", acc_t, xv, True)
            shifted = lambda r: binary("sub", xv(r), m)  # noqa: E731
            sum_exp, s = row_reduce(ctx, (n,), "add", acc_t, lambda r: unary("exp", shifted(r)), True)
            if log:
                logs = ctx.fresh("logs")
                pre = Let(logs, unary("log", s))
                value = lambda r: binary("sub", shifted(r), Var(logs, acc_t))  # noqa: E731
            else:
                inv = ctx.fresh("inv")
                pre = Let(inv, binary("div", const(1.0, acc_t), s))
                value = lambda r: binary("mul", unary("exp", shifted(r)), Var(inv, acc_t))  # noqa: E731
            write = loop_nest(ctx, (n,), lambda r: Store(out, at(r), cast(value(r), t.dtype)), stem="j")
            return seq(find_max, sum_exp, pre, write)

        return loop_nest(ctx, kept, element)

    return Nest(build, "row")
