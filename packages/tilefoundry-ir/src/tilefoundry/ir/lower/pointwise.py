"""Lowering of pointwise ops: each is a `Compute` over broadcast reads.

Element math runs in the compute dtype (f32 for 16-bit floats) and each op's result is rounded
once to its own dtype, exactly as the evaluator does; a fused chain of bf16 ops therefore
rounds after every op, not only at the end.

    silu(x: bf16)[i]  ->  bf16(f32(x[i]) * sigmoid(f32(x[i])))
"""

from __future__ import annotations

import math
from collections.abc import Callable

from ..ops.pointwise import (
    Abs,
    Add,
    Binary,
    Cast,
    Clamp,
    Comparison,
    Div,
    Eq,
    Exp,
    Exp2,
    Ge,
    Gelu,
    Gt,
    Le,
    Log,
    Log2,
    LogicalAnd,
    LogicalNot,
    LogicalOr,
    LogicalXor,
    Lt,
    Maximum,
    Minimum,
    Mul,
    Ne,
    Neg,
    Pow,
    Relu,
    Rsqrt,
    Sigmoid,
    Silu,
    Softplus,
    Sqrt,
    Sub,
    Tanh,
    Unary,
    Where,
)
from ..tile.expr import Expr, Select, binary, cast, compute_dtype, const, unary
from ..types import TensorType
from .core import Compute, Index, Operand, lower, read

_UNARY: dict[type, str] = {
    Neg: "neg",
    Abs: "abs",
    Exp: "exp",
    Exp2: "exp2",
    Log: "log",
    Log2: "log2",
    Sqrt: "sqrt",
    Rsqrt: "rsqrt",
    Tanh: "tanh",
    Sigmoid: "sigmoid",
    LogicalNot: "not",
}

_BINARY: dict[type, str] = {
    Add: "add",
    Sub: "sub",
    Mul: "mul",
    Div: "div",
    Pow: "pow",
    Maximum: "max",
    Minimum: "min",
    LogicalAnd: "and",
    LogicalOr: "or",
    LogicalXor: "xor",
    Eq: "eq",
    Ne: "ne",
    Lt: "lt",
    Le: "le",
    Gt: "gt",
    Ge: "ge",
}

_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)


def _silu(v: Expr) -> Expr:
    return binary("mul", v, unary("sigmoid", v))


def _relu(v: Expr) -> Expr:
    # NaN < 0 is false, so NaN passes through as torch.relu does.
    return Select(binary("lt", v, const(0, v.dtype)), const(0, v.dtype), v)


def _softplus(v: Expr) -> Expr:
    # torch: linear above the threshold 20 (beta 1), log1p(exp(x)) below.
    soft = unary("log1p", unary("exp", v))
    return Select(binary("gt", v, const(20.0, v.dtype)), v, soft)


def _gelu(approximate: str) -> Callable[[Expr], Expr]:
    def erf_form(v: Expr) -> Expr:
        inner = unary("erf", binary("mul", v, const(1.0 / math.sqrt(2.0), v.dtype)))
        return binary("mul", binary("mul", const(0.5, v.dtype), v), binary("add", const(1.0, v.dtype), inner))

    def tanh_form(v: Expr) -> Expr:
        cube = binary("mul", binary("mul", v, v), v)
        arg = binary(
            "mul",
            const(_SQRT_2_OVER_PI, v.dtype),
            binary("add", v, binary("mul", const(0.044715, v.dtype), cube)),
        )
        return binary(
            "mul",
            binary("mul", const(0.5, v.dtype), v),
            binary("add", const(1.0, v.dtype), unary("tanh", arg)),
        )

    return tanh_form if approximate == "tanh" else erf_form


def in_compute(dtype_of_result: TensorType, fn: Callable[[Expr], Expr]) -> Callable[[Expr], Expr]:
    """`fn` applied in the compute dtype, the result rounded once to the result dtype."""
    return lambda v: cast(fn(cast(v, compute_dtype(v.dtype))), dtype_of_result.dtype)


@lower.register(Unary)
def _lower_unary(op: Unary, t: TensorType, x: Operand) -> Compute:
    composite: dict[type, Callable[[Expr], Expr]] = {Silu: _silu, Relu: _relu, Softplus: _softplus}
    if isinstance(op, Gelu):
        fn = _gelu(op.approximate)
    elif type(op) in composite:
        fn = composite[type(op)]
    else:
        name = _UNARY[type(op)]
        fn = lambda v: unary(name, v)  # noqa: E731
    f = in_compute(t, fn)
    return Compute(lambda idx: f(read(x, idx, t.shape)))


@lower.register(Binary)
def _lower_binary(op: Binary, t: TensorType, a: Operand, b: Operand) -> Compute:
    name = _BINARY[type(op)]
    acc = compute_dtype(a.dtype)

    def element(idx: Index) -> Expr:
        out = binary(name, cast(read(a, idx, t.shape), acc), cast(read(b, idx, t.shape), acc))
        return out if isinstance(op, Comparison) else cast(out, t.dtype)

    return Compute(element)


@lower.register(Where)
def _lower_where(op: Where, t: TensorType, c: Operand, a: Operand, b: Operand) -> Compute:
    return Compute(lambda idx: Select(read(c, idx, t.shape), read(a, idx, t.shape), read(b, idx, t.shape)))


@lower.register(Clamp)
def _lower_clamp(op: Clamp, t: TensorType, x: Operand) -> Compute:
    def fn(v: Expr) -> Expr:
        if op.lo is not None:
            v = binary("max", v, const(op.lo, v.dtype))
        if op.hi is not None:
            v = binary("min", v, const(op.hi, v.dtype))
        return v

    f = in_compute(t, fn)
    return Compute(lambda idx: f(x.at(idx)))


@lower.register(Cast)
def _lower_cast(op: Cast, t: TensorType, x: Operand) -> Compute:
    return Compute(lambda idx: cast(x.at(idx), op.dtype))
