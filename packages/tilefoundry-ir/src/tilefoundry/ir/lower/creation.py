"""Lowering of creation and placement ops: full, arange, reshard, local — all index maps.

full((T, 4), 1.5, f32)[i, j]   = 1.5
arange(2, T, 3, i64)[i]        = 2 + 3*i
reshard(x)[idx]                = x[idx]           (values unchanged)
local(x)[idx]                  = x[instance 0's block at idx]
"""

from __future__ import annotations

from ..errors import PlanError
from ..layout import flatten, product
from ..ops.creation import Arange, Full
from ..ops.placement import Local, Reshard
from ..tile.expr import Const, Expr, cast, const, dim_expr, floordiv, mod
from ..types import TensorType
from .core import Compute, Index, Operand, lower


@lower.register(Full)
def _lower_full(op: Full, t: TensorType) -> Compute:
    return Compute(lambda idx: const(op.value, t.dtype))


@lower.register(Arange)
def _lower_arange(op: Arange, t: TensorType) -> Compute:
    return Compute(lambda idx: cast(dim_expr(op.start) + idx[0] * op.step, t.dtype))


@lower.register(Reshard)
def _lower_reshard(op: Reshard, t: TensorType, x: Operand) -> Compute:
    return Compute(x.at)


@lower.register(Local)
def _lower_local(op: Local, t: TensorType, x: Operand) -> Compute:
    sl = op.layout
    assert sl is not None
    split = sl.split_positions()
    modes: list[list[tuple[int, bool]]] = []
    first = 0
    for mode in sl.layout:
        leaves = flatten(mode.shape)
        if not all(isinstance(s, int) for s in leaves):
            raise PlanError(
                f"local: the layout {sl} has a symbolic leaf; a compiled local() needs static leaf extents",
                expected="static leaves",
                got=sl,
            )
        modes.append([(s, first + j in split) for j, s in enumerate(leaves)])
        first += len(leaves)

    def element(idx: Index) -> Expr:
        # A single-instance program plays instance 0: every split leaf reads coordinate 0.
        out: list[Expr] = []
        for k, leaves in enumerate(modes):
            kept_stride = 1
            x_k: Expr = Const(0)
            for j, (size, is_split) in enumerate(leaves):
                if not is_split:
                    c = mod(floordiv(idx[k], kept_stride), size)
                    x_k = x_k + c * product(tuple(s for s, _ in leaves[:j]))
                    kept_stride *= size
            out.append(x_k)
        return x.at(tuple(out))

    return Compute(element)
