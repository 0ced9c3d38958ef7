"""Shape and data movement: reshape, transpose, slice, concat, stack, repeat_interleave, broadcast_to.

These ops move elements without arithmetic; shapes in their attributes may hold DimVars (the
evaluator sees them resolved to ints). Ops that read through an integer index tensor live in
`indexing.py`.

    reshape(x: [(T, 32, 128), bf16], shape=(T, 4096))         -> [(T, 4096), bf16]
    slice(x: [(T, 64), f32], axis=1, start=8, stop=40, step=2) -> [(T, 16), f32]
    concat(a: [(T, 4), f32], b: [(T, 2), f32], axis=1)        -> [(T, 6), f32]
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..dims import Dim, dims_equal, format_dim
from ..errors import DSLError
from ..types import TensorType
from .base import Op, evaluate, infer
from .operands import (
    element_count,
    exact_quotient,
    format_shape,
    is_dim,
    normalize_axis,
    provably_le,
    require_dims_equal,
    require_same_dtype,
)


@dataclass(frozen=True)
class DataMovement(Op):
    """Base of ops that copy, reorder or select elements without computing new values."""


# ---------------------------------------------------------------- reshape


@dataclass(frozen=True)
class Reshape(DataMovement):
    """Reinterpret x in row-major order as `shape`, which must hold the same number of elements.

    One entry may be -1; it is inferred when the element count divides exactly, e.g.
    `(T, 32, 128) -> (-1, 4096)` gives `(T, 4096)`.
    """

    name = "reshape"
    inputs = ("x",)
    shape: tuple[Dim, ...] = ()


@infer.register(Reshape)
def _infer_reshape(op: Reshape, x: TensorType) -> TensorType:
    bad = [d for d in op.shape if not is_dim(d) or (isinstance(d, int) and d < -1)]
    if bad:
        raise DSLError(
            f"reshape: shape entries must be extents >= 0, DimVars or one -1, got {bad[0]!r} in {op.shape!r}",
            expected="ints >= 0, DimVars, one -1",
            got=op.shape,
        )
    holes = [i for i, d in enumerate(op.shape) if isinstance(d, int) and d == -1]
    if len(holes) > 1:
        raise DSLError(f"reshape: at most one -1 in shape, got {op.shape!r}", expected="one -1", got=op.shape)
    count = element_count(x.shape)
    known = element_count([d for i, d in enumerate(op.shape) if i not in holes])
    shape = list(op.shape)
    if holes:
        inferred = exact_quotient(count, known)
        if inferred is None:
            raise DSLError(
                f"reshape: cannot infer -1 in {format_shape(op.shape)}: {format_dim(count)} elements of "
                f"{format_shape(x.shape)} do not divide by {format_dim(known)}",
                expected=f"a multiple of {format_dim(known)}",
                got=format_dim(count),
            )
        shape[holes[0]] = inferred
    elif not dims_equal(known, count):
        raise DSLError(
            f"reshape: cannot reshape {format_shape(x.shape)} ({format_dim(count)} elements) to "
            f"{format_shape(op.shape)} ({format_dim(known)} elements)",
            expected=format_dim(count),
            got=format_dim(known),
        )
    return TensorType(tuple(shape), x.dtype)


@evaluate.register(Reshape)
def _eval_reshape(op: Reshape, x: torch.Tensor) -> torch.Tensor:
    return x.reshape(op.shape)


# ---------------------------------------------------------------- transpose


@dataclass(frozen=True)
class Transpose(DataMovement):
    """Reorder the axes: result axis i is x's axis `perm[i]` (negative entries count from the end)."""

    name = "transpose"
    inputs = ("x",)
    perm: tuple[int, ...] = ()


@infer.register(Transpose)
def _infer_transpose(op: Transpose, x: TensorType) -> TensorType:
    perm = tuple(normalize_axis("transpose", p, x.rank) for p in op.perm)
    if sorted(perm) != list(range(x.rank)):
        raise DSLError(
            f"transpose: perm {op.perm!r} is not a permutation of the {x.rank} axes of "
            f"{format_shape(x.shape)}",
            expected=f"a permutation of {tuple(range(x.rank))}",
            got=op.perm,
        )
    return TensorType(tuple(x.shape[p] for p in perm), x.dtype)


@evaluate.register(Transpose)
def _eval_transpose(op: Transpose, x: torch.Tensor) -> torch.Tensor:
    return x.permute(op.perm)


# ---------------------------------------------------------------- slice


@dataclass(frozen=True)
class Slice(DataMovement):
    """Elements `start, start + step, ...` below `stop` along one `axis`.

    Bounds are normalized (no negatives, no clamping): `0 <= start <= stop <= extent` must be
    provable from the DimVars' ranges, and `step >= 1`. Subscripts (`x[1:-1:2]`) build these.
    """

    name = "slice"
    inputs = ("x",)
    axis: int = 0
    start: Dim = 0
    stop: Dim = 0
    step: int = 1


@infer.register(Slice)
def _infer_slice(op: Slice, x: TensorType) -> TensorType:
    axis = normalize_axis("slice", op.axis, x.rank)
    extent = x.shape[axis]
    if isinstance(op.step, bool) or not isinstance(op.step, int) or op.step < 1:
        raise DSLError(f"slice: step must be an int >= 1, got {op.step!r}", expected=">= 1", got=op.step)
    for what, d in (("start", op.start), ("stop", op.stop)):
        if not is_dim(d):
            raise DSLError(f"slice: {what} must be an int or DimVar, got {d!r}", expected="a dim", got=d)
    if not (provably_le(0, op.start) and provably_le(op.start, op.stop) and provably_le(op.stop, extent)):
        raise DSLError(
            f"slice: bounds [{format_dim(op.start)}, {format_dim(op.stop)}) do not provably lie within "
            f"axis {axis} of extent {format_dim(extent)} (need 0 <= start <= stop <= extent)",
            expected=f"0 <= start <= stop <= {format_dim(extent)}",
            got=(op.start, op.stop),
        )
    length = op.stop - op.start
    if op.step > 1:
        length = (length + op.step - 1) // op.step
    return TensorType((*x.shape[:axis], length, *x.shape[axis + 1 :]), x.dtype)


@evaluate.register(Slice)
def _eval_slice(op: Slice, x: torch.Tensor) -> torch.Tensor:
    axis = op.axis % x.dim()
    return x[(slice(None),) * axis + (slice(op.start, op.stop, op.step),)]


# ---------------------------------------------------------------- concat, stack


def _same_shapes_except(op: str, xs: tuple[TensorType, ...], axis: int | None) -> None:
    require_same_dtype(op, tuple((f"xs[{i}]", t) for i, t in enumerate(xs)))
    first = xs[0]
    for i, t in enumerate(xs[1:], 1):
        if t.rank != first.rank:
            raise DSLError(
                f"{op}: xs[{i}] has rank {t.rank}, xs[0] has rank {first.rank}",
                expected=first.rank,
                got=t.rank,
            )
        for d, (a, b) in enumerate(zip(first.shape, t.shape, strict=True)):
            if d != axis:
                require_dims_equal(op, f"dim {d} of xs[0] and xs[{i}]", a, b)


@dataclass(frozen=True)
class Concat(DataMovement):
    """Join tensors along an existing `axis`; all other dims and the dtype must agree."""

    name = "concat"
    inputs = ("*xs",)
    axis: int = 0


@infer.register(Concat)
def _infer_concat(op: Concat, *xs: TensorType) -> TensorType:
    if not xs:
        raise DSLError("concat: needs at least one tensor, got none", expected=">= 1", got=0)
    axis = normalize_axis("concat", op.axis, xs[0].rank)
    _same_shapes_except("concat", xs, axis)
    total: Dim = 0
    for t in xs:
        total = total + t.shape[axis]
    return TensorType((*xs[0].shape[:axis], total, *xs[0].shape[axis + 1 :]), xs[0].dtype)


@evaluate.register(Concat)
def _eval_concat(op: Concat, *xs: torch.Tensor) -> torch.Tensor:
    return torch.cat(xs, dim=op.axis)


@dataclass(frozen=True)
class Stack(DataMovement):
    """Join equal-shaped tensors along a new `axis` in [-(rank + 1), rank]."""

    name = "stack"
    inputs = ("*xs",)
    axis: int = 0


@infer.register(Stack)
def _infer_stack(op: Stack, *xs: TensorType) -> TensorType:
    if not xs:
        raise DSLError("stack: needs at least one tensor, got none", expected=">= 1", got=0)
    axis = normalize_axis("stack", op.axis, xs[0].rank + 1)
    _same_shapes_except("stack", xs, None)
    shape = xs[0].shape
    return TensorType((*shape[:axis], len(xs), *shape[axis:]), xs[0].dtype)


@evaluate.register(Stack)
def _eval_stack(op: Stack, *xs: torch.Tensor) -> torch.Tensor:
    return torch.stack(xs, dim=op.axis)


# ---------------------------------------------------------------- repeat_interleave, broadcast_to


@dataclass(frozen=True)
class RepeatInterleave(DataMovement):
    """Repeat each element `repeats` times along `axis` (torch.repeat_interleave with an int).

    Example: grouped-query heads `(B, Hkv, S, D) -> (B, Hkv * 4, S, D)` with repeats=4, axis=1.
    """

    name = "repeat_interleave"
    inputs = ("x",)
    repeats: int = 1
    axis: int = 0


@infer.register(RepeatInterleave)
def _infer_repeat_interleave(op: RepeatInterleave, x: TensorType) -> TensorType:
    if isinstance(op.repeats, bool) or not isinstance(op.repeats, int) or op.repeats < 1:
        raise DSLError(
            f"repeat_interleave: repeats must be an int >= 1, got {op.repeats!r}",
            expected=">= 1",
            got=op.repeats,
        )
    axis = normalize_axis("repeat_interleave", op.axis, x.rank)
    return TensorType((*x.shape[:axis], x.shape[axis] * op.repeats, *x.shape[axis + 1 :]), x.dtype)


@evaluate.register(RepeatInterleave)
def _eval_repeat_interleave(op: RepeatInterleave, x: torch.Tensor) -> torch.Tensor:
    return torch.repeat_interleave(x, op.repeats, dim=op.axis)


@dataclass(frozen=True)
class BroadcastTo(DataMovement):
    """Stretch x to `shape` numpy-style: x's dims align at the end, each equal or a static 1."""

    name = "broadcast_to"
    inputs = ("x",)
    shape: tuple[Dim, ...] = ()


@infer.register(BroadcastTo)
def _infer_broadcast_to(op: BroadcastTo, x: TensorType) -> TensorType:
    ok = len(op.shape) >= x.rank and all(is_dim(d) and not (isinstance(d, int) and d < 0) for d in op.shape)
    ok = ok and all(
        dims_equal(have, want) or (isinstance(have, int) and have == 1)
        for have, want in zip(reversed(x.shape), reversed(op.shape), strict=False)
    )
    if not ok:
        raise DSLError(
            f"broadcast_to: cannot broadcast {format_shape(x.shape)} to {format_shape(op.shape)}",
            expected="trailing dims equal to the target's or 1",
            got=format_shape(x.shape),
        )
    return TensorType(tuple(op.shape), x.dtype)


@evaluate.register(BroadcastTo)
def _eval_broadcast_to(op: BroadcastTo, x: torch.Tensor) -> torch.Tensor:
    return torch.broadcast_to(x, op.shape)
