"""Group-context CUDA C++: one logical instance (a row) run by G cooperating lanes.

Seed 003's group mapping for a GPU: statements of the instance body run uniformly on every lane
of the group, and the first parallel or proved-reassociable reduction loop inside is shared out:

    Let / Assign / If / serial loops   every lane, same values (uniform)
    Store                              lane 0 writes, a barrier follows when the kernel reads it back
    Alloc (scratch)                    shared memory, one slot per group, at its largest extents
    parallel loop                      lanes take iterations lane, lane + G, ... (16-byte packs of N
                                       consecutive iterations when proved); barrier around it when
                                       the kernel also reads what it writes
    reduce loop, reassociable,         lanes fold strided shares into identity-initialised partial
      folds with add/max/min           carries, group_reduce combines them in a fixed order, the
                                       carry absorbs the total: acc = acc ⊕ (⊕ partials)
    argmax scan                        each lane scans its strided share from the carried
                                       candidate, group_reduce keeps the best (value, index) pair:
                                       exact in any order, the first maximum winning ties

A reduce loop that may not be reassociated stays uniform (every lane folds the whole loop in
order, so the value is the ordered one). Inside a shared-out loop everything is thread-private
(`serial.SerialCode`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

from tilefoundry.ir.dtypes import DType
from tilefoundry.ir.errors import PlanError
from tilefoundry.ir.plan.binding import simple_fold
from tilefoundry.ir.tile.cexpr import CExpr, cname, ctype
from tilefoundry.ir.tile.expr import Const, Expr, Select, Var, free_vars, mul
from tilefoundry.ir.tile.stmt import (
    Alloc,
    Assign,
    AtomCall,
    Buffer,
    Check,
    For,
    If,
    Let,
    Seq,
    Stmt,
    Store,
    statements,
    walk_stmts,
)

from .row_registers import Holding, Walk, hold_rows, trips
from .serial import SerialCode, indent, largest_count
from .vector import COMBINERS, PackCode, PackPlan, plan_packs


@dataclass(frozen=True)
class ReduceChain:
    """Perfectly nested reduce loops sharing carries, innermost a simple fold."""

    loops: tuple[For, ...]
    carries: tuple[tuple[str, str], ...]

    @property
    def body(self) -> Stmt:
        return self.loops[-1].body


def argmax_scan(loop: For) -> bool:
    """Whether `loop` is an argmax scan as lowering writes it: carries (best, at) tagged
    "argmax", a body of value definitions then `at = c ? index : at` and `best = c ? v : best` on
    one condition c. Lanes may scan shares of it apart: the best pair does not depend on order."""
    if len(loop.carries) != 2 or any(comb != "argmax" for _, comb in loop.carries):
        return False
    (best, _), (at, _) = loop.carries
    stmts = statements(loop.body)
    if len(stmts) < 2:
        return False
    *lets, take_at, take_best = stmts
    if not all(isinstance(s, Let) and not s.mutable for s in lets):
        return False
    if not (isinstance(take_at, Assign) and isinstance(take_best, Assign)):
        return False
    a, b = take_at.value, take_best.value
    return (
        take_at.name == at
        and take_best.name == best
        and isinstance(a, Select)
        and isinstance(b, Select)
        and a.cond == b.cond
        and a.a == Var(loop.var, a.dtype)
        and a.b == Var(at, a.dtype)
        and b.b == Var(best, b.dtype)
    )


def reduce_chain(loop: For, reassociate: bool) -> ReduceChain | str:
    """`loop` as a distributable reduction, or why it is not one."""
    if any(comb == "argmax" for _, comb in loop.carries):
        if argmax_scan(loop):
            return ReduceChain((loop,), loop.carries)
        return f"{loop.var}: an argmax loop not in the scan form lowering writes"
    if not (loop.reassociable or reassociate):
        return f"{loop.var}: its op does not allow reassociating the reduction"
    loops = [loop]
    while isinstance(loops[-1].body, For) and loops[-1].body.kind == "reduce":
        loops.append(loops[-1].body)
    inner = loops[-1]
    if any(c.carries != loop.carries for c in loops) or not simple_fold(inner):
        return f"{loop.var}: its body does more than fold its carries with add, max or min"
    names = {c for c, _ in loop.carries}
    for s in walk_stmts(inner.body):
        if isinstance(s, Assign) and free_vars(s.value.b) & names:  # type: ignore[attr-defined]
            return f"{loop.var}: a carry's update reads a carry"
    chain_vars = {c.var for c in loops}
    if any(free_vars(c.extent) & chain_vars for c in loops):
        return f"{loop.var}: an inner extent depends on an outer reduction index"
    return ReduceChain(tuple(loops), loop.carries)


def shareable_parallel(loop: For) -> bool:
    """A parallel loop whose iterations update no scalar declared outside it."""
    inner = {s.name for s in walk_stmts(loop.body) if isinstance(s, Let)}
    return not any(
        (isinstance(s, Assign) and s.name not in inner) or isinstance(s, (Check, AtomCall))
        for s in walk_stmts(loop.body)
    )


def _carry_dtypes(chain: ReduceChain) -> dict[str, DType]:
    return {s.name: s.value.dtype for s in walk_stmts(chain.body) if isinstance(s, Assign)}


def _writes(s: Stmt) -> set[int]:
    return {id(x.buffer) for x in walk_stmts(s) if isinstance(x, Store)}


def _static_extent(e: Expr) -> int | None:
    return e.value if isinstance(e, Const) and isinstance(e.value, int) else None


class GroupCode:
    """Emits one instance body in group context.

    Args:
        serial: the thread-private emitter (for shared-out loop bodies).
        group: lanes per instance (32: a warp; the CTA size otherwise).
        read_back: ids of buffers the kernel reads; a write to one is followed by a barrier.
        reassociate: the options allow reassociating any sum.
        vectorize: 16-byte packs may be used.
    """

    def __init__(
        self, serial: SerialCode, group: int, read_back: set[int], reassociate: bool, vectorize: bool
    ):
        self.serial = serial
        self.group = group
        self.read_back = read_back
        self.reassociate = reassociate
        self.vectorize = vectorize
        self.loops = 0
        self.packed: list[PackPlan] = []
        self.workspaces: dict[str, tuple[str, int]] = {}  # a CTA group's warp partials: name -> (type, bytes)
        self.shared: list[Buffer] = []
        self.walks: list[Walk] = []
        self.holding = Holding()
        self.nest = 0  # branches and uniform loops around the statement being emitted

    # ------------------------------------------------------------ what would be shared out

    def shares_work(self, s: Stmt) -> bool:
        """True when some loop of `s` (at group level) would be shared out among the lanes."""
        if isinstance(s, Seq):
            return any(self.shares_work(c) for c in s.body)
        if isinstance(s, (Alloc, If)):
            return any(
                self.shares_work(c) for c in ((s.body,) if isinstance(s, Alloc) else (s.then, s.orelse)) if c
            )
        if isinstance(s, For):
            if s.kind == "parallel" and shareable_parallel(s):
                return True
            if s.kind == "reduce" and isinstance(reduce_chain(s, self.reassociate), ReduceChain):
                return True
            return self.shares_work(s.body)
        return False

    def shared_extents(self, s: Stmt) -> list[int | None]:
        """Extents of the loops that would be shared out (None: dynamic)."""
        out: list[int | None] = []
        for x in walk_stmts(s):
            if isinstance(x, For) and (x.kind == "parallel" or x.kind == "reduce"):
                out.append(_static_extent(x.extent))
        return out

    # ------------------------------------------------------------ emission

    def instance(self, body: Stmt, depth: int, names: Mapping[str, str]) -> list[str]:
        """Lines of one instance's `body`; packs its walks read again are held in registers
        (row_registers), declared first."""
        if self.vectorize:
            dry = GroupCode(self.serial, self.group, self.read_back, self.reassociate, True)
            dry.stmt(body, depth, names)
            self.holding = hold_rows(dry.walks, body, self.group)
        lines = self.stmt(body, depth, names)
        return indent([r.declaration() for r in self.holding.rows], depth) + lines

    def sync(self, depth: int) -> list[str]:
        return indent([f"group_sync<{self.group}>();"], depth)

    def nested(self, s: Stmt, depth: int, names: Mapping[str, str]) -> list[str]:
        """Lines of `s` under a branch or a uniform loop: no walk there is at the top level."""
        self.nest += 1
        try:
            return self.stmt(s, depth, names)
        finally:
            self.nest -= 1

    def pack_loop(self, loop: For, plan: PackPlan, number: int, cx: CExpr) -> tuple[list[str], PackCode, int]:
        """Head lines of a shared loop moving `plan`'s packs, its PackCode and the braces to close.

        A top-level walk with a static extent is recorded; one holding rows runs its `trips`
        packs as a fully unrolled count, so each pack's held registers are indexed statically.
        """
        var, extent = loop.var, loop.extent
        g, n, base = self.group, plan.lanes, f"{var}_b"
        e = extent.value if isinstance(extent, Const) and isinstance(extent.value, int) else None
        if self.nest == 0 and e is not None:
            self.walks.append(Walk(number, plan, e, loop.body))
        held = self.holding.walks.get(number, {})
        if e is None or not held:
            head = f"for (int64_t {base} = lane_ * {n}; {base} < {cx(extent)}; {base} += {g * n}) {{"
            return [head], PackCode(plan, base), 1
        count = f"{var}_i"
        named = {name: f"{row.name}[{count}]" for name, (row, _) in held.items()}
        plan = replace(plan, loads=tuple(replace(a, name=named.get(a.name, a.name)) for a in plan.loads))
        lines = [
            "#pragma unroll",
            f"for (int {count} = 0; {count} < {trips(e, g, n)}; ++{count}) {{",
            f"  const int64_t {base} = lane_ * {n} + {count} * {g * n};",
        ]
        close = 1
        if e % (g * n):
            lines.append(f"  if ({base} < {e}) {{")
            close = 2
        fills = {named[name]: fill for name, (_, fill) in held.items()}
        return lines, PackCode(plan, base, fills), close

    def stmt(self, s: Stmt, depth: int, names: Mapping[str, str]) -> list[str]:
        """Lines of `s` at `depth`, every lane running them."""
        if isinstance(s, Seq):
            return [x for c in s.body for x in self.stmt(c, depth, names)]
        if isinstance(s, (Let, Assign)):
            return self.serial.stmt(s, depth, names)
        if isinstance(s, Store):
            out = (
                indent(["if (lane_ == 0) {"], depth)
                + self.serial.stmt(s, depth + 1, names)
                + indent(["}"], depth)
            )
            return out + (self.sync(depth) if id(s.buffer) in self.read_back else [])
        if isinstance(s, If):
            cx = self.serial.cx(names)
            out = indent([f"if ({cx(s.cond)}) {{"], depth) + self.nested(s.then, depth + 1, names)
            if s.orelse is not None:
                out += indent(["} else {"], depth) + self.nested(s.orelse, depth + 1, names)
            return out + indent(["}"], depth)
        if isinstance(s, Alloc):
            return self.alloc(s, depth, names)
        if isinstance(s, For):
            if s.kind == "parallel" and shareable_parallel(s):
                return self.share_parallel(s, depth, names)
            if s.kind == "reduce":
                chain = reduce_chain(s, self.reassociate)
                if isinstance(chain, ReduceChain):
                    return self.share_reduce(chain, depth, names)
            cx = self.serial.cx(names)
            head = f"for (int64_t {s.var} = 0; {s.var} < {cx(s.extent)}; ++{s.var}) {{  // uniform"
            return indent([head], depth) + self.nested(s.body, depth + 1, names) + indent(["}"], depth)
        raise PlanError(
            f"cuda: kernel {self.serial.kernel}: a {type(s).__name__} cannot run in a cooperating group",
            where=self.serial.kernel,
        )

    def alloc(self, s: Alloc, depth: int, names: Mapping[str, str]) -> list[str]:
        b = s.buffer
        n = largest_count(b.shape)
        assert n is not None, b.name  # realize.rows_smem refused unbounded scratch
        self.shared.append(b)
        line = f"{ctype(b.dtype)}* {cname(b)} = {cname(b)}_smem_[slot_];  // group scratch in shared memory"
        return indent([line], depth) + self.stmt(s.body, depth, names)

    def share_parallel(self, loop: For, depth: int, names: Mapping[str, str]) -> list[str]:
        cx = self.serial.cx(names)
        g = self.group
        writes = _writes(loop.body)
        fence = bool(writes & self.read_back)
        out = self.sync(depth) if fence else []
        plan = (
            plan_packs(loop.var, loop.extent, loop.body, f"p{self.loops}", frozenset())
            if self.vectorize
            else None
        )
        self.loops += 1
        if isinstance(plan, PackPlan):
            self.packed.append(plan)
            head, code, close = self.pack_loop(loop, plan, self.loops - 1, cx)
            body = code.prologue(cx, loop.body) + code.lanes(loop.body, cx) + code.epilogue(cx)
            out += indent([f"// {loop.var}: shared out in 16-byte packs of {plan.lanes}", *head], depth)
            out += indent(body, depth + close) + indent(_closing(close), depth)
        else:
            head = f"for (int64_t {loop.var} = lane_; {loop.var} < {cx(loop.extent)}; {loop.var} += {g}) {{"
            out += indent([f"// {loop.var}: shared out over {g} lanes", head], depth)
            out += self.serial.stmt(loop.body, depth + 1, names) + indent(["}"], depth)
        return out + (self.sync(depth) if fence else [])

    def share_reduce(self, chain: ReduceChain, depth: int, names: Mapping[str, str]) -> list[str]:
        cx = self.serial.cx(names)
        g = self.group
        dtypes = _carry_dtypes(chain)
        partial = {acc: f"{acc}_p_" for acc, _ in chain.carries}
        lane_names = {**names, **partial}
        scan = chain.carries[0][1] == "argmax"
        out = ["{"]
        for acc, comb in chain.carries:
            t = ctype(dtypes[acc])
            # an argmax share starts from the carried candidate: a pair already scanned, never lost
            out.append(f"  {t} {partial[acc]} = {acc if scan else f'identity_{comb}<{t}>()'};")
        first = chain.loops[0]
        plan = None
        if len(chain.loops) == 1 and self.vectorize:
            plan = plan_packs(first.var, first.extent, chain.body, f"p{self.loops}", frozenset(partial))
        self.loops += 1
        if isinstance(plan, PackPlan):
            self.packed.append(plan)
            head, code, close = self.pack_loop(first, plan, self.loops - 1, cx)
            lane_cx = self.serial.cx(lane_names)
            note = f"  // {first.var}: partial carries over {g} lanes in 16-byte packs of {plan.lanes}"
            ahead = packs_in_flight(plan, first.extent, g) if not code.held else 1
            if ahead > 1:
                out += [
                    f"{note}, {ahead} a lane in flight",
                    *indent(self.packs_ahead(first.extent, code, ahead, chain.body, lane_cx), 1),
                ]
            else:
                out += [note, *indent(head, 1)]
                out += indent(code.prologue(lane_cx, chain.body) + code.lanes(chain.body, lane_cx), 1 + close)
                out += indent(_closing(close), 1)
        else:
            total = Const(1)
            for c in chain.loops:
                total = mul(total, c.extent)
            flat = f"{first.var}_f"
            out.append(f"  // {', '.join(c.var for c in chain.loops)}: partial carries over {g} lanes")
            out.append(f"  for (int64_t {flat} = lane_; {flat} < {cx(total)}; {flat} += {g}) {{")
            out += indent(unflatten(flat, [(c.var, cx(c.extent)) for c in chain.loops]), 2)
            out += [*self.serial.stmt(chain.body, 2, lane_names), "  }"]
        if scan:
            (best, _), (at, _) = chain.carries
            v = ctype(dtypes[best])
            t = f"IndexedValue<{v}>"
            pair = f"{t}{{{partial[best]}, {partial[at]}}}"
            space = self.workspace(t, f"iv_{v}", 16)  # sizeof: a value of at most 8 bytes, an int64_t
            out += [
                f"  const {t} {best}_r_ = group_reduce<{g}>(argmax_combine{{}}, {pair}, {space});",
                f"  {best} = {best}_r_.value;",
                f"  {at} = {best}_r_.index;",
            ]
        else:
            for acc, comb in chain.carries:
                t = ctype(dtypes[acc])
                space = self.workspace(t, t, dtypes[acc].itemsize)
                total_text = f"group_reduce<{g}>({COMBINERS[comb]}{{}}, {partial[acc]}, {space})"
                update = {
                    "add": f"{acc} + {total_text}",
                    "max": f"max_nan({acc}, {total_text})",
                    "min": f"min_nan({acc}, {total_text})",
                }[comb]
                out.append(f"  {acc} = {update};")
        out.append("}")
        return indent(out, depth)

    def packs_ahead(self, extent: Expr, code: PackCode, ahead: int, body: Stmt, cx: CExpr) -> list[str]:
        """A lane's strided packs of a shared reduction, `ahead` at a time: every pack's loads, then
        each pack's lanes in order, then the packs left over one at a time by `code` (the one-pack
        loop's). Each lane folds its elements in the order the one-pack loop does, so sums and
        argmax ties come out the same; only the loads are in flight together (ptxas keeps one load
        a trip where the loop body loads, folds and loops)."""
        plan, base, end = code.plan, code.base, cx(extent)
        n = plan.lanes
        stride = self.group * n
        main = [
            f"int64_t {base} = lane_ * {n};",
            f"for (; {base} + {(ahead - 1) * stride} < ({end}); {base} += {ahead * stride}) {{",
        ]
        loads: list[str] = []
        lanes: list[str] = []
        for u in range(ahead):
            named = replace(plan, loads=tuple(replace(a, name=f"{a.name}{u}") for a in plan.loads))
            pack = PackCode(named, f"{base}{u}")
            loads += [f"const int64_t {base}{u} = {base} + {u * stride};", *pack.prologue(cx, body)]
            lanes += pack.lanes(body, cx)
        tail = [f"for (; {base} < ({end}); {base} += {stride}) {{"]
        tail += [*indent(code.prologue(cx, body) + code.lanes(body, cx), 1), "}"]
        return ["{", *indent([*main, *indent(loads + lanes, 1), "}", *tail], 1), "}"]

    def workspace(self, t: str, stem: str, size: int) -> str:
        """The shared array a CTA group combines its warps' partials of C++ type `t` (`size` bytes)
        in, named from `stem` and declared by the kernel; a warp group needs none (a typed null)."""
        if self.group <= 32:
            return f"static_cast<{t}*>(nullptr)"
        name = f"ws_{stem}_"
        self.workspaces[name] = (t, size)
        return name

    def workspace_bytes(self, body: Stmt) -> int:
        """Shared memory of the warp-partial arrays `body`'s shared reductions combine in."""
        dry = GroupCode(self.serial, self.group, set(), self.reassociate, self.vectorize)
        dry.stmt(body, 0, {})
        return sum(32 * size for _, size in dry.workspaces.values())


# 16-byte packs a lane keeps in flight in a shared reduction (its registers: 4 words a pack)
PACKS_IN_FLIGHT = 4


def packs_in_flight(plan: PackPlan, extent: Expr, group: int) -> int:
    """How many of its strided packs a lane of a shared reduction loads before folding them: up to
    PACKS_IN_FLIGHT over the plan's packed loads, where a lane takes several packs and the plan is
    plain loads (nothing hoisted, folded, exchanged or stored, whose names one pack's scope
    holds). 1: a pack at a time."""
    if plan.hoisted or plan.folds or plan.exchanges or plan.stores or plan.uniform:
        return 1
    if any(a.partner is not None or a.guard for a in plan.loads) or not plan.loads:
        return 1
    ahead = max(1, PACKS_IN_FLIGHT // len(plan.loads))
    if isinstance(extent, Const) and isinstance(extent.value, int):
        ahead = min(ahead, trips(extent.value, group, plan.lanes))
    return ahead


def _closing(braces: int) -> list[str]:
    """The lines closing `braces` nested blocks, innermost first."""
    return ["  " * k + "}" for k in range(braces - 1, -1, -1)]


def group_packs(kernel: str, body: Stmt, group: int, reassociate: bool) -> tuple[PackPlan, ...]:
    """The 16-byte pack plans `GroupCode` gives `body`'s shared loops, in order.

    The rows realization plans them before emission, so the host knows which base addresses its
    packed variant needs aligned.
    """
    code = GroupCode(SerialCode({}, kernel), group, set(), reassociate, True)
    code.stmt(body, 0, {})
    return tuple(code.packed)


def unflatten(flat: str, axes: list[tuple[str, str]]) -> list[str]:
    """Declarations of each axis variable from a row-major flat index over `axes` (name, extent)."""
    if not axes:
        return []
    if len(axes) == 1:
        return [f"const int64_t {axes[0][0]} = {flat};"]
    rest = f"{flat}_r"
    lines = [f"int64_t {rest} = {flat};"]
    for name, extent in reversed(axes[1:]):
        lines += [f"const int64_t {name} = {rest} % ({extent});", f"{rest} /= ({extent});"]
    lines.append(f"const int64_t {axes[0][0]} = {rest};")
    return lines
