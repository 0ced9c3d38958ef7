"""Lowering of matmul: the checked contraction loop, one ordered K sum per output element.

    matmul(a: (B, M, K), b: (K, N))[b, m, n] :
      var acc: f32 = 0.0
      for r in 0..K reduce(acc:add):
        acc = acc + f32(a[b, m, r]) * f32(b[r, n])
      out[b, m, n] = acc

Operands are materialized (each element is read N or M times), so planning may replace a
proved whole-GEMM region by one atom; otherwise vectorizing the N axis keeps each output's K
loop serial (lane-private accumulators, no reassociation).
"""

from __future__ import annotations

from ..dims import Dim
from ..ops.contraction import Matmul
from ..tile.expr import Expr, binary, cast, compute_dtype
from ..tile.stmt import Stmt, Store, seq
from ..types import TensorType
from .core import Index, Nest, NestContext, Operand, broadcast_index, loop_nest, lower
from .reduction import row_reduce


@lower.register(Matmul)
def _lower_matmul(op: Matmul, t: TensorType, a: Operand, b: Operand) -> Nest:
    acc_t = compute_dtype(a.dtype)
    a_batch: tuple[Dim, ...] = a.shape[:-2]
    b_batch: tuple[Dim, ...] = b.shape[:-2]
    nb = max(len(a_batch), len(b_batch))
    batch_shape = t.shape[:nb]
    k_extent = a.shape[-1]

    def a_at(batch: Index, m: Expr | None, k: Expr) -> Expr:
        if a.type.rank == 1:
            return a.at((k,))
        return a.at((*broadcast_index(batch, batch_shape, a_batch), m, k))  # type: ignore[arg-type]

    def b_at(batch: Index, k: Expr, n: Expr | None) -> Expr:
        if b.type.rank == 1:
            return b.at((k,))
        return b.at((*broadcast_index(batch, batch_shape, b_batch), k, n))  # type: ignore[arg-type]

    def build(out, ctx: NestContext) -> Stmt:
        def element(idx: Index) -> Stmt:
            batch = idx[:nb]
            m = idx[nb] if a.type.rank > 1 else None
            n = idx[-1] if b.type.rank > 1 else None

            def product(r: Index) -> Expr:
                return binary("mul", cast(a_at(batch, m, r[0]), acc_t), cast(b_at(batch, r[0], n), acc_t))

            fold, acc = row_reduce(ctx, (k_extent,), "add", acc_t, product, False)
            return seq(fold, Store(out, idx, cast(acc, t.dtype)))

        return loop_nest(ctx, t.shape, element)

    return Nest(build, "contraction", materialize=(0, 1))
