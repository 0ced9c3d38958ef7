"""TileIR statements, buffers, kernels and programs.

A `Program` is one HIR function lowered: its parameter buffers (inputs, then outputs), the
temporary buffers between kernels, and the kernels in execution order. A `Kernel` body is a loop
nest of `For` statements over `Store`s and scalar updates.

The same classes hold both forms. In *Candidate* TileIR a loop says only what it logically is
(`parallel`: independent iterations; `reduce`: an ordered carry; `serial`); planning turns it
into *Scheduled* TileIR by setting `binding` (`worker`, `vector`, `serial`), a vector `width`,
and by replacing proved regions with `AtomCall`s.

    kernel k0_exp  [element grid (T, 64)]
      for i0 in 0..T parallel:
        for i1 in 0..64 parallel:
          out[i0, i1] = exp(x[i0, i1])
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from ..dims import Dim, DimVar
from ..dtypes import DType
from .expr import Expr, Var, substitute

ROLES = ("input", "output", "temp", "local")
LOOP_KINDS = ("parallel", "reduce", "serial")
BINDINGS = ("worker", "vector", "serial")


@dataclass(eq=False)
class Buffer:
    """A compact row-major tensor in memory.

    Attributes:
        role: "input"/"output" (entry parameters), "temp" (between kernels, allocated by the
            host entry), or "local" (kernel scratch, declared by an `Alloc`).
        shape: extents; DimVars stay symbolic and are read from parameter shapes at run time.
    """

    name: str
    dtype: DType
    shape: tuple[Dim, ...]
    role: str = "temp"

    def __post_init__(self) -> None:
        assert self.role in ROLES, self.role

    @property
    def rank(self) -> int:
        return len(self.shape)

    def __repr__(self) -> str:
        return f"Buffer({self.name})"


class Stmt:
    """Base of statements."""


@dataclass(eq=False)
class Seq(Stmt):
    """Statements in order."""

    body: tuple[Stmt, ...]


@dataclass(eq=False)
class For(Stmt):
    """`for var in 0..extent` with a logical kind and, once scheduled, a binding.

    Attributes:
        kind: "parallel" (iterations independent), "reduce" (an ordered carry of
            `carries`), or "serial".
        reassociable: on a reduce loop, the op allows its carries' combination to be
            reassociated (max/min always may; a sum only when the op or options say so).
        carries: on a reduce loop, (scalar name, combiner) pairs, combiner one of
            add max min, or argmax on both the value and the index of an argmax scan.
        binding / width: the schedule: "worker" (thread team), "vector" (packs of `width` lanes
            plus a scalar tail), "serial"; None while Candidate.
        request: an explicit binding the author asked for (fails closed when not honored).
    """

    var: str
    extent: Expr
    body: Stmt
    kind: str = "parallel"
    reassociable: bool = False
    carries: tuple[tuple[str, str], ...] = ()
    binding: str | None = None
    width: int = 1
    request: str | None = None

    def __post_init__(self) -> None:
        assert self.kind in LOOP_KINDS, self.kind
        assert self.binding is None or self.binding in BINDINGS, self.binding


@dataclass(eq=False)
class Store(Stmt):
    """`buffer[index] = value` (value converted to the buffer's dtype)."""

    buffer: Buffer
    index: tuple[Expr, ...]
    value: Expr


@dataclass(eq=False)
class Let(Stmt):
    """Declare scalar `name` = `value`; `mutable` scalars may be `Assign`ed later (accumulators)."""

    name: str
    value: Expr
    mutable: bool = False

    @property
    def var(self) -> Var:
        return Var(self.name, self.value.dtype)


@dataclass(eq=False)
class Assign(Stmt):
    """Update a mutable scalar."""

    name: str
    value: Expr


@dataclass(eq=False)
class If(Stmt):
    """`if cond: then else: orelse`."""

    cond: Expr
    then: Stmt
    orelse: Stmt | None = None


@dataclass(eq=False)
class Check(Stmt):
    """Raise at run time unless `cond` holds: `message` then the value of `shown`.

    Only in serial code (data-dependent index validation); planning never binds its loops.
    """

    cond: Expr
    message: str
    shown: Expr


@dataclass(eq=False)
class Alloc(Stmt):
    """Kernel-local scratch `buffer` (role "local"), live for `body`."""

    buffer: Buffer
    body: Stmt


@dataclass(eq=False)
class AtomCall(Stmt):
    """A proved region realized as one opaque atom (e.g. a whole GEMM as one library call).

    Attributes:
        atom: the catalog name of the atom.
        operands: buffer operands, in the atom's order.
        params: the atom's scalar parameters (extents, transposes, strides) as expressions.
        replaces: the Candidate statement it stands for (kept for printing and re-checking).
        epilogue: an element-grid kernel over the atom's output coordinates that the atom may
            apply to its results before they reach memory (`ir.plan.gemm_epilogues`); the
            kernel stays in the program and runs on its own when the atom does not.
        prologue: the row kernel writing the atom's A, which the atom may compute itself
            instead (`ir.plan.gemm_prologues`); it stays in the program and runs on its own,
            before the atom, when the atom will not.
        chain: the GEMM kernel whose atom reads this atom's epilogue output, which the target
            may run with this atom as one (`ir.plan.gemm_chains`); it stays in the program and
            runs after the epilogue, as before, when the target does not.
    """

    atom: str
    operands: tuple[Buffer, ...]
    params: dict[str, Expr]
    replaces: Stmt
    epilogue: Kernel | None = None
    prologue: Kernel | None = None
    chain: Kernel | None = None


def statements(s: Stmt) -> tuple[Stmt, ...]:
    """The top-level statements of `s`: a Seq's body, else `s` alone."""
    return s.body if isinstance(s, Seq) else (s,)


def seq(*stmts: Stmt | None) -> Stmt:
    """A Seq of the non-None statements, flattening nested Seqs; one statement stays itself."""
    flat: list[Stmt] = []
    for s in stmts:
        if s is None:
            continue
        flat.extend(statements(s))
    return flat[0] if len(flat) == 1 else Seq(tuple(flat))


def child_stmts(s: Stmt) -> tuple[Stmt, ...]:
    """The direct sub-statements of `s`."""
    if isinstance(s, Seq):
        return s.body
    if isinstance(s, (For, Alloc)):
        return (s.body,)
    if isinstance(s, If):
        return (s.then,) if s.orelse is None else (s.then, s.orelse)
    return ()


def walk_stmts(s: Stmt) -> Iterator[Stmt]:
    """Every statement of `s`, parents before children."""
    yield s
    for c in child_stmts(s):
        yield from walk_stmts(c)


def map_stmt(s: Stmt, fn: Callable[[Stmt], Stmt | None]) -> Stmt:
    """Rewrite top-down: `fn` returns a replacement (not revisited) or None to recurse."""
    out = fn(s)
    if out is not None:
        return out
    if isinstance(s, Seq):
        return Seq(tuple(map_stmt(c, fn) for c in s.body))
    if isinstance(s, (For, Alloc)):
        return dataclasses.replace(s, body=map_stmt(s.body, fn))
    if isinstance(s, If):
        return If(s.cond, map_stmt(s.then, fn), None if s.orelse is None else map_stmt(s.orelse, fn))
    return s


def stmt_exprs(s: Stmt) -> tuple[Expr, ...]:
    """The expressions `s` itself evaluates (not those of its children)."""
    if isinstance(s, For):
        return (s.extent,)
    if isinstance(s, Store):
        return (*s.index, s.value)
    if isinstance(s, (Let, Assign)):
        return (s.value,)
    if isinstance(s, If):
        return (s.cond,)
    if isinstance(s, Check):
        return (s.cond, s.shown)
    if isinstance(s, AtomCall):
        return tuple(s.params.values())
    return ()


@dataclass(frozen=True)
class MeshCut:
    """One mesh axis of a kernel's explicit placement: which instance loop it cuts (seed 000 §2.3, §2.10).

    Instance `id` of `topology` sits at coordinate `(id / stride) % extent` on this axis; that
    coordinate picks one of `extent` contiguous blocks of ceil(n / extent) iterations of instance
    loop `loop` (of extent n), the same cut `local()` makes of a Split tensor axis.

    Attributes:
        axis: the mesh axis name (`cta`, `thread0`).
        topology: the topology level whose ids the axis reads.
        extent: instances along the axis.
        stride: the axis' stride within its topology's ids (the mesh layout's stride).
        loop: the instance loop it cuts (0 = outermost), or None when its layout does not split
            the kernel's domain into blocks; `attr` then says what it does instead.
        depth: among the axes cutting one loop, 0 cuts the largest blocks.
        attr: the layout's shard attribute on this axis, as text (`Split(1)`, `Broadcast`).
    """

    axis: str
    topology: str
    extent: int
    stride: int
    loop: int | None
    depth: int = 0
    attr: str = ""

    def __str__(self) -> str:
        cut = f"cuts loop {self.loop}" + (f" (depth {self.depth})" if self.depth else "")
        text = f"{self.axis}:{self.extent} {cut if self.loop is not None else 'cuts no loop'}"
        return f"{text} [{self.attr}]" if self.attr else text


@dataclass(frozen=True, eq=False)
class RegionUpdate:
    """Output `output` equals input `source` except where its kernel writes it: a region along `axis`.

    Lowering records one for each `cache_update` result an element grid stores (the fact); the
    update-in-place pass (`ir.plan.in_place`) keeps only those it proves may run in place, where
    a code generator may, when the caller passes `output` as the very tensor `source`, run only
    the region: the kernel's loop over `axis` from `start` for `length` iterations.

    Attributes:
        start: the region's first index, an expression over inputs and DimVars only (the same on
            every instance); it runs for `length` indices.
    """

    output: Buffer
    source: Buffer
    axis: int
    start: Expr
    length: Dim


@dataclass(eq=False)
class Kernel:
    """One kernel of a program.

    Attributes:
        name: unique within the program (`k0_softmax`).
        form: what the kernel is, for printing and planning ("element grid", "reduction",
            "contraction", "row", "attention", ...).
        body: the loop nest.
        reads / writes: the buffers it reads and writes (parameters and temporaries).
        origin: the HIR ops it realizes, `op@file:line`, for diagnostics.
        request: an explicit placement (execution axis names) from the author's Mesh scope.
        placement: the mesh axes of that placement and the instance loop each cuts, one per
            mesh axis in mesh order (empty without a Mesh scope).
        decisions: planning decisions with their reasons (Scheduled form only).
        updates: outputs it writes as an update of an input (`RegionUpdate`).
        element: for a row kernel whose rule offers it (`Nest.element`), the value it stores at
            each index of its output, its row statistics as `Fold`s.
    """

    name: str
    form: str
    body: Stmt
    reads: tuple[Buffer, ...]
    writes: tuple[Buffer, ...]
    origin: tuple[str, ...] = ()
    request: tuple[str, ...] = ()
    placement: tuple[MeshCut, ...] = ()
    decisions: list[str] = field(default_factory=list)
    updates: tuple[RegionUpdate, ...] = ()
    element: StoredElement | None = None


@dataclass(frozen=True)
class StoredElement:
    """`out[index] = expr`: a kernel's output element as one expression of the index variables."""

    index: tuple[Var, ...]
    expr: Expr


@dataclass(eq=False)
class DimBinding:
    """Where the host entry reads a DimVar: `params[param].shape[axis]`, solved if an expression."""

    var: DimVar
    param: int
    axis: int
    extent: Dim


@dataclass(eq=False)
class Program:
    """One function lowered to TileIR.

    Attributes:
        params: entry parameter buffers: inputs (declaration order), then outputs.
        output_count: trailing outputs in `params`.
        temps: buffers between kernels, allocated by the host entry.
        dims: how each DimVar is read from the parameters.
        stage: "candidate" or "scheduled".
        notes: function-level planning notes (Scheduled form).
        constants: names of the entry parameters declared ConstTensor (weights): constant while
            the program runs, and written by nothing in flight when it is called.
    """

    name: str
    params: tuple[Buffer, ...]
    output_count: int
    temps: tuple[Buffer, ...]
    kernels: tuple[Kernel, ...]
    dims: tuple[DimBinding, ...]
    stage: str = "candidate"
    notes: list[str] = field(default_factory=list)
    meta: dict[str, Any] = field(default_factory=dict)
    constants: frozenset[str] = frozenset()

    @property
    def inputs(self) -> tuple[Buffer, ...]:
        return self.params[: len(self.params) - self.output_count]

    @property
    def outputs(self) -> tuple[Buffer, ...]:
        return self.params[len(self.params) - self.output_count :]

    @property
    def updates(self) -> dict[int, int]:
        """Output position -> input position of each output its kernels update in place (`Kernel.updates`)."""
        outs, ins = list(self.outputs), list(self.inputs)
        return {outs.index(u.output): ins.index(u.source) for k in self.kernels for u in k.updates}


def map_exprs(s: Stmt, fn: Callable[[Expr], Expr]) -> Stmt:
    """`s` with `fn` applied to every expression it holds (indices, values, extents, conditions)."""

    def one(x: Stmt) -> Stmt | None:
        if isinstance(x, Store):
            return Store(x.buffer, tuple(fn(i) for i in x.index), fn(x.value))
        if isinstance(x, Let):
            return Let(x.name, fn(x.value), x.mutable)
        if isinstance(x, Assign):
            return Assign(x.name, fn(x.value))
        if isinstance(x, Check):
            return Check(fn(x.cond), x.message, fn(x.shown))
        if isinstance(x, For):
            return dataclasses.replace(x, extent=fn(x.extent), body=map_stmt(x.body, one))
        if isinstance(x, If):
            orelse = None if x.orelse is None else map_stmt(x.orelse, one)
            return If(fn(x.cond), map_stmt(x.then, one), orelse)
        if isinstance(x, AtomCall):
            return dataclasses.replace(x, params={k: fn(v) for k, v in x.params.items()})
        return None

    return map_stmt(s, one)


def substitute_stmt(s: Stmt, mapping: dict[str, Expr]) -> Stmt:
    """`s` with each Var named in `mapping` replaced, in every expression it holds."""
    return map_exprs(s, lambda e: substitute(e, mapping))
