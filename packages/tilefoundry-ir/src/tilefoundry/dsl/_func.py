"""`@func`: trace a Python function into a `hir.Function`; `@fn.converter("w")` for weights.

    @func
    def scale(x: Tensor[(T, 4), "f32"], g: ConstTensor[(4,), "f32"]) -> Tensor[(T, 4), "f32"]:
        return x * g

The body runs once with `TracedTensor` parameters built from the annotations; every op it
calls becomes a node. Errors name the author's file and line.
"""

from __future__ import annotations

import contextlib
import inspect
import types
from collections.abc import Callable
from typing import Any

from ..ir.dims import DimVar, dim_vars
from ..ir.errors import DSLError, SourceLoc, TileFoundryError
from ..ir.hir import Function, Node, Param, Value
from ..ir.shard import Topology
from ..ir.types import Storage, TensorType
from ._annotations import TensorSpec, result_specs
from ._statements import check_statements
from ._trace import Trace, TracedTensor, _is_internal, tracing, user_frame

_FORM = 'Tensor[(dims...), "dtype"] or ConstTensor[(dims...), "dtype"]'


def func(fn: Callable[..., Any] | None = None, *, topologies: tuple[Any, ...] | None = None) -> Any:
    """Trace `fn` into a `hir.Function`; `@func(topologies=(...))` also declares its topology.

    The topology is what the implicit single-function Module (`Module.of(fn)`) declares.

    Raises:
        DSLError: for a bad annotation, an unsupported statement, data-dependent control flow,
            or an op refusing its operands; the message names the file and line.
    """
    if fn is None:
        return lambda f: trace_function(f, kind="@func", topologies=topologies)
    return trace_function(fn, kind="@func", topologies=topologies)


def definition_loc(fn: Callable[..., Any]) -> SourceLoc:
    """The location of `fn`'s `def` line (not its first decorator)."""
    code = fn.__code__
    try:
        lines, first = inspect.getsourcelines(fn)
    except (OSError, TypeError):
        return SourceLoc(code.co_filename, code.co_firstlineno)
    for i, line in enumerate(lines):
        if line.lstrip().startswith(("def ", "async def ")):
            return SourceLoc(code.co_filename, first + i)
    return SourceLoc(code.co_filename, first)


def trace_function(
    pyfn: Callable[..., Any], *, kind: str, topologies: tuple[Any, ...] | None = None
) -> Function:
    """Check `pyfn`'s statements, build its parameters, run it traced, and return the Function."""
    if not isinstance(pyfn, types.FunctionType):
        raise TypeError(f"{kind} decorates a Python function, got {type(pyfn).__name__}")
    check_statements(pyfn, kind)
    loc = definition_loc(pyfn)
    if topologies is not None and not all(isinstance(t, Topology) for t in topologies):
        raise DSLError(
            f"{kind} {pyfn.__name__!r}: topologies must be Topology values, got {tuple(topologies)!r}",
            where=loc,
            expected='(Topology("cta", 132), Topology("thread", 256))',
            got=tuple(topologies),
        )
    annotations = _annotations(pyfn, kind, loc)
    params = _params(pyfn, kind, loc, annotations)
    declared = _declared_results(annotations, loc)
    _check_dim_names(pyfn.__name__, params, declared or (), loc)
    trace = Trace(pyfn.__name__)
    with tracing(trace):
        out = _run(pyfn, [TracedTensor(p, trace) for p in params])
    returns_tuple = isinstance(out, tuple)
    results = _results(pyfn.__name__, kind, out, trace, loc)
    if declared is not None:
        _check_results(pyfn.__name__, declared, results, loc)
    return Function(
        pyfn.__name__,
        params,
        _live(trace.nodes, results),
        results,
        returns_tuple=returns_tuple,
        loc=loc,
        topologies=tuple(topologies) if topologies is not None else None,
    )


def _annotations(pyfn: Callable[..., Any], kind: str, loc: SourceLoc) -> dict[str, Any]:
    """The evaluated annotations of `pyfn`.

    Under `from __future__ import annotations` they are strings; they resolve against the
    function's globals, its closure, and the locals of the scope decorating it (where a
    DimVar defined next to the function lives).
    """
    frame = user_frame()
    scope = dict(frame.f_locals) if frame is not None else {}
    code, closure = pyfn.__code__, pyfn.__closure__ or ()
    for name, cell in zip(code.co_freevars, closure, strict=True):
        with contextlib.suppress(ValueError):  # an empty cell: not bound yet
            scope[name] = cell.cell_contents
    try:
        return inspect.get_annotations(pyfn, locals=scope, eval_str=True)
    except DSLError as err:
        if isinstance(err.where, SourceLoc) and err.where.file != "<string>":
            raise
        # A string annotation was evaluated by `eval`: its own frame is "<string>", so the
        # `def` line is the place to name.
        raise DSLError(err.message, where=loc, expected=err.expected, got=err.got) from None
    except NameError as err:
        raise DSLError(
            f"{kind} {pyfn.__name__!r}: an annotation does not resolve ({err}); names in annotations "
            f"must be visible where the function is decorated",
            where=loc,
            expected="names visible where the function is decorated",
            got=str(err),
        ) from None


def _params(
    pyfn: Callable[..., Any], kind: str, loc: SourceLoc, annotations: dict[str, Any]
) -> tuple[Param, ...]:
    params = []
    for p in inspect.signature(pyfn).parameters.values():
        if p.kind not in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            raise DSLError(
                f"{kind} {pyfn.__name__!r}: parameter {p} is not a plain positional parameter",
                where=loc,
                expected=f"name: {_FORM}",
                got=str(p),
            )
        spec = annotations.get(p.name)
        if not isinstance(spec, TensorSpec):
            got = "no annotation" if spec is None else f"annotation {spec!r}"
            raise DSLError(
                f"{kind} {pyfn.__name__!r}: parameter {p.name!r} has {got}; expected {_FORM}",
                where=loc,
                expected=_FORM,
                got=spec,
            )
        params.append(Param(spec.type, name=p.name, const=spec.const, loc=loc))
    return tuple(params)


def _declared_results(annotations: dict[str, Any], loc: SourceLoc) -> tuple[TensorSpec, ...] | None:
    try:
        return result_specs(annotations.get("return"))
    except DSLError as err:
        raise err.at(loc) from None


def _check_dim_names(
    name: str, params: tuple[Param, ...], declared: tuple[TensorSpec, ...], loc: SourceLoc
) -> None:
    # Canonical text names a DimVar by its name, so one name must mean one range.
    seen: dict[str, DimVar] = {}
    for t in [p.type for p in params] + [s.type for s in declared]:
        for d in t.shape:
            for v in sorted(dim_vars(d), key=lambda v: v.name):
                other = seen.setdefault(v.name, v)
                if other != v:
                    raise DSLError(
                        f"{name!r}: two DimVars are named {v.name!r}, with ranges [{other.lo}, {other.hi}) "
                        f"and [{v.lo}, {v.hi}); give them distinct names or reuse one DimVar",
                        where=loc,
                        expected="one DimVar per name",
                        got=(other, v),
                    )


def _author_frame_loc(tb: types.TracebackType | None, innermost_only: bool) -> SourceLoc | None:
    """The author's line in a traceback: the last frame outside tilefoundry.

    With `innermost_only`, only when the error was raised in the author's own frame (a call
    with wrong arguments fails in the caller's frame, before the callee runs).
    """
    found = None
    while tb is not None:
        inside = _is_internal(tb.tb_frame.f_code.co_filename)
        if not inside:
            found = SourceLoc(tb.tb_frame.f_code.co_filename, tb.tb_lineno)
        elif innermost_only:
            found = None
        tb = tb.tb_next
    return found


def _explain(err: Exception) -> tuple[str, str]:
    """A message for a Python error at the author's line, and what would have been accepted."""
    from . import tf

    if isinstance(err, AttributeError) and isinstance(err.obj, TracedTensor):
        accepted = "shape dtype ndim type T reshape transpose permute to, or a tf.* function"
        return f"a traced tensor has no attribute {err.name!r}; accepted: {accepted}", accepted
    head = str(err).split("(", 1)[0]
    target = getattr(tf, head, None) if head.isidentifier() else None
    if isinstance(err, TypeError) and callable(target):
        signature = f"tf.{head}{inspect.signature(target)}"
        return f"{err}; accepted: {signature}", signature
    return str(err), "valid Python at trace time"


def _run(pyfn: Callable[..., Any], args: list[TracedTensor]) -> Any:
    try:
        return pyfn(*args)
    except TileFoundryError as err:
        if err.where is None:
            err.at(_author_frame_loc(err.__traceback__, innermost_only=False))
        raise
    except (TypeError, AttributeError) as err:
        loc = _author_frame_loc(err.__traceback__, innermost_only=True)
        if loc is None:
            raise
        message, expected = _explain(err)
        raise DSLError(message, where=loc, expected=expected, got=str(err)) from err


def _results(name: str, kind: str, out: Any, trace: Trace, loc: SourceLoc) -> tuple[Value, ...]:
    items = out if isinstance(out, tuple) else (out,)
    for i, x in enumerate(items):
        if not isinstance(x, TracedTensor) or x.trace is not trace:
            got = f"a value of {x.trace.name!r}" if isinstance(x, TracedTensor) else type(x).__name__
            raise DSLError(
                f"{kind} {name!r} must return a tensor of its body or a tuple of them; result {i} is {got}",
                where=loc,
                expected="a tensor or a tuple of tensors",
                got=got,
            )
    if not items:
        raise DSLError(
            f"{kind} {name!r} returns an empty tuple", where=loc, expected="at least one tensor", got="()"
        )
    return tuple(x.value for x in items)


def _compatible(declared: TensorType, actual: TensorType) -> bool:
    if declared.dtype != actual.dtype or not declared.same_shape(actual):
        return False
    layout_ok = declared.layout is None or declared.layout == actual.layout
    storage_ok = declared.storage is Storage.UNDECIDED or declared.storage == actual.storage
    return layout_ok and storage_ok


def _check_results(
    name: str, declared: tuple[TensorSpec, ...], results: tuple[Value, ...], loc: SourceLoc
) -> None:
    if len(declared) != len(results):
        raise DSLError(
            f"{name!r} returns {len(results)} values but its annotation declares {len(declared)}",
            where=loc,
            expected=len(declared),
            got=len(results),
        )
    for i, (spec, value) in enumerate(zip(declared, results, strict=True)):
        if not _compatible(spec.type, value.type):  # type: ignore[arg-type]
            raise DSLError(
                f"{name!r}: result {i} has type {value.type} but the return annotation declares {spec.type}",
                where=loc,
                expected=spec.type,
                got=value.type,
            )


def _live(nodes: list[Node], results: tuple[Value, ...]) -> tuple[Node, ...]:
    """The nodes the results depend on, in trace order (values computed and dropped vanish)."""
    needed: set[int] = set()
    stack = list(results)
    while stack:
        v = stack.pop()
        if id(v) in needed:
            continue
        needed.add(id(v))
        if isinstance(v, Node):
            stack.extend(v.args)
    return tuple(n for n in nodes if id(n) in needed)


def add_converter(base: Function, weight: str, pyfn: Callable[..., Any]) -> Function:
    """Trace `pyfn` as the converter of `base`'s weight `weight` and register it.

    Raises:
        DSLError: when `weight` is not a ConstTensor parameter of `base`, when it already has a
            converter, or when the converter does not return exactly the weight's type.
    """
    loc = definition_loc(pyfn)
    weights = {p.name: p for p in base.weights}
    if weight not in weights:
        raise DSLError(
            f"converter for {weight!r}: {base.name!r} has no weight of that name; "
            f"accepted: {', '.join(weights) or 'none (it has no ConstTensor parameters)'}",
            where=loc,
            expected=tuple(weights),
            got=weight,
        )
    if weight in base.converters:
        first = base.converters[weight].loc
        raise DSLError(
            f"a second converter for weight {weight!r} of {base.name!r} (the first is at {first}); "
            f"a weight has at most one converter",
            where=loc,
            expected="one converter per weight",
            got="two",
        )
    conv = trace_function(pyfn, kind="converter")
    declared = weights[weight].type
    results = conv.result_types
    if conv.returns_tuple or not (results[0].dtype == declared.dtype and results[0].same_shape(declared)):
        got = ", ".join(str(t) for t in results)
        raise DSLError(
            f"converter for {base.name}.{weight} returns {got}; it must return exactly the weight's "
            f"declared type {declared}",
            where=loc,
            expected=declared,
            got=got,
        )
    conv.converts = weight
    base.converters[weight] = conv
    return conv
