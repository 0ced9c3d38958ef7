"""The reference evaluator: run a `hir.Function` on torch tensors, node by node.

It is slow and exact — the oracle compiled code and runtime twins are checked against. Before
running, it checks the call: one tensor per declared parameter (weights included), dtypes and
ranks as declared, DimVars bound from the actual shapes (every occurrence agreeing, each extent
inside its half-open range), and every tensor on one device, where the run happens.

    out = evaluate(rms_norm, x, g)     # same as rms_norm(x, g)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from .dims import Dim, DimExpr, DimVar, dim_vars, evaluate_dim, format_dim
from .dtypes import dtype_of
from .errors import EvalError, TileFoundryError
from .hir import Call, Function, Node, Param, TupleGet, Value
from .ops.base import evaluate as evaluate_op
from .ops.base import evaluating_on, resolve_dims
from .types import TensorType


def evaluate(fn: Function, *args: Any) -> Any:
    """Run `fn` on torch tensors: one per declared parameter, in declaration order.

    Returns:
        A tensor, or a tuple of tensors when `fn` returns a tuple. Results are on the
        arguments' device.

    Raises:
        EvalError: for a wrong argument count, a non-tensor argument, a dtype / rank / extent
            that does not match the declaration, a DimVar out of range, or arguments on
            different devices; the message names the parameter.
    """
    if not isinstance(fn, Function):
        raise EvalError(
            f"evaluate takes a Function, got {type(fn).__name__}; for a Module call mod.forward(...) "
            f"or mod.<function>(...)",
            expected="Function",
            got=type(fn).__name__,
        )
    _check_count(fn, args)
    bindings = bind_dims(fn, args)
    device = _one_device(fn, args)
    with evaluating_on(device):
        return _run(fn, args, bindings)


def _check_count(fn: Function, args: Sequence[Any]) -> None:
    if len(args) == len(fn.params):
        return
    names = ", ".join(p.name for p in fn.params)
    hint = ""
    if fn.weights and len(args) == len(fn.activations):
        # The activations-alone convention belongs to a loaded reading (seed 000 §1.1.2).
        hint = (
            f"; {len(args)} is its activation count: a Module's function takes its weights too, "
            f"while a LoadedModule's (mod.load(resource).{fn.name}) takes activations alone"
        )
    raise EvalError(
        f"{fn.name}: takes {len(fn.params)} arguments, one per declared parameter ({names}), "
        f"got {len(args)}{hint}",
        where=fn.name,
        expected=len(fn.params),
        got=len(args),
    )


def _check_tensor(fn: Function, p: Param, a: Any) -> None:
    t: TensorType = p.type  # type: ignore[assignment]
    if not isinstance(a, torch.Tensor):
        raise EvalError(
            f"{fn.name}: argument {p.name!r} must be a torch.Tensor {t}, got {type(a).__name__}",
            where=fn.name,
            expected=t,
            got=type(a).__name__,
        )
    try:
        got: object = dtype_of(a.dtype)
    except ValueError:
        got = a.dtype
    if got != t.dtype:
        raise EvalError(
            f"{fn.name}: argument {p.name!r} has dtype {got}, declared {t.dtype}",
            where=fn.name,
            expected=t.dtype,
            got=got,
        )
    if a.dim() != t.rank:
        raise EvalError(
            f"{fn.name}: argument {p.name!r} has shape {tuple(a.shape)} (rank {a.dim()}), declared {t} "
            f"(rank {t.rank})",
            where=fn.name,
            expected=t.rank,
            got=a.dim(),
        )


def bind_dims(fn: Function, args: Sequence[Any]) -> dict[DimVar, int]:
    """Check each argument against its declaration and bind `fn`'s DimVars from actual shapes.

    A DimVar standing alone as an extent binds directly; one appearing only inside arithmetic
    (`2*T`) is solved when the arithmetic is linear in it. Every declared extent is then checked.

    Raises:
        EvalError: naming the parameter, the DimVar and its range, or the mismatching extent.
    """
    for p, a in zip(fn.params, args, strict=True):
        _check_tensor(fn, p, a)
    bindings: dict[DimVar, int] = {}
    where: dict[DimVar, str] = {}
    for p, a in zip(fn.params, args, strict=True):
        for axis, (d, n) in enumerate(zip(p.type.shape, a.shape, strict=True)):
            if isinstance(d, DimVar):
                _bind(fn, bindings, where, d, int(n), f"{p.name!r} dim {axis}")
    for p, a in zip(fn.params, args, strict=True):
        for axis, (d, n) in enumerate(zip(p.type.shape, a.shape, strict=True)):
            if isinstance(d, DimExpr):
                unbound = [v for v in dim_vars(d) if v not in bindings]
                if len(unbound) == 1 and (value := _solve(d, unbound[0], bindings, int(n))) is not None:
                    _bind(fn, bindings, where, unbound[0], value, f"{p.name!r} dim {axis} ({format_dim(d)})")
            if dim_vars(d) <= bindings.keys() and evaluate_dim(d, bindings) != n:
                raise EvalError(
                    f"{fn.name}: argument {p.name!r} has shape {tuple(a.shape)}, declared {p.type}: "
                    f"dim {axis} is {int(n)}, expected {_spelled(d, bindings)}",
                    where=fn.name,
                    expected=evaluate_dim(d, bindings),
                    got=int(n),
                )
            if not dim_vars(d) <= bindings.keys():
                raise EvalError(
                    f"{fn.name}: argument {p.name!r} dim {axis} is {format_dim(d)}, which does not determine "
                    f"its DimVars from the extent {int(n)}",
                    where=fn.name,
                    expected="a DimVar bound by a plain extent elsewhere",
                    got=format_dim(d),
                )
    return bindings


def _spelled(d: Dim, bindings: dict[DimVar, int]) -> str:
    value = evaluate_dim(d, bindings)
    return str(value) if isinstance(d, int) else f"{format_dim(d)} = {value}"


def _bind(
    fn: Function, bindings: dict[DimVar, int], where: dict[DimVar, str], v: DimVar, n: int, at: str
) -> None:
    if v in bindings and bindings[v] != n:
        raise EvalError(
            f"{fn.name}: DimVar {v.name} is {bindings[v]} from argument {where[v]} "
            f"but {n} from argument {at}",
            where=fn.name,
            expected=bindings[v],
            got=n,
        )
    if not v.admits(n):
        raise EvalError(
            f"{fn.name}: argument {at} gives DimVar {v.name} the extent {n}, "
            f"outside its range [{v.lo}, {v.hi})",
            where=fn.name,
            expected=f"[{v.lo}, {v.hi})",
            got=n,
        )
    bindings[v] = n
    where[v] = at


def _solve(d: Dim, v: DimVar, bindings: dict[DimVar, int], n: int) -> int | None:
    """The value of `v` making `d == n`, when `d` is `a*v + b` with the others bound; else None."""
    trial = {**bindings, v: 0}
    try:
        b = evaluate_dim(d, trial)
        a = evaluate_dim(d, {**bindings, v: 1}) - b
        # Linear only if a third point agrees.
        if evaluate_dim(d, {**bindings, v: 2}) != 2 * a + b or a == 0 or (n - b) % a:
            return None
    except KeyError:
        return None
    return (n - b) // a


def _one_device(fn: Function, args: Sequence[torch.Tensor]) -> torch.device:
    devices = {a.device for a in args}
    if len(devices) > 1:
        placed = ", ".join(f"{p.name} on {a.device}" for p, a in zip(fn.params, args, strict=True))
        raise EvalError(
            f"{fn.name}: arguments sit on different devices ({placed}); put them all on one device",
            where=fn.name,
            expected="one device",
            got=sorted(str(d) for d in devices),
        )
    return devices.pop() if devices else torch.device("cpu")


def _run(fn: Function, args: Sequence[torch.Tensor], bindings: dict[DimVar, int]) -> Any:
    env: dict[Value, Any] = dict(zip(fn.params, args, strict=True))
    for node in fn.body:
        env[node] = _run_node(fn, node, [env[a] for a in node.args], bindings)
    results = tuple(env[v] for v in fn.results)
    return results if fn.returns_tuple else results[0]


def _run_node(fn: Function, node: Node, args: list[Any], bindings: dict[DimVar, int]) -> Any:
    op = node.op
    if isinstance(op, TupleGet):
        return args[0][op.index]
    if isinstance(op, Call):
        assert op.function is not None
        return evaluate(op.function, *args)
    try:
        out = evaluate_op(resolve_dims(op, bindings), *args)
    except TileFoundryError as err:
        raise err.at(node.loc) from None
    except Exception as err:
        raise EvalError(
            f"{fn.name}: {op.name} failed while evaluating: {err}",
            where=node.loc,
            expected=node.type,
            got=str(err),
        ) from err
    _check_result(fn, node, out, bindings)
    return out


def _check_result(fn: Function, node: Node, out: Any, bindings: dict[DimVar, int]) -> None:
    """Refuse an evaluator rule whose result disagrees with the op's inferred type."""
    t = node.type
    if not isinstance(t, TensorType):
        return
    shape = tuple(evaluate_dim(d, bindings) for d in t.shape)
    if not isinstance(out, torch.Tensor) or tuple(out.shape) != shape or out.dtype != t.dtype.torch:
        got = f"{tuple(out.shape)} {out.dtype}" if isinstance(out, torch.Tensor) else type(out).__name__
        raise EvalError(
            f"{fn.name}: the evaluation rule of {node.op.name} returned {got}, but type inference "
            f"says {t} = {shape} {t.dtype}",
            where=node.loc,
            expected=shape,
            got=got,
        )
