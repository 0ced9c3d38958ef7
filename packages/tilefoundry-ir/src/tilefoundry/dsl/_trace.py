"""Tracing: the values a @func body computes with, and how op calls become HIR nodes.

While a @func body runs, its parameters are `TracedTensor`s. Every `tf.*` call (and every
Python operator on a TracedTensor) reaches `emit`, which infers the result type, records a
`Node` carrying the author's source line and the enclosing `with Mesh(...)` scope, and hands
back a new TracedTensor. Nothing is computed: the body runs once and leaves a dataflow graph.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import os
import sys
import types
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from ..ir.dtypes import DType
from ..ir.errors import DSLError, SourceLoc
from ..ir.hir import Call, Function, Node, TupleGet, Value
from ..ir.ops.base import Op, infer
from ..ir.shard import current_mesh
from ..ir.types import TensorType


@functools.cache
def _package_roots() -> tuple[str, ...]:
    import tilefoundry

    roots = {os.path.dirname(os.path.dirname(os.path.realpath(__file__)))}
    roots.update(os.path.realpath(p) for p in tilefoundry.__path__)
    return tuple(sorted(os.path.join(r, "") for r in roots))


@functools.cache
def _is_internal(filename: str) -> bool:
    return os.path.realpath(filename).startswith(_package_roots())


def user_frame() -> types.FrameType | None:
    """The first stack frame outside the tilefoundry package (the author's code)."""
    frame = sys._getframe(1)
    while frame is not None and _is_internal(frame.f_code.co_filename):
        frame = frame.f_back
    return frame


def user_loc() -> SourceLoc | None:
    """The source location of the first stack frame outside the tilefoundry package.

    A helper function the author writes is outside the package, so its own line is reported.
    """
    frame = user_frame()
    return None if frame is None else SourceLoc(frame.f_code.co_filename, frame.f_lineno)


@dataclass(eq=False)
class Trace:
    """The nodes recorded so far for one @func body being traced."""

    name: str
    nodes: list[Node] = field(default_factory=list)


_CURRENT: contextvars.ContextVar[Trace | None] = contextvars.ContextVar("tilefoundry_trace", default=None)


@contextlib.contextmanager
def tracing(trace: Trace) -> Iterator[Trace]:
    """Scope in which `emit` records into `trace`; traces nest (a @func defined while tracing)."""
    token = _CURRENT.set(trace)
    try:
        yield trace
    finally:
        _CURRENT.reset(token)


def _current(what: str) -> Trace:
    trace = _CURRENT.get()
    if trace is None:
        raise DSLError(
            f"{what} outside a @func body: ops build IR only while a @func is being traced",
            where=user_loc(),
            expected="a call inside a function decorated with @func",
            got="a call at module or test level",
        )
    return trace


def is_traced(x: object) -> bool:
    """True for a value of a @func body being traced."""
    return isinstance(x, TracedTensor)


def _operand(x: object, trace: Trace, op_name: str, index: int) -> TracedTensor:
    if not isinstance(x, TracedTensor):
        raise DSLError(
            f"{op_name}: operand {index} must be a traced tensor, got {type(x).__name__} {x!r}",
            where=user_loc(),
            expected="a tensor computed in this @func body",
            got=type(x).__name__,
        )
    if x.trace is not trace:
        raise DSLError(
            f"{op_name}: operand {index} belongs to the body of {x.trace.name!r}, "
            f"not to {trace.name!r} being traced now",
            where=user_loc(),
            expected=f"a value of {trace.name!r}",
            got=f"a value of {x.trace.name!r}",
        )
    return x


def _check_arity(op: Op, n: int) -> None:
    if op.variadic:
        fixed = len(op.inputs) - 1
        if n >= fixed:
            return
        expected = f"at least {fixed}"
    elif n == len(op.inputs):
        return
    else:
        expected = str(len(op.inputs))
    raise DSLError(
        f"{op.name}: takes {expected} operands ({', '.join(op.inputs)}), got {n}",
        expected=expected,
        got=n,
    )


def emit(op: Op, *operands: TracedTensor) -> Any:
    """Record `op` applied to `operands` in the body being traced and return its result.

    Returns:
        A TracedTensor; for an op whose inferred type is a tuple, a tuple of TracedTensors
        (one `tuple_get` node per element).

    Raises:
        DSLError: from type inference or a bad operand, located at the author's line.
    """
    trace = _current(f"tf.{op.name}")
    loc = user_loc()
    args = tuple(_operand(x, trace, op.name, i) for i, x in enumerate(operands))
    try:
        _check_arity(op, len(args))
        result_type = infer(op, *(a.type for a in args))
    except DSLError as err:
        raise err.at(loc) from None
    node = Node(result_type, op=op, args=tuple(a.value for a in args), loc=loc, mesh=current_mesh())
    trace.nodes.append(node)
    if not isinstance(result_type, tuple):
        return TracedTensor(node, trace)
    parts = []
    for i, t in enumerate(result_type):
        part = Node(t, op=TupleGet(index=i), args=(node,), loc=loc, mesh=node.mesh)
        trace.nodes.append(part)
        parts.append(TracedTensor(part, trace))
    return tuple(parts)


def call_function(fn: Function, *args: object) -> Any:
    """Record a call of `fn` (not inlined); a tuple-returning callee yields a tuple of values."""
    if not all(isinstance(a, TracedTensor) for a in args):
        bad = next(a for a in args if not isinstance(a, TracedTensor))
        raise DSLError(
            f"call of {fn.name!r} inside a @func body: every argument must be a traced tensor, "
            f"got {type(bad).__name__}",
            where=user_loc(),
            expected="tensors computed in this body (declare constants as ConstTensor parameters)",
            got=type(bad).__name__,
        )
    return emit(Call(function=fn), *args)


def _tf(name: str) -> Any:
    # tf imports this module (for emit), so it is looked up at call time.
    from . import tf

    return getattr(tf, name)


def _data_dependent(what: str, instead: str) -> DSLError:
    return DSLError(
        f"data-dependent control flow: {what} of a traced tensor is not known while tracing; {instead}",
        where=user_loc(),
        expected="a compile-time value (a Python constant, a shape, a loop over range(...))",
        got="a traced tensor",
    )


class TracedTensor:
    """A tensor value of a @func body being traced: it has a type, not data.

    Python operators call the `tf` functions: `+ - * / ** @`, unary `-`, `abs()`,
    `< <= > >= == !=` (comparisons yield bool tensors), `& | ~` (logical ops on bool tensors),
    `x[key]` (`tf.getitem`). Because `==` builds an op, identity is the hash: TracedTensors are
    safe as dict keys and in sets, while `x in some_list` compares by value and is refused.
    """

    __slots__ = ("trace", "value")
    __hash__ = object.__hash__

    def __init__(self, value: Value, trace: Trace):
        self.value = value
        self.trace = trace

    @property
    def type(self) -> TensorType:
        return self.value.type  # type: ignore[return-value]

    @property
    def shape(self) -> tuple:
        return self.type.shape

    @property
    def dtype(self) -> DType:
        return self.type.dtype

    @property
    def ndim(self) -> int:
        return self.type.rank

    def __repr__(self) -> str:
        return f"TracedTensor{self.type}"

    # Methods that mirror torch's, spelled through tf.
    @property
    def T(self) -> TracedTensor:
        return _tf("transpose")(self, tuple(reversed(range(self.ndim))))

    def reshape(self, *shape: Any) -> TracedTensor:
        """`x.reshape(a, b)` or `x.reshape((a, b))`."""
        if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
            shape = tuple(shape[0])
        return _tf("reshape")(self, tuple(shape))

    def transpose(self, dim0: int, dim1: int) -> TracedTensor:
        """Swap two axes, as torch's `Tensor.transpose` does."""
        perm = list(range(self.ndim))
        perm[dim0], perm[dim1] = perm[dim1], perm[dim0]
        return _tf("transpose")(self, tuple(perm))

    def permute(self, *perm: int) -> TracedTensor:
        """Reorder all axes: `x.permute(0, 2, 1, 3)`."""
        if len(perm) == 1 and isinstance(perm[0], (tuple, list)):
            perm = tuple(perm[0])
        return _tf("transpose")(self, tuple(perm))

    def to(self, dtype: str | DType) -> TracedTensor:
        """Cast to `dtype`."""
        return _tf("cast")(self, dtype)

    def __getitem__(self, key: Any) -> TracedTensor:
        return _tf("getitem")(self, key)

    # Values with no trace-time answer.
    def __bool__(self) -> bool:
        raise _data_dependent("the truth value", "use tf.where(cond, a, b) to select between tensors")

    def __iter__(self) -> Iterator[TracedTensor]:
        raise _data_dependent("iteration", "index with compile-time ints (for i in range(x.shape[0]))")

    def __len__(self) -> int:
        raise _data_dependent("len()", "use x.shape[0]")

    def __index__(self) -> int:
        raise _data_dependent("the integer value", "pass a Python int or read x.shape")

    def __int__(self) -> int:
        raise _data_dependent("the integer value", "pass a Python int or read x.shape")

    def __float__(self) -> float:
        raise _data_dependent("the float value", "pass a Python float")


def _binary(tf_name: str, reflected: bool) -> Any:
    if reflected:
        return lambda self, other: _tf(tf_name)(other, self)
    return lambda self, other: _tf(tf_name)(self, other)


# Python operator -> tf function. A table, so adding an operator is one line.
_BINARY_OPERATORS = {
    "add": "add",
    "sub": "sub",
    "mul": "mul",
    "truediv": "div",
    "pow": "pow",
    "matmul": "matmul",
    "and": "logical_and",
    "or": "logical_or",
}
_COMPARISONS = {"lt": "lt", "le": "le", "gt": "gt", "ge": "ge", "eq": "eq", "ne": "ne"}
_UNARY_OPERATORS = {"neg": "neg", "abs": "abs", "invert": "logical_not"}

for _py, _name in _BINARY_OPERATORS.items():
    setattr(TracedTensor, f"__{_py}__", _binary(_name, reflected=False))
    setattr(TracedTensor, f"__r{_py}__", _binary(_name, reflected=True))
for _py, _name in _COMPARISONS.items():
    setattr(TracedTensor, f"__{_py}__", _binary(_name, reflected=False))
for _py, _name in _UNARY_OPERATORS.items():
    setattr(TracedTensor, f"__{_py}__", lambda self, _n=_name: _tf(_n)(self))
TracedTensor.__pos__ = lambda self: self  # type: ignore[attr-defined]
