"""Hoist shared values: a subexpression used twice becomes one worker-local scalar.

Inlined producers are memoized per index, so a value consumed twice (`x32 * x32`, a producer
feeding two outputs of one element grid) is one expression object referenced twice. This pass
names each such object once with a `Let` before its first use, so emitted code computes it
once and its text stays linear in the program size:

    out0[i] = exp(x[i]) + 1;  out1[i] = exp(x[i]) * 2
      ->  let v0 = exp(x[i]);  out0[i] = v0 + 1;  out1[i] = v0 * 2

A value is bound only where it is computed whatever the data: in a statement, outside Select
branches (a branch may read out of bounds when not taken), and nothing inside a Fold (its body
reads the Fold's own variable). Once bound, the name also serves the value's occurrences inside
branches of that statement and the later ones (rope's `x[j] * inv` beside
`j < 64 ? -x[j + 64] * inv : ...` folds `inv`'s row once). A value reading a scalar or buffer
the same run of statements updates is left in place.
"""

from __future__ import annotations

import functools
import itertools

from .expr import Bin, Cast, Const, Expr, Fold, Load, Select, Un, Var, children, free_vars
from .stmt import Assign, Check, Let, Program, Seq, Stmt, Store, map_stmt, seq

_SIMPLE = (Store, Let, Assign, Check)


def _count(e: Expr, refs: dict[int, int], nodes: dict[int, Expr]) -> None:
    key = id(e)
    refs[key] = refs.get(key, 0) + 1
    if refs[key] > 1:
        return
    nodes[key] = e
    if isinstance(e, Select):
        _count(e.cond, refs, nodes)
        return
    for k in _kids(e):
        _count(k, refs, nodes)


def _branch_nodes(e: Expr, refs: dict[int, int], out: set[int]) -> None:
    """Add to `out` the id of each node inside a Select branch of `e` that is also computed
    outside every branch (in `refs`), the outermost such node of each path only."""

    def tops(x: Expr) -> None:
        if id(x) in refs:
            out.add(id(x))
            return
        for k in (x.cond, x.a, x.b) if isinstance(x, Select) else _kids(x):
            tops(k)

    if isinstance(e, Select):
        _branch_nodes(e.cond, refs, out)
        tops(e.a)
        tops(e.b)
        return
    for k in _kids(e):
        _branch_nodes(k, refs, out)


def _reuse(e: Expr, bound: dict[int, Var]) -> Expr:
    """`e` with every node already bound replaced by its name, inside branches too."""
    if id(e) in bound:
        return bound[id(e)]
    kids = (e.cond, e.a, e.b) if isinstance(e, Select) else _kids(e)
    new = tuple(_reuse(k, bound) for k in kids)
    if all(a is b for a, b in zip(new, kids, strict=True)):
        return e
    return Select(*new) if isinstance(e, Select) else _rebuild(e, new)


def _kids(e: Expr) -> tuple[Expr, ...]:
    if isinstance(e, Bin):
        return (e.a, e.b)
    if isinstance(e, (Un, Cast)):
        return (e.a,)
    if isinstance(e, Load):
        return e.index
    return ()


def _exprs(s: Stmt) -> list[Expr]:
    if isinstance(s, Store):
        return [*s.index, s.value]
    if isinstance(s, (Let, Assign)):
        return [s.value]
    assert isinstance(s, Check)
    return [s.cond, s.shown]


class _Rewriter:
    def __init__(self, names: itertools.count, reserved: frozenset[str]):
        self.names = names
        self.reserved = reserved

    def fresh(self) -> str:
        while True:
            name = f"v{next(self.names)}"
            if name not in self.reserved:
                return name

    def run(self, stmts: list[Stmt]) -> list[Stmt]:
        refs: dict[int, int] = {}
        nodes: dict[int, Expr] = {}
        for s in stmts:
            for e in _exprs(s):
                _count(e, refs, nodes)
        inside: set[int] = set()
        for s in stmts:
            for e in _exprs(s):
                _branch_nodes(e, refs, inside)
        updated = {s.name for s in stmts if isinstance(s, Assign)}
        stored = {id(s.buffer) for s in stmts if isinstance(s, Store)}
        shared = {
            k
            for k, n in refs.items()
            if (n > 1 or k in inside)
            and not isinstance(nodes[k], (Var, Const))
            and not (free_vars(nodes[k]) & updated)
            and not any(isinstance(x, Load) and id(x.buffer) in stored for x in _walk(nodes[k]))
        }
        if not shared:
            return stmts
        bound: dict[int, Var] = {}
        out: list[Stmt] = []
        for s in stmts:
            pending: list[Stmt] = []
            new = _replace_in(s, functools.partial(self._bind, shared=shared, bound=bound, pending=pending))
            out.extend(pending)
            out.append(_replace_in(new, functools.partial(_reuse, bound=bound)))
        return out

    def _bind(self, e: Expr, shared: set[int], bound: dict[int, Var], pending: list[Stmt]) -> Expr:
        key = id(e)
        if key in bound:
            return bound[key]
        if isinstance(e, Select):
            rebuilt: Expr = Select(self._bind(e.cond, shared, bound, pending), e.a, e.b)
        else:
            kids = _kids(e)
            new = tuple(self._bind(k, shared, bound, pending) for k in kids)
            rebuilt = _rebuild(e, new) if any(a is not b for a, b in zip(new, kids, strict=True)) else e
        if key in shared:
            var = Var(self.fresh(), rebuilt.dtype)
            pending.append(Let(var.name, rebuilt))
            bound[key] = var
            return var
        return rebuilt


def _walk(e: Expr) -> list[Expr]:
    out = [e]
    for k in (e.cond,) if isinstance(e, Select) else children(e) if isinstance(e, Fold) else _kids(e):
        out.extend(_walk(k))
    return out


def _rebuild(e: Expr, kids: tuple[Expr, ...]) -> Expr:
    if isinstance(e, Bin):
        return Bin(e.op, kids[0], kids[1], e.dtype)
    if isinstance(e, Un):
        return Un(e.op, kids[0], e.dtype)
    if isinstance(e, Cast):
        return Cast(kids[0], e.dtype)
    if isinstance(e, Load):
        return Load(e.buffer, kids)
    return e


def _replace_in(s: Stmt, fn) -> Stmt:
    if isinstance(s, Store):
        return Store(s.buffer, tuple(fn(i) for i in s.index), fn(s.value))
    if isinstance(s, Let):
        return Let(s.name, fn(s.value), s.mutable)
    if isinstance(s, Assign):
        return Assign(s.name, fn(s.value))
    assert isinstance(s, Check)
    return Check(fn(s.cond), s.message, fn(s.shown))


def _blocks(s: Stmt, rw: _Rewriter) -> Stmt | None:
    body = list(s.body) if isinstance(s, Seq) else [s] if isinstance(s, _SIMPLE) else None
    if body is None:
        return None
    out: list[Stmt] = []
    run: list[Stmt] = []
    for c in body:
        if isinstance(c, _SIMPLE):
            run.append(c)
            continue
        out.extend(rw.run(run))
        run = []
        out.append(map_stmt(c, lambda x: _blocks(x, rw)))
    out.extend(rw.run(run))
    return seq(*out)


def hoist_shared_values(program: Program) -> Program:
    """Name every expression object used more than once within a run of statements.

    The names (`v0`, `v1`, ...) skip the program's DimVar names, which TileIR reads as Vars.
    """
    reserved = frozenset(d.var.name for d in program.dims)
    for k in program.kernels:
        rw = _Rewriter(itertools.count(), reserved)
        k.body = map_stmt(k.body, functools.partial(_blocks, rw=rw))
    return program
