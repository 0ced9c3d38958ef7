"""The lowering contract: the `lower` registry, operands, and the two forms a rule returns.

Every op class has one lowering rule, registered next to its family's other rules. A rule
receives the op, its result type, and one `Operand` per input, and returns either

- `Compute(expr)`: the result element at an index, as a scalar expression over the operands'
  elements. Pointwise math, broadcasting, transposes, slices, gathers are all `Compute`: an index
  map, never a copy. A `Compute` producer can be inlined into its consumers; or
- `Nest(build)`: an explicit loop nest writing the whole result buffer (reductions, matmul,
  softmax, norms, attention). Its operands may still be inlined pointwise producers.

    @lower.register(Exp)
    def _(op, t, x):
        return Compute(lambda idx: unary("exp", x.at(idx)))
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass, field

from ..dims import Dim
from ..dtypes import DType
from ..ops.base import Registry
from ..tile.expr import Expr, Var, dim_expr
from ..tile.stmt import Buffer, For, Stmt
from ..types import TensorType

lower = Registry("lowering")

Index = tuple[Expr, ...]


@dataclass(eq=False)
class Operand:
    """One input of a rule: its type and how to read its element at an index.

    Attributes:
        at: the element at an index (a Load from `buffer`, or an inlined producer's expression).
        buffer: the compact row-major buffer holding the value, when it is materialized; atoms
            that need memory (a library GEMM) are only selected when it is set.
    """

    type: TensorType
    at: Callable[[Index], Expr]
    buffer: Buffer | None = None

    @property
    def shape(self) -> tuple[Dim, ...]:
        return self.type.shape

    @property
    def dtype(self) -> DType:
        return self.type.dtype


@dataclass(frozen=True)
class IndexCheck:
    """Data-dependent indices the compiled code validates before use.

    Every element of `operand` must lie in `[lo, hi)`; otherwise the call raises `message`
    followed by the offending value (the evaluator refuses the same inputs).
    """

    operand: Operand
    lo: Dim
    hi: Dim
    message: str


@dataclass(frozen=True)
class Update:
    """The result is `source` with `length` elements along `axis` from `start` replaced (cache_update).

    Recorded on the kernel that stores such a result (`tile.stmt.RegionUpdate`) so the
    update-in-place pass can recognise it without reading the element expression.
    """

    source: Operand
    axis: int
    start: Expr
    length: Dim


@dataclass(frozen=True)
class Compute:
    """The result element at an index: `expr(index) -> Expr` in the result dtype.

    Attributes:
        checks: index validations that must pass before any element is read.
        update: set when the result equals one operand outside a region the rule writes.
    """

    expr: Callable[[Index], Expr]
    checks: tuple[IndexCheck, ...] = ()
    update: Update | None = None


@dataclass(frozen=True)
class Nest:
    """An explicit loop nest: `build(out, ctx) -> Stmt` writes every element of buffer `out`.

    Attributes:
        form: what the kernel is, for printing and planning ("reduction", "row", "contraction").
        materialize: indices of operands the nest wants in memory rather than inlined (a
            contraction reads each operand element many times).
        checks: index validations that must pass before the nest runs.
        recompute: the result element as an expression that folds its row's statistics itself
            (a `Fold`), for rows short enough to recompute: the partition may inline such a row
            op into element-wise readers instead of giving it a kernel.
        element: the same expression for a row of any length: the kernel keeps it
            (`Kernel.element`) for a reader that folds the statistics in a loop of its own over
            the row (a GEMV's K loop, `codegen.cuda.gemm_prologue`).
    """

    build: Callable[[Buffer, NestContext], Stmt]
    form: str
    materialize: tuple[int, ...] = ()
    checks: tuple[IndexCheck, ...] = ()
    recompute: Callable[[Index], Expr] | None = None
    element: Callable[[Index], Expr] | None = None


@dataclass
class NestContext:
    """Fresh names and scratch buffers for a rule building a loop nest.

    Attributes:
        reserved: names a fresh name must never take: the function's DimVars, which TileIR
            reads as Vars of the same name (a DimVar called `i0` must not meet loop `i0`).
    """

    prefix: str = ""
    reserved: frozenset[str] = frozenset()
    _counter: itertools.count = field(default_factory=itertools.count)

    def fresh(self, stem: str) -> str:
        """A name unique within the kernel and not reserved: `acc3`."""
        while True:
            name = f"{stem}{next(self._counter)}"
            if name not in self.reserved:
                return name

    def var(self, stem: str) -> Var:
        """A fresh i64 loop variable."""
        return Var(self.fresh(stem))

    def scratch(self, stem: str, dtype: DType, shape: tuple[Dim, ...]) -> Buffer:
        """A kernel-local buffer (declare it with `Alloc`)."""
        return Buffer(self.fresh(f"{self.prefix}{stem}"), dtype, shape, "local")


def loop_nest(
    ctx: NestContext,
    shape: tuple[Dim, ...],
    body: Callable[[Index], Stmt],
    kind: str = "parallel",
    stem: str = "i",
) -> Stmt:
    """`for i0 in 0..shape[0]: for i1 ...: body((i0, i1, ...))`; a rank-0 shape runs body once."""
    names = [ctx.fresh(stem) for _ in shape]
    stmt = body(tuple(Var(n) for n in names))
    for name, d in reversed(list(zip(names, shape, strict=True))):
        stmt = For(name, dim_expr(d), stmt, kind)
    return stmt


def broadcast_index(idx: Index, out_shape: tuple[Dim, ...], in_shape: tuple[Dim, ...]) -> Index:
    """The operand index for a numpy-broadcast read: trailing alignment, static 1 reads index 0."""
    offset = len(out_shape) - len(in_shape)
    out: list[Expr] = []
    for k, d in enumerate(in_shape):
        i = idx[offset + k]
        out.append(i if not (isinstance(d, int) and d == 1) else dim_expr(0))
    return tuple(out)


def read(x: Operand, idx: Index, out_shape: tuple[Dim, ...]) -> Expr:
    """`x`'s element for result index `idx`, broadcasting `x` to `out_shape`."""
    return x.at(broadcast_index(idx, out_shape, x.shape))
