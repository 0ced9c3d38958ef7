"""Ops that read or write through integer index tensors: index_select, gather, cache_update.

Index values are data, so their range is checked when the evaluator runs: an index outside
its axis raises EvalError naming the op, the offending value and the valid range.

    index_select(x: [(V, D), bf16], ids: [(T,), i64], axis=0)           -> [(T, D), bf16]
    cache_update(cache: [(B, H, 4096, D), bf16], pos: [(), i32],
                 new: [(B, H, T, D), bf16])                             -> [(B, H, 4096, D), bf16]
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..dims import Dim, format_dim
from ..errors import DSLError, EvalError
from ..types import TensorType
from .base import evaluate, infer
from .movement import DataMovement
from .operands import (
    INTEGERS,
    format_shape,
    normalize_axis,
    provably_le,
    require_dims_equal,
    require_dtype,
    require_rank,
    require_same_dtype,
)


def check_index_range(op: str, what: str, index: torch.Tensor, n: int) -> None:
    """Raise EvalError unless every value of `index` lies in [0, n)."""
    if index.numel() == 0:
        return
    lo, hi = int(index.min()), int(index.max())
    if lo < 0 or hi >= n:
        bad = lo if lo < 0 else hi
        raise EvalError(f"{op}: {what} holds {bad}, outside [0, {n})", expected=f"[0, {n})", got=bad)


# ---------------------------------------------------------------- index_select, gather


@dataclass(frozen=True)
class IndexSelect(DataMovement):
    """Rows of x along `axis` picked by a 1-D integer `index` (torch.index_select).

    The result is x's shape with the axis extent replaced by len(index).
    """

    name = "index_select"
    inputs = ("x", "index")
    axis: int = 0


@infer.register(IndexSelect)
def _infer_index_select(op: IndexSelect, x: TensorType, index: TensorType) -> TensorType:
    axis = normalize_axis("index_select", op.axis, x.rank)
    require_dtype("index_select", "index", index, INTEGERS)
    require_rank("index_select", "index", index, 1, "(N,)")
    return TensorType(x.shape[:axis] + index.shape + x.shape[axis + 1 :], x.dtype)


@evaluate.register(IndexSelect)
def _eval_index_select(op: IndexSelect, x: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    check_index_range("index_select", "index", index, x.shape[op.axis])
    return torch.index_select(x, op.axis, index.long())


@dataclass(frozen=True)
class Gather(DataMovement):
    """`out[i][j][k] = x[index[i][j][k]][j][k]` for axis 0, and so on (torch.gather).

    `index` has x's rank and an integer dtype; on every other axis its extent is at most x's.
    The result has index's shape and x's dtype.
    """

    name = "gather"
    inputs = ("x", "index")
    axis: int = 0


@infer.register(Gather)
def _infer_gather(op: Gather, x: TensorType, index: TensorType) -> TensorType:
    axis = normalize_axis("gather", op.axis, x.rank)
    require_dtype("gather", "index", index, INTEGERS)
    require_rank("gather", "index", index, x.rank, f"(the rank of x {format_shape(x.shape)})")
    for d, (have, limit) in enumerate(zip(index.shape, x.shape, strict=True)):
        if d != axis and not provably_le(have, limit):
            raise DSLError(
                f"gather: index extent {format_dim(have)} on axis {d} may exceed x's extent "
                f"{format_dim(limit)}",
                expected=f"<= {format_dim(limit)}",
                got=format_dim(have),
            )
    return TensorType(index.shape, x.dtype)


@evaluate.register(Gather)
def _eval_gather(op: Gather, x: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    check_index_range("gather", "index", index, x.shape[op.axis])
    return torch.gather(x, op.axis, index.long())


# ---------------------------------------------------------------- cache_update


@dataclass(frozen=True)
class CacheUpdate(DataMovement):
    """A copy of `cache` with `new` written at offset `pos` along `axis` (default -2, the sequence).

    Functional: the input cache is never mutated. For a KV cache laid out `(B, H, Smax, D)`,
    `new` is `(B, H, S, D)` and `pos` an integer scalar tensor (shape `()`); the result equals
    the cache with `cache[:, :, pos:pos + S] = new`. cache and new share rank, dtype and every
    extent but `axis`; an `S` provably larger than `Smax` is refused at definition time, and
    `pos < 0` or `pos + S > Smax` when the evaluator runs.
    """

    name = "cache_update"
    inputs = ("cache", "pos", "new")
    axis: int = -2


@infer.register(CacheUpdate)
def _infer_cache_update(op: CacheUpdate, cache: TensorType, pos: TensorType, new: TensorType) -> TensorType:
    axis = normalize_axis("cache_update", op.axis, cache.rank)
    require_dtype("cache_update", "pos", pos, INTEGERS)
    require_rank("cache_update", "pos", pos, 0, "()")
    require_same_dtype("cache_update", (("cache", cache), ("new", new)))
    require_rank("cache_update", "new", new, cache.rank, f"(the rank of cache {format_shape(cache.shape)})")
    for d, (c, n) in enumerate(zip(cache.shape, new.shape, strict=True)):
        if d != axis:
            require_dims_equal("cache_update", f"dim {d} of cache and new", c, n)
    cap: Dim = cache.shape[axis]
    if provably_le(cap + 1, new.shape[axis]):
        raise DSLError(
            f"cache_update: new has extent {format_dim(new.shape[axis])} on axis {axis}, "
            f"more than the cache's {format_dim(cap)}",
            expected=f"<= {format_dim(cap)}",
            got=format_dim(new.shape[axis]),
        )
    return TensorType(cache.shape, cache.dtype)


@evaluate.register(CacheUpdate)
def _eval_cache_update(
    op: CacheUpdate, cache: torch.Tensor, pos: torch.Tensor, new: torch.Tensor
) -> torch.Tensor:
    axis = op.axis % cache.dim()
    start, length, cap = int(pos), new.shape[axis], cache.shape[axis]
    if start < 0 or start + length > cap:
        raise EvalError(
            f"cache_update: pos {start} + new extent {length} does not fit the cache extent {cap} "
            f"on axis {axis}",
            expected=f"0 <= pos <= {cap - length}",
            got=start,
        )
    out = cache.clone()
    out.narrow(axis, start, length).copy_(new)
    return out
