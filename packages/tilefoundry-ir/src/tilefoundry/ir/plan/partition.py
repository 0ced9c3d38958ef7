"""Kernel partition: fusion groups around anchors, pointwise producers fused into consumers.

Each op's lowering rule says what it is: a `Compute` (an element of the result from elements
of the operands: pointwise math and index maps) or a `Nest` (an anchor: reduction, contraction,
row op, attention). Anchors get a kernel each. A `Compute` value is inlined into every consumer
unless it must live in memory: a function result, or an operand an anchor asked to be
materialized. Materialized `Compute` values that follow each other in program order and share
one domain form one element-grid kernel with several outputs, under seed 003's admission
proof: same domain, compact injective writes, no read of a buffer the group writes (a consumer
inside the group recomputes the producer instead), parameters checked noalias at the entry.

A row op whose rule can also `recompute` an element (a norm over a short row) is inlined like a
`Compute` when every path from it ends in an element-grid output: each reader then folds the
row's statistic itself, and the row op's kernel and its round trip through memory disappear.
It keeps its kernel when it is a result, an anchor wants it in memory, or it reaches an anchor.

    exp, add -> result r0; mul -> result r1   ==>   kernel k0 [element grid (T, 64)]: r0, r1
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field

from ..dims import Dim, dims_equal, format_dim
from ..errors import PlanError
from ..hir import Function, Node, Value
from ..lower.core import Compute, Nest, Operand, lower
from ..tile.expr import Const
from ..types import TensorType


@dataclass(eq=False)
class Group:
    """One future kernel: an anchor node, or the element-grid outputs sharing a domain."""

    kind: str  # "anchor" or "grid"
    nodes: list[Node]
    domain: tuple[Dim, ...]
    notes: list[str] = field(default_factory=list)


@dataclass(eq=False)
class Partition:
    """A function cut into kernel groups.

    Attributes:
        materialized: values that live in memory (parameters, anchor results, results,
            anchor operands); every other node is inlined into its consumers.
        forms: the lowering form of each node, `Compute` or `Nest`.
        recomputed: row ops inlined into their readers through `Nest.recompute`, with why.
    """

    function: Function
    groups: list[Group]
    materialized: set[Value]
    forms: dict[Node, type]
    recomputed: dict[Node, str] = field(default_factory=dict)


def node_origin(node: Node) -> str:
    """`op@file:line` of a node, for kernel origins and diagnostics."""
    return f"{node.op.name}@{node.loc}" if node.loc is not None else node.op.name  # type: ignore[union-attr]


def _placeholder(v: Value) -> Operand:
    t = v.type
    if not isinstance(t, TensorType):
        raise PlanError(
            f"a tuple-typed value reaches a kernel operand ({t}); only tensors flow between kernels",
            expected="a TensorType",
            got=t,
        )
    return Operand(t, lambda idx: Const(0))


def form_of(fn: Function, node: Node) -> Compute | Nest:
    """The lowering rule's result for `node` with placeholder operands (only its kind is used)."""
    op = node.op
    assert op is not None
    if lower.rule(type(op)) is None:
        raise PlanError(
            f"{fn.name}: op {op.name!r} has no lowering rule, so it cannot be compiled",
            where=node.loc,
            expected="a registered lowering rule",
            got=op.name,
        )
    return lower(op, node.type, *(_placeholder(a) for a in node.args))


def _recomputable(
    fn: Function, forms: dict[Node, Compute | Nest], wanted: set[Value], results: set[Value]
) -> dict[Node, str]:
    """Row ops to inline into their readers, each with the reason (module docstring)."""
    readers: dict[Value, list[Node]] = {}
    for n in fn.body:
        for a in n.args:
            readers.setdefault(a, []).append(n)

    @functools.cache
    def ends_in_grids(v: Value) -> bool:
        users = readers.get(v, [])
        return bool(users) and all(
            isinstance(forms[u], Compute) and (u in results or u in wanted or ends_in_grids(u))
            for u in users
        )

    out = {}
    for n, f in forms.items():
        inline = isinstance(f, Nest) and f.recompute is not None and n not in results | wanted
        if inline and ends_in_grids(n):
            out[n] = (
                f"{node_origin(n)} recomputed here: each reader folds its short row's statistic "
                f"itself, so the row op has no kernel and its result never reaches memory"
            )
    return out


def partition_kernels(fn: Function) -> Partition:
    """Cut `fn` (calls already inlined) into kernel groups; see the module docstring."""
    forms = {n: form_of(fn, n) for n in fn.body}
    results = set(fn.results)
    wanted = {n.args[i] for n, f in forms.items() if isinstance(f, Nest) for i in f.materialize}
    recomputed = _recomputable(fn, forms, wanted, results)
    materialized: set[Value] = set(fn.params) | results | wanted
    materialized.update(n for n, f in forms.items() if isinstance(f, Nest) and n not in recomputed)
    groups: list[Group] = []
    open_grid: Group | None = None
    for n in fn.body:
        if n not in materialized:
            continue
        if isinstance(forms[n], Nest) and n not in recomputed:
            groups.append(Group("anchor", [n], n.type.shape))  # type: ignore[union-attr]
            open_grid = None
            continue
        shape = n.type.shape  # type: ignore[union-attr]
        same = (
            open_grid is not None
            and len(open_grid.domain) == len(shape)
            and all(dims_equal(a, b) for a, b in zip(open_grid.domain, shape, strict=True))
        )
        if same and open_grid is not None:
            open_grid.nodes.append(n)
            continue
        open_grid = Group("grid", [n], shape)
        groups.append(open_grid)
    for g in groups:
        if g.kind == "grid" and len(g.nodes) > 1:
            dims = ", ".join(format_dim(d) for d in g.domain)
            g.notes.append(
                f"fused {len(g.nodes)} outputs into one element grid ({dims}): same domain, "
                f"compact injective "
                f"writes, no read of a buffer the group writes, parameters noalias (checked at entry)"
            )
    kinds = {n: Compute if n in recomputed else type(f) for n, f in forms.items()}
    return Partition(fn, groups, materialized, kinds, recomputed)
