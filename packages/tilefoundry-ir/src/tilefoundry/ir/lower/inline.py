"""Specialization before partition: calls are inlined so kernels can fuse across them.

HIR records a call of another @func as a `Call` node (and `TupleGet`s for a tuple result). The
compiler sees through it: the callee's body is copied into the caller with its parameters
bound to the call's arguments and its DimVars to the caller's extents.

    %0 = call silu_mul(%x, %w)    ->    %0 = silu(%x)
                                        %1 = mul(%0, %w)
"""

from __future__ import annotations

import dataclasses

from ..dims import Dim, DimExpr, DimVar
from ..hir import Call, Function, Node, TupleGet, Value, bind_call, substitute_dim
from ..ops.base import Op
from ..types import TensorType


def _retype(t: object, mapping: dict[DimVar, Dim]) -> object:
    if isinstance(t, TensorType):
        return t.with_(shape=tuple(substitute_dim(d, mapping) for d in t.shape))
    if isinstance(t, tuple):
        return tuple(_retype(x, mapping) for x in t)
    return t


def _reattr(op: Op, mapping: dict[DimVar, Dim]) -> Op:
    def sub(v: object) -> object:
        if isinstance(v, tuple):
            return tuple(sub(x) for x in v)
        return substitute_dim(v, mapping) if isinstance(v, (DimVar, DimExpr)) else v

    if not mapping or not dataclasses.is_dataclass(op):
        return op
    return dataclasses.replace(op, **{k: sub(v) for k, v in op.attrs().items()})  # type: ignore[misc]


def _expand(
    fn: Function, args: tuple[Value, ...], mapping: dict[DimVar, Dim], out: list[Node]
) -> tuple[Value, ...]:
    """Append `fn`'s body (calls expanded) to `out`; returns the values of its results."""
    env: dict[Value, Value | tuple[Value, ...]] = dict(zip(fn.params, args, strict=True))
    for node in fn.body:
        operands = [env[a] for a in node.args]
        op = node.op
        if isinstance(op, Call):
            callee = op.function
            assert callee is not None
            types = tuple(v.type for v in operands)  # type: ignore[union-attr]
            inner = bind_call(callee, types)  # type: ignore[arg-type]
            env[node] = _expand(callee, tuple(operands), inner, out)  # type: ignore[arg-type]
            if not callee.returns_tuple:
                env[node] = env[node][0]  # type: ignore[index]
            continue
        if isinstance(op, TupleGet):
            env[node] = operands[0][op.index]  # type: ignore[index]
            continue
        new = Node(
            _retype(node.type, mapping),
            op=_reattr(op, mapping),
            args=tuple(operands),
            loc=node.loc,
            mesh=node.mesh,
        )  # type: ignore[arg-type]
        out.append(new)
        env[node] = new
    return tuple(env[r] for r in fn.results)  # type: ignore[misc]


def inline_calls(fn: Function) -> Function:
    """`fn` with every call (transitively) replaced by the callee's body; fn itself is unchanged."""
    if not any(isinstance(n.op, (Call, TupleGet)) for n in fn.body):
        return fn
    body: list[Node] = []
    results = _expand(fn, fn.params, {}, body)
    return dataclasses.replace(fn, body=tuple(body), results=results)
