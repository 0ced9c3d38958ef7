"""High-level IR: SSA values, op nodes, and functions.

A `Function` is a pure dataflow graph. Its body lists `Node`s in a topological order; each
node applies one `Op` to earlier values (params or nodes). Calls to other functions are
`Call` nodes (not inlined); a call with several results is followed by `TupleGet` nodes.

    func mlp(%x: [(T, 2048), bf16], %w: const [(2048, 6144), bf16]):
      %0 = matmul(%x, %w)
      return %0
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .dims import Dim, DimVar, DivModAtom, dims_equal, format_dim
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

    def __repr__(self) -> str:
        return f"<Param {'const ' if self.const else ''}{self.name}: {self.type}>"


@dataclass(eq=False)
class Node(Value):
    """One op applied to earlier values. `mesh` is the enclosing `with Mesh(...)` scope, if any."""

    op: Op | None = None
    args: tuple[Value, ...] = ()
    loc: SourceLoc | None = None
    mesh: Any = None

    def __repr__(self) -> str:
        # Not the dataclass repr: that would print every operand's graph again, recursively.
        name = self.op.name if self.op is not None else "?"
        return f"<Node {name}: {self.type} at {self.loc}>"


@dataclass(eq=False)
class Function:
    """A semantic function: parameters, a body of nodes, and its results.

    Attributes:
        returns_tuple: the author returned a tuple (results are then returned as a tuple
            even when it holds one value).
        converters: weight name -> converter Function (run at prepare time).
        topologies: the execution hierarchy a single-function `@func(topologies=...)` declares.
        converts: on a converter, the name of the weight it produces.

    Calling a Function with torch tensors evaluates it (one argument per declared parameter,
    weights included); calling it with traced tensors inside a @func body records a call.
    """

    name: str
    params: tuple[Param, ...]
    body: tuple[Node, ...]
    results: tuple[Value, ...]
    returns_tuple: bool = False
    loc: SourceLoc | None = None
    converters: dict[str, Function] = field(default_factory=dict)
    topologies: tuple[Any, ...] | None = None
    converts: str | None = None

    def __call__(self, *args: Any) -> Any:
        # The DSL and the evaluator build on this module, so they are imported at call time.
        from ..dsl._trace import call_function, is_traced
        from .evaluator import evaluate

        if any(is_traced(a) for a in args):
            return call_function(self, *args)
        return evaluate(self, *args)

    def converter(self, weight: str) -> Callable[[Callable[..., Any]], Function]:
        """Decorator: trace a converter producing weight `weight` from raw checkpoint tensors.

        The converter's parameters are raw checkpoint names, annotated like @func parameters; it
        returns exactly the weight's declared type. It runs at prepare time, not per call.
        """
        from ..dsl._func import add_converter

        return lambda pyfn: add_converter(self, weight, pyfn)

    def __repr__(self) -> str:
        return f"<Function {self.name}>"

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


def substitute_dim(d: Dim, mapping: Mapping[DimVar, Dim]) -> Dim:
    """`d` with each DimVar in `mapping` replaced by its Dim (others kept)."""
    if isinstance(d, int):
        return d
    if isinstance(d, DimVar):
        return mapping.get(d, d)
    total: Dim = 0
    for monomial, coef in d.terms:
        term: Dim = coef
        for atom in monomial:
            if isinstance(atom, DivModAtom):
                inner = substitute_dim(atom.expr, mapping)
                term = term * (inner // atom.k if atom.kind == "//" else inner % atom.k)
            else:
                term = term * mapping.get(atom, atom)
        total = total + term
    return total


def _call_error(fn: Function, message: str, expected: object, got: object) -> DSLError:
    return DSLError(f"call of {fn.name!r}: {message}", expected=expected, got=got)


def bind_call(fn: Function, args: tuple[TensorType, ...]) -> dict[DimVar, Dim]:
    """Bind the callee's DimVars to the caller's extents, checking every declared dimension.

    Raises:
        DSLError: for a wrong argument count, dtype, rank, or an extent that cannot match.
    """
    if len(args) != len(fn.params):
        names = ", ".join(p.name for p in fn.params)
        message = f"takes {len(fn.params)} arguments ({names}), got {len(args)}"
        raise _call_error(fn, message, len(fn.params), len(args))
    for p, t in zip(fn.params, args, strict=True):
        pt = p.type
        if not isinstance(t, TensorType) or t.dtype != pt.dtype or t.rank != pt.rank:
            raise _call_error(fn, f"argument {p.name!r} must be {pt}, got {t}", pt, t)
    bindings: dict[DimVar, Dim] = {}
    for p, t in zip(fn.params, args, strict=True):
        for want, have in zip(p.type.shape, t.shape, strict=True):
            if not isinstance(want, DimVar):
                continue
            if want in bindings and not dims_equal(bindings[want], have):
                raise _call_error(
                    fn,
                    f"argument {p.name!r} binds {want.name} to {format_dim(have)}, but an earlier argument "
                    f"bound it to {format_dim(bindings[want])}",
                    bindings[want],
                    have,
                )
            if isinstance(have, int) and not want.admits(have):
                raise _call_error(
                    fn,
                    f"argument {p.name!r} has extent {have} for {want.name}, "
                    f"outside its range [{want.lo}, {want.hi})",
                    f"[{want.lo}, {want.hi})",
                    have,
                )
            bindings.setdefault(want, have)
    for p, t in zip(fn.params, args, strict=True):
        for want, have in zip(p.type.shape, t.shape, strict=True):
            expected = substitute_dim(want, bindings)
            if not dims_equal(expected, have):
                raise _call_error(
                    fn,
                    f"argument {p.name!r} has shape {t} where {p.type} is declared "
                    f"(extent {format_dim(have)}, expected {format_dim(expected)})",
                    p.type,
                    t,
                )
    return bindings


def _substitute_type(t: TensorType, mapping: Mapping[DimVar, Dim]) -> TensorType:
    return t.with_(shape=tuple(substitute_dim(d, mapping) for d in t.shape))


@infer.register(Call)
def _infer_call(op: Call, *args: TensorType) -> ValueType:
    fn = op.function
    assert fn is not None
    bindings = bind_call(fn, args)
    types = tuple(_substitute_type(t, bindings) for t in fn.result_types)
    return types if fn.returns_tuple else types[0]


@infer.register(TupleGet)
def _infer_tuple_get(op: TupleGet, t: ValueType) -> TensorType:
    if not isinstance(t, tuple) or not 0 <= op.index < len(t):
        raise DSLError(f"tuple_get: index {op.index} out of a value of type {t}", expected="a tuple", got=t)
    return t[op.index]
