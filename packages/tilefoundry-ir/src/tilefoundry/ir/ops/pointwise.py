"""Pointwise ops: unary math, binary arithmetic, comparisons, logical ops, where, clamp, cast.

Binary and ternary ops broadcast numpy-style (`operands.broadcast_shapes`) and never promote:
operands share one dtype, and the result has it (comparisons yield bool). The evaluator
computes 16-bit float work in f32 and rounds once to the operand dtype, which is what a fused
kernel does.

    exp(x: [(T, 4), f32])                        -> [(T, 4), f32]
    add(a: [(T, 1), bf16], b: [(3,), bf16])      -> [(T, 3), bf16]
    lt(a: [(4,), i32], b: [(), i32])             -> [(4,), bool]
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar

import torch

from ..dtypes import DType, boolean, dtype_of
from ..errors import DSLError
from ..types import TensorType
from .base import Op, evaluate, infer
from .operands import (
    BOOL,
    FLOATS,
    NUMERIC,
    SIGNED,
    accumulation_dtype,
    broadcast_shapes,
    require_dtype,
    require_same_dtype,
)


@dataclass(frozen=True)
class Pointwise(Op):
    """Base of ops that map each output element from the elements at the same index."""


# ---------------------------------------------------------------- unary


@dataclass(frozen=True)
class Unary(Pointwise):
    """A one-operand pointwise op; `accepted` lists the dtypes it takes, the result keeps x's dtype."""

    inputs = ("x",)
    accepted: ClassVar[frozenset[DType]] = FLOATS


@dataclass(frozen=True)
class Neg(Unary):
    """`-x`. Signed dtypes only (u8 would wrap)."""

    name = "neg"
    accepted = SIGNED


@dataclass(frozen=True)
class Abs(Unary):
    """`|x|`."""

    name = "abs"
    accepted = NUMERIC


@dataclass(frozen=True)
class Exp(Unary):
    """`e**x`."""

    name = "exp"


@dataclass(frozen=True)
class Exp2(Unary):
    """`2**x`."""

    name = "exp2"


@dataclass(frozen=True)
class Log(Unary):
    """Natural logarithm; `log(0) = -inf`, negative inputs give NaN."""

    name = "log"


@dataclass(frozen=True)
class Log2(Unary):
    """Base-2 logarithm."""

    name = "log2"


@dataclass(frozen=True)
class Sqrt(Unary):
    """Square root; negative inputs give NaN."""

    name = "sqrt"


@dataclass(frozen=True)
class Rsqrt(Unary):
    """`1 / sqrt(x)`, computed exactly (no approximate intrinsic)."""

    name = "rsqrt"


@dataclass(frozen=True)
class Tanh(Unary):
    """Hyperbolic tangent."""

    name = "tanh"


@dataclass(frozen=True)
class Sigmoid(Unary):
    """`1 / (1 + exp(-x))`."""

    name = "sigmoid"


@dataclass(frozen=True)
class Silu(Unary):
    """`x * sigmoid(x)`."""

    name = "silu"


@dataclass(frozen=True)
class Gelu(Unary):
    """Gaussian error linear unit; `approximate` is "none" (erf form) or "tanh" (as torch)."""

    name = "gelu"
    approximate: str = "none"


@dataclass(frozen=True)
class Relu(Unary):
    """`max(x, 0)`."""

    name = "relu"
    accepted = NUMERIC


@dataclass(frozen=True)
class Softplus(Unary):
    """`log(1 + exp(x))` as torch.nn.functional.softplus (beta 1; linear above x = 20)."""

    name = "softplus"


@dataclass(frozen=True)
class LogicalNot(Unary):
    """Boolean not."""

    name = "logical_not"
    accepted = BOOL


_UNARY_FN: dict[type[Unary], Callable[[torch.Tensor], torch.Tensor]] = {
    Neg: torch.neg,
    Abs: torch.abs,
    Exp: torch.exp,
    Exp2: torch.exp2,
    Log: torch.log,
    Log2: torch.log2,
    Sqrt: torch.sqrt,
    Rsqrt: torch.rsqrt,
    Tanh: torch.tanh,
    Sigmoid: torch.sigmoid,
    Silu: torch.nn.functional.silu,
    Relu: torch.relu,
    Softplus: torch.nn.functional.softplus,
    LogicalNot: torch.logical_not,
}

_GELU_APPROXIMATIONS = ("none", "tanh")


def _in_f32(x: torch.Tensor, fn: Callable[[torch.Tensor], torch.Tensor]) -> torch.Tensor:
    """`fn(x)` computed in the accumulation dtype and rounded once to x's dtype."""
    return fn(x.to(accumulation_dtype(x.dtype))).to(x.dtype)


@infer.register(Unary)
def _infer_unary(op: Unary, x: TensorType) -> TensorType:
    require_dtype(op.name, "x", x, op.accepted)
    if isinstance(op, Gelu) and op.approximate not in _GELU_APPROXIMATIONS:
        raise DSLError(
            f"gelu: approximate must be one of {', '.join(map(repr, _GELU_APPROXIMATIONS))}, "
            f"got {op.approximate!r}",
            expected=_GELU_APPROXIMATIONS,
            got=op.approximate,
        )
    return TensorType(x.shape, x.dtype)


@evaluate.register(Unary)
def _eval_unary(op: Unary, x: torch.Tensor) -> torch.Tensor:
    if isinstance(op, Gelu):
        return _in_f32(x, lambda t: torch.nn.functional.gelu(t, approximate=op.approximate))
    return _in_f32(x, _UNARY_FN[type(op)])


# ---------------------------------------------------------------- binary


@dataclass(frozen=True)
class Binary(Pointwise):
    """A two-operand broadcasting op; both operands share a dtype from `accepted`."""

    inputs = ("a", "b")
    accepted: ClassVar[frozenset[DType]] = NUMERIC


@dataclass(frozen=True)
class Add(Binary):
    """`a + b`."""

    name = "add"


@dataclass(frozen=True)
class Sub(Binary):
    """`a - b`."""

    name = "sub"


@dataclass(frozen=True)
class Mul(Binary):
    """`a * b`."""

    name = "mul"


@dataclass(frozen=True)
class Div(Binary):
    """True division `a / b`; floats only (integer division would need a rounding rule)."""

    name = "div"
    accepted = FLOATS


@dataclass(frozen=True)
class Pow(Binary):
    """`a ** b`; integer operands need non-negative exponents."""

    name = "pow"


@dataclass(frozen=True)
class Maximum(Binary):
    """Elementwise maximum; NaN if either operand is NaN."""

    name = "maximum"


@dataclass(frozen=True)
class Minimum(Binary):
    """Elementwise minimum; NaN if either operand is NaN."""

    name = "minimum"


@dataclass(frozen=True)
class LogicalAnd(Binary):
    """Boolean and."""

    name = "logical_and"
    accepted = BOOL


@dataclass(frozen=True)
class LogicalOr(Binary):
    """Boolean or."""

    name = "logical_or"
    accepted = BOOL


@dataclass(frozen=True)
class LogicalXor(Binary):
    """Boolean exclusive or."""

    name = "logical_xor"
    accepted = BOOL


@dataclass(frozen=True)
class Comparison(Binary):
    """A broadcasting comparison; operands share a dtype, the result is bool."""

    accepted = NUMERIC


@dataclass(frozen=True)
class Eq(Comparison):
    """`a == b`."""

    name = "eq"
    accepted = NUMERIC | BOOL


@dataclass(frozen=True)
class Ne(Comparison):
    """`a != b`."""

    name = "ne"
    accepted = NUMERIC | BOOL


@dataclass(frozen=True)
class Lt(Comparison):
    """`a < b`."""

    name = "lt"


@dataclass(frozen=True)
class Le(Comparison):
    """`a <= b`."""

    name = "le"


@dataclass(frozen=True)
class Gt(Comparison):
    """`a > b`."""

    name = "gt"


@dataclass(frozen=True)
class Ge(Comparison):
    """`a >= b`."""

    name = "ge"


_BINARY_FN: dict[type[Binary], Callable[[torch.Tensor, torch.Tensor], torch.Tensor]] = {
    Add: torch.add,
    Sub: torch.sub,
    Mul: torch.mul,
    Div: torch.div,
    Pow: torch.pow,
    Maximum: torch.maximum,
    Minimum: torch.minimum,
    LogicalAnd: torch.logical_and,
    LogicalOr: torch.logical_or,
    LogicalXor: torch.logical_xor,
    Eq: torch.eq,
    Ne: torch.ne,
    Lt: torch.lt,
    Le: torch.le,
    Gt: torch.gt,
    Ge: torch.ge,
}


@infer.register(Binary)
def _infer_binary(op: Binary, a: TensorType, b: TensorType) -> TensorType:
    require_dtype(op.name, "a", a, op.accepted)
    require_dtype(op.name, "b", b, op.accepted)
    dtype = require_same_dtype(op.name, (("a", a), ("b", b)))
    shape = broadcast_shapes(op.name, a.shape, b.shape)
    return TensorType(shape, boolean if isinstance(op, Comparison) else dtype)


@evaluate.register(Binary)
def _eval_binary(op: Binary, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    fn = _BINARY_FN[type(op)]
    acc = accumulation_dtype(a.dtype)
    out = fn(a.to(acc), b.to(acc))
    return out if isinstance(op, Comparison) else out.to(a.dtype)


# ---------------------------------------------------------------- where, clamp, cast


@dataclass(frozen=True)
class Where(Pointwise):
    """`a` where `cond` holds, else `b`; cond is bool, a and b share a dtype; all three broadcast."""

    name = "where"
    inputs = ("cond", "a", "b")


@infer.register(Where)
def _infer_where(op: Where, cond: TensorType, a: TensorType, b: TensorType) -> TensorType:
    require_dtype("where", "cond", cond, BOOL)
    dtype = require_same_dtype("where", (("a", a), ("b", b)))
    return TensorType(broadcast_shapes("where", cond.shape, a.shape, b.shape), dtype)


@evaluate.register(Where)
def _eval_where(op: Where, cond: torch.Tensor, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return torch.where(cond, a, b)


@dataclass(frozen=True)
class Clamp(Pointwise):
    """`min(max(x, lo), hi)` with Python-number bounds; either bound may be None, not both.

    Integer tensors take integer bounds only; NaN inputs stay NaN.
    """

    name = "clamp"
    inputs = ("x",)
    lo: float | int | None = None
    hi: float | int | None = None


@infer.register(Clamp)
def _infer_clamp(op: Clamp, x: TensorType) -> TensorType:
    require_dtype("clamp", "x", x, NUMERIC)
    if op.lo is None and op.hi is None:
        raise DSLError("clamp: give lo, hi or both, got neither", expected="lo or hi", got=None)
    is_float = x.dtype in FLOATS
    for bound, v in (("lo", op.lo), ("hi", op.hi)):
        if v is None:
            continue
        number = isinstance(v, int) or (is_float and isinstance(v, float) and not math.isnan(v))
        if isinstance(v, bool) or not number:
            kind = "a number (not NaN)" if is_float else "an int"
            raise DSLError(
                f"clamp: bound {bound} must be {kind} for x of dtype {x.dtype}, got {v!r}",
                expected=kind,
                got=v,
            )
    if op.lo is not None and op.hi is not None and op.lo > op.hi:
        raise DSLError(f"clamp: lo {op.lo} exceeds hi {op.hi}", expected="lo <= hi", got=(op.lo, op.hi))
    return TensorType(x.shape, x.dtype)


@evaluate.register(Clamp)
def _eval_clamp(op: Clamp, x: torch.Tensor) -> torch.Tensor:
    return _in_f32(x, lambda t: torch.clamp(t, op.lo, op.hi))


@dataclass(frozen=True)
class Cast(Pointwise):
    """Convert x to `dtype` as torch's `.to(dtype)`: floats round to nearest even, float to
    integer truncates toward zero, anything to bool tests `!= 0`. Every dtype pair is accepted."""

    name = "cast"
    inputs = ("x",)
    dtype: DType

    def __post_init__(self) -> None:
        object.__setattr__(self, "dtype", dtype_of(self.dtype))


@infer.register(Cast)
def _infer_cast(op: Cast, x: TensorType) -> TensorType:
    return TensorType(x.shape, op.dtype)


@evaluate.register(Cast)
def _eval_cast(op: Cast, x: torch.Tensor) -> torch.Tensor:
    return x.to(op.dtype.torch)
