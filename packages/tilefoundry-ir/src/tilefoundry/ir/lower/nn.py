"""Lowering of model ops: norms as two- or three-pass rows, rope and embedding as index maps,
attention as a flash-style loop with an online softmax.

Norm and attention sums are marked reassociable: their definitions fix the math, not the
summation order (torch reorders them too).

    attention[b, h, i, :] :
      var m = -inf, l = 0, acc[0..Dv) = 0
      for j in 0..visible(i) serial:          # one key at a time, in order
        s = scale * sum_d q[b, h, i, d] * k[b, h / g, j, d]
        m' = max(m, s); c = exp(m - m'); p = exp(s - m')
        l = l * c + p;  acc[d] = acc[d] * c + p * v[b, h / g, j, d];  m = m'
      out[b, h, i, d] = l > 0 ? acc[d] / l : 0
"""

from __future__ import annotations

import math

from ..dims import Dim
from ..dtypes import i64
from ..ops.nn import Attention, Embedding, LayerNorm, RmsNorm, Rope
from ..ops.operands import element_count, exact_quotient
from ..tile.expr import (
    Expr,
    Load,
    Select,
    Var,
    binary,
    cast,
    compute_dtype,
    const,
    dim_expr,
    floordiv,
    fold,
    identity,
    unary,
)
from ..tile.stmt import Alloc, Assign, For, Let, Stmt, Store, seq
from ..types import TensorType
from .core import Compute, Index, IndexCheck, Nest, NestContext, Operand, loop_nest, lower
from .reduction import row_reduce

# The longest row a reader recomputes a norm over: a head (64-256 elements) costs each reading
# thread a few L1-hot loads, a hidden row (thousands) would multiply the norm's reads.
RECOMPUTED_ROW = 256


def _norm_split(x: Operand, w: Operand) -> tuple[tuple[Dim, ...], tuple[Dim, ...]]:
    k = w.type.rank
    return x.shape[:-k], x.shape[-k:]


@lower.register(RmsNorm)
def _lower_rms_norm(op: RmsNorm, t: TensorType, x: Operand, w: Operand) -> Nest:
    outer, row = _norm_split(x, w)
    acc_t = compute_dtype(x.dtype)

    def build(out, ctx: NestContext) -> Stmt:
        def element(idx: Index) -> Stmt:
            xv = lambda r: cast(x.at((*idx, *r)), acc_t)  # noqa: E731
            sq, s = row_reduce(ctx, row, "add", acc_t, lambda r: binary("mul", xv(r), xv(r)), True)
            inv = ctx.fresh("inv")
            mean = binary("div", s, cast(dim_expr(element_count(row)), acc_t))
            scale = Let(inv, unary("rsqrt", binary("add", mean, const(op.eps, acc_t))))
            iv = Var(inv, acc_t)
            value = lambda r: binary("mul", binary("mul", xv(r), iv), cast(w.at(r), acc_t))  # noqa: E731
            write = loop_nest(ctx, row, lambda r: Store(out, (*idx, *r), cast(value(r), t.dtype)), stem="j")
            return seq(sq, scale, write)

        return loop_nest(ctx, outer, element)

    (n,) = row if len(row) == 1 else (None,)
    if not isinstance(n, int):
        return Nest(build, "row")
    inverses: dict[Index, Expr] = {}

    def element(idx: Index) -> Expr:
        """The element with its row's inverse RMS folded in the reading thread (one per row)."""
        outer_idx = idx[:-1]
        if outer_idx not in inverses:
            xv = lambda r: cast(x.at((*outer_idx, r)), acc_t)  # noqa: E731
            sq = fold("add", dim_expr(n), lambda r: binary("mul", xv(r), xv(r)), identity("add", acc_t))
            mean = binary("div", sq, const(float(n), acc_t))
            inverses[outer_idx] = unary("rsqrt", binary("add", mean, const(op.eps, acc_t)))
        value = binary("mul", cast(x.at(idx), acc_t), inverses[outer_idx])
        return cast(binary("mul", value, cast(w.at(idx[-1:]), acc_t)), t.dtype)

    return Nest(build, "row", recompute=element if n <= RECOMPUTED_ROW else None, element=element)


@lower.register(LayerNorm)
def _lower_layer_norm(op: LayerNorm, t: TensorType, x: Operand, w: Operand, b: Operand) -> Nest:
    outer, row = _norm_split(x, w)
    acc_t = compute_dtype(x.dtype)
    count = element_count(row)

    def build(out, ctx: NestContext) -> Stmt:
        def element(idx: Index) -> Stmt:
            xv = lambda r: cast(x.at((*idx, *r)), acc_t)  # noqa: E731
            n = cast(dim_expr(count), acc_t)
            total, s = row_reduce(ctx, row, "add", acc_t, xv, True)
            mean = ctx.fresh("mean")
            mv = Var(mean, acc_t)
            centered = lambda r: binary("sub", xv(r), mv)  # noqa: E731
            sq, v = row_reduce(
                ctx, row, "add", acc_t, lambda r: binary("mul", centered(r), centered(r)), True
            )
            inv = ctx.fresh("inv")
            iv = Var(inv, acc_t)
            scale = Let(inv, unary("rsqrt", binary("add", binary("div", v, n), const(op.eps, acc_t))))

            def value(r: Index) -> Expr:
                normed = binary("mul", centered(r), iv)
                return binary("add", binary("mul", normed, cast(w.at(r), acc_t)), cast(b.at(r), acc_t))

            write = loop_nest(ctx, row, lambda r: Store(out, (*idx, *r), cast(value(r), t.dtype)), stem="j")
            return seq(total, Let(mean, binary("div", s, n)), sq, scale, write)

        return loop_nest(ctx, outer, element)

    return Nest(build, "row")


@lower.register(Rope)
def _lower_rope(
    op: Rope, t: TensorType, x: Operand, cos: Operand, sin: Operand, positions: Operand
) -> Compute:
    acc_t = compute_dtype(x.dtype)
    d = x.shape[3]
    half = floordiv(dim_expr(d), 2)
    check = IndexCheck(
        positions, 0, cos.shape[0], "rope: positions holds a value outside [0, P) of the cos table: "
    )

    def element(idx: Index) -> Expr:
        b, h, s, j = idx
        p = cast(positions.at((s,) if positions.type.rank == 1 else (b, s)), i64)
        xv = cast(x.at(idx), acc_t)
        first = binary("lt", j, half)
        # rotate_half: -x[j + D/2] on the first half, x[j - D/2] on the second.
        partner = Select(
            first,
            unary("neg", cast(x.at((b, h, s, j + half)), acc_t)),
            cast(x.at((b, h, s, j - half)), acc_t),
        )
        c = cast(cos.at((p, j)), acc_t)
        sn = cast(sin.at((p, j)), acc_t)
        return cast(binary("add", binary("mul", xv, c), binary("mul", partner, sn)), t.dtype)

    return Compute(element, (check,))


@lower.register(Embedding)
def _lower_embedding(op: Embedding, t: TensorType, table: Operand, ids: Operand) -> Compute:
    check = IndexCheck(ids, 0, table.shape[0], "embedding: ids holds a value outside [0, V) of the table: ")
    rank = ids.type.rank
    return Compute(lambda idx: table.at((cast(ids.at(idx[:rank]), i64), idx[rank])), (check,))


@lower.register(Attention)
def _lower_attention(
    op: Attention, t: TensorType, q: Operand, k: Operand, v: Operand, *kv_len: Operand
) -> Nest:
    acc_t = compute_dtype(q.dtype)
    _, hq, sq, d = q.shape
    skv, dv = k.shape[2], v.shape[3]
    group = exact_quotient(hq, k.shape[1])
    scale = 1.0 / math.sqrt(d) if op.scale is None else float(op.scale)  # type: ignore[arg-type]
    checks: tuple[IndexCheck, ...] = ()
    if kv_len:
        checks = (IndexCheck(kv_len[0], 0, skv + 1, "attention: kv_len holds a value outside [0, Skv]: "),)

    def build(out, ctx: NestContext) -> Stmt:
        def element(idx: Index) -> Stmt:
            b, h, i = idx
            hk = floordiv(h, dim_expr(group))  # type: ignore[arg-type]
            length: Expr = dim_expr(skv)
            if kv_len:
                lens = kv_len[0]
                length = cast(lens.at(() if lens.type.rank == 0 else (b,)), i64)
            names = {n: ctx.fresh(n) for n in ("len", "m", "l", "s", "mn", "c", "p")}
            var = {n: Var(names[n], i64 if n == "len" else acc_t) for n in names}
            visible: Expr = var["len"]
            if op.causal:
                visible = binary("min", var["len"], i + var["len"] - dim_expr(sq) + 1)
            accbuf = ctx.scratch("acc", acc_t, (dv,))
            j = ctx.fresh("j")
            jv = Var(j)
            qk = lambda r: binary(  # noqa: E731
                "mul", cast(q.at((b, h, i, r[0])), acc_t), cast(k.at((b, hk, jv, r[0])), acc_t)
            )
            dot, dotv = row_reduce(ctx, (d,), "add", acc_t, qk, True)
            step = seq(
                dot,
                Let(names["s"], binary("mul", dotv, const(scale, acc_t))),
                Let(names["mn"], binary("max", var["m"], var["s"])),
                Let(names["c"], unary("exp", binary("sub", var["m"], var["mn"]))),
                Let(names["p"], unary("exp", binary("sub", var["s"], var["mn"]))),
                Assign(names["l"], binary("add", binary("mul", var["l"], var["c"]), var["p"])),
                loop_nest(
                    ctx,
                    (dv,),
                    lambda e: Store(
                        accbuf,
                        e,
                        binary(
                            "add",
                            binary("mul", Load(accbuf, e), var["c"]),
                            binary("mul", var["p"], cast(v.at((b, hk, jv, e[0])), acc_t)),
                        ),
                    ),
                    stem="e",
                ),
                Assign(names["m"], var["mn"]),
            )
            carries = ((names["m"], "online_max"), (names["l"], "online_sum"))
            scan = For(j, binary("max", visible, dim_expr(0)), step, "serial", False, carries)
            finish = loop_nest(
                ctx,
                (dv,),
                lambda e: Store(
                    out,
                    (b, h, i, e[0]),
                    cast(
                        Select(
                            binary("gt", var["l"], const(0.0, acc_t)),
                            binary("div", Load(accbuf, e), var["l"]),
                            const(0.0, acc_t),
                        ),
                        t.dtype,
                    ),
                ),
                stem="e",
            )
            zero = loop_nest(ctx, (dv,), lambda e: Store(accbuf, e, const(0.0, acc_t)), stem="e")
            body = seq(
                Let(names["len"], length),
                Let(names["m"], const(-math.inf, acc_t), mutable=True),
                Let(names["l"], const(0.0, acc_t), mutable=True),
                zero,
                scan,
                finish,
            )
            return Alloc(accbuf, body)

        return loop_nest(ctx, (q.shape[0], hq, sq), element)

    # q, k and v live in memory: each element is read once per key (or query), so an inlined
    # producer (rope, a head split) would be recomputed that often, and a flash atom needs buffers.
    return Nest(build, "attention", materialize=(0, 1, 2), checks=checks)
