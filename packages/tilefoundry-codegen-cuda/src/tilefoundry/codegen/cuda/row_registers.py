"""Rows held in registers: a pack that several walks of one instance read is loaded once.

A row kernel's instance often walks its row several times: softmax reads x for the max, again
for the sum of exponentials and again to write. Each walk is a shared loop moving 16-byte packs,
and walks of the same group, pack width and static extent hand every lane the same packs, so a
pack read again is one the lane loaded before. The first walk then loads the packs into an array
`hN_[trips][lanes]` that the later walks read, and nvcc, seeing fully unrolled walks apply the
same transcendental to the same registers, computes it once: softmax's exp per element, not
twice (on the H200, softmax 32768 x 4096 bf16 went from 62% to 87% of copy bandwidth).

    for r in 0..4096 reduce(m:max): m = max(m, x[i, r])         bf16 h0_[2][8];
    for r in 0..4096 reduce(s:add): s = s + exp(x[i, r] - m) ->  walk 1: load_pack(x + .., h0_[r_i])
    for j in 0..4096: out[i, j] = exp(x[i, j] - m) / s          walks 2, 3: read h0_[.._i][l_]

A pack is held only where that saving exists: two walks apply one transcendental (exp, log,
tanh, erf, sigmoid, ...) to it. Walks that only re-read the row gain nothing: their re-reads hit
L1, and holding cost layer norm (mean, variance, output) 90% -> 80% of copy, since the unrolled
output walk's weight loads are hoisted over the reductions and occupancy fell from 6 CTAs an SM
to 5. A held pack must also fit ROW_REGISTER_BYTES a lane and be the same value in every walk:
its buffer is not written by the instance body; its other indices use names fixed for the
instance (loop indices of the instance chain, top-level immutable lets) and gather from buffers
the body does not write; the first walk loads it whatever the data; and the walks sit at the
instance's top level (under no branch or uniform loop), so each runs after the first.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field

from tilefoundry.ir.tile.cexpr import ctype
from tilefoundry.ir.tile.expr import Expr, Un, Var, free_vars, loads, substitute, walk
from tilefoundry.ir.tile.stmt import Alloc, Assign, Buffer, For, Let, Seq, Stmt, Store, walk_stmts

from .vector import Access, PackPlan

# Registers a lane may spend on held packs (bytes): 64 keep a 4096-wide bf16 row of a CTA of 256
# (2 packs of 8) with room to spare; a larger hold lowers occupancy more than it saves.
ROW_REGISTER_BYTES = 64

# Unary ops whose repetition holding saves (a few to tens of instructions each, MUFU-bound).
TRANSCENDENTAL = frozenset({"exp", "exp2", "log", "log2", "log1p", "tanh", "erf", "sigmoid"})

_PACK = "_pack_"  # stands for a walk's own loop variable when packs of different walks are compared


@dataclass(frozen=True)
class Walk:
    """A shared loop at an instance's top level moving packs: its number in the kernel, plan,
    static extent and body."""

    number: int
    plan: PackPlan
    extent: int
    body: Stmt


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
    first: dict[tuple, tuple[Walk, Access]] = {}
    later: dict[tuple, list[tuple[Walk, str]]] = {}
    applied = Counter(e for w in walks for e in _transcendentals(w))  # walks applying each
    repeated = {e for e, n in applied.items() if n > 1}
    for w in walks:
        for a in w.plan.loads:
            index = _pack_index(w, a.index)
            if id(a.buffer) in written or any(
                free_vars(i) & unfixed or any(id(g.buffer) in written for g in loads(i)) for i in index
            ):
                continue
            key = (id(a.buffer), index, w.plan.lanes, w.extent)
            if key in first:
                later[key].append((w, a.name))
            elif not a.guard:
                first[key], later[key] = (w, a), []
    rows: list[HeldRow] = []
    held: dict[int, dict[str, tuple[HeldRow, bool]]] = {}
    spent = 0
    for key, (w, a) in first.items():
        if not later[key] or not any(_reads(e, key) for e in repeated):
            continue
        row = HeldRow(f"h{len(rows)}_", a.buffer, trips(w.extent, group, w.plan.lanes), w.plan.lanes)
        size = row.trips * row.lanes * a.buffer.dtype.itemsize
        if spent + size > budget:
            continue
        spent += size
        rows.append(row)
        held.setdefault(w.number, {})[a.name] = (row, True)
        for u, uname in later[key]:
            held.setdefault(u.number, {})[uname] = (row, False)
    return Holding(tuple(rows), held)


def _pack_index(w: Walk, index: tuple[Expr, ...]) -> tuple[Expr, ...]:
    """`index` with the walk's own variable as the placeholder every walk shares."""
    return tuple(substitute(i, {w.plan.var: Var(_PACK)}) for i in index)


def _transcendentals(w: Walk) -> set[Expr]:
    """The transcendental subexpressions of `w`'s body reading a pack, lane lets inlined and the
    walk's variable as the placeholder, so equal ones of two walks compare equal."""
    env: dict[str, Expr] = {w.plan.var: Var(_PACK)}
    out: set[Expr] = set()
    for s in w.body.body if isinstance(w.body, Seq) else (w.body,):
        value = substitute(s.value, env)  # type: ignore[union-attr]
        if isinstance(s, Let):
            env[s.name] = value
        out |= {e for e in walk(value) if isinstance(e, Un) and e.op in TRANSCENDENTAL and loads(e)}
    return out


def _reads(e: Expr, key: tuple) -> bool:
    """Whether `e` reads the pack of `key` (buffer id, placeholder index, ...)."""
    return any(id(ld.buffer) == key[0] and ld.index == key[1] for ld in loads(e))


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
