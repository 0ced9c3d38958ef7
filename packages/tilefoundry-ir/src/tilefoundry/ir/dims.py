"""Dimensions: ints, dynamic `DimVar`s, and simple integer arithmetic over them.

A dimension (`Dim`) is an `int`, a `DimVar`, or a `DimExpr` — a canonical polynomial over
DimVars (and floor-division/modulo atoms) with integer coefficients. Canonical form makes
structural equality and the printed text deterministic:

    T = DimVar("tokens", 1, 8193)
    T * 2 + 1 - T      # -> T + 1  (a DimExpr)
    (T * 4) // 2       # -> 2*T
    T + 1 - T - 1      # -> 0      (an int)
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass


class _Arith:
    """Integer arithmetic shared by DimVar and DimExpr; results are simplified Dims."""

    def __add__(self, other: Dim) -> Dim:
        return _add(_poly(self), _poly(other))

    __radd__ = __add__

    def __sub__(self, other: Dim) -> Dim:
        return _add(_poly(self), _scale(_poly(other), -1))

    def __rsub__(self, other: Dim) -> Dim:
        return _add(_poly(other), _scale(_poly(self), -1))

    def __mul__(self, other: Dim) -> Dim:
        return _mul(_poly(self), _poly(other))

    __rmul__ = __mul__

    def __neg__(self) -> Dim:
        return _simplify(_scale(_poly(self), -1))

    def __floordiv__(self, other: int) -> Dim:
        return _divmod_atom("//", self, other)

    def __mod__(self, other: int) -> Dim:
        return _divmod_atom("%", self, other)


@dataclass(frozen=True, eq=True)
class DimVar(_Arith):
    """A dynamic dimension with half-open bounds `[lo, hi)`.

    Example: `T = DimVar("tokens", 1, 8193)` admits extents 1 through 8192.
    """

    name: str
    lo: int
    hi: int

    def __post_init__(self) -> None:
        if not self.name.isidentifier():
            raise ValueError(f"DimVar name {self.name!r} must be an identifier")
        if not (isinstance(self.lo, int) and isinstance(self.hi, int)) or self.lo < 0 or self.hi <= self.lo:
            raise ValueError(
                f"DimVar {self.name!r}: bounds must be ints with 0 <= lo < hi, got [{self.lo}, {self.hi})"
            )

    def admits(self, extent: int) -> bool:
        return self.lo <= extent < self.hi

    def __repr__(self) -> str:
        return self.name


@dataclass(frozen=True)
class DivModAtom:
    """`expr // k` or `expr % k` kept symbolic because `expr` is not a multiple of `k`."""

    kind: str  # "//" or "%"
    expr: Dim
    k: int

    def __repr__(self) -> str:
        inner = format_dim(self.expr)
        inner = inner if isinstance(self.expr, (int, DimVar)) else f"({inner})"
        return f"({inner} {self.kind} {self.k})"


Atom = DimVar | DivModAtom
Monomial = tuple  # sorted tuple of Atoms
# A polynomial: {monomial: coefficient}; the empty monomial holds the constant.
_Poly = dict


@dataclass(frozen=True)
class DimExpr(_Arith):
    """A canonical non-trivial polynomial over atoms. Build it through arithmetic, not directly."""

    terms: tuple  # ((monomial, coef), ...) sorted by the monomial's text

    def __repr__(self) -> str:
        return format_dim(self)


Dim = int | DimVar | DimExpr


def _key(atom: Atom) -> str:
    return repr(atom)


def _poly(d: object) -> _Poly:
    if isinstance(d, bool) or not isinstance(d, (int, DimVar, DimExpr)):
        raise TypeError(f"dimension arithmetic takes ints and DimVars, got {type(d).__name__} {d!r}")
    if isinstance(d, int):
        return {(): d} if d else {}
    if isinstance(d, DimVar):
        return {(d,): 1}
    return dict(d.terms)


def _add(a: _Poly, b: _Poly) -> Dim:
    out = dict(a)
    for m, c in b.items():
        out[m] = out.get(m, 0) + c
    return _simplify(out)


def _scale(a: _Poly, k: int) -> _Poly:
    return {m: c * k for m, c in a.items()}


def _mul(a: _Poly, b: _Poly) -> Dim:
    out: _Poly = {}
    for ma, ca in a.items():
        for mb, cb in b.items():
            m = tuple(sorted(ma + mb, key=_key))
            out[m] = out.get(m, 0) + ca * cb
    return _simplify(out)


def _simplify(p: _Poly) -> Dim:
    p = {m: c for m, c in p.items() if c}
    if not p:
        return 0
    if list(p) == [()]:
        return p[()]
    if len(p) == 1:
        ((m, c),) = p.items()
        if c == 1 and len(m) == 1 and isinstance(m[0], DimVar):
            return m[0]
    return DimExpr(tuple(sorted(p.items(), key=lambda mc: (len(mc[0]), ",".join(map(_key, mc[0]))))))


def _divmod_atom(kind: str, expr: Dim, k: object) -> Dim:
    if isinstance(k, bool) or not isinstance(k, int) or k <= 0:
        raise TypeError(f"dimension {kind} takes a positive int divisor, got {k!r}")
    p = _poly(expr)
    if all(c % k == 0 for c in p.values()):
        return _simplify({m: c // k for m, c in p.items()}) if kind == "//" else 0
    return _simplify({(DivModAtom(kind, expr, k),): 1})


def is_static(d: Dim) -> bool:
    """True for a plain int extent."""
    return isinstance(d, int)


def dim_vars(d: Dim) -> set[DimVar]:
    """The DimVars a dimension mentions."""
    out: set[DimVar] = set()
    for m in _poly(d):
        for a in m:
            out |= {a} if isinstance(a, DimVar) else dim_vars(a.expr)
    return out


def evaluate_dim(d: Dim, bindings: Mapping[DimVar, int]) -> int:
    """The integer value of `d` under `bindings`; KeyError names an unbound DimVar."""
    total = 0
    for m, c in _poly(d).items():
        v = c
        for a in m:
            if isinstance(a, DimVar):
                if a not in bindings:
                    raise KeyError(f"DimVar {a.name!r} is not bound")
                v *= bindings[a]
            else:
                inner = evaluate_dim(a.expr, bindings)
                v *= inner // a.k if a.kind == "//" else inner % a.k
        total += v
    return total


def dims_equal(a: Dim, b: Dim) -> bool:
    """Structural equality after canonicalization (T*2 == T+T)."""
    return _poly(a) == _poly(b)


def dim_bounds(d: Dim) -> tuple[int, int] | None:
    """Inclusive [min, max] of `d` over its DimVars' ranges, or None when not monotone-linear."""
    lo = hi = 0
    for m, c in _poly(d).items():
        if not m:
            lo, hi = lo + c, hi + c
            continue
        if len(m) != 1 or not isinstance(m[0], DimVar):
            return None
        v = m[0]
        a, b = c * v.lo, c * (v.hi - 1)
        lo, hi = lo + min(a, b), hi + max(a, b)
    return lo, hi


def format_dim(d: Dim) -> str:
    """Deterministic text of a dimension: `tokens`, `2*tokens + 1`, `(tokens // 2)`."""
    if isinstance(d, int):
        return str(d)
    if isinstance(d, DimVar):
        return d.name
    parts = []
    const = 0
    for m, c in d.terms:
        if not m:
            const = c
            continue
        body = "*".join(repr(a) for a in m)
        parts.append((c, body if c == 1 else f"-{body}" if c == -1 else f"{c}*{body}"))
    text = ""
    for i, (c, p) in enumerate(parts):
        text += p if i == 0 else (f" - {p[1:]}" if c < 0 else f" + {p}")
    if const:
        text += f" - {-const}" if const < 0 else f" + {const}"
    return text
