"""Stores at a permutation copy's destination (attention writing (B, S, H, D) without a copy kernel).

`tf.reshape(tf.transpose(o, (0, 2, 1, 3)), (T, H * D))` after an attention lowers to the
attention kernel W writing a temp t and a copy kernel P reading all of it:

    W   ... t[b, h, s, d] = value
    P   for i0 in 0..B*S: for i1 in 0..H*D: dst[i0, i1] = t[i0 // S, i1 // D, i0 % S, i1 % D]

P's load index cuts each of its loop variables into mixed-radix digits, `(i // stride) % extent`
from stride 1 upwards, and every dim of t is exactly one digit (or a constant 0 of extent 1): a
bijection between the compact layouts of dst and t. So the element W stores at t[idx] is the one
P copies to dst[f(idx)], f summing each digit times its stride; W may store it there itself:

    W   ... dst[b * S + s, h * D + d] = value          (P and t dropped)

The proof is done on the bodies, never on kernel names or forms:

    copy     P is a perfect nest of parallel loops over dst's compact extents around one
             `dst[i0, .., ik] = t[g(i)]`, same dtype, reading only t and writing only dst,
             g a digit split as above (anything else keeps the copy, the reason noted on P)
    temp     role "temp", written by one kernel W before P, read by P alone
    writer   W's only effect on t is one Store (no load of t, not an atom), and W neither
             reads nor writes dst
    between  no kernel between W and P reads or writes dst (it would see W's stores early,
             or be overwritten by them out of order)
    placement neither W nor P (nor their loops) carries an explicit placement
"""

from __future__ import annotations

from dataclasses import dataclass

from ..dims import Dim, dims_equal, format_dim
from ..tile.expr import Bin, Const, Expr, Load, Var, add, dim_expr, loads, mul
from ..tile.printer import format_expr
from ..tile.stmt import AtomCall, Buffer, For, Kernel, Program, Stmt, Store, map_stmt, stmt_exprs, walk_stmts

# One digit of a copy's loop variable: (temp dim it is, its stride, whether it is taken modulo).
_Digit = tuple[int, Expr, bool]
# A dest dim's index as (temp dim, stride) digits, most significant first.
_Strides = tuple[tuple[int, Expr], ...]


@dataclass(frozen=True)
class PermutationCopy:
    """A kernel that is exactly `dest[i] = temp[g(i)]` over all of both, g a bijection.

    Attributes:
        strides: per dim of dest, the (temp dim, stride) digits that make its index, most
            significant first: `dest[k] = Σ temp_index[dim] * stride`.
    """

    kernel: Kernel
    temp: Buffer
    dest: Buffer
    strides: tuple[_Strides, ...]

    def dest_index(self, index: tuple[Expr, ...]) -> tuple[Expr, ...]:
        """Where the copy puts the element at `temp[index]`."""
        out = []
        for digits in self.strides:
            total: Expr = Const(0)
            for dim, stride in digits:
                total = add(total, mul(index[dim], stride))
            out.append(total)
        return tuple(out)


@dataclass(frozen=True)
class StoreFold:
    """A writer that may store straight into a permutation copy's destination."""

    copy: PermutationCopy
    writer: Kernel

    def __str__(self) -> str:
        c = self.copy
        t, dst = c.temp.name, c.dest.name
        idx = tuple(Var(f"x{j}") for j in range(c.temp.rank))
        where = ", ".join(format_expr(e) for e in c.dest_index(idx))
        return (
            f"stores {t}[{', '.join(x.name for x in idx)}] at {dst}[{where}]: kernel {c.kernel.name} "
            f"was exactly that permutation copy over all of {t} (compact layouts, a bijection), the "
            f"only reader of {t}, and nothing between them touches {dst}; {c.kernel.name} and {t} dropped"
        )


def _nest(k: Kernel) -> tuple[list[For], Stmt]:
    loops: list[For] = []
    body = k.body
    while isinstance(body, For):
        loops.append(body)
        body = body.body
    return loops, body


def _digit(e: Expr, names: list[str]) -> tuple[int, Expr, Expr | None] | None:
    """(loop, stride, modulus) when `e` is `(i // stride) % modulus` (either part optional), else None."""
    modulus = None
    if isinstance(e, Bin) and e.op == "mod":
        e, modulus = e.a, e.b
    stride: Expr = Const(1)
    if isinstance(e, Bin) and e.op == "floordiv":
        e, stride = e.a, e.b
    if isinstance(e, Var) and e.name in names:
        return names.index(e.name), stride, modulus
    return None


def _chain(digits: list[_Digit], shape: tuple[Dim, ...], name: str, extent: Dim) -> _Strides | str:
    """Loop variable `name`'s digits, most significant first, or why they are not its mixed-radix split."""
    order: list[tuple[int, Expr]] = []
    below: Dim = 1  # the product of the extents of the digits found so far
    left = list(digits)
    while left:
        found = [d for d in left if d[1] == dim_expr(below)]
        if len(found) != 1:
            return f"{len(found)} digits of {name} have stride {format_dim(below)}"
        dim, stride, modded = found[0]
        left.remove(found[0])
        if left and not modded:
            return f"dim {dim} takes {name} // {format_dim(below)} without a modulo below a higher digit"
        order.append((dim, stride))
        below = below * shape[dim]
    if not dims_equal(below, extent):
        return f"the digits of {name} cover {format_dim(below)} values, {name} has {format_dim(extent)}"
    return tuple(reversed(order))


def permutation_copy(k: Kernel) -> PermutationCopy | str | None:
    """The copy `k` is, or why it is not a permutation of all of its temp (text); None: not a temp's copy."""
    loops, store = _nest(k)
    if not (loops and isinstance(store, Store) and isinstance(store.value, Load)):
        return None
    temp, dest = store.value.buffer, store.buffer
    if not (
        temp.role == "temp"
        and temp is not dest
        and dest.role != "local"
        and temp.dtype == dest.dtype
        and k.reads == (temp,)
        and k.writes == (dest,)
    ):
        return None
    names = [f.var for f in loops]
    if any(f.kind != "parallel" for f in loops) or store.index != tuple(Var(n) for n in names):
        return f"{k.name} is not a nest of parallel loops storing each {dest.name} element at its own index"
    if [f.extent for f in loops] != [dim_expr(d) for d in dest.shape]:
        return f"{k.name}'s loops do not cover {dest.name}'s extents"
    digits: list[list[_Digit]] = [[] for _ in names]
    for dim, e in enumerate(store.value.index):
        if e == Const(0) and dims_equal(temp.shape[dim], 1):
            continue
        d = _digit(e, names)
        if d is None:
            why = "is not a digit (i // stride) % extent of a loop variable"
            return f"{temp.name}'s index {format_expr(e)} {why}"
        loop, stride, modulus = d
        if modulus is not None and modulus != dim_expr(temp.shape[dim]):
            return f"{temp.name}'s index {format_expr(e)} is not taken modulo dim {dim}'s extent"
        digits[loop].append((dim, stride, modulus is not None))
    strides = []
    for loop, name in enumerate(names):
        chain = _chain(digits[loop], temp.shape, name, dest.shape[loop])
        if isinstance(chain, str):
            return f"not a permutation of all of {temp.name}: {chain}"
        strides.append(chain)
    return PermutationCopy(k, temp, dest, tuple(strides))


def _placed(k: Kernel) -> bool:
    return bool(k.request) or any(isinstance(s, For) and s.request for s in walk_stmts(k.body))


def _stores_to(k: Kernel, b: Buffer) -> list[Store]:
    return [s for s in walk_stmts(k.body) if isinstance(s, Store) and s.buffer is b]


def _loads_of(k: Kernel, b: Buffer) -> bool:
    return any(ld.buffer is b for s in walk_stmts(k.body) for e in stmt_exprs(s) for ld in loads(e))


def find_store_fold(program: Program, copy: PermutationCopy) -> StoreFold | str:
    """How the writer of `copy`'s temp may store into its destination, or why it may not (text)."""
    kernels = list(program.kernels)
    p, t, dst = copy.kernel, copy.temp, copy.dest
    writers = [k for k in kernels if t in k.writes]
    if len(writers) != 1 or kernels.index(writers[0]) > kernels.index(p):
        return f"{t.name} is not written by one kernel before {p.name}"
    w = writers[0]
    if _placed(w) or _placed(p):
        return f"{w.name if _placed(w) else p.name} has an explicit placement, which keeps its realization"
    others = [k.name for k in kernels if t in k.reads and k is not p]
    if others:
        return f"{t.name} is also read by {', '.join(others)}"
    if isinstance(w.body, AtomCall):
        return f"{w.name} is the atom {w.body.atom}, which writes {t.name} in its own layout"
    if len(_stores_to(w, t)) != 1 or _loads_of(w, t) or t in w.reads:
        return f"{w.name}'s only effect on {t.name} is not one store"
    if dst in w.reads or dst in w.writes:
        return f"{w.name} itself touches {dst.name}"
    between = kernels[kernels.index(w) + 1 : kernels.index(p)]
    touching = [k.name for k in between if dst in k.reads or dst in k.writes]
    if touching:
        return f"{', '.join(touching)} touches {dst.name} between {w.name} and {p.name}"
    return StoreFold(copy, w)


def store_permuted(fold: StoreFold) -> Stmt:
    """The writer's body with its store `temp[idx] = v` made `dest[f(idx)] = v`."""
    c = fold.copy

    def one(s: Stmt) -> Stmt | None:
        if isinstance(s, Store) and s.buffer is c.temp:
            return Store(c.dest, c.dest_index(s.index), s.value)
        return None

    return map_stmt(fold.writer.body, one)


def permute_stores(program: Program) -> Program:
    """Let each permutation copy's writer store at the copy's destination; drop the copy and its temp."""
    for p in list(program.kernels):
        copy = permutation_copy(p)
        if copy is None:
            continue
        fold = find_store_fold(program, copy) if isinstance(copy, PermutationCopy) else copy
        if isinstance(fold, str):
            p.decisions.append(f"kept the copy: {fold}")
            continue
        w = fold.writer
        w.body = store_permuted(fold)
        w.writes = tuple(dict.fromkeys(copy.dest if b is copy.temp else b for b in w.writes))
        w.decisions.append(str(fold))
        program.kernels = tuple(k for k in program.kernels if k is not p)
        program.temps = tuple(b for b in program.temps if b is not copy.temp)
    return program
