"""Canonical text of Functions and Modules: the jit cache key and the golden format.

The text is a function of the IR alone — no object ids, source locations, set or hash order —
so the same source prints byte-identical text in any process. Floats print by `repr`.

    module Mlp:
      entry: mlp
      topologies: none
      func mlp(%x: [(T, 64), f32], %w: const [(64, 64), f32]) -> [(T, 64), f32] {
        dims T in [1, 9)
        %0: [(T, 64), f32] = matmul(%x, %w)
        return %0
      }

Values print as `%<param name>` and `%<n>` in body order; a call names its callee `@name`
(`@name#2` for a second, different function of the same name); callees that are not functions
of the printed module follow it under `callee`. A `with Mesh(...)` scope prints as a block
around the nodes traced inside it. Attribute values print through `attr_text`, a registry by
type: a new attribute type registers its text rather than growing a switch.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
from typing import Any

import torch

from .dims import DimExpr, DimVar, dim_vars, format_dim
from .dtypes import DType
from .hir import Call, Function, Node, Value
from .layout import Layout
from .module import Module
from .shard import Broadcast, Dynamic, Mesh, Partial, Placement, ShardLayout, Split, Topology
from .types import Storage, TensorType

_INDENT = "  "


@functools.singledispatch
def attr_text(value: Any) -> str:
    """The canonical text of an attribute value; dataclasses print field by field.

    Raises:
        TypeError: for a type with no registered text (its repr could hold an object id).
    """
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = ", ".join(f"{f.name}={attr_text(getattr(value, f.name))}" for f in dataclasses.fields(value))
        return f"{type(value).__name__}({fields})"
    raise TypeError(
        f"no canonical text for an attribute of type {type(value).__qualname__}; "
        f"register one with tilefoundry.ir.printer.attr_text.register"
    )


@attr_text.register(bool)
@attr_text.register(int)
@attr_text.register(type(None))
@attr_text.register(type(Ellipsis))
def _(value: object) -> str:
    return "..." if value is Ellipsis else str(value)


@attr_text.register(float)
@attr_text.register(str)
def _(value: float | str) -> str:
    return repr(value)


@attr_text.register(tuple)
@attr_text.register(list)
def _(value: tuple | list) -> str:
    inner = ", ".join(attr_text(v) for v in value)
    return f"({inner},)" if len(value) == 1 else f"({inner})"


@attr_text.register(slice)
def _(value: slice) -> str:
    parts = ["" if p is None else attr_text(p) for p in (value.start, value.stop, value.step)]
    return ":".join(parts if value.step is not None else parts[:2])


@attr_text.register(DimVar)
@attr_text.register(DimExpr)
def _(value: DimVar | DimExpr) -> str:
    return format_dim(value)


@attr_text.register(enum.Enum)
def _(value: enum.Enum) -> str:
    return str(value.value)


# Types whose own str is already canonical (they print structure, never ids).
_SELF_PRINTING = (
    DType, torch.dtype, Layout, ShardLayout, Placement, Mesh, Topology, Split, Broadcast, Partial, Dynamic,
)  # fmt: skip
for _cls in _SELF_PRINTING:
    attr_text.register(_cls)(str)


def type_text(t: TensorType | tuple) -> str:
    """`[(T, 4), f32]`, with the layout and storage when set; a tuple type prints as `(t1, t2)`."""
    if isinstance(t, tuple):
        inner = ", ".join(type_text(x) for x in t)
        return f"({inner},)" if len(t) == 1 else f"({inner})"
    parts = [f"({', '.join(format_dim(d) for d in t.shape)}{',' if t.rank == 1 else ''})", t.dtype.name]
    if t.layout is not None:
        parts.append(attr_text(t.layout))
    if t.storage is not Storage.UNDECIDED:
        parts.append(t.storage.value)
    return f"[{', '.join(parts)}]"


class _Printer:
    """Labels functions across one printing and writes their text."""

    def __init__(self) -> None:
        self.labels: dict[int, str] = {}
        self.name_count: dict[str, int] = {}
        self.printed: set[int] = set()
        self.callees: list[Function] = []
        self.lines: list[str] = []

    def label(self, fn: Function) -> str:
        """`fn`'s name, made unique (`f#2`) when a different function of that name came first."""
        if id(fn) not in self.labels:
            n = self.name_count.get(fn.name, 0) + 1
            self.name_count[fn.name] = n
            self.labels[id(fn)] = fn.name if n == 1 else f"{fn.name}#{n}"
        return self.labels[id(fn)]

    def emit(self, depth: int, text: str) -> None:
        self.lines.append(_INDENT * depth + text)

    def function(self, fn: Function, depth: int, title: str | None = None) -> None:
        """Print `fn` (as `func <label>`, or `converter <title>`) and then its converters."""
        self.printed.add(id(fn))
        names: dict[Value, str] = {p: f"%{p.name}" for p in fn.params}
        params = ", ".join(f"{names[p]}: {'const ' if p.const else ''}{type_text(p.type)}" for p in fn.params)
        head = f"converter {title}" if title else f"func {self.label(fn)}"
        self.emit(depth, f"{head}({params}) -> {_results(fn, [type_text(v.type) for v in fn.results])} {{")
        dims = _dims_of(fn)
        if dims:
            self.emit(depth + 1, "dims " + ", ".join(f"{v.name} in [{v.lo}, {v.hi})" for v in dims))
        mesh: Any = None
        for i, node in enumerate(fn.body):
            names[node] = f"%{i}"
            if node.mesh is not None and (mesh is None or node.mesh != mesh):
                self.emit(depth + 1, f"with {attr_text(node.mesh)}:")
            mesh = node.mesh
            self.emit(depth + (2 if mesh is not None else 1), self.node(node, names))
        self.emit(depth + 1, "return " + _results(fn, [names[v] for v in fn.results]))
        self.emit(depth, "}")
        for weight in sorted(fn.converters):
            self.function(fn.converters[weight], depth, title=f"{self.label(fn)}.{weight}")

    def node(self, node: Node, names: dict[Value, str]) -> str:
        op = node.op
        assert op is not None
        args = [names[a] for a in node.args]
        if isinstance(op, Call):
            assert op.function is not None
            if id(op.function) not in self.printed and op.function not in self.callees:
                self.callees.append(op.function)
            head = f"call @{self.label(op.function)}"
        else:
            head = op.name
            args += [f"{k}={attr_text(v)}" for k, v in op.attrs().items()]
        return f"{names[node]}: {type_text(node.type)} = {head}({', '.join(args)})"

    def pending_callees(self, depth: int) -> None:
        """Print every called function not printed yet (and, in turn, what those call)."""
        while todo := [f for f in self.callees if id(f) not in self.printed]:
            for f in todo:
                self.function(f, depth)


def _results(fn: Function, items: list[str]) -> str:
    if not fn.returns_tuple:
        return items[0]
    return f"({items[0]},)" if len(items) == 1 else f"({', '.join(items)})"


def _dims_of(fn: Function) -> list[DimVar]:
    """The DimVars in `fn`'s value types, by name (a function's DimVar names are distinct)."""
    found: dict[str, DimVar] = {}
    for v in (*fn.params, *fn.body):
        for t in v.type if isinstance(v.type, tuple) else (v.type,):
            for d in t.shape:
                for var in () if isinstance(d, int) else dim_vars(d):
                    found[var.name] = var
    return [found[k] for k in sorted(found)]


def function_text(fn: Function) -> str:
    """The canonical text of `fn`, its converters, and every function it calls."""
    p = _Printer()
    p.function(fn, 0)
    p.pending_callees(0)
    return "\n".join(p.lines) + "\n"


def module_text(mod: Module) -> str:
    """The canonical text of a Module tree.

    Per node, preorder: its dotted path, entry, effective topology hierarchy, method names,
    constants, and functions with their converters; then the functions they call.
    """
    p = _Printer()
    tree = list(mod.walk(mod.name))
    # Label every module function before any call is printed, so a call never takes a name first.
    for _, node in tree:
        for fn in node.functions.values():
            p.label(fn)
    for path, node in tree:
        topologies = node.effective_topologies
        p.emit(0, f"module {path}:")
        p.emit(1, f"entry: {node.entry or 'none'}")
        p.emit(1, f"topologies: {', '.join(attr_text(t) for t in topologies) if topologies else 'none'}")
        if node.methods:
            p.emit(1, f"methods: {', '.join(node.methods)}")
        if node.attributes:
            p.emit(1, "attributes: " + ", ".join(f"{k}={attr_text(v)}" for k, v in node.attributes.items()))
        for fn in node.functions.values():
            p.function(fn, 1)
    if any(id(f) not in p.printed for f in p.callees):
        p.emit(0, "callees:")
        p.pending_callees(1)
    return "\n".join(p.lines) + "\n"
