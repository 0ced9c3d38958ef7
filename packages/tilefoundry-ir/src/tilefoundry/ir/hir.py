"""High-level IR: SSA values, op nodes, and functions.

A `Function` is a pure dataflow graph. Its body lists `Node`s in a topological order; each
node applies one `Op` to earlier values (params or nodes). Calls to other functions are
`Call` nodes (not inlined); a call with several results is followed by `TupleGet` nodes.

    func mlp(%x: [(T, 2048), bf16], %w: const [(2048, 6144), bf16]):
      %0 = matmul(%x, %w)
      return %0
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .errors import DSLError, SourceLoc
from .ops.base import Op, infer
from .types import TensorType

ValueType = TensorType | tuple[TensorType, ...]


@dataclass(eq=False)
class Value:
    """An SSA value; identity is the object (values are never compared structurally)."""

    type: ValueType


@dataclass(eq=False)
class Param(Value):
    """A declared parameter: a weight (`const=True`, from `ConstTensor`) or an activation/state."""

    name: str = ""
    const: bool = False
    loc: SourceLoc | None = None


@dataclass(eq=False)
class Node(Value):
    """One op applied to earlier values. `mesh` is the enclosing `with Mesh(...)` scope, if any."""

    op: Op | None = None
    args: tuple[Value, ...] = ()
    loc: SourceLoc | None = None
    mesh: Any = None


@dataclass(eq=False)
class Function:
    """A semantic function: parameters, a body of nodes, and its results.

    Attributes:
        returns_tuple: the author returned a tuple (results are then returned as a tuple
            even when it holds one value).
        converters: weight name -> converter Function (run at prepare time).
        topologies: the execution hierarchy a single-function `@func(topologies=...)` declares.
    """

    name: str
    params: tuple[Param, ...]
    body: tuple[Node, ...]
    results: tuple[Value, ...]
    returns_tuple: bool = False
    loc: SourceLoc | None = None
    converters: dict[str, Function] = field(default_factory=dict)
    topologies: tuple[Any, ...] | None = None

    @property
    def weights(self) -> tuple[Param, ...]:
        """The ConstTensor parameters, in declaration order."""
        return tuple(p for p in self.params if p.const)

    @property
    def activations(self) -> tuple[Param, ...]:
        """The Tensor (non-const) parameters, in declaration order."""
        return tuple(p for p in self.params if not p.const)

    @property
    def result_types(self) -> tuple[TensorType, ...]:
        return tuple(v.type for v in self.results)  # type: ignore[misc]


@dataclass(frozen=True, eq=False)
class Call(Op):
    """A call of another Function; its type is the callee's result type(s)."""

    name = "call"
    inputs = ("*args",)
    function: Function | None = None


@dataclass(frozen=True)
class TupleGet(Op):
    """Element `index` of a tuple-typed value (a multi-result call)."""

    name = "tuple_get"
    inputs = ("tuple",)
    index: int = 0


@infer.register(Call)
def _infer_call(op: Call, *args: TensorType) -> ValueType:
    fn = op.function
    assert fn is not None
    if len(args) != len(fn.params):
        raise DSLError(
            f"call of {fn.name!r}: takes {len(fn.params)} arguments ({', '.join(p.name for p in fn.params)}), "
            f"got {len(args)}",
            expected=len(fn.params),
            got=len(args),
        )
    for p, t in zip(fn.params, args):
        pt = p.type
        if not isinstance(t, TensorType) or t.dtype != pt.dtype or t.rank != pt.rank:
            raise DSLError(f"call of {fn.name!r}: argument {p.name!r} must be {pt}, got {t}", expected=pt, got=t)
    types = fn.result_types
    return types if fn.returns_tuple else types[0]


@infer.register(TupleGet)
def _infer_tuple_get(op: TupleGet, t: ValueType) -> TensorType:
    if not isinstance(t, tuple) or not 0 <= op.index < len(t):
        raise DSLError(f"tuple_get: index {op.index} out of a value of type {t}", expected="a tuple", got=t)
    return t[op.index]
