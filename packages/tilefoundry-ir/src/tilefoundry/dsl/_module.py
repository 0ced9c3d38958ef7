"""`@module`: collect a class body into a `Module`.

    @module(entry="block", topologies=(Topology("cta", 132),))
    class Decoder:
        attn = Attention                    # a child named "attn" (an independent copy)
        layers = (Layer, Layer)             # children "layers.0", "layers.1"
        eps = 1e-6                          # a plain constant

        @func
        def block(...): ...                 # a function

        def forward(self, x, ...): ...      # an orchestration method

The decorator returns the Module instance, not a class.
"""

from __future__ import annotations

import inspect
import types
from collections.abc import Sequence
from typing import Any

from ..ir.dims import DimExpr, DimVar
from ..ir.dtypes import DType
from ..ir.errors import DSLError, SourceLoc
from ..ir.hir import Function
from ..ir.module import Module
from ..ir.shard import Topology

_CONSTANTS = (int, float, str, bool, type(None), DType, DimVar, DimExpr)
_ACCEPTED = (
    "@func functions, Module children (or tuples of them), methods (plain functions), "
    "and constants (numbers, strings, tuples of them)"
)


def module(
    cls: type | None = None, *, entry: str | None = None, topologies: Sequence[Topology] | None = None
) -> Any:
    """Turn a class body into a Module; `entry` names a function, `topologies` the hierarchy.

    Raises:
        DSLError: for a class attribute of another kind, an unknown entry, clashing names,
            a weight name with two types, or topologies that are not Topology values.
    """
    if cls is None:
        return lambda c: module_from_class(c, entry=entry, topologies=topologies)
    return module_from_class(cls, entry=entry, topologies=topologies)


def _class_loc(cls: type) -> SourceLoc | None:
    try:
        lines, first = inspect.getsourcelines(cls)
    except (OSError, TypeError):
        return None
    offset = next((i for i, line in enumerate(lines) if line.lstrip().startswith("class ")), 0)
    return SourceLoc(inspect.getsourcefile(cls) or "<unknown>", first + offset)


def _is_constant(value: object) -> bool:
    if isinstance(value, tuple):
        return all(_is_constant(v) for v in value)
    return isinstance(value, _CONSTANTS)


def module_from_class(
    cls: type, *, entry: str | None = None, topologies: Sequence[Topology] | None = None
) -> Module:
    """The Module a `@module` class body declares (see `module`)."""
    if not isinstance(cls, type):
        raise DSLError(
            f"@module decorates a class holding @func functions, not a {type(cls).__name__}",
            where=getattr(cls, "loc", None),
            expected="@module above `class Name:`",
            got=cls,
        )
    loc = _class_loc(cls)
    if topologies is not None and not all(isinstance(t, Topology) for t in topologies):
        raise DSLError(
            f"@module {cls.__name__}: topologies must be Topology values, got {tuple(topologies)!r}",
            where=loc,
            expected='(Topology("cta", 132), Topology("thread", 256))',
            got=tuple(topologies),
        )
    functions: dict[str, Function] = {}
    children: list[Module] = []
    methods: dict[str, Any] = {}
    attributes: dict[str, Any] = {}
    for attr, value in vars(cls).items():
        if attr.startswith("__") and attr.endswith("__"):
            continue
        if isinstance(value, Function):
            if value.converts is None:  # converters live on their base function
                functions[attr] = value
        elif isinstance(value, Module):
            children.append(value.renamed(attr))
        elif isinstance(value, tuple) and value and all(isinstance(v, Module) for v in value):
            children.extend(v.renamed(f"{attr}.{i}") for i, v in enumerate(value))
        elif isinstance(value, types.FunctionType):
            methods[attr] = value
        elif _is_constant(value):
            attributes[attr] = value
        else:
            raise DSLError(
                f"@module {cls.__name__}: attribute {attr!r} is a {type(value).__name__}; "
                f"a module class holds {_ACCEPTED}",
                where=loc,
                expected=_ACCEPTED,
                got=type(value).__name__,
            )
    try:
        return Module(
            cls.__name__,
            functions=functions,
            children=children,
            methods=methods,
            attributes=attributes,
            entry=entry,
            topologies=topologies,
        )
    except DSLError as err:
        raise err.at(loc) from None
