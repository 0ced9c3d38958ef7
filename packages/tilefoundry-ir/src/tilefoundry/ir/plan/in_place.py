"""Update in place: an output that is an input with one region rewritten may be that input itself.

`tf.cache_update(cache, pos, new)` is functional (seed 000 §1.1.2: a step MUST NOT mutate the
caches it is given), so a compiled decode step copies every cache into a fresh output each call
and its cost grows with the caches' capacity, not with the tokens it writes. A caller that gives
an old cache up (`tilefoundry.runtime.donate`) may pass that very tensor as the output; then only
the region the update writes needs writing.

Lowering records a `RegionUpdate` (output O, input I, axis, start, length) on each element grid
that stores a cache_update result. This pass keeps it only when it proves that the kernel computes
the function's value with O and I one tensor, and that running its loop over the axis from start
for length iterations does too:

    nest       the kernel is a perfect nest of parallel loops over O's extents whose innermost
               body only defines scalars and stores, each store at exactly the loop variables
    stores     every store writes an updated output, once; the kernel's updates share one axis,
               start and length (the one region its loop over that axis is cut to)
    source     I is an input no other kernel touches; this kernel reads it only at the store
               index and not after the store to O (an element is read before it is overwritten,
               by the instance that overwrites it)
    output     no other kernel writes O; the kernel does not read it; O and I share shape and
               dtype, and each takes part in one update
    start      reads no loop variable and no scalar of the body, and no buffer but the kernel's
               reads other than O and I (it is the same on every instance)
    launch     no explicit placement (it fixes the launch) and not a GEMM's epilogue

A kept update puts O -> I in the entry's `EntryABI.updates` (`Program.updates`): the entry then
accepts O passed as exactly I, and its code generator may run `region_nest` for the kernel (only
the region, skipping indices outside [0, extent)) when every output of the kernel is its source.
Otherwise the kernel's updates are dropped and it says why, all or none: a region-only run would
skip the rows of any store that is not an update.

    # updates in place: out1 is k_cache and out2 is v_cache except at [pos[], pos[] + tokens) along axis 2 ...
    # keeps full copies (out1 of k_cache): k11_attention also reads k_cache
"""

from __future__ import annotations

import dataclasses

from ..dims import dims_equal, format_dim
from ..tile.expr import Var, add, binary, dim_expr, free_vars, loads
from ..tile.printer import format_expr
from ..tile.stmt import (
    AtomCall,
    For,
    If,
    Kernel,
    Let,
    Program,
    RegionUpdate,
    Stmt,
    Store,
    seq,
    statements,
    stmt_exprs,
    walk_stmts,
)


def _nest(k: Kernel) -> tuple[list[For], tuple[Stmt, ...]]:
    """The perfect nest at the top of `k`'s body and the statements inside it."""
    loops: list[For] = []
    body = k.body
    while isinstance(body, For):
        loops.append(body)
        body = body.body
    return loops, statements(body)


def _placed(k: Kernel) -> bool:
    return bool(k.request) or any(isinstance(s, For) and s.request for s in walk_stmts(k.body))


def _kernel_blocker(program: Program, k: Kernel) -> str | None:
    """Why the kernel as a whole may not run in place, or None."""
    if _placed(k):
        return f"{k.name} has an explicit placement, which fixes its launch"
    epilogues = {id(q.body.epilogue) for q in program.kernels if isinstance(q.body, AtomCall)}
    if id(k) in epilogues:
        return f"{k.name} is a GEMM atom's epilogue, launched only when the atom does not apply it"
    loops, stmts = _nest(k)
    first = k.updates[0]
    out = first.output
    if len(loops) != out.rank or any(f.kind != "parallel" for f in loops):
        return f"{k.name} is not a nest of {out.rank} parallel loops over {out.name}"
    if [f.extent for f in loops] != [dim_expr(d) for d in out.shape]:
        return f"{k.name}'s loops do not cover {out.name}'s extents"
    if not all(isinstance(s, (Let, Store)) for s in stmts):
        return f"{k.name}'s loop body holds more than scalar definitions and stores"
    index = tuple(Var(f.var) for f in loops)
    stores = [s for s in stmts if isinstance(s, Store)]
    outputs = [u.output for u in k.updates]
    for s in stores:
        if s.buffer not in outputs:
            return f"{k.name} also stores {s.buffer.name}, which is not an update of an input"
        if s.index != index:
            return f"{k.name} stores {s.buffer.name} elsewhere than at its loop variables"
    if sorted(id(s.buffer) for s in stores) != sorted(id(b) for b in outputs):
        return f"{k.name} does not store each updated output once"
    for u in k.updates[1:]:
        if u.axis != first.axis or u.start != first.start or not dims_equal(u.length, first.length):
            return f"{k.name}'s updates of {first.output.name} and {u.output.name} write different regions"
    body_names = {f.var for f in loops} | {s.name for s in stmts if isinstance(s, Let)}
    used = free_vars(first.start) & body_names
    if used:
        return f"the region's start {format_expr(first.start)} reads {', '.join(sorted(used))} of the body"
    return None


def _update_blocker(program: Program, k: Kernel, u: RegionUpdate) -> str | None:
    """Why one update of a kernel that may run in place may not, or None."""
    o, i = u.output, u.source
    if i.role != "input" or o.role != "output":
        return f"{o.name} is not an entry output updating an entry input"
    if o.dtype is not i.dtype or o.rank != i.rank or not all(map(dims_equal, o.shape, i.shape)):
        return f"{o.name} and {i.name} differ in shape or dtype"
    if o in k.reads:
        return f"{k.name} reads {o.name}, which it writes"
    start_reads = {id(ld.buffer) for ld in loads(u.start)}
    if start_reads - {id(b) for b in k.reads} or start_reads & {id(o), id(i)}:
        return f"the region's start {format_expr(u.start)} reads a buffer the kernel may overwrite"
    touching = [q.name for q in program.kernels if q is not k and (i in q.reads or i in q.writes)]
    if touching:
        return f"{', '.join(touching)} also read{'s' if len(touching) == 1 else ''} {i.name}"
    writing = [q.name for q in program.kernels if q is not k and o in q.writes]
    if writing:
        return f"{', '.join(writing)} also write{'s' if len(writing) == 1 else ''} {o.name}"
    loops, stmts = _nest(k)
    index = tuple(Var(f.var) for f in loops)
    stored = False
    for s in stmts:
        for ld in (ld for e in stmt_exprs(s) for ld in loads(e)):
            if ld.buffer is not i:
                continue
            if ld.index != index:
                return f"{k.name} reads {i.name} elsewhere than at the index it stores {o.name}"
            if stored:
                return f"{k.name} reads {i.name} after storing {o.name}"
        stored = stored or (isinstance(s, Store) and s.buffer is o)
    return None


def _shared(program: Program) -> set[int]:
    """Ids of buffers named by more than one update of the program."""
    seen: list[int] = [id(b) for k in program.kernels for u in k.updates for b in (u.output, u.source)]
    return {b for b in seen if seen.count(b) > 1}


def _region(u: RegionUpdate) -> str:
    start = format_expr(u.start)
    return f"[{start}, {start} + {format_dim(u.length)}) along axis {u.axis}"


def update_in_place(program: Program) -> Program:
    """Keep each kernel's region updates proved to run in place; drop the others, saying why."""
    shared = _shared(program)
    for k in program.kernels:
        if not k.updates:
            continue
        why = _kernel_blocker(program, k)
        reasons = [why] if why is not None else []
        for u in k.updates:
            if id(u.output) in shared or id(u.source) in shared:
                twice = u.source if id(u.source) in shared else u.output
                reasons.append(f"{twice.name} takes part in more than one update")
            elif why is None and (blocked := _update_blocker(program, k, u)) is not None:
                reasons.append(blocked)
        pairs = ", ".join(f"{u.output.name} of {u.source.name}" for u in k.updates)
        if reasons:
            k.decisions.append(f"keeps full copies ({pairs}): {'; '.join(dict.fromkeys(reasons))}")
            k.updates = ()
            continue
        same = " and ".join(f"{u.output.name} is {u.source.name}" for u in k.updates)
        k.decisions.append(
            f"updates in place: {same} except at {_region(k.updates[0])}, which this kernel writes; "
            "each output may be passed as its very input (EntryABI.updates), and when every one is, "
            "only that region runs (an index outside the extent skipped)"
        )
    return program


def axis_loop(k: Kernel) -> For:
    """The loop of an in-place kernel's nest that runs over its updates' axis."""
    loops, _ = _nest(k)
    return loops[k.updates[0].axis]


def region_counter(k: Kernel, reserved: frozenset[str] = frozenset()) -> str:
    """A name for the axis loop's counter in a region run: `<var>_r`, unused by the body and `reserved`."""
    used = set(reserved)
    for s in walk_stmts(k.body):
        used |= {n for e in stmt_exprs(s) for n in free_vars(e)}
        used |= {s.var} if isinstance(s, For) else {s.name} if isinstance(s, Let) else set()
    name = f"{axis_loop(k).var}_r"
    while name in used:
        name += "_"
    return name


def region_nest(k: Kernel, reserved: frozenset[str] = frozenset()) -> Stmt:
    """`k`'s body over its region alone, for when every updated output is its source.

    The axis loop `for v in 0..extent` becomes `for v_r in 0..length` around `let v = start + v_r`
    and `if 0 <= v < extent:` the old body, so a start the index checks refuse writes nothing
    outside the tensor even before they report (`v_r`: `region_counter(k, reserved)`).
    """
    target = axis_loop(k)
    u = k.updates[0]
    counter = region_counter(k, reserved)

    def cut(s: Stmt) -> Stmt:
        if not isinstance(s, For):
            return s
        if s is not target:
            return dataclasses.replace(s, body=cut(s.body))
        v = Var(s.var)
        inside = binary("and", binary("ge", v, dim_expr(0)), binary("lt", v, s.extent))
        body = seq(Let(s.var, add(u.start, Var(counter))), If(inside, s.body))
        return dataclasses.replace(s, var=counter, extent=dim_expr(u.length), body=body)

    return cut(k.body)
