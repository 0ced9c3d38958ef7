"""GEMM operands read in place through a transpose kernel (x @ w.T without the copy of w).

`x @ tf.transpose(w, (1, 0))` lowers to two kernels: a copy `t[i, j] = w[j, i]` into a temp and
a contraction reading `t[k, n]`. When that copy is the temp's only writer and the contraction
its only reader, `t[k, n]` is `w[n, k]` everywhere it is read, so the contraction may read `w`
directly: its B operand becomes K-major (stored (N, K)), the value of every product unchanged.
The proof is done on the bodies, never on kernel names or forms:

    writer   for i in 0..E0 parallel: for j in 0..E1 parallel: t[i, j] = src[j, i]
             t (E0, E1), src (E1, E0), one dtype, the writer reads only src and writes only t
    temp     role "temp", written by that kernel alone, read by the contraction alone
    source   a buffer in memory (parameter or temp), not written between the copy and the GEMM
    placement neither loop nor kernel carries an explicit placement (those keep their realization)

Atom selection (`ir.plan.atoms`) decides whether reading in place pays: only when the catalog
has a whole-GEMM atom for the resulting operand major-ness.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..tile.expr import Expr, Load, Var, dim_expr, loads, transform
from ..tile.stmt import (
    Assign,
    Buffer,
    For,
    Kernel,
    Let,
    Program,
    Stmt,
    Store,
    map_stmt,
    stmt_exprs,
    walk_stmts,
)


@dataclass(frozen=True)
class TransposeFold:
    """A temp that is `source` transposed, which a contraction may read in place.

    Attributes:
        temp: the 2-D temp the writer fills, `temp[i, j] = source[j, i]`.
        source: the buffer in memory it copies.
        writer: the transpose kernel, dropped once the contraction reads `source`.
    """

    temp: Buffer
    source: Buffer
    writer: Kernel

    def __str__(self) -> str:
        t, s = self.temp.name, self.source.name
        return (
            f"{t} read in place as {s} transposed (kernel {self.writer.name} is exactly "
            f"{t}[i, j] = {s}[j, i] over all of {t}, and nothing else reads {t}); "
            f"{self.writer.name} and {t} dropped"
        )


def transpose_source(k: Kernel) -> tuple[Buffer, Buffer] | None:
    """(temp, source) when kernel `k` is exactly `temp[i, j] = source[j, i]` over all of temp, else None."""
    outer = k.body
    if not (isinstance(outer, For) and isinstance(outer.body, For)):
        return None
    inner = outer.body
    store = inner.body
    if not (isinstance(store, Store) and isinstance(store.value, Load)):
        return None
    i, j = Var(outer.var), Var(inner.var)
    temp, source = store.buffer, store.value.buffer
    if not (
        outer.kind == inner.kind == "parallel"
        and store.index == (i, j)
        and store.value.index == (j, i)
        and temp.rank == source.rank == 2
        and temp is not source
        and temp.dtype == source.dtype
        and source.role != "local"
        and k.reads == (source,)
        and k.writes == (temp,)
    ):
        return None
    extents = [outer.extent, inner.extent]
    if [dim_expr(d) for d in temp.shape] != extents or [dim_expr(d) for d in source.shape] != extents[::-1]:
        return None
    return temp, source


def find_fold(program: Program, gemm: Kernel, operand: Buffer) -> TransposeFold | str | None:
    """How `gemm` could read `operand` in place, why it may not (text), or None when no transpose wrote it."""
    if operand.role != "temp":
        return None
    kernels = list(program.kernels)
    writers = [k for k in kernels if operand in k.writes]
    if len(writers) != 1:
        return None
    writer = writers[0]
    proved = transpose_source(writer)
    if proved is None:
        return None
    temp, source = proved
    if writer.request or any(s.request for s in walk_stmts(writer.body) if isinstance(s, For)):
        return f"its writer {writer.name} has an explicit placement, which keeps its realization"
    others = [k.name for k in kernels if temp in k.reads and k is not gemm]
    if others:
        return f"{temp.name} is also read by {', '.join(others)}"
    first, last = kernels.index(writer), kernels.index(gemm)
    if first > last:
        return f"its writer {writer.name} runs after {gemm.name}"
    between = [k.name for k in kernels[first + 1 : last + 1] if source in k.writes]
    if between:
        return f"{source.name} is written by {', '.join(between)} after {writer.name} copies it"
    return TransposeFold(temp, source, writer)


def read_in_place(body: Stmt, fold: TransposeFold) -> Stmt | str:
    """`body` with every `temp[a, b]` read as `source[b, a]`, or why some read of temp remains."""

    def swap(e: Expr) -> Expr | None:
        if isinstance(e, Load) and e.buffer is fold.temp:
            return Load(fold.source, (e.index[1], e.index[0]))
        return None

    def one(s: Stmt) -> Stmt | None:
        if isinstance(s, Store):
            return Store(s.buffer, tuple(transform(i, swap) for i in s.index), transform(s.value, swap))
        if isinstance(s, Let):
            return Let(s.name, transform(s.value, swap), s.mutable)
        if isinstance(s, Assign):
            return Assign(s.name, transform(s.value, swap))
        return None

    out = map_stmt(body, one)
    for s in walk_stmts(out):
        if any(x.buffer is fold.temp for e in stmt_exprs(s) for x in loads(e)):
            return f"{fold.temp.name} is read outside the contraction's loads and stores"
    return out


def drop_folded(program: Program, folds: list[tuple[Kernel, TransposeFold]]) -> None:
    """Remove each fold's writer kernel and temp; each reader then reads the source instead."""
    if not folds:
        return
    for reader, fold in folds:
        reads = tuple(fold.source if b is fold.temp else b for b in reader.reads)
        reader.reads = tuple(dict.fromkeys(reads))  # x @ x.T reads x once
    writers = {id(f.writer) for _, f in folds}
    temps = {id(f.temp) for _, f in folds}
    program.kernels = tuple(k for k in program.kernels if id(k) not in writers)
    program.temps = tuple(t for t in program.temps if id(t) not in temps)
