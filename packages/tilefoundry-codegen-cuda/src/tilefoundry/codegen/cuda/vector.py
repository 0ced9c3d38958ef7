"""16-byte packs: the proof that a loop body may move N consecutive elements per access.

A loop over `j` (the innermost element axis of a flat grid, or a distributed row loop) takes
packs of N lanes when, for every access the pack would move:

- its last index is `j + s` with s a multiple of N (0 for most; a constant, or a product with
  such a constant: a head's `h * 64`), the others free of `j`: lanes l = 0..N-1 touch N
  consecutive elements, the first at a multiple of N;
- it is read whatever the data, or under Select branches whose conditions are *pack-uniform*:
  free of `j`, or comparing `j + s` with a constant at a multiple of N. All lanes of a pack take
  the same branch, so the pack loads a branch's operands only when its lanes read them, and
  every element it loads is one a lane reads (rotate-half's `j < 64 ? -x[j + 64] : x[j - 64]`,
  a cache update's `i in region ? new[...] : cache[...]`);
- the buffer's last extent is static and a multiple of N, as is the loop's extent: a pack never
  straddles a row;
- N * itemsize is a multiple of 16 bytes (N = 16 / the smallest itemsize among packed buffers).

The host checks at run time that every packed buffer's base address is 16-byte aligned and
launches the scalar kernel otherwise; with it, each pack starts 16-byte aligned. Other loads
of the body stay per-lane scalar loads. Stores must all be packed: a pack is written whole.

A `Fold` (a short row's statistic a reader recomputes) must not move with `j`: the pack folds
it once, before its lanes, under the branches its reads sit under, its own loads in packs
along the fold's variable when they qualify as above. Where the fold spans exactly the loop's
extent and consecutive threads take a row's packs (a flat grid, `share_folds`), each thread
folds its own pack and the row's threads combine their partials by warp shuffles. There, too,
a value that reads only the packs the row's thread p ^ m loads as its own (rotate-half's
normalized other half) is that thread's own value: it is computed there and passed by shuffles
(`Exchange`, found by partners.py).

    for j in 0..64: out[i, j] = exp(x[i, j]) + y[j]      (f32: N = 4)
      ->  load_pack<4>(x + i*64 + jb); load_pack<4>(y + jb); 4 lanes; store_pack<4>(out + i*64 + jb)
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace

from tilefoundry.ir.tile.cexpr import CExpr, cname, ctype
from tilefoundry.ir.tile.expr import (
    COMPARISONS,
    Bin,
    Const,
    Expr,
    Fold,
    Load,
    Select,
    Un,
    Var,
    add,
    children,
    free_vars,
    identity,
    loads,
    rebuild,
    sub,
    substitute,
    transform,
    walk,
)
from tilefoundry.ir.tile.stmt import Assign, Buffer, Let, Stmt, Store, statements

from .serial import indent

MAX_LANES = 16


# A pack-uniform Select condition and the branch taken: (cond, True) is its `a` branch.
Guard = tuple[tuple[Expr, bool], ...]


@dataclass(frozen=True)
class Access:
    """One packed access: `buffer[index]` with `index[-1] == j + shift`; `name` is its lane array.

    `guard`: the pack-uniform Select branches the access sits under; the pack is loaded only
    when all of them are taken (empty: always). `merged`: the indices of the two branch loads
    this one stands for (`merge_branch_loads`), its own index selecting between them.
    `partner`: (own, across, offset) when the pack is another thread's lane array `own`, the
    thread `offset` away by xor among the `across` that share a row (partners.py); it
    is not loaded when every read of it is inside an `Exchange`.
    """

    buffer: Buffer
    index: tuple[Expr, ...]
    name: str
    guard: Guard = ()
    merged: tuple[tuple[Expr, ...], ...] = ()
    partner: tuple[str, int, int] | None = None

    @property
    def reads(self) -> tuple[tuple[Expr, ...], ...]:
        """The element indices whose lane values this access's array holds."""
        return self.merged or (self.index,)


@dataclass(frozen=True)
class FoldPlan:
    """A Fold the pack computes once into scalar `name`, before its lanes.

    `guards`: the branch sets it sits under; it is folded when one of them holds (an empty set
    among them: always). `lanes`/`loads`: its body's loads moved as packs along the fold's own
    variable (lanes 1 and no loads: a scalar loop). `across` > 1: the fold is shared by that
    many consecutive threads, each folding the one pack of the row it moves (`share_folds`).
    """

    fold: Fold
    name: str
    guards: tuple[Guard, ...]
    lanes: int = 1
    loads: tuple[Access, ...] = ()
    across: int = 1


@dataclass(frozen=True)
class Exchange:
    """A value of the partner thread's pack, computed by that thread and passed by shuffles.

    `own` is the value at this thread's lanes, computed into lane array `name`; each of `partner`
    (one a branch) is the same value over the partner's pack, read from `name`'s exchanged copy
    `name_x`. Rotate-half's normalized other half is the partner's own normalized half.
    """

    own: Expr
    partner: tuple[Expr, ...]
    name: str
    across: int
    offset: int

    @property
    def name_x(self) -> str:
        return f"{self.name[:-1]}x_"


@dataclass(frozen=True)
class PackPlan:
    """N lanes per pack over loop variable `var`; the loads and stores moved as packs.

    `hoisted` names the body's definitions that do not move with `var` (a gathered row index):
    they are computed once per pack, before its loads, which may use them. `uniform` holds the
    Select conditions that move with `var` alone and are pack-uniform (rotate-half's `j < 64`):
    the lanes test them at the pack's base, once, not once a lane.
    """

    var: str
    lanes: int
    loads: tuple[Access, ...]
    stores: tuple[Access, ...]
    hoisted: frozenset[str] = frozenset()
    folds: tuple[FoldPlan, ...] = ()
    exchanges: tuple[Exchange, ...] = ()
    uniform: frozenset[Expr] = frozenset()

    @property
    def buffers(self) -> tuple[Buffer, ...]:
        """Every packed buffer, once (their base addresses must be 16-byte aligned)."""
        seen: dict[int, Buffer] = {}
        for a in (*self.loads, *self.stores, *(a for f in self.folds for a in f.loads)):
            seen.setdefault(id(a.buffer), a.buffer)
        return tuple(seen.values())


def _guarded_loads(
    e: Expr,
    uniform: Callable[[Expr], bool],
    guard: Guard,
    out: list[tuple[Load, Guard]],
    folds: list[tuple[Fold, Guard | None]],
) -> None:
    """Every load with the pack-uniform branches it sits under; loads under other branches are
    skipped (a branch not taken may read out of bounds). Folds are collected whole, with None
    for a guard under a branch that is not pack-uniform."""
    if isinstance(e, Select):
        _guarded_loads(e.cond, uniform, guard, out, folds)
        if uniform(e.cond):
            _guarded_loads(e.a, uniform, (*guard, (e.cond, True)), out, folds)
            _guarded_loads(e.b, uniform, (*guard, (e.cond, False)), out, folds)
        else:
            folds.extend((f, None) for f in _folds(e.a) + _folds(e.b))
        return
    if isinstance(e, Fold):
        folds.append((e, guard))
        return
    if isinstance(e, Load):
        out.append((e, guard))
    for k in children(e):
        _guarded_loads(k, uniform, guard, out, folds)


def _folds(e: Expr) -> list[Fold]:
    """The outermost Folds of `e`."""
    if isinstance(e, Fold):
        return [e]
    return [f for k in children(e) for f in _folds(k)]


def _shift(e: Expr, var: str) -> int | None:
    """s when `e` is `var + s` (s a constant), else None."""
    offset = lane_offset((e,), var)
    if not isinstance(offset, Const) or isinstance(offset.value, bool) or not isinstance(offset.value, int):
        return None
    return offset.value


def _aligned(e: Expr, lanes: int) -> bool:
    """Whether the index `e` is a multiple of `lanes` whatever its variables."""
    if isinstance(e, Const):
        return isinstance(e.value, int) and not isinstance(e.value, bool) and e.value % lanes == 0
    if isinstance(e, Bin) and e.op == "mul":
        return _aligned(e.a, lanes) or _aligned(e.b, lanes)
    if isinstance(e, Bin) and e.op in ("add", "sub"):
        return _aligned(e.a, lanes) and _aligned(e.b, lanes)
    return False


def signed_terms(e: Expr, sign: int = 1) -> list[tuple[int, Expr]]:
    """`e` as a signed sum of terms, through its additions and subtractions."""
    if isinstance(e, Bin) and e.op in ("add", "sub"):
        return signed_terms(e.a, sign) + signed_terms(e.b, sign if e.op == "add" else -sign)
    return [(sign, e)]


def lane_offset(index: tuple[Expr, ...], var: str) -> Expr | None:
    """s when `index` is `[..., var + s]` (a sum in any order) with s and the other indices free
    of `var`, else None."""
    if not index or any(var in free_vars(i) for i in index[:-1]):
        return None
    terms = signed_terms(index[-1])
    moving = [(k, t) for k, t in terms if var in free_vars(t)]
    if moving != [(1, Var(var))]:
        return None
    offset: Expr = Const(0)
    for k, t in terms:
        if t != Var(var):
            offset = add(offset, t) if k > 0 else sub(offset, t)
    return offset


def _moves_packs(index: tuple[Expr, ...], var: str, lanes: int) -> bool:
    """Whether an access at `index` moves `lanes` consecutive elements per pack of `var`."""
    offset = lane_offset(index, var)
    return offset is not None and _aligned(offset, lanes)


def _pack_uniform(e: Expr, var: str, moving: set[str], lanes: int) -> bool:
    """Whether the boolean `e` has one value over each pack of `lanes` (packs start at multiples)."""
    if not free_vars(e) & moving:
        return True
    if isinstance(e, Bin) and e.op in ("and", "or", "xor"):
        return _pack_uniform(e.a, var, moving, lanes) and _pack_uniform(e.b, var, moving, lanes)
    if isinstance(e, Un) and e.op == "not":
        return _pack_uniform(e.a, var, moving, lanes)
    if not (isinstance(e, Bin) and e.op in COMPARISONS - {"eq", "ne"}):
        return False
    # j + s < c and j + s >= c flip at j = c - s; <= and > at j = c - s + 1.
    op, left, right = e.op, e.a, e.b
    if isinstance(left, Const):
        op, left, right = {"lt": "gt", "le": "ge", "gt": "lt", "ge": "le"}[op], right, left
    s = _shift(left, var)
    c = right.value if isinstance(right, Const) else None
    if s is None or not isinstance(c, int) or isinstance(c, bool):
        return False
    edge = c - s + (1 if op in ("le", "gt") else 0)
    return edge % lanes == 0


def _last_extent(b: Buffer) -> int | None:
    d = b.shape[-1] if b.shape else None
    return d if isinstance(d, int) else None


def plan_packs(
    var: str, extent: Expr, body: Stmt, prefix: str, carries: frozenset[str] = frozenset()
) -> PackPlan | str:
    """The pack plan of a loop over `var` with `body`, or why it has none.

    Args:
        prefix: stem of the lane-array names (unique per loop in a kernel).
        carries: scalars the body may update (a distributed reduction's partial carries).
    """
    stmts = statements(body)
    if not all(isinstance(s, (Let, Store)) or (isinstance(s, Assign) and s.name in carries) for s in stmts):
        return "its body holds more than value definitions, stores and carry updates"
    stores = [s for s in stmts if isinstance(s, Store)]
    if not stores and not carries:
        return "its body stores nothing"
    hoisted = _invariant_lets(stmts, var)
    lane_lets = {s.name for s in stmts if isinstance(s, Let)} - hoisted

    def before_lanes(index: tuple[Expr, ...]) -> bool:
        return not any(free_vars(i) & lane_lets for i in index[:-1])

    if not all(
        lane_offset(s.index, var) == Const(0) and before_lanes(s.index) and s.buffer.role != "local"
        for s in stores
    ):
        return f"a store is not at [..., {var}] of a buffer in memory"
    values = [e for s in stmts for e in (s.value, *(s.index if isinstance(s, Store) else ()))]  # type: ignore[union-attr]
    moving = {var} | lane_lets

    def packable(lanes: int) -> list[tuple[Load, Guard]]:
        found: list[tuple[Load, Guard]] = []
        for e in values:
            _guarded_loads(e, lambda c: _pack_uniform(c, var, moving, lanes), (), found, [])
        return [
            (ld, g)
            for ld, g in found
            if _moves_packs(ld.index, var, lanes) and before_lanes(ld.index) and ld.buffer.role != "local"
        ]

    # Lanes from every candidate first; the accepted loads may narrow it to a divisor, under
    # which their shifts and conditions stay aligned.
    widest = packable(1)
    packed = [s.buffer for s in stores] + [ld.buffer for ld, _ in widest]
    if not packed:
        return f"no access moves along {var}"
    loads = packable(min(MAX_LANES, 16 // min(b.dtype.itemsize for b in packed)))
    packed = [s.buffer for s in stores] + [ld.buffer for ld, _ in loads]
    if not packed:
        return f"no access moves along {var}"
    lanes = min(MAX_LANES, 16 // min(b.dtype.itemsize for b in packed))
    if not (isinstance(extent, Const) and isinstance(extent.value, int) and extent.value % lanes == 0):
        return f"its extent is not a static multiple of {lanes}"
    short = [b.name for b in packed if _last_extent(b) is None or _last_extent(b) % lanes]  # type: ignore[operator]
    if short:
        return f"the last extent of {short[0]} is not a static multiple of {lanes}"
    if any(ld.buffer in {s.buffer for s in stores} for ld, _ in loads):
        return "it reads a buffer it writes"
    guards: dict[tuple[int, tuple[Expr, ...]], set[Guard]] = {}
    first: dict[tuple[int, tuple[Expr, ...]], Load] = {}
    for ld, g in loads:
        key = (id(ld.buffer), ld.index)
        guards.setdefault(key, set()).add(g)
        first.setdefault(key, ld)
    load_acc: list[Access] = []
    for key, ld in first.items():
        gs = guards[key]
        if () in gs or len(gs) == 1:  # read whatever the data, or under one set of branches
            guard = () if () in gs else next(iter(gs))
            load_acc.append(Access(ld.buffer, ld.index, f"{prefix}l{len(load_acc)}_", guard))
    load_acc = [replace(a, name=f"{prefix}l{i}_") for i, a in enumerate(merge_branch_loads(load_acc))]
    store_acc = [Access(s.buffer, s.index, f"{prefix}s{i}_") for i, s in enumerate(stores)]
    if len({(id(a.buffer), a.index) for a in store_acc}) != len(store_acc):
        return "two stores write one element"
    folds = _plan_folds(values, var, moving, lanes, prefix, {id(a.buffer) for a in store_acc})
    if isinstance(folds, str):
        return folds
    uniform = frozenset(
        x.cond
        for e in values
        for x in walk(e)
        if isinstance(x, Select)
        and free_vars(x.cond) & moving == {var}
        and _pack_uniform(x.cond, var, moving, lanes)
    )
    return PackPlan(var, lanes, tuple(load_acc), tuple(store_acc), frozenset(hoisted), folds, uniform=uniform)


def merge_branch_loads(accesses: list[Access]) -> list[Access]:
    """`accesses` with each pair loading one buffer in the two branches of one pack-uniform
    condition (and under the same other branches) made one load at the selected index.

    Rotate-half's `j < 64 ? -x[j + 64] : x[j - 64]` then holds one lane array of x, loaded
    whatever the branch, instead of two of which a pack fills one: fewer registers, so more
    threads per SM, and one load instruction. A merged load may merge again (nested branches).
    """
    out = list(accesses)
    while pair := next(((a, b) for a in out for b in out if a is not b and _branch_pair(a, b)), None):
        a, b = pair
        cond = next(c for c, taken in a.guard if (c, not taken) in b.guard)
        yes, no = (a, b) if (cond, True) in a.guard else (b, a)
        index = tuple(x if x == y else Select(cond, x, y) for x, y in zip(yes.index, no.index, strict=True))
        guard = tuple(g for g in a.guard if g[0] != cond)
        merged = Access(a.buffer, index, a.name, guard, yes.reads + no.reads)
        out = [merged if x is a else x for x in out if x is not b]
    return out


def _complementary(a: Guard, b: Guard) -> bool:
    """Whether guards `a` and `b` differ only in the branch taken of one condition."""
    if len(a) != len(b):
        return False
    flipped = set(a) ^ set(b)
    if len(flipped) != 2:
        return False
    (c1, t1), (c2, t2) = flipped
    return c1 == c2 and t1 != t2


def _branch_pair(a: Access, b: Access) -> bool:
    """Whether `a` and `b` read one buffer under guards that differ only in one condition's branch."""
    return a.buffer is b.buffer and len(a.index) == len(b.index) and _complementary(a.guard, b.guard)


def _plan_folds(
    values: list[Expr], var: str, moving: set[str], lanes: int, prefix: str, stored: set[int]
) -> tuple[FoldPlan, ...] | str:
    """The body's Folds, each once with every branch set it sits under, or why the loop cannot
    take packs."""
    found: list[tuple[Fold, Guard | None]] = []
    for e in values:
        _guarded_loads(e, lambda c: _pack_uniform(c, var, moving, lanes), (), [], found)
    guards: dict[Fold, list[Guard]] = {}
    for f, g in found:
        if free_vars(f) & moving:
            return f"a fold moves with {var}"
        if g is None:
            return "a fold sits under a branch whose lanes may differ"
        if any(id(ld.buffer) in stored for ld in loads(f)):
            return "a fold reads a buffer the loop writes"
        guards.setdefault(f, [])
        if g not in guards[f]:
            guards[f].append(g)
    return tuple(_fold_packs(f, f"{prefix}f{i}_", _weakest(gs)) for i, (f, gs) in enumerate(guards.items()))


def _weakest(guards: list[Guard]) -> tuple[Guard, ...]:
    """The branch sets a fold is needed under, less those another one implies (a superset)."""
    return tuple(g for g in guards if not any(set(h) < set(g) for h in guards))


def _fold_packs(f: Fold, name: str, guards: tuple[Guard, ...]) -> FoldPlan:
    """`f`'s plan: its body's loads in 16-byte packs along its variable when every one moves so."""
    scalar = FoldPlan(f, name, () if () in guards else guards)
    body_loads = [ld for ld in loads(f.body) if f.var in free_vars(ld)]
    if not body_loads or _folds(f.body) or any(isinstance(x, Select) for x in walk(f.body)):
        return scalar
    lanes = min(MAX_LANES, 16 // min(ld.buffer.dtype.itemsize for ld in body_loads))
    extent = f.extent.value if isinstance(f.extent, Const) else None
    if not (
        isinstance(extent, int)
        and extent % lanes == 0
        and all(
            _moves_packs(ld.index, f.var, lanes)
            and ld.buffer.role != "local"
            and (last := _last_extent(ld.buffer)) is not None
            and last % lanes == 0
            for ld in body_loads
        )
    ):
        return scalar
    seen: dict[tuple[int, tuple[Expr, ...]], Access] = {}
    for ld in body_loads:
        seen.setdefault((id(ld.buffer), ld.index), Access(ld.buffer, ld.index, f"{name}l{len(seen)}_"))
    return replace(scalar, lanes=lanes, loads=tuple(seen.values()))


# The group_reduce.cuh functor of each reassociable combiner.
COMBINERS = {"add": "add_combine", "max": "max_combine", "min": "min_combine"}


def row_threads(extent: Expr, lanes: int) -> int | None:
    """How many consecutive threads of a flat grid share a row of `extent` elements, a pack of
    `lanes` each, when they can combine by warp shuffles: a power of two in [2, 32], else None."""
    if not (isinstance(extent, Const) and isinstance(extent.value, int)):
        return None
    across = extent.value // lanes
    return across if 2 <= across <= 32 and not across & (across - 1) else None


def share_folds(plan: PackPlan, extent: Expr) -> PackPlan:
    """`plan` with each fold the threads of a row can share: a flat grid runs one pack per thread,
    the packs of a row on consecutive threads (the loop over `plan.var`, of `extent`, innermost).

    A fold is shared when it spans exactly that extent in packs of the loop's width, starts from
    its combiner's identity, is folded under branches free of `plan.var` (one verdict per row),
    and a row's packs are a power of two of at most a warp's lanes.
    """
    across = row_threads(extent, plan.lanes)
    if across is None:
        return plan
    shared = []
    for fp in plan.folds:
        f = fp.fold
        fits = (
            f.extent == extent
            and fp.lanes == plan.lanes
            and f.init == identity(f.op, f.dtype)
            and not any(plan.var in free_vars(c) for g in fp.guards for c, _ in g)
        )
        shared.append(replace(fp, across=across) if fits else fp)
    return replace(plan, folds=tuple(shared))


def _reading_folds(lets: list[Let]) -> set[str]:
    """The definitions among `lets` (in order) that read a Fold, directly or through another."""
    out: set[str] = set()
    for s in lets:
        if _folds(s.value) or free_vars(s.value) & out:
            out.add(s.name)
    return out


def _invariant_lets(stmts: tuple[Stmt, ...], var: str) -> set[str]:
    """Immutable definitions whose value does not depend on `var`, directly or through another."""
    moving = {var}
    out: set[str] = set()
    for s in stmts:
        if isinstance(s, Let):
            if s.mutable or free_vars(s.value) & moving:
                moving.add(s.name)
            else:
                out.add(s.name)
    return out


class PackCode:
    """Emits one pack: loads into lane arrays, N unrolled lanes of the body, stores from lane arrays.

    Args:
        plan: the proved plan.
        base: the C++ variable holding the pack's first `var` value (a multiple of `plan.lanes`).
        held: loads whose lane arrays are held rows (row_registers), by name: True where this
            loop loads the row, False where it only reads what an earlier loop loaded.
        warp_in_step: every lane of a warp runs the pack's code together (a loop whose trip count
            is uniform per warp), so the row threads' shuffles take the full mask
            (`Callers::warp`) instead of their group's, which ptxas guards with a convergence test.
    """

    def __init__(
        self, plan: PackPlan, base: str, held: Mapping[str, bool] | None = None, *, warp_in_step: bool = False
    ):
        self.plan = plan
        self.base = base
        self.held = dict(held or {})
        self.callers = ", Callers::warp" if warp_in_step else ""
        # Each exchanged value and the lane array it is read from (own, or the partner's copy).
        self.values: dict[Expr, str] = {}
        for x in plan.exchanges:
            self.values[x.own] = x.name
            self.values.update(dict.fromkeys(x.partner, x.name_x))

    def _at_base(self, e: Expr) -> Expr:
        return substitute(e, {self.plan.var: Var(self.base)})

    def _at(self, cx: CExpr, a: Access) -> str:
        return f"{cname(a.buffer)} + {cx.linear(a.buffer.shape, (*a.index[:-1], self._at_base(a.index[-1])))}"

    def _when(self, cx: CExpr, guard: Guard) -> str:
        """The C++ condition under which a guarded pack is loaded: its branches, at the pack's base."""
        return " && ".join(
            cx(self._at_base(c)) if taken else f"!({cx(self._at_base(c))})" for c, taken in guard
        )

    def prologue(self, cx: CExpr, body: Stmt) -> list[str]:
        """Hoisted definitions, lane arrays and their packed loads, then the folds and the
        definitions that read them: the pack's loads are in flight while a fold loads its row."""
        loads, rest = self.prologue_parts(cx, body)
        return loads + rest

    def prologue_parts(self, cx: CExpr, body: Stmt) -> tuple[list[str], list[str]]:
        """The prologue as (its packed loads and what they need, the rest): a thread taking several
        packs writes every pack's loads before any pack's folds and exchanges wait for them."""
        n = self.plan.lanes
        stmts = statements(body)
        hoisted = [s for s in stmts if isinstance(s, Let) and s.name in self.plan.hoisted]
        late = _reading_folds(hoisted)
        folds = self._folds(cx, self.plan.folds)
        if any(free_vars(i) & late for a in self.plan.loads for i in a.index):
            late, out = set(), folds  # a packed address needs a fold: the folds come first
            folds = []
        else:
            out = []
        out += [self._let(cx, s) for s in hoisted if s.name not in late]
        read = self._partner_reads(stmts)
        into = self._one_array_of_two_branches()
        for a in self.plan.loads:
            if a.partner is not None and a.name not in read:
                continue  # every read of it is through an exchanged value
            target = into.get(a.name, a.name)
            load = f"load_pack<{n}>({self._at(cx, a)}, {target});"
            if a.name in self.held:
                out += [load] if self.held[a.name] else []
                continue
            t = ctype(a.buffer.dtype)
            out += [
                f"{t} {a.name}[{n}];" if target == a.name else f"{t} (&{a.name})[{n}] = {target};",
                f"if ({self._when(cx, a.guard)}) {load}" if a.guard else load,
            ]
        loaded, out = out, folds + [self._let(cx, s) for s in hoisted if s.name in late]
        for x in self.plan.exchanges:  # after the folds and the definitions they feed
            t = ctype(x.own.dtype)
            out += [
                f"{t} {x.name}[{n}];",
                "#pragma unroll",
                f"for (int l_ = 0; l_ < {n}; ++l_) {x.name}[l_] = {cx(self._lane_value(x.own, own=True))};",
                f"{t} {x.name_x}[{n}];",
                f"lane_group_exchange<{x.across}, {x.offset}{self.callers}>({x.name}, {x.name_x});",
            ]
        out += [f"{ctype(a.buffer.dtype)} {a.name}[{n}];" for a in self.plan.stores]
        return loaded, out

    def _one_array_of_two_branches(self) -> dict[str, str]:
        """Loads of two buffers in the two branches of one pack-uniform condition (under the same
        other branches), such as a cache update's `i in region ? new[...] : cache[...]`: the second
        fills the first's lane array, of which a pack loads one, and names it by reference. One
        array instead of two, and the lanes' select of equal values folds away. By name: the
        second's to the first's."""
        into: dict[str, str] = {}
        loads = [a for a in self.plan.loads if a.partner is None and a.name not in self.held]
        for i, a in enumerate(loads):
            if a.name in into:
                continue
            for b in loads[i + 1 :]:
                same = b.buffer.dtype == a.buffer.dtype
                if b.name not in into and same and _complementary(a.guard, b.guard):
                    into[b.name] = a.name
                    break
        return into

    def _exchanged(self, e: Expr) -> Expr:
        """`e` with each exchanged value read from its lane array (own or the partner's copy)."""
        return _lane_reads(e, (), values=self.values) if self.values else e

    def _lane_value(self, e: Expr, *, own: bool = False) -> Expr:
        """`e` as lane `l_` reads it: exchanged values (unless `e` is one's `own`), lane arrays and
        folds, and its pack-uniform conditions at the pack's base."""
        folds = {f.fold: f.name for f in self.plan.folds}
        return self._uniform_at_base(_lane_reads(e, self.plan.loads, folds, None if own else self.values))

    def _uniform_at_base(self, e: Expr) -> Expr:
        """`e` with each condition of `plan.uniform` tested at the pack's base (one value per pack)."""
        if not self.plan.uniform:
            return e

        def at_base(x: Expr) -> Expr | None:
            if isinstance(x, Select) and x.cond in self.plan.uniform:
                return Select(self._at_base(x.cond), x.a, x.b)
            return None

        return transform(e, at_base)

    def _partner_reads(self, stmts: tuple[Stmt, ...]) -> set[str]:
        """The partner packs the lanes still read once exchanged values are swapped in."""
        names = {(id(a.buffer), i): a.name for a in self.plan.loads if a.partner is not None for i in a.reads}
        values = [self._exchanged(s.value) for s in stmts if isinstance(s, (Let, Store, Assign))]
        found = (names.get((id(x.buffer), x.index)) for v in values for x in walk(v) if isinstance(x, Load))
        return {n for n in found if n is not None}

    def _let(self, cx: CExpr, s: Let) -> str:
        return f"const {ctype(s.value.dtype)} {s.name} = {cx(self._swap_folds(s.value))};"

    def _swap_folds(self, e: Expr) -> Expr:
        return _lane_reads(e, (), {f.fold: f.name for f in self.plan.folds}) if self.plan.folds else e

    def _folds(self, cx: CExpr, plans: tuple[FoldPlan, ...]) -> list[str]:
        """Each fold: a scalar folded under its guards."""
        return [line for fp in plans for line in self._fold(cx, fp)]

    def _fold(self, cx: CExpr, fp: FoldPlan) -> list[str]:
        f = fp.fold
        acc = Var(fp.name, f.dtype)
        head = f"if ({' || '.join(f'({self._when(cx, g)})' for g in fp.guards)}) {{" if fp.guards else "{"
        out = [f"{ctype(f.dtype)} {fp.name} = {cx(f.init)};", head]
        extent = cx(f.extent)
        if fp.lanes == 1:
            step = cx(Bin(f.op, acc, f.body, f.dtype))
            loop = f"  for (int64_t {f.var} = 0; {f.var} < {extent}; ++{f.var}) {fp.name} = {step};"
            return [*out, loop, "}"]
        if fp.across > 1:  # this thread's pack of the row, then the row's threads combined
            combine = f"lane_group_reduce<{fp.across}{self.callers}>({COMBINERS[f.op]}{{}}, {fp.name})"
            return [*out, *indent(self._fold_pack(cx, fp, self.base), 1), "}", f"{fp.name} = {combine};"]
        base = f"{f.var}b"
        # unrolled: every pack of the row in flight at once, not one L2 round trip per pack
        loop = f"for (int64_t {base} = 0; {base} < {extent}; {base} += {fp.lanes}) {{"
        return [*out, "  #pragma unroll", f"  {loop}", *indent(self._fold_pack(cx, fp, base), 2), "  }", "}"]

    @staticmethod
    def _fold_pack(cx: CExpr, fp: FoldPlan, base: str) -> list[str]:
        """Folding the pack of the fold's row that starts at `base`: its loads, then its lanes."""
        f = fp.fold
        out = []
        for a in fp.loads:
            where = cx.linear(a.buffer.shape, (*a.index[:-1], substitute(a.index[-1], {f.var: Var(base)})))
            out += [
                f"{ctype(a.buffer.dtype)} {a.name}[{fp.lanes}];",
                f"load_pack<{fp.lanes}>({cname(a.buffer)} + {where}, {a.name});",
            ]
        step = cx(Bin(f.op, Var(fp.name, f.dtype), _lane_reads(f.body, fp.loads), f.dtype))
        return [
            *out,
            "#pragma unroll",
            f"for (int l_ = 0; l_ < {fp.lanes}; ++l_) {{",
            f"  const int64_t {f.var} = {base} + l_;",
            f"  {fp.name} = {step};",
            "}",
        ]

    def lanes(self, body: Stmt, cx: CExpr) -> list[str]:
        """The unrolled lanes; packed loads read `name[l_]`, packed stores write it."""
        stores = {(id(a.buffer), a.index): a.name for a in self.plan.stores}
        swap = self._lane_value

        lines = [
            "#pragma unroll",
            f"for (int l_ = 0; l_ < {self.plan.lanes}; ++l_) {{",
            f"  const int64_t {self.plan.var} = {self.base} + l_;",
        ]
        for s in statements(body):
            if isinstance(s, Store):
                lines.append(f"  {stores[(id(s.buffer), s.index)]}[l_] = {cx(swap(s.value))};")
            elif isinstance(s, Assign):
                lines.append(f"  {cx(Var(s.name))} = {cx(swap(s.value))};")
            elif s.name not in self.plan.hoisted:  # type: ignore[union-attr]
                assert isinstance(s, Let)
                lines.append(f"  const {ctype(s.value.dtype)} {s.name} = {cx(swap(s.value))};")
        return [*lines, "}"]

    def epilogue(self, cx: CExpr) -> list[str]:
        """Packed stores of the lane arrays."""
        n = self.plan.lanes
        return [f"store_pack<{n}>({self._at(cx, a)}, {a.name});" for a in self.plan.stores]


def _lane_reads(
    e: Expr,
    packed: tuple[Access, ...],
    folds: Mapping[Fold, str] | None = None,
    values: Mapping[Expr, str] | None = None,
) -> Expr:
    """`e` with each of `values` (whole subexpressions) and each packed load read from its lane
    array at lane `l_`, and each fold of `folds` read from its scalar."""
    names = {(id(a.buffer), index): a.name for a in packed for index in a.reads}

    def swap(x: Expr) -> Expr:
        if values and (name := values.get(x)) is not None:
            return Var(f"{name}[l_]", x.dtype)
        if isinstance(x, Load) and (name := names.get((id(x.buffer), x.index))) is not None:
            return Var(f"{name}[l_]", x.dtype)
        if isinstance(x, Fold) and folds and x in folds:
            return Var(folds[x], x.dtype)
        kids = children(x)
        new = tuple(swap(k) for k in kids)
        return x if all(a is b for a, b in zip(new, kids, strict=True)) else rebuild(x, new)

    return swap(e)
