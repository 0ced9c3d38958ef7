"""Partner packs: values a thread of a row computes for another, passed by warp shuffles.

In a flat grid whose packs of a row run on consecutive threads (`share_folds`' layout), thread p
holds pack p of the row. Rotate-half's other half, pack p ^ 8, is then the pack thread p ^ 8 loads
as its own, and any value computed from such packs and row-uniform names alone (the normalized
`bf16(x * rsqrt(..) * g)` of the other half) is that thread's own value. The pack plan records it
as an `Exchange`: each thread computes the value over its own pack and `lane_group_exchange`
(group_reduce.cuh) hands it to the partner, so the partner's operands are neither loaded nor held.

    gs0_[l_] = bf16(n(x, g)[l_] * cos + (j < 64 ? -n(x', g')[l_] : n(x', g')[l_]) * sin)
      ->  ge0_[l_] = n(x, g)[l_];  lane_group_exchange<16, 8>(ge0_, ge0x_);
          gs0_[l_] = bf16(ge0_[l_] * cos + (j < 64 ? -ge0x_[l_] : ge0x_[l_]) * sin)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from tilefoundry.ir.tile.expr import (
    Bin,
    Cast,
    Const,
    Expr,
    Fold,
    Load,
    Select,
    Un,
    Var,
    children,
    substitute,
    transform,
)
from tilefoundry.ir.tile.stmt import Assign, Let, Stmt, Store, statements

from .vector import Exchange, PackPlan, lane_offset, row_threads, signed_terms


def share_partner_loads(plan: PackPlan, extent: Expr, body: Stmt, prefix: str) -> PackPlan:
    """`plan` with each value over packs that another thread of the row loads as its own taken
    from that thread by shuffles (a flat grid, the row's packs on consecutive threads, as
    `share_folds`).

    A load is a partner pack when it is unguarded and reads, at pack p of the row, the pack
    p ^ m (m a power of two) of a buffer row this plan also loads unguarded at pack p:
    rotate-half's merged `x[j < 64 ? j + 64 : j - 64]` beside `x[j]`. A value computed from
    partner packs and row-uniform names alone (the normalized `x * rsqrt(..) * g` of the other
    half) is the partner thread's own value: it computes it anyway, so it is exchanged once
    computed (`Exchange`), and its operands need neither loads nor registers here (the head-norm
    rope kernel: 51 -> 42 registers). A partner pack read bare stays a load: exchanging it would
    put a shuffle after the load on the pack's path and save no register (rope measured 1-2%
    slower so on the H200, 2026-12-01).
    """
    n = plan.lanes
    across = row_threads(extent, n)
    if across is None:
        return plan
    own: dict[tuple[int, tuple[Expr, ...]], list[tuple[Expr, str]]] = {}
    for a in plan.loads:
        at = lane_offset(a.index, plan.var)
        if not a.guard and at is not None:
            own.setdefault((id(a.buffer), a.index[:-1]), []).append((at, a.name))
    shared = []
    for a in plan.loads:
        mates = own.get((id(a.buffer), a.index[:-1]), []) if not a.guard else []
        found = next(
            (
                (name, offset)
                for at, name in mates
                if name != a.name and (offset := _xor_offset(a.index[-1], at, plan.var, n, across))
            ),
            None,
        )
        shared.append(replace(a, partner=(found[0], across, found[1])) if found else a)
    plan = replace(plan, loads=tuple(shared))
    return replace(plan, exchanges=_exchanges(plan, body, prefix))


def _exchanges(plan: PackPlan, body: Stmt, prefix: str) -> tuple[Exchange, ...]:
    """The largest values of the body that read only partner packs and row-uniform names."""
    stmts = statements(body)
    moving = {plan.var} | {s.name for s in stmts if isinstance(s, Let)} - plan.hoisted
    reads = {(id(a.buffer), index): a for a in plan.loads if a.partner is not None for index in a.reads}
    owners = {a.name: a for a in plan.loads}

    def partner_of(e: Expr) -> tuple[int, int] | bool | None:
        """(across, offset) that all its loads share; False when it reads anything moving or a Fold."""
        if isinstance(e, Load):
            a = reads.get((id(e.buffer), e.index))
            return a.partner[1:] if a is not None and a.partner is not None else False
        if isinstance(e, Fold) or (isinstance(e, Var) and e.name in moving):
            return False
        found: set[tuple[int, int]] = set()
        for k in children(e):
            got = partner_of(k)
            if got is False:
                return False
            if got is not None:
                found.add(got)  # type: ignore[arg-type]
        return found.pop() if len(found) == 1 else (None if not found else False)

    def own_load(x: Expr) -> Expr | None:
        if not isinstance(x, Load):
            return None
        mine = reads[(id(x.buffer), x.index)].partner[0]  # type: ignore[index]
        return Load(x.buffer, owners[mine].index)

    found: dict[Expr, list[Expr]] = {}
    keys: dict[Expr, tuple[int, int]] = {}

    def narrowest(e: Expr) -> Expr:
        """The narrowest value through `e`'s chain of negations and casts (deepest on a tie): the
        fewest words to shuffle, and the value a branch's `-x` and the other's `x` share."""
        best = e
        while isinstance(e, (Un, Cast)):
            e = e.a
            if e.dtype.itemsize <= best.dtype.itemsize:
                best = e
        return best

    def visit(e: Expr) -> None:
        got = partner_of(e) if not isinstance(e, Load) else False
        if got:
            e = narrowest(e)
            if isinstance(e, Load):  # the partner's pack itself, read bare: it stays a load
                return
            own = transform(e, own_load)
            found.setdefault(own, []).append(e)
            keys[own] = got  # type: ignore[assignment]
            return
        for k in children(e):
            visit(k)

    for st in stmts:
        if isinstance(st, (Let, Store, Assign)) and not (isinstance(st, Let) and st.name in plan.hoisted):
            visit(st.value)
    return tuple(
        Exchange(own, tuple(dict.fromkeys(partners)), f"{prefix}e{i}_", *keys[own])
        for i, (own, partners) in enumerate(found.items())
    )


def _xor_offset(index: Expr, at: Expr, var: str, lanes: int, across: int) -> int | None:
    """m when `index`, at the pack base `p * lanes`, is `at` plus `(p ^ m) * lanes` for every
    p < across (m a power of two): the pack the thread m away by xor loads at `[var + at]`."""
    found = None
    for p in range(across):
        shift = _pack_shift(index, at, var, p * lanes)
        if shift is None or shift % lanes or not 0 <= shift // lanes < across:
            return None
        m = p ^ (shift // lanes)
        if found is not None and m != found:
            return None
        found = m
    return found if found and found & (found - 1) == 0 else None


def _pack_shift(index: Expr, at: Expr, var: str, base: int) -> int | None:
    """The element `index` reads relative to `at` when `var` is `base`: through Selects whose
    conditions compare `var` with constants, to `var + s` with `s - at` a constant."""
    if isinstance(index, Select):
        cond = _static_int(substitute(index.cond, {var: Const(base)}))
        return None if cond is None else _pack_shift(index.a if cond else index.b, at, var, base)
    s = lane_offset((index,), var)
    if s is None:
        return None
    (symbols, shift), (symbols_at, shift_at) = _split(s), _split(at)
    return base + shift - shift_at if symbols == symbols_at else None


def _split(e: Expr) -> tuple[list[tuple[int, Expr]], int]:
    """`e`'s signed terms that are not constants (sorted), and the sum of those that are."""
    symbols, total = [], 0
    for sign, t in signed_terms(e):
        v = _static_int(t)
        if v is None or isinstance(v, bool):
            symbols.append((sign, t))
        else:
            total += sign * v
    return sorted(symbols, key=repr), total


_STATIC_OPS: dict[str, Callable[[int, int], int | bool]] = {
    "add": lambda a, b: a + b,
    "sub": lambda a, b: a - b,
    "mul": lambda a, b: a * b,
    "lt": lambda a, b: a < b,
    "le": lambda a, b: a <= b,
    "gt": lambda a, b: a > b,
    "ge": lambda a, b: a >= b,
}


def _static_int(e: Expr) -> int | bool | None:
    """The value of an index expression over constants (sums, products, comparisons, Selects),
    or None when it has another node."""
    if isinstance(e, Const):
        return e.value if isinstance(e.value, (int, bool)) else None
    if isinstance(e, Bin) and e.op in _STATIC_OPS:
        a, b = _static_int(e.a), _static_int(e.b)
        return None if a is None or b is None else _STATIC_OPS[e.op](a, b)
    if isinstance(e, Select):
        c = _static_int(e.cond)
        return None if c is None else _static_int(e.a if c else e.b)
    return None
