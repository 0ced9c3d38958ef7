"""Operand rules shared by the op families: dtype classes, broadcasting, axes, accumulation.

Every check raises `DSLError(message, expected=..., got=...)` without a location; the DSL
attaches the file and line of the offending expression.

    broadcast_shapes("add", (T, 1, 4), (3, 1))   # -> (T, 3, 4)
    normalize_axes("reduce", (-1, 0), 3)          # -> (0, 2)
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import torch

from ..dims import Dim, DimExpr, DimVar, dim_bounds, dims_equal, format_dim
from ..dtypes import DType, bf16, boolean, f16, f32, f64, i8, i16, i32, i64, u8
from ..errors import DSLError
from ..types import TensorType

FLOATS: frozenset[DType] = frozenset({f64, f32, f16, bf16})
INTEGERS: frozenset[DType] = frozenset({i64, i32, i16, i8, u8})
NUMERIC: frozenset[DType] = FLOATS | INTEGERS
BOOL: frozenset[DType] = frozenset({boolean})
SIGNED: frozenset[DType] = FLOATS | (INTEGERS - {u8})

# Printed in this order so messages are deterministic.
_ORDER = ("f64", "f32", "f16", "bf16", "fp8e4m3", "fp8e5m2", "i64", "i32", "i16", "i8", "u8", "bool")


def dtype_names(dtypes: Iterable[DType]) -> str:
    """The names of `dtypes` in canonical order, space-separated."""
    names = {d.name for d in dtypes}
    return " ".join(n for n in _ORDER if n in names)


def format_shape(shape: Sequence[Dim]) -> str:
    """`(tokens, 4)`; a 1-tuple keeps its comma: `(4,)`."""
    inner = ", ".join(format_dim(d) if is_dim(d) else repr(d) for d in shape)
    return f"({inner},)" if len(shape) == 1 else f"({inner})"


def require_dtype(op: str, what: str, t: TensorType, accepted: frozenset[DType]) -> None:
    """Refuse `t` unless its dtype is in `accepted`; the message lists the accepted dtypes."""
    if t.dtype not in accepted:
        raise DSLError(
            f"{op}: {what} has dtype {t.dtype}; accepted: {dtype_names(accepted)}",
            expected=dtype_names(accepted),
            got=t.dtype,
        )


def require_same_dtype(op: str, named: Sequence[tuple[str, TensorType]]) -> DType:
    """The dtype all operands share; refuses a mismatch naming both dtypes (no silent promotion)."""
    (first_name, first), *rest = named
    for name, t in rest:
        if t.dtype != first.dtype:
            raise DSLError(
                f"{op}: operands must share a dtype (no silent promotion), got {first_name} {first.dtype} "
                f"and {name} {t.dtype}; cast one with tf.cast",
                expected=first.dtype,
                got=t.dtype,
            )
    return first.dtype


def require_rank(op: str, what: str, t: TensorType, rank: int, layout: str) -> None:
    """Refuse `t` unless it has `rank` dims; `layout` spells the expected shape, e.g. `(B, H, S, D)`."""
    if t.rank != rank:
        raise DSLError(
            f"{op}: {what} must have rank {rank} {layout}, got shape {format_shape(t.shape)}",
            expected=layout,
            got=format_shape(t.shape),
        )


def require_dims_equal(op: str, what: str, a: Dim, b: Dim) -> None:
    """Refuse unless two extents are provably equal; `what` says which extents they are."""
    if not dims_equal(a, b):
        raise DSLError(
            f"{op}: {what} must match, got {format_dim(a)} and {format_dim(b)}",
            expected=format_dim(a),
            got=format_dim(b),
        )


def broadcast_shapes(op: str, *shapes: Sequence[Dim]) -> tuple[Dim, ...]:
    """The numpy-style broadcast of `shapes`.

    Shapes align at their trailing dims; a static 1 stretches to the other extent. Symbolic
    extents broadcast only against an equal extent or a static 1: a DimVar that might be 1 at
    run time is not stretched.
    """
    rank = max(len(s) for s in shapes)
    out: list[Dim] = []
    for i in range(-rank, 0):
        d: Dim = 1
        for s in shapes:
            if len(s) < -i:
                continue
            e = s[i]
            if isinstance(d, int) and d == 1:
                d = e
            elif not (isinstance(e, int) and e == 1) and not dims_equal(d, e):
                listed = " and ".join(format_shape(s) for s in shapes)
                raise DSLError(
                    f"{op}: shapes {listed} do not broadcast: dim {i} is {format_dim(d)} vs {format_dim(e)}",
                    expected="equal extents or 1 at each trailing dim",
                    got=listed,
                )
        out.append(d)
    return tuple(out)


def normalize_axis(op: str, axis: object, rank: int) -> int:
    """`axis` in [0, rank); negative axes count from the end."""
    if isinstance(axis, bool) or not isinstance(axis, int):
        raise DSLError(f"{op}: axis must be an int, got {axis!r}", expected="int", got=axis)
    if not -rank <= axis < rank:
        raise DSLError(
            f"{op}: axis {axis} is out of range for rank {rank} (accepted {-rank}..{rank - 1})",
            expected=f"{-rank}..{rank - 1}",
            got=axis,
        )
    return axis % rank


def normalize_axes(op: str, axes: object, rank: int) -> tuple[int, ...]:
    """Sorted distinct axes from an int, a tuple of ints, or None (every axis)."""
    if axes is None:
        return tuple(range(rank))
    items = axes if isinstance(axes, (tuple, list)) else (axes,)
    out = tuple(normalize_axis(op, a, rank) for a in items)
    if len(set(out)) != len(out):
        given = tuple(items)
        raise DSLError(f"{op}: axes {given} name an axis twice", expected="distinct axes", got=given)
    return tuple(sorted(out))


def is_dim(d: object) -> bool:
    """True for an int extent (not bool), a DimVar or a DimExpr."""
    return isinstance(d, (DimVar, DimExpr)) or (isinstance(d, int) and not isinstance(d, bool))


def provably_le(a: Dim, b: Dim) -> bool:
    """True when `a <= b` holds for every value of their DimVars."""
    if dims_equal(a, b):
        return True
    bounds = dim_bounds(b - a)
    return bounds is not None and bounds[0] >= 0


def element_count(shape: Sequence[Dim]) -> Dim:
    """The product of the extents."""
    n: Dim = 1
    for d in shape:
        n = n * d
    return n


def _terms(d: Dim) -> tuple[tuple[tuple, int], ...]:
    if isinstance(d, int):
        return (((), d),) if d else ()
    if isinstance(d, DimVar):
        return (((d,), 1),)
    return d.terms


def exact_quotient(a: Dim, b: Dim) -> Dim | None:
    """`q` with `q * b == a` for every DimVar value when `b` is a single term, else None.

    Example: `exact_quotient(4096*T, 32*T)` is 128; `exact_quotient(T + 1, T)` is None.
    """
    divisor = _terms(b)
    if len(divisor) != 1:
        return None
    ((atoms, coef),) = divisor
    q: Dim = 0
    for mono, c in _terms(a):
        rest = list(mono)
        for atom in atoms:
            if atom not in rest:
                return None
            rest.remove(atom)
        if c % coef:
            return None
        term: Dim = c // coef
        for atom in rest:
            term = term * atom
        q = q + term
    return q


def accumulation_dtype(dtype: torch.dtype) -> torch.dtype:
    """The dtype the evaluator computes in: f32 for 16-bit floats, else the dtype itself."""
    return torch.float32 if dtype in (torch.float16, torch.bfloat16) else dtype
