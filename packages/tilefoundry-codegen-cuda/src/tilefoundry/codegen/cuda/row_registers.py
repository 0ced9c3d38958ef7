"""Rows held in registers: a pack that several walks of one instance read is loaded once.

A row kernel's instance often walks its row several times: softmax reads x for the max, again
for the sum of exponentials and again to write; layer norm for the mean, the variance and the
output. Each walk is a shared loop moving 16-byte packs, and walks of the same group, pack width
and static extent hand every lane the same packs, so a pack read again is one the lane loaded
before. When a lane's packs fit ROW_REGISTER_BYTES, the first walk loads them into an array
`hN_[trips][lanes]` that the later walks read: the row crosses memory once, and nvcc, seeing
fully unrolled walks read the same registers, computes a value they repeat once (softmax's exp).

    for r in 0..4096 reduce(m:max): m = max(m, x[i, r])         bf16 h0_[2][8];
    for r in 0..4096 reduce(s:add): s = s + exp(x[i, r] - m) ->  walk 1: load_pack(x + .., h0_[r_i])
    for j in 0..4096: out[i, j] = exp(x[i, j] - m) / s          walks 2, 3: read h0_[.._i][l_]

A pack is held only when it is the same value in every walk: its buffer is not written by the
instance body; its other indices use names fixed for the instance (loop indices of the instance
chain, top-level immutable lets) and gather from buffers the body does not write; the first walk
loads it whatever the data; and the walks sit at the instance's top level (under no branch or
uniform loop), so each runs after the first.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field

from tilefoundry.ir.tile.cexpr import ctype
from tilefoundry.ir.tile.expr import Var, free_vars, loads, substitute
from tilefoundry.ir.tile.stmt import Alloc, Assign, Buffer, For, Let, Seq, Stmt, Store, walk_stmts

from .vector import PackPlan

# Registers a lane may spend on held packs (bytes): 64 keep a 4096-wide bf16 row of a CTA of 256
# (2 packs of 8) with room to spare; a larger hold lowers occupancy more than it saves.
ROW_REGISTER_BYTES = 64

_PACK = "_pack_"  # stands for a walk's own loop variable when packs of different walks are compared


@dataclass(frozen=True)
class Walk:
    """A shared loop at an instance's top level moving packs: its number in the kernel, plan and
    static extent."""

    number: int
    plan: PackPlan
    extent: int


@dataclass(frozen=True)
class HeldRow:
    """The packs of one buffer access a lane keeps: `name[trips][lanes]` of the buffer's type."""

    name: str
    buffer: Buffer
    trips: int
    lanes: int

    def declaration(self) -> str:
        return f"{ctype(self.buffer.dtype)} {self.name}[{self.trips}][{self.lanes}];  // held in registers"


@dataclass(frozen=True)
class Holding:
    """The held rows of one instance, and per walk number the lane arrays it reads from them:
    lane-array name -> (held row, True when this walk loads it)."""

    rows: tuple[HeldRow, ...] = ()
    walks: Mapping[int, Mapping[str, tuple[HeldRow, bool]]] = field(default_factory=dict)


def trips(extent: int, group: int, lanes: int) -> int:
    """Packs one lane takes in a walk of `extent` elements by `group` lanes."""
    return -(-extent // (group * lanes))


def hold_rows(walks: list[Walk], body: Stmt, group: int, budget: int = ROW_REGISTER_BYTES) -> Holding:
    """Which packs of `walks` (in program order) to hold, within `budget` bytes per lane."""
    unfixed = _unfixed_names(body)
    written = {id(s.buffer) for s in walk_stmts(body) if isinstance(s, Store)}
    first: dict[tuple, tuple[Walk, str]] = {}
    later: dict[tuple, list[tuple[Walk, str]]] = {}
    for w in walks:
        for a in w.plan.loads:
            index = tuple(substitute(i, {w.plan.var: Var(_PACK)}) for i in a.index)
            if id(a.buffer) in written or any(
                free_vars(i) & unfixed or any(id(g.buffer) in written for g in loads(i)) for i in index
            ):
                continue
            key = (id(a.buffer), index, w.plan.lanes, w.extent)
            if key in first:
                later[key].append((w, a.name))
            elif not a.guard:
                first[key], later[key] = (w, a.name), []
    rows: list[HeldRow] = []
    held: dict[int, dict[str, tuple[HeldRow, bool]]] = {}
    spent = 0
    for key, (w, name) in first.items():
        if not later[key]:
            continue
        b = next(a.buffer for a in w.plan.loads if a.name == name)
        row = HeldRow(f"h{len(rows)}_", b, trips(w.extent, group, w.plan.lanes), w.plan.lanes)
        size = row.trips * row.lanes * b.dtype.itemsize
        if spent + size > budget:
            continue
        spent += size
        rows.append(row)
        held.setdefault(w.number, {})[name] = (row, True)
        for u, uname in later[key]:
            held.setdefault(u.number, {})[uname] = (row, False)
    return Holding(tuple(rows), held)


def _unfixed_names(body: Stmt) -> set[str]:
    """Names `body` defines whose value may differ between walks: all but its top-level immutable
    lets defined once. Names it does not define (the instance chain's indices, dims) are fixed."""
    defs = Counter(
        s.var if isinstance(s, For) else s.name  # type: ignore[union-attr]
        for s in walk_stmts(body)
        if isinstance(s, (Let, Assign, For))
    )
    top: set[str] = set()
    pending = [body]
    while pending:
        s = pending.pop()
        if isinstance(s, Seq):
            pending.extend(s.body)
        elif isinstance(s, Alloc):
            pending.append(s.body)
        elif isinstance(s, Let) and not s.mutable and defs[s.name] == 1:
            top.add(s.name)
    return set(defs) - top
