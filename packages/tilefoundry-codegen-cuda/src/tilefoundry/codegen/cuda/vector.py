"""16-byte packs: the proof that a loop body may move N consecutive elements per access.

A loop over `j` (the innermost element axis of a flat grid, or a distributed row loop) takes
packs of N lanes when, for every access the pack would move:

- its last index is `j + s` with s a static multiple of N (0 for most), the others free of `j`:
  lanes l = 0..N-1 touch N consecutive elements, the first at a multiple of N;
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

    for j in 0..64: out[i, j] = exp(x[i, j]) + y[j]      (f32: N = 4)
      ->  load_pack<4>(x + i*64 + jb); load_pack<4>(y + jb); 4 lanes; store_pack<4>(out + i*64 + jb)
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from tilefoundry.ir.tile.cexpr import CExpr, cname, ctype
from tilefoundry.ir.tile.expr import (
    COMPARISONS,
    Bin,
    Const,
    Expr,
    Load,
    Select,
    Un,
    Var,
    children,
    free_vars,
    substitute,
    transform,
)
from tilefoundry.ir.tile.stmt import Assign, Buffer, Let, Seq, Stmt, Store

MAX_LANES = 16


# A pack-uniform Select condition and the branch taken: (cond, True) is its `a` branch.
Guard = tuple[tuple[Expr, bool], ...]


@dataclass(frozen=True)
class Access:
    """One packed access: `buffer[index]` with `index[-1] == j + shift`; `name` is its lane array.

    `guard`: the pack-uniform Select branches the access sits under; the pack is loaded only
    when all of them are taken (empty: always).
    """

    buffer: Buffer
    index: tuple[Expr, ...]
    name: str
    guard: Guard = ()


@dataclass(frozen=True)
class PackPlan:
    """N lanes per pack over loop variable `var`; the loads and stores moved as packs.

    `hoisted` names the body's definitions that do not move with `var` (a gathered row index):
    they are computed once per pack, before its loads, which may use them.
    """

    var: str
    lanes: int
    loads: tuple[Access, ...]
    stores: tuple[Access, ...]
    hoisted: frozenset[str] = frozenset()

    @property
    def buffers(self) -> tuple[Buffer, ...]:
        """Every packed buffer, once (their base addresses must be 16-byte aligned)."""
        seen: dict[int, Buffer] = {}
        for a in (*self.loads, *self.stores):
            seen.setdefault(id(a.buffer), a.buffer)
        return tuple(seen.values())


def _guarded_loads(
    e: Expr, uniform: Callable[[Expr], bool], guard: Guard, out: list[tuple[Load, Guard]]
) -> None:
    """Every load with the pack-uniform branches it sits under; loads under other branches are
    skipped (a branch not taken may read out of bounds)."""
    if isinstance(e, Select):
        _guarded_loads(e.cond, uniform, guard, out)
        if uniform(e.cond):
            _guarded_loads(e.a, uniform, (*guard, (e.cond, True)), out)
            _guarded_loads(e.b, uniform, (*guard, (e.cond, False)), out)
        return
    if isinstance(e, Load):
        out.append((e, guard))
    for k in children(e):
        _guarded_loads(k, uniform, guard, out)


def _shift(e: Expr, var: str) -> int | None:
    """s when `e` is `var + s` (s a constant), else None."""
    if e == Var(var):
        return 0
    if isinstance(e, Bin) and e.op in ("add", "sub") and isinstance(e.b, Const) and e.a == Var(var):
        k = e.b.value
        return None if not isinstance(k, int) or isinstance(k, bool) else (k if e.op == "add" else -k)
    if isinstance(e, Bin) and e.op == "add" and isinstance(e.a, Const) and e.b == Var(var):
        k = e.a.value
        return k if isinstance(k, int) and not isinstance(k, bool) else None
    return None


def _lane_shift(index: tuple[Expr, ...], var: str) -> int | None:
    """s when `index` is `[..., var + s]` with the other indices free of `var`, else None."""
    if not index or any(var in free_vars(i) for i in index[:-1]):
        return None
    return _shift(index[-1], var)


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
    stmts = body.body if isinstance(body, Seq) else (body,)
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
        _lane_shift(s.index, var) == 0 and before_lanes(s.index) and s.buffer.role != "local" for s in stores
    ):
        return f"a store is not at [..., {var}] of a buffer in memory"
    values = [e for s in stmts for e in (s.value, *(s.index if isinstance(s, Store) else ()))]  # type: ignore[union-attr]
    moving = {var} | lane_lets

    def packable(lanes: int) -> list[tuple[Load, Guard]]:
        found: list[tuple[Load, Guard]] = []
        for e in values:
            _guarded_loads(e, lambda c: _pack_uniform(c, var, moving, lanes), (), found)
        return [
            (ld, g)
            for ld, g in found
            if (k := _lane_shift(ld.index, var)) is not None
            and k % lanes == 0
            and before_lanes(ld.index)
            and ld.buffer.role != "local"
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
    store_acc = [Access(s.buffer, s.index, f"{prefix}s{i}_") for i, s in enumerate(stores)]
    if len({(id(a.buffer), a.index) for a in store_acc}) != len(store_acc):
        return "two stores write one element"
    return PackPlan(var, lanes, tuple(load_acc), tuple(store_acc), frozenset(hoisted))


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
    """

    def __init__(self, plan: PackPlan, base: str, held: Mapping[str, bool] | None = None):
        self.plan = plan
        self.base = base
        self.held = dict(held or {})

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
        """Hoisted definitions, lane arrays and their packed loads."""
        n = self.plan.lanes
        out = [
            f"const {ctype(s.value.dtype)} {s.name} = {cx(s.value)};"
            for s in (body.body if isinstance(body, Seq) else (body,))
            if isinstance(s, Let) and s.name in self.plan.hoisted
        ]
        for a in self.plan.loads:
            load = f"load_pack<{n}>({self._at(cx, a)}, {a.name});"
            if a.name in self.held:
                out += [load] if self.held[a.name] else []
                continue
            out += [
                f"{ctype(a.buffer.dtype)} {a.name}[{n}];",
                f"if ({self._when(cx, a.guard)}) {load}" if a.guard else load,
            ]
        out += [f"{ctype(a.buffer.dtype)} {a.name}[{n}];" for a in self.plan.stores]
        return out

    def lanes(self, body: Stmt, cx: CExpr) -> list[str]:
        """The unrolled lanes; packed loads read `name[l_]`, packed stores write it."""
        loads = {(id(a.buffer), a.index): a.name for a in self.plan.loads}
        stores = {(id(a.buffer), a.index): a.name for a in self.plan.stores}

        def swap(e: Expr) -> Expr | None:
            if isinstance(e, Load) and (id(e.buffer), e.index) in loads:
                return Var(f"{loads[(id(e.buffer), e.index)]}[l_]", e.dtype)
            return None

        lines = [
            "#pragma unroll",
            f"for (int l_ = 0; l_ < {self.plan.lanes}; ++l_) {{",
            f"  const int64_t {self.plan.var} = {self.base} + l_;",
        ]
        for s in body.body if isinstance(body, Seq) else (body,):
            if isinstance(s, Store):
                lines.append(f"  {stores[(id(s.buffer), s.index)]}[l_] = {cx(transform(s.value, swap))};")
            elif isinstance(s, Assign):
                lines.append(f"  {cx(Var(s.name))} = {cx(transform(s.value, swap))};")
            elif s.name not in self.plan.hoisted:  # type: ignore[union-attr]
                assert isinstance(s, Let)
                lines.append(f"  const {ctype(s.value.dtype)} {s.name} = {cx(transform(s.value, swap))};")
        return [*lines, "}"]

    def epilogue(self, cx: CExpr) -> list[str]:
        """Packed stores of the lane arrays."""
        n = self.plan.lanes
        return [f"store_pack<{n}>({self._at(cx, a)}, {a.name});" for a in self.plan.stores]
