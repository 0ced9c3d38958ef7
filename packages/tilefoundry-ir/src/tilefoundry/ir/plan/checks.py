"""Merge checks: every index check over the program's inputs becomes one kernel, run first.

Lowering puts an `index check` kernel before each kernel that reads through data (a gather's
ids, rope's positions, cache_update's pos, attention's kv_len). A check that reads only input
parameters, which no kernel of the program writes, validates values that are all known at
entry, so it may run before any kernel: this pass collects those checks into ONE index-check
kernel placed first (one launch, and on a GPU one verdict read back, instead of one per check),
dropping exact duplicates (two fused cache_updates both check `pos`; rope and cache_update both
check `positions`):

    kernel k9_check:   for c4 in 0..T: let v0 = positions[c4]; check ... 'rope: ...'
    kernel k10_check:  let v0 = pos[]; check ... 'cache_update: ...'
                       for c4 in 0..T: let v1 = positions[c4]; check ... 'rope: ...'
    ->
    kernel checks:     for c0 in 0..T: let v0 = positions[c0]; check ... 'rope: ...'
                       let v1 = pos[]; check ... 'cache_update: ...'

A check that reads a temporary (an index the program computes) stays before its kernel. The
merged kernel's scalars and loop variables are renamed (`v<n>`, `c<n>`) so that checks coming
from different kernels never share a name.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable, Iterator

from ..tile.expr import Expr, Var, free_vars
from ..tile.printer import format_stmt
from ..tile.stmt import (
    Check,
    For,
    Kernel,
    Let,
    Program,
    Stmt,
    map_stmt,
    seq,
    statements,
    stmt_exprs,
    substitute_stmt,
    walk_stmts,
)

CHECKS_KERNEL = "checks"


def check_units(body: Stmt) -> list[Stmt]:
    """The independent checks of an index-check kernel body, in order.

    A unit is one loop nest, or the scalar `Let`s that end at a rank-0 `Check`; a unit that
    reads a scalar an earlier one declares is joined with it (and those between), so every
    unit stands alone.
    """
    units: list[list[Stmt]] = []
    open_: list[Stmt] = []
    for s in statements(body):
        open_.append(s)
        if isinstance(s, (For, Check)):
            units.append(open_)
            open_ = []
    if open_ and units:
        units[-1].extend(open_)  # trailing scalars no check reads
    elif open_:
        units.append(open_)
    joined: list[list[Stmt]] = []
    for unit in units:
        owner = {name: i for i, u in enumerate(joined) for name in _declared(u)}
        deps = [owner[n] for n in _read(unit) if n in owner]
        if deps:
            first = min(deps)
            unit = [s for u in joined[first:] for s in u] + unit
            del joined[first:]
        joined.append(unit)
    return [seq(*u) for u in joined]


def _declared(stmts: list[Stmt]) -> Iterator[str]:
    for s in stmts:
        for x in walk_stmts(s):
            if isinstance(x, Let):
                yield x.name
            elif isinstance(x, For):
                yield x.var


def _read(stmts: list[Stmt]) -> set[str]:
    return {n for s in stmts for x in walk_stmts(s) for e in stmt_exprs(x) for n in free_vars(e)}


def _renamed(unit: Stmt, fresh: Callable[[str], str]) -> Stmt:
    """`unit` with each loop variable and scalar it declares renamed by `fresh(stem)`, in order."""
    names: dict[str, str] = {}
    values: dict[str, Expr] = {}
    for x in walk_stmts(unit):
        if isinstance(x, For):
            names[x.var] = fresh("c")
            values[x.var] = Var(names[x.var])
        elif isinstance(x, Let):
            names[x.name] = fresh("v")
            values[x.name] = Var(names[x.name], x.value.dtype)

    def binder(x: Stmt) -> Stmt | None:
        if isinstance(x, For):
            return dataclasses.replace(x, var=names[x.var], body=map_stmt(x.body, binder))
        if isinstance(x, Let):
            return Let(names[x.name], x.value, x.mutable)
        return None

    return map_stmt(substitute_stmt(unit, values), binder)


def _namer(reserved: set[str]) -> Callable[[str], str]:
    """Fresh names `<stem><n>`, one counter per stem, skipping `reserved`."""
    counters: dict[str, Iterator[int]] = {}

    def fresh(stem: str) -> str:
        count = counters.setdefault(stem, itertools.count())
        return next(name for n in count if (name := f"{stem}{n}") not in reserved)

    return fresh


def _key(unit: Stmt, reserved: set[str]) -> str:
    """Text of `unit` with canonical names: equal keys are structurally equal checks."""
    return "\n".join(format_stmt(_renamed(unit, _namer(reserved))))


def _entry_check(k: Kernel, written: set[int]) -> bool:
    """An index check reading only input parameters that no kernel writes."""
    return k.form == "index check" and all(b.role == "input" and id(b) not in written for b in k.reads)


def merge_checks(program: Program) -> Program:
    """One index-check kernel, first, for every check over unwritten inputs; duplicates dropped."""
    written = {id(b) for k in program.kernels for b in k.writes}
    merged = [k for k in program.kernels if _entry_check(k, written)]
    if not merged:
        return program
    units = [u for k in merged for u in check_units(k.body)]
    reserved = set().union(*(_read([u]) for u in units)) - set().union(*(_declared([u]) for u in units))
    kept: dict[str, Stmt] = {}
    for u in units:
        kept.setdefault(_key(u, reserved), u)
    fresh = _namer(reserved)
    body = seq(*(_renamed(u, fresh) for u in kept.values()))
    reads = {b.name: b for k in merged for b in k.reads}
    dropped = len(units) - len(kept)
    note = (
        f"merged the index checks of {', '.join(k.name for k in merged)} into one kernel run first "
        f"({len(kept)} checks"
        + (f", {dropped} exact duplicate{'s' if dropped > 1 else ''} dropped" if dropped else "")
        + f"): they read only the inputs {', '.join(sorted(reads))}, which no kernel writes, so every "
        "value they validate is available at entry"
    )
    stay = [k.name for k in program.kernels if k.form == "index check" and k not in merged]
    if stay:
        note += f"; kept in place, reading a computed index: {', '.join(stay)}"
    kernel = Kernel(
        CHECKS_KERNEL,
        "index check",
        body,
        tuple(reads[n] for n in sorted(reads)),
        (),
        tuple(dict.fromkeys(o for k in merged for o in k.origin)),
        decisions=[note, *dict.fromkeys(d for k in merged for d in k.decisions)],
    )
    rest = tuple(k for k in program.kernels if k not in merged)
    return dataclasses.replace(program, kernels=(kernel, *rest))
