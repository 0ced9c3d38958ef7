"""TileIR scalar expressions: the value of one element, written over loop variables.

An expression is a small immutable tree. Index arithmetic is i64; element arithmetic carries the
dtype it computes in (16-bit floats compute in f32, as the evaluator does). Builders fold
constants and drop identities, so lowering rules can write plain arithmetic:

    i = Var("i0")
    idx = i * 4 + 0                        # -> (i0 * 4)
    x = Load(buf, (i, Const(3)))           # x[i0, 3]
    Bin("add", x, Const(1.0, f32))         # x[i0, 3] + 1.0f
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..dims import Dim, DimExpr, DimVar, DivModAtom
from ..dtypes import DType, boolean, f32, i64

# Binary operators whose result is bool whatever the operands.
COMPARISONS = frozenset({"lt", "le", "gt", "ge", "eq", "ne"})
BINARY_OPS = COMPARISONS | frozenset(
    {"add", "sub", "mul", "div", "floordiv", "mod", "min", "max", "pow", "and", "or", "xor"}
)
# Unary math; each maps to one scalar function of the target's math library.
UNARY_OPS = frozenset(
    {"neg", "abs", "exp", "exp2", "log", "log2", "log1p", "sqrt", "rsqrt", "tanh", "erf", "sigmoid", "not"}
)


class Expr:
    """Base of scalar expressions; `dtype` is the type the value computes in."""

    dtype: DType

    def __add__(self, other: Expr | int) -> Expr:
        return add(self, other)

    def __radd__(self, other: int) -> Expr:
        return add(other, self)

    def __sub__(self, other: Expr | int) -> Expr:
        return sub(self, other)

    def __mul__(self, other: Expr | int) -> Expr:
        return mul(self, other)

    def __rmul__(self, other: int) -> Expr:
        return mul(other, self)

    def __floordiv__(self, other: Expr | int) -> Expr:
        return floordiv(self, other)

    def __mod__(self, other: Expr | int) -> Expr:
        return mod(self, other)


@dataclass(frozen=True, eq=True)
class Const(Expr):
    """A literal; `value` is a Python int, float or bool."""

    value: int | float | bool
    dtype: DType = i64


@dataclass(frozen=True, eq=True)
class Var(Expr):
    """A loop variable, a scalar temporary, or a dynamic extent (named after its DimVar)."""

    name: str
    dtype: DType = i64


@dataclass(frozen=True, eq=True)
class Bin(Expr):
    """`a <op> b`; comparisons yield bool, the rest compute in `a`'s dtype."""

    op: str
    a: Expr
    b: Expr
    dtype: DType = field(default=i64)

    def __post_init__(self) -> None:
        assert self.op in BINARY_OPS, self.op


@dataclass(frozen=True, eq=True)
class Un(Expr):
    """`op(a)` for one of UNARY_OPS."""

    op: str
    a: Expr
    dtype: DType = field(default=f32)

    def __post_init__(self) -> None:
        assert self.op in UNARY_OPS, self.op


@dataclass(frozen=True, eq=True)
class Cast(Expr):
    """`a` converted to `dtype` with torch's `.to` semantics."""

    a: Expr
    dtype: DType


@dataclass(frozen=True, eq=True)
class Select(Expr):
    """`a if cond else b`."""

    cond: Expr
    a: Expr
    b: Expr

    @property
    def dtype(self) -> DType:  # type: ignore[override]
        return self.a.dtype


@dataclass(frozen=True, eq=True)
class Fold(Expr):
    """`init <op> body(0) <op> ... <op> body(extent - 1)`, folded in the thread that reads it.

    A short row's statistic recomputed by each element that needs it (a head's RMS), so a row op
    can be inlined into its element-wise readers. `var` is bound inside `body` only; `extent` is
    free of it. `op` is a reassociable combiner ("add", "max", "min").
    """

    op: str
    var: str
    extent: Expr
    body: Expr
    init: Expr

    def __post_init__(self) -> None:
        assert self.op in ("add", "max", "min"), self.op

    @property
    def dtype(self) -> DType:  # type: ignore[override]
        return self.init.dtype


@dataclass(frozen=True, eq=False)
class Load(Expr):
    """The element of `buffer` at `index` (one i64 expression per dim, row-major compact)."""

    buffer: Any  # stmt.Buffer; typed loosely to keep the modules acyclic
    index: tuple[Expr, ...]

    @property
    def dtype(self) -> DType:  # type: ignore[override]
        return self.buffer.dtype

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Load) and other.buffer is self.buffer and other.index == self.index

    def __hash__(self) -> int:
        return hash((id(self.buffer), self.index))


def const(value: int | float | bool, dtype: DType) -> Const:
    """A literal of `dtype`, with the Python value normalized to that dtype's kind."""
    if dtype.is_bool:
        return Const(bool(value), boolean)
    if dtype.is_integer:
        return Const(int(value), dtype)
    return Const(float(value), dtype)


def _as_index(x: Expr | int) -> Expr:
    return Const(x, i64) if isinstance(x, int) else x


def _int(e: Expr) -> int | None:
    return e.value if isinstance(e, Const) and e.dtype is i64 else None  # type: ignore[return-value]


def add(a: Expr | int, b: Expr | int) -> Expr:
    """Index sum with folding: `x + 0 -> x`, `2 + 3 -> 5`."""
    a, b = _as_index(a), _as_index(b)
    ia, ib = _int(a), _int(b)
    if ia is not None and ib is not None:
        return Const(ia + ib)
    if ia == 0:
        return b
    if ib == 0:
        return a
    return Bin("add", a, b, a.dtype)


def sub(a: Expr | int, b: Expr | int) -> Expr:
    """Index difference with folding."""
    a, b = _as_index(a), _as_index(b)
    ia, ib = _int(a), _int(b)
    if ia is not None and ib is not None:
        return Const(ia - ib)
    if ib == 0:
        return a
    return Bin("sub", a, b, a.dtype)


def mul(a: Expr | int, b: Expr | int) -> Expr:
    """Index product with folding: `x * 1 -> x`, `x * 0 -> 0`."""
    a, b = _as_index(a), _as_index(b)
    ia, ib = _int(a), _int(b)
    if ia is not None and ib is not None:
        return Const(ia * ib)
    if ia == 1:
        return b
    if ib == 1:
        return a
    if ia == 0 or ib == 0:
        return Const(0)
    return Bin("mul", a, b, a.dtype)


def floordiv(a: Expr | int, b: Expr | int) -> Expr:
    """Index floor division (operands non-negative) with folding: `x // 1 -> x`."""
    a, b = _as_index(a), _as_index(b)
    ia, ib = _int(a), _int(b)
    if ia is not None and ib is not None:
        return Const(ia // ib)
    if ib == 1:
        return a
    return Bin("floordiv", a, b, a.dtype)


def mod(a: Expr | int, b: Expr | int) -> Expr:
    """Index modulo (operands non-negative) with folding: `x % 1 -> 0`."""
    a, b = _as_index(a), _as_index(b)
    ia, ib = _int(a), _int(b)
    if ia is not None and ib is not None:
        return Const(ia % ib)
    if ib == 1:
        return Const(0)
    return Bin("mod", a, b, a.dtype)


def minimum(a: Expr, b: Expr) -> Expr:
    """`min(a, b)` in a's dtype."""
    return Bin("min", a, b, a.dtype)


def maximum(a: Expr, b: Expr) -> Expr:
    """`max(a, b)` in a's dtype."""
    return Bin("max", a, b, a.dtype)


def binary(op: str, a: Expr, b: Expr) -> Expr:
    """Element arithmetic `a <op> b`; comparisons yield bool, the rest a's dtype."""
    return Bin(op, a, b, boolean if op in COMPARISONS else a.dtype)


def unary(op: str, a: Expr) -> Expr:
    """Element math `op(a)` in a's dtype."""
    return Un(op, a, a.dtype)


def cast(a: Expr, dtype: DType) -> Expr:
    """`a` as `dtype`; a no-op cast disappears and a literal converts in place."""
    if a.dtype is dtype:
        return a
    if isinstance(a, Const):
        return const(a.value, dtype)
    return Cast(a, dtype)


def dim_expr(d: Dim) -> Expr:
    """A dimension as an index expression; a DimVar becomes the Var of the same name."""
    if isinstance(d, int):
        return Const(d)
    if isinstance(d, DimVar):
        return Var(d.name)
    assert isinstance(d, DimExpr)
    total: Expr = Const(0)
    for monomial, coef in d.terms:
        term: Expr = Const(coef)
        for atom in monomial:
            if isinstance(atom, DivModAtom):
                inner = dim_expr(atom.expr)
                term = mul(term, floordiv(inner, atom.k) if atom.kind == "//" else mod(inner, atom.k))
            else:
                term = mul(term, Var(atom.name))
        total = add(total, term)
    return total


def children(e: Expr) -> tuple[Expr, ...]:
    """The direct subexpressions of `e`, in evaluation order."""
    if isinstance(e, Bin):
        return (e.a, e.b)
    if isinstance(e, (Un, Cast)):
        return (e.a,)
    if isinstance(e, Select):
        return (e.cond, e.a, e.b)
    if isinstance(e, Load):
        return e.index
    if isinstance(e, Fold):
        return (e.extent, e.body, e.init)
    return ()


def rebuild(e: Expr, kids: tuple[Expr, ...]) -> Expr:
    """`e` with its direct subexpressions replaced by `kids` (same arity as `children(e)`)."""
    if isinstance(e, Bin):
        return Bin(e.op, kids[0], kids[1], e.dtype)
    if isinstance(e, Un):
        return Un(e.op, kids[0], e.dtype)
    if isinstance(e, Cast):
        return Cast(kids[0], e.dtype)
    if isinstance(e, Select):
        return Select(*kids)
    if isinstance(e, Load):
        return Load(e.buffer, kids)
    if isinstance(e, Fold):
        return Fold(e.op, e.var, *kids)
    return e


def transform(e: Expr, fn: Callable[[Expr], Expr | None]) -> Expr:
    """Rewrite bottom-up: `fn` returns a replacement for a node, or None to keep it."""
    kids = children(e)
    if kids:
        new = tuple(transform(k, fn) for k in kids)
        if any(n is not k for n, k in zip(new, kids, strict=True)):
            e = rebuild(e, new)
    out = fn(e)
    return e if out is None else out


def substitute(e: Expr, mapping: dict[str, Expr]) -> Expr:
    """`e` with each Var named in `mapping` replaced."""
    return transform(e, lambda x: mapping.get(x.name) if isinstance(x, Var) else None)


def walk(e: Expr) -> list[Expr]:
    """Every node of `e`, children before parents."""
    out: list[Expr] = []
    for k in children(e):
        out.extend(walk(k))
    out.append(e)
    return out


def free_vars(e: Expr) -> set[str]:
    """Names of the Vars `e` reads (a Fold's own variable is bound, not free)."""
    if isinstance(e, Fold):
        return free_vars(e.extent) | free_vars(e.init) | (free_vars(e.body) - {e.var})
    out: set[str] = {e.name} if isinstance(e, Var) else set()
    for k in children(e):
        out |= free_vars(k)
    return out


def loads(e: Expr) -> list[Load]:
    """The Loads of `e`."""
    return [x for x in walk(e) if isinstance(x, Load)]


def known_multiple(e: Expr) -> int:
    """The largest n that the index expression `e` is a multiple of whatever its variables hold
    (0 for the constant 0, 1 where nothing is known): products multiply, sums and either branch
    of a select keep the common divisor, an exact division divides it."""
    if isinstance(e, Const):
        return abs(e.value) if e.dtype is i64 else 1  # type: ignore[arg-type]
    if isinstance(e, Select):
        return math.gcd(known_multiple(e.a), known_multiple(e.b))
    if not isinstance(e, Bin):
        return 1
    a, b, divisor = known_multiple(e.a), known_multiple(e.b), _int(e.b)
    if e.op == "mul":
        return a * b
    if e.op in ("add", "sub"):
        return math.gcd(a, b)
    if e.op == "floordiv" and divisor and divisor > 0 and a % divisor == 0:
        return a // divisor
    if e.op == "mod" and divisor:
        return math.gcd(a, divisor)
    return 1


def identity(combiner: str, dtype: DType) -> Const:
    """The value a fold with `combiner` ("add", "max", "min") starts from in `dtype`."""
    if dtype.is_float:
        return const({"add": 0.0, "max": -math.inf, "min": math.inf}[combiner], dtype)
    info = {"add": 0, "max": -(2 ** (dtype.bits - 1)), "min": 2 ** (dtype.bits - 1) - 1}
    if dtype.kind == "uint":
        info.update(max=0, min=2**dtype.bits - 1)
    return const(info[combiner], dtype)


def fold(op: str, extent: Expr, body: Callable[[Var], Expr], init: Expr) -> Fold:
    """`Fold` of `body(r)` over `r` in [0, extent).

    The variable is named after the Folds nested in the body (`f0_` holds none, `f1_` holds an
    `f0_` fold), so a Fold never captures one inside it and equal Folds get equal names: two
    reads of one row's statistic are one value to hoist.
    """
    placeholder = "fold?"
    built = body(Var(placeholder))
    depth = max((int(x.var[1:-1]) + 1 for x in walk(built) if isinstance(x, Fold)), default=0)
    name = f"f{depth}_"
    return Fold(op, name, extent, substitute(built, {placeholder: Var(name)}), init)


def compute_dtype(dtype: DType) -> DType:
    """The dtype element arithmetic runs in: f32 for 16-bit and 8-bit floats."""
    return f32 if dtype.is_float and dtype.bits < 32 else dtype
