"""Creation ops: full (and zeros through it) and arange. They take no operands.

Shapes and bounds may hold DimVars; the evaluator places results on `eval_device()`, the
device the function's inputs live on.

    full(shape=(T, 4), value=0.5, dtype=bf16)     -> [(T, 4), bf16]
    arange(start=0, stop=T, step=1, dtype=i64)    -> [(T,), i64]
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..dims import Dim, DimExpr, DimVar, format_dim
from ..dtypes import DType, dtype_of, i64
from ..errors import DSLError
from ..types import TensorType
from .base import Op, eval_device, evaluate, infer
from .operands import NUMERIC, is_dim, provably_le, require_dtype


@dataclass(frozen=True)
class Creation(Op):
    """Base of ops that make a tensor from attributes alone."""


def _require_shape(op: str, shape: tuple) -> None:
    if not isinstance(shape, tuple) or not all(
        is_dim(d) and not (isinstance(d, int) and d < 0) for d in shape
    ):
        raise DSLError(
            f"{op}: shape must be a tuple of extents >= 0 and DimVars, got {shape!r}",
            expected="a tuple of dims",
            got=shape,
        )


def value_fits(value: object, dtype: DType) -> bool:
    """True when the Python number (or DimVar expression) `value` is a `dtype` value as it is."""
    if dtype.is_bool:
        return isinstance(value, bool)
    if isinstance(value, (DimVar, DimExpr)):
        return True
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    if dtype.is_float:
        return True
    info = torch.iinfo(dtype.torch)
    return isinstance(value, int) and info.min <= value <= info.max


@dataclass(frozen=True)
class Full(Creation):
    """A tensor of `shape` filled with `value` of `dtype`.

    `value` must be representable without a silent conversion: True/False for bool, an int in
    range for integer dtypes, any int or float (inf and nan included) for float dtypes, which
    round it to nearest. A DimVar expression (`T - 1`) is a value too, known when the
    evaluator binds the DimVars (`x + T` in a @func body builds one).
    """

    name = "full"
    shape: tuple[Dim, ...]
    value: bool | int | float
    dtype: DType

    def __post_init__(self) -> None:
        object.__setattr__(self, "dtype", dtype_of(self.dtype))


@infer.register(Full)
def _infer_full(op: Full) -> TensorType:
    _require_shape("full", op.shape)
    if not value_fits(op.value, op.dtype):
        raise DSLError(
            f"full: value {op.value!r} does not fit dtype {op.dtype}",
            expected=f"a {op.dtype} value",
            got=op.value,
        )
    return TensorType(op.shape, op.dtype)


@evaluate.register(Full)
def _eval_full(op: Full) -> torch.Tensor:
    return torch.full(op.shape, op.value, dtype=op.dtype.torch, device=eval_device())


@dataclass(frozen=True)
class Arange(Creation):
    """`start, start + step, ...` below `stop` (above it for a negative step), like torch.arange.

    start and stop are ints or DimVars, step a nonzero int (positive when a bound is symbolic;
    then `start <= stop` must be provable). `dtype` is numeric, i64 by default.
    """

    name = "arange"
    start: Dim = 0
    stop: Dim = 0
    step: int = 1
    dtype: DType = i64

    def __post_init__(self) -> None:
        object.__setattr__(self, "dtype", dtype_of(self.dtype))


@infer.register(Arange)
def _infer_arange(op: Arange) -> TensorType:
    require_dtype("arange", "the result", TensorType((), op.dtype), NUMERIC)
    if not (is_dim(op.start) and is_dim(op.stop)):
        raise DSLError(
            f"arange: start and stop must be ints or DimVars, got {op.start!r} and {op.stop!r}",
            expected="dims",
            got=(op.start, op.stop),
        )
    if isinstance(op.step, bool) or not isinstance(op.step, int) or op.step == 0:
        raise DSLError(
            f"arange: step must be a nonzero int, got {op.step!r}", expected="a nonzero int", got=op.step
        )
    if isinstance(op.start, int) and isinstance(op.stop, int):
        return TensorType((len(range(op.start, op.stop, op.step)),), op.dtype)
    if op.step < 0 or not provably_le(op.start, op.stop):
        raise DSLError(
            f"arange: with symbolic bounds, step must be positive and start <= stop provable, got "
            f"start {format_dim(op.start)}, stop {format_dim(op.stop)}, step {op.step}",
            expected="step > 0 and start <= stop",
            got=(op.start, op.stop, op.step),
        )
    length = op.stop - op.start
    return TensorType(((length + op.step - 1) // op.step if op.step > 1 else length,), op.dtype)


@evaluate.register(Arange)
def _eval_arange(op: Arange) -> torch.Tensor:
    return torch.arange(op.start, op.stop, op.step, dtype=op.dtype.torch, device=eval_device())
