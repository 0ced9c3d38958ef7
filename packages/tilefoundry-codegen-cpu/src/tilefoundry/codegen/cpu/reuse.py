"""Reuse through the output: a value a sum loop computes is stored, not recomputed by a later loop.

A row kernel often folds `E(r)` into a sum and, after a loop-invariant step, writes
`out[.., j] = f(E(j))` over the same extent (softmax: the exponentials). On the cpu the second
evaluation of `E` (a vector `exp` per element) costs more than an L1-hot store and reload, so
the sum loop also stores `E(r)` where the later loop will read it:

    for r reduce(s:add): s = s + E(r)          for r reduce(s:add): let e = E(r); out[i, r] = e; s = s + e
    let inv = 1 / s                     ->     let inv = 1 / s
    for j parallel: out[i, j] = E(j) * inv     for j parallel: out[i, j] = out[i, j] * inv

This is an IR-structure rule (seed 003 style), not recognition of softmax. It is applied only
when proved to give the same values: equal extents; `E` pure, reading no buffer the kernel
writes; the store index injective in `j` (its last entry is `j`, the others free of it); `out`
of `E`'s dtype, so the stored value reads back exactly; nothing in between touches `out` or
updates a scalar `E` reads.
"""

from __future__ import annotations

import dataclasses

from tilefoundry.ir.tile.expr import Bin, Expr, Load, Var, free_vars, substitute, transform, walk
from tilefoundry.ir.tile.printer import format_expr
from tilefoundry.ir.tile.stmt import (
    Assign,
    Buffer,
    For,
    Kernel,
    Let,
    Program,
    Seq,
    Stmt,
    Store,
    map_stmt,
    seq,
    stmt_exprs,
    walk_stmts,
)


def _sum_term(loop: For) -> Expr | None:
    """`E` of `for r reduce(s:add): s = s + E(r)`, or None when the loop is not that."""
    if loop.kind != "reduce" or len(loop.carries) != 1 or loop.carries[0][1] != "add":
        return None
    body = loop.body
    acc = loop.carries[0][0]
    if not (isinstance(body, Assign) and body.name == acc and isinstance(body.value, Bin)):
        return None
    v = body.value
    if v.op != "add" or v.a != Var(acc, v.dtype) or acc in free_vars(v.b):
        return None
    return v.b


def _touches(s: Stmt, buffer: Buffer) -> bool:
    """`s` stores to or loads from `buffer`."""
    for x in walk_stmts(s):
        if isinstance(x, Store) and x.buffer is buffer:
            return True
        if any(isinstance(e, Load) and e.buffer is buffer for ex in stmt_exprs(x) for e in walk(ex)):
            return True
    return False


def _assigns(s: Stmt, names: set[str]) -> bool:
    """`s` updates one of the scalars `names` (then a later `E` would not be the stored one)."""
    return any(isinstance(x, Assign) and x.name in names for x in walk_stmts(s))


def _reuse(sum_loop: For, term: Expr, write: For, written: set[int], name: str) -> tuple[For, For] | None:
    """The two loops rewritten to store `term` in the sum loop and reload it, or None if unproved."""
    if write.kind != "parallel" or write.extent != sum_loop.extent or not isinstance(write.body, Store):
        return None
    store = write.body
    j, r, out = write.var, sum_loop.var, store.buffer
    if out.dtype != term.dtype or any(isinstance(e, Load) and id(e.buffer) in written for e in walk(term)):
        return None
    if not store.index or store.index[-1] != Var(j) or any(j in free_vars(i) for i in store.index[:-1]):
        return None
    if any(isinstance(e, Load) and e.buffer is out for e in walk(store.value)):
        return None
    again = substitute(term, {r: Var(j)})
    value = transform(store.value, lambda e: Load(out, store.index) if e == again else None)
    if value == store.value:
        return None
    acc = sum_loop.carries[0][0]
    e = Var(name, term.dtype)
    body = seq(
        Let(name, term),
        Store(out, tuple(substitute(i, {j: Var(r)}) for i in store.index), e),
        Assign(acc, Bin("add", Var(acc, term.dtype), e, term.dtype)),
    )
    reload = Store(out, store.index, value)
    return dataclasses.replace(sum_loop, body=body), dataclasses.replace(write, body=reload)


class _Kernel:
    def __init__(self, kernel: Kernel, reserved: frozenset[str]):
        self.kernel = kernel
        self.written = {id(b) for b in kernel.writes}
        stmts = list(walk_stmts(kernel.body))
        self.taken = set(reserved) | {n for x in stmts for ex in stmt_exprs(x) for n in free_vars(ex)}
        self.taken |= {x.name for x in stmts if isinstance(x, (Let, Assign))}
        self.taken |= {x.var for x in stmts if isinstance(x, For)}
        self.notes: list[str] = []

    def fresh(self, stem: str) -> str:
        name = stem
        while name in self.taken:
            name += "_"
        self.taken.add(name)
        return name

    def block(self, s: Stmt) -> Stmt | None:
        if not isinstance(s, Seq):
            return None
        body = [map_stmt(c, self.block) for c in s.body]
        for i, loop in enumerate(body):
            term = _sum_term(loop) if isinstance(loop, For) else None
            if term is None:
                continue
            for k in range(i + 1, len(body)):
                write = body[k]
                if not isinstance(write, For):
                    continue
                out = write.body.buffer if isinstance(write.body, Store) else None
                between = body[i + 1 : k]
                if out is None or any(_touches(x, out) or _assigns(x, free_vars(term)) for x in between):
                    break
                done = _reuse(loop, term, write, self.written, self.fresh(f"{loop.carries[0][0]}_e"))
                if done is not None:
                    body[i], body[k] = done
                    self.notes.append(
                        f"{loop.var}: stores {format_expr(term)} in {out.name} for loop {write.var} to "
                        f"reload (one evaluation per element)"
                    )
                break
        return Seq(tuple(body))


def reuse_sum_terms(program: Program) -> Program:
    """`program` with every proved sum-then-write pair rewritten (a new Program; kernels copied)."""
    reserved = frozenset(d.var.name for d in program.dims)
    kernels = []
    for k in program.kernels:
        plan = _Kernel(k, reserved)
        body = map_stmt(k.body, plan.block)
        kernels.append(dataclasses.replace(k, body=body, decisions=[*k.decisions, *plan.notes]))
    return dataclasses.replace(program, kernels=tuple(kernels))
