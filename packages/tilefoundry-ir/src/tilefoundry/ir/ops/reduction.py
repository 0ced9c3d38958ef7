"""Reductions over axes: reduce (sum mean max min absmax), argmax, softmax, log_softmax.

Axes are ints in [-rank, rank) (negative counts from the end), a tuple of them, or None for
every axis. 16-bit float inputs accumulate in f32 and the result is rounded once to the input
dtype; integer sums accumulate in the input dtype (no widening), as the result type says.

    reduce(x: [(T, 8, 4), bf16], axes=-1, keepdim=True, kind="mean")  -> [(T, 8, 1), bf16]
    argmax(x: [(T, 32000), f32], axis=-1)                              -> [(T,), i64]
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from ..dims import Dim
from ..dtypes import i64
from ..errors import DSLError
from ..types import TensorType
from .base import Op, evaluate, infer
from .operands import FLOATS, NUMERIC, accumulation_dtype, normalize_axes, normalize_axis, require_dtype


@dataclass(frozen=True)
class Reduction(Op):
    """Base of ops whose result element depends on a whole line of the input along an axis."""


def _reduced_shape(shape: tuple[Dim, ...], axes: tuple[int, ...], keepdim: bool) -> tuple[Dim, ...]:
    if keepdim:
        return tuple(1 if i in axes else d for i, d in enumerate(shape))
    return tuple(d for i, d in enumerate(shape) if i not in axes)


# ---------------------------------------------------------------- reduce


@dataclass(frozen=True)
class Reduce(Reduction):
    """Reduce x over `axes` with `kind`.

    Kinds: "sum" and "max"/"min" (numeric dtypes), "mean" (floats), "absmax" (max of |x|,
    numeric). `axes` is an int, a tuple of ints, or None (all axes); an empty tuple reduces
    nothing and returns x. With `keepdim` each reduced axis stays as extent 1. bool is refused.
    """

    name = "reduce"
    inputs = ("x",)
    axes: int | tuple[int, ...] | None = None
    keepdim: bool = False
    kind: str = "sum"


_KIND_DTYPES = {"sum": NUMERIC, "mean": FLOATS, "max": NUMERIC, "min": NUMERIC, "absmax": NUMERIC}

_KIND_FN: dict[str, Callable[[torch.Tensor, tuple[int, ...], bool], torch.Tensor]] = {
    "sum": lambda x, dims, keep: torch.sum(x, dims, keepdim=keep, dtype=x.dtype),
    "mean": lambda x, dims, keep: torch.mean(x, dims, keepdim=keep),
    "max": lambda x, dims, keep: torch.amax(x, dims, keepdim=keep),
    "min": lambda x, dims, keep: torch.amin(x, dims, keepdim=keep),
    "absmax": lambda x, dims, keep: torch.amax(x.abs(), dims, keepdim=keep),
}


@infer.register(Reduce)
def _infer_reduce(op: Reduce, x: TensorType) -> TensorType:
    if op.kind not in _KIND_DTYPES:
        raise DSLError(
            f"reduce: kind must be one of {', '.join(_KIND_DTYPES)}, got {op.kind!r}",
            expected=tuple(_KIND_DTYPES),
            got=op.kind,
        )
    require_dtype(f"reduce({op.kind})", "x", x, _KIND_DTYPES[op.kind])
    axes = normalize_axes("reduce", op.axes, x.rank)
    return TensorType(_reduced_shape(x.shape, axes, op.keepdim), x.dtype)


@evaluate.register(Reduce)
def _eval_reduce(op: Reduce, x: torch.Tensor) -> torch.Tensor:
    axes = normalize_axes("reduce", op.axes, x.dim())
    if not axes:  # torch reads dim=() as "every axis"; here it means "no axis"
        return x
    return _KIND_FN[op.kind](x.to(accumulation_dtype(x.dtype)), axes, op.keepdim).to(x.dtype)


# ---------------------------------------------------------------- argmax


@dataclass(frozen=True)
class Argmax(Reduction):
    """Index (i64) of the maximum along one `axis`; the first maximum wins on ties.

    Numeric dtypes only (bool is refused); NaN counts as the maximum, as in torch.
    """

    name = "argmax"
    inputs = ("x",)
    axis: int = -1
    keepdim: bool = False


@infer.register(Argmax)
def _infer_argmax(op: Argmax, x: TensorType) -> TensorType:
    require_dtype("argmax", "x", x, NUMERIC)
    axis = normalize_axis("argmax", op.axis, x.rank)
    return TensorType(_reduced_shape(x.shape, (axis,), op.keepdim), i64)


@evaluate.register(Argmax)
def _eval_argmax(op: Argmax, x: torch.Tensor) -> torch.Tensor:
    return torch.argmax(x, dim=op.axis, keepdim=op.keepdim)


# ---------------------------------------------------------------- softmax


@dataclass(frozen=True)
class Softmax(Reduction):
    """`exp(x - max) / sum(exp(x - max))` along `axis` (numerically stable); floats only."""

    name = "softmax"
    inputs = ("x",)
    axis: int = -1


@dataclass(frozen=True)
class LogSoftmax(Softmax):
    """`x - max - log(sum(exp(x - max)))` along `axis` (numerically stable); floats only."""

    name = "log_softmax"


@infer.register(Softmax)
def _infer_softmax(op: Softmax, x: TensorType) -> TensorType:
    require_dtype(op.name, "x", x, FLOATS)
    normalize_axis(op.name, op.axis, x.rank)
    return TensorType(x.shape, x.dtype)


@evaluate.register(Softmax)
def _eval_softmax(op: Softmax, x: torch.Tensor) -> torch.Tensor:
    fn = torch.log_softmax if isinstance(op, LogSoftmax) else torch.softmax
    return fn(x, op.axis, dtype=accumulation_dtype(x.dtype)).to(x.dtype)
