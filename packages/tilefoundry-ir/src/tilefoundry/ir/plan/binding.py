"""Execution binding: logical loops -> the target's execution axes, read from its catalog.

For each kernel:
- the outermost perfectly nested `parallel` loops bind to the axis that binds logical
  `worker` scopes (a thread team on CPU), as one collapsed region;
- the innermost independent (`parallel`) axis binds to the axis that binds `vector`: packs of
  the catalog's lane count for its dtype plus a scalar tail. Scalars declared inside become
  lane-private, so a serial K loop inside each output element stays serial;
- an innermost `reduce` loop vectorizes with lane-private partial carries only when its
  combination may be reassociated (max/min always, sums when the op or the options allow);
- a domain with a single parallel axis is strip-mined: chunks to workers, lanes inside.

Explicit requests (the author's Mesh scope, compile options) fail closed with a PlanError naming
what blocked them; nothing is silently dropped. Each decision is recorded on the kernel.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from ..dtypes import DType, f32
from ..errors import PlanError
from ..target.catalog import TargetCatalog, VectorAtom
from ..target.options import REASSOCIATE, VECTORIZE
from ..tile.expr import Const, Expr, Load, Var, add, floordiv, free_vars, minimum, mul, sub, walk
from ..tile.stmt import (
    Alloc,
    Assign,
    AtomCall,
    Check,
    For,
    Kernel,
    Let,
    Program,
    Seq,
    Stmt,
    Store,
    map_stmt,
    stmt_exprs,
    substitute_stmt,
    walk_stmts,
)

# Elements per worker chunk when a one-axis domain is strip-mined.
CHUNK = 4096


def _axis_for(catalog: TargetCatalog, scope: str) -> str | None:
    return next((a.name for a in catalog.exec_axes if scope in a.binds), None)


def vector_atom(catalog: TargetCatalog, dtype: DType) -> VectorAtom | None:
    """The widest vector atom for `dtype`; 16-bit floats compute in f32 lanes."""
    name = "f32" if dtype.is_float and dtype.bits < 32 else dtype.name
    atoms = [a for a in catalog.atoms_of("vector") if isinstance(a, VectorAtom) and a.dtype == name]
    return max(atoms, key=lambda a: a.lanes) if atoms else None


def _loop_dtype(body: Stmt) -> DType:
    for s in walk_stmts(body):
        if isinstance(s, (Store, Assign)):
            return s.value.dtype
    return f32


def vector_blocker(loop: For) -> str | None:
    """Why `loop` cannot take a vector binding, or None when it can."""
    for s in walk_stmts(loop.body):
        if isinstance(s, Alloc):
            return f"its body allocates scratch {s.buffer.name}"
        if isinstance(s, Check):
            return "its body validates data-dependent indices"
        if isinstance(s, AtomCall):
            return f"its body is the atom {s.atom}"
        if s is not loop and isinstance(s, For) and s.kind == "parallel":
            return f"it contains the parallel loop {s.var}"
    return None


def _indices(s: Stmt) -> list[tuple[Expr, ...]]:
    out = [ld.index for e in stmt_exprs(s) for ld in walk(e) if isinstance(ld, Load)]
    if isinstance(s, Store):
        out.append(s.index)
    return out


def contiguous(loop: For) -> bool:
    """Every access of the body moves along its last dim only as `loop.var` moves."""
    return all(
        not any(loop.var in free_vars(i) for i in idx[:-1])
        for s in walk_stmts(loop.body)
        for idx in _indices(s)
    )


def simple_fold(loop: For) -> bool:
    """A reduce loop whose body only declares values and folds each carry with its combiner."""
    carries = dict(loop.carries)
    body = loop.body.body if isinstance(loop.body, Seq) else (loop.body,)
    for s in body:
        if isinstance(s, Let) and not s.mutable:
            continue
        if isinstance(s, Assign) and carries.get(s.name) in ("add", "max", "min"):
            v = s.value
            if getattr(v, "op", None) == carries[s.name] and getattr(v, "a", None) == Var(s.name, v.dtype):
                continue
        return False
    return True


def strip_mine(loop: For, chunk: int, reserved: frozenset[str] = frozenset()) -> For:
    """`for i in 0..n` -> `for io in 0..ceil(n/chunk): for ii in 0..min(chunk, n - io*chunk)`.

    The new names take as many trailing `_` as needed to avoid `reserved` (the DimVar names).
    """
    outer, inner = f"{loop.var}o", f"{loop.var}i"
    while outer in reserved or inner in reserved:
        outer, inner = outer + "_", inner + "_"
    start = mul(Var(outer), chunk)
    body = substitute_stmt(loop.body, {loop.var: add(start, Var(inner))})
    inner_loop = For(inner, minimum(Const(chunk), sub(loop.extent, start)), body, "parallel")
    return For(outer, floordiv(add(loop.extent, chunk - 1), chunk), inner_loop, "parallel")


class _KernelPlan:
    def __init__(
        self,
        kernel: Kernel,
        catalog: TargetCatalog,
        options: Mapping[str, Any],
        reserved: frozenset[str] = frozenset(),
    ):
        self.k = kernel
        self.reserved = reserved
        self.catalog = catalog
        self.vectorize = VECTORIZE.read(options)
        self.reassociate = REASSOCIATE.read(options)
        self.worker_axis = _axis_for(catalog, "worker")
        self.vector_axis = _axis_for(catalog, "vector")
        self.requested = set(kernel.request)

    def refuse(self, what: str, why: str) -> PlanError:
        origin = f" ({', '.join(self.k.origin)})" if self.k.origin else ""
        return PlanError(
            f"{self.catalog.target}: kernel {self.k.name}{origin}: explicit {what} refused: {why}",
            where=self.k.name,
            expected=what,
            got=why,
        )

    def check_requests(self) -> None:
        axes = [a.name for a in self.catalog.exec_axes]
        for name in sorted(self.requested):
            if name not in axes:
                raise self.refuse(
                    f"placement on '{name}'", f"the target's execution axes are {', '.join(axes)}"
                )
        if "vector" in self.requested and not self.vectorize:
            raise self.refuse("vector binding", "vectorize=False cannot override an explicit vector request")

    def plan(self) -> None:
        self.check_requests()
        self.vectored = False
        if self.k.form == "index check":
            self.k.body = map_stmt(self.k.body, _serial)
            self.k.decisions.append("serial: validates data-dependent indices before any read")
            return
        self.k.body = self.bind_workers(self.k.body)
        if self.vectorize and self.vector_axis is not None:
            self.k.body = map_stmt(self.k.body, self.bind_vectors)
        self.k.body = map_stmt(self.k.body, _serial)
        if "vector" in self.requested and not self.vectored:
            raise self.refuse(
                "vector binding",
                "no innermost independent axis could take it: "
                + (self.why_not or "the kernel has no parallel loop"),
            )

    def bind_workers(self, body: Stmt) -> Stmt:
        if self.worker_axis is None or not isinstance(body, For) or body.kind != "parallel":
            self.k.decisions.append("serial outer loop: no outer parallel region")
            return body
        chain = [body]
        while isinstance(chain[-1].body, For) and chain[-1].body.kind == "parallel":
            chain.append(chain[-1].body)
        last = chain[-1]
        has_inner = any(isinstance(x, For) for x in walk_stmts(last.body))
        # NOTE: without a vector axis (a GPU) nothing would take the lanes: every axis goes to workers.
        lanes_fit = (
            self.vectorize
            and self.vector_axis is not None
            and vector_blocker(last) is None
            and (not has_inner or contiguous(last))
        )
        if len(chain) == 1 and lanes_fit and not has_inner:
            body = strip_mine(body, CHUNK, self.reserved)
            chain = [body]
            self.k.decisions.append(f"strip-mined {last.var} into worker chunks of {CHUNK} elements")
        elif len(chain) > 1 and lanes_fit:
            chain = chain[:-1]  # the last independent axis stays for the vector lanes
        names = [c.var for c in chain]
        self.k.decisions.append(
            f"{self.worker_axis}: loops {', '.join(names)} (outer independent axes, collapsed)"
        )
        return _rebind(body, set(names), "worker", 1)

    def bind_vectors(self, s: Stmt) -> Stmt | None:
        if not isinstance(s, For) or s.binding == "worker" or s.binding == "vector":
            return None
        inner_for = [c for c in walk_stmts(s.body) if isinstance(c, For)]
        if s.kind == "parallel":
            blocker = vector_blocker(s)
            if blocker is None and (not inner_for or contiguous(s)):
                return self.vector(
                    s,
                    "innermost independent axis"
                    + ("; inner loops stay serial per lane (lane-private carries)" if inner_for else ""),
                )
            self.why_not = blocker or f"{s.var} strides across lanes"
            return None
        if s.kind == "reduce" and not inner_for:
            may = s.reassociable or self.reassociate
            if may and simple_fold(s):
                why = "op allows reassociation" if s.reassociable else "options allow reassociation"
                return self.vector(s, f"reduction with lane-private partial carries ({why})")
            if not may:
                self.k.decisions.append(
                    f"{s.var}: reduction kept in order (its op does not allow reassociation)"
                )
        return None

    def vector(self, loop: For, why: str) -> For:
        atom = vector_atom(self.catalog, _loop_dtype(loop.body))
        if atom is None:
            self.why_not = f"the catalog has no vector atom for {_loop_dtype(loop.body)}"
            return loop
        self.vectored = True
        self.k.decisions.append(
            f"{self.vector_axis} x{atom.lanes} ({atom.name}): {loop.var}, {why}; scalar tail"
        )
        body = map_stmt(loop.body, _serial)
        return dataclasses.replace(loop, binding="vector", width=atom.lanes, body=body)

    why_not: str | None = None
    vectored: bool = False


def _serial(s: Stmt) -> Stmt | None:
    if isinstance(s, For) and s.binding is None:
        return dataclasses.replace(s, binding="serial", body=map_stmt(s.body, _serial))
    return None


def _rebind(s: Stmt, names: set[str], binding: str, width: int) -> Stmt:
    def one(x: Stmt) -> Stmt | None:
        if isinstance(x, For) and x.var in names:
            return dataclasses.replace(x, binding=binding, width=width, body=map_stmt(x.body, one))
        return None

    return map_stmt(s, one)


def bind_execution(program: Program, catalog: TargetCatalog, options: Mapping[str, Any]) -> Program:
    """Bind every kernel's loops to the catalog's axes; the program becomes Scheduled."""
    reserved = frozenset(d.var.name for d in program.dims)
    for k in program.kernels:
        _KernelPlan(k, catalog, options, reserved).plan()
    program.stage = "scheduled"
    return program
