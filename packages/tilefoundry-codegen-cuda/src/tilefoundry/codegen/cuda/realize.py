"""How each scheduled kernel runs on the GPU: its realization, chosen by proof, in a fixed order.

The binding pass put a kernel's outer independent loops on the `cta` axis (the instance
loops). The realizers below are tried in order; the first whose proof holds on the final body
wins, and every refusal is recorded with its reason (`Kernel.decisions`, printed in the source):

    placed     the author's Mesh scope spans `thread`: exactly its <<<cta, thread>>> launch, each
               instance running its local block of the instance loops              -> placed.py
    atom       the body is an AtomCall (a proved whole region, e.g. a GEMM)      -> atoms.py
    attention  the body is exactly the attention nest over buffers (attention.py): the
               flash atom (its CUDA-core tier's K/V stages sized against the catalog's shared
               memory; 16-bit head dims 64/128 also have the tensor-core tier, picked per call)
    check      data-dependent index validation: one launch running every loop nest, one thread
               per checked element
    rows       instance body with a loop the lanes can share (a parallel loop, a
               reduction that may be reassociated, or an argmax scan, exact in any
               order): a warp per instance when the
               shared extents are small, else a CTA; scratch in shared memory
    grid       everything else: one thread per instance, the body serial in order;
               16-byte packs along the innermost instance axis when proved (vector.py)

An explicit placement (the author's Mesh scope) the realization cannot honor fails closed. A
Mesh over `cta` alone is what every realization does with the instance loops (on as many CTAs
as the launch picks); one over `thread` is realized as placed; `cluster`, `warp` and `lane`
placements are refused.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from tilefoundry.ir.errors import PlanError
from tilefoundry.ir.plan.checks import check_units
from tilefoundry.ir.target import TargetCatalog
from tilefoundry.ir.target.options import GEMM, REASSOCIATE, VECTORIZE
from tilefoundry.ir.tile.expr import Const, Expr, free_vars, loads
from tilefoundry.ir.tile.stmt import Alloc, AtomCall, Buffer, Check, For, Kernel, Stmt, seq, walk_stmts

from .attention import atom_blocker, atom_call, match_attention
from .group import GroupCode, group_packs
from .in_place import InPlace, describe, plan_in_place
from .options import ATTENTION, GRID_CTAS_PER_SM, GRID_PACKS
from .partners import share_partner_loads
from .placed import PlacedGrid, plan_placed
from .serial import SerialCode, largest_count
from .vector import PackPlan, plan_packs, share_folds

# Threads per CTA of a flat grid: light bodies (no loops) and heavy ones.
GRID_THREADS = 256
HEAVY_GRID_THREADS = 128
# Warp-per-instance when every shared loop is at most this long; else a CTA per instance.
WARP_ROW_EXTENT = 1024
ROW_WARPS_PER_CTA = 4
# NOTE: statically declared shared memory is limited to 48 KiB per CTA whatever the device offers.
STATIC_SMEM_BYTES = 48 * 1024
PLACEMENTS = ("cta", "thread")
# The attention atom's K/V tile (keys) and query rows per CTA (atoms/attention.cuh).
ATTN_KEYS = 32
ATTN_ROWS = 4


@dataclass(eq=False)
class Realization:
    """One launch of a kernel.

    Attributes:
        kind: "placed", "atom", "check", "rows" or "grid".
        name: the __global__ function's name (unique in the translation unit).
        chain: instance loops flattened onto the launch, outermost first.
        body: what each instance runs (the AtomCall for an atom).
        threads: threads per CTA; group: lanes per instance (1 for grid/check).
        packs: the 16-byte pack plan of a grid's innermost instance axis.
        row_packs: the 16-byte pack plans of a rows realization's shared loops, in body order.
        smem_bytes: static shared memory of the kernel.
        reassociate: the option a rows realization (or an atom's prologue) shares reductions under.
        vectorize: the option an atom's prologue may use 16-byte packs under.
        placed: the launch of a placed realization (gridDim, blockDim, the loops' cuts).
        nests: a check's loop nests, each (instance loops, body), all run by its one launch.
        messages: a check's distinct messages; a violation reports the 1-based position of its own.
        in_place: how a grid or rows launch runs only the kernel's region when its updated
            outputs are their sources (in_place.py).
        min_ctas: the CTAs an SM the packed variant is compiled to hold (0: as ptxas chooses).
        thread_packs: the packs each thread of a packed grid takes (grid_packs), loads first.
        notes: the decisions behind it, printed above the kernel.
    """

    kind: str
    name: str
    kernel: Kernel
    chain: tuple[For, ...]
    body: Stmt
    threads: int = GRID_THREADS
    group: int = 1
    packs: PackPlan | None = None
    row_packs: tuple[PackPlan, ...] = ()
    smem_bytes: int = 0
    reassociate: bool = False
    vectorize: bool = True
    placed: PlacedGrid | None = None
    nests: tuple[tuple[tuple[For, ...], Stmt], ...] = ()
    messages: tuple[str, ...] = ()
    notes: list[str] = field(default_factory=list)
    in_place: InPlace | None = None
    min_ctas: int = 0
    thread_packs: int = 1

    @property
    def plans(self) -> tuple[PackPlan, ...]:
        """Every pack plan of the packed variant (none: the kernel has only its scalar variant)."""
        return (self.packs,) if self.packs is not None else self.row_packs

    @property
    def packed_buffers(self) -> tuple[Buffer, ...]:
        """The buffers whose base addresses the packed variant needs 16-byte aligned, once each."""
        seen: dict[int, Buffer] = {}
        for plan in self.plans:
            for b in plan.buffers:
                seen.setdefault(id(b), b)
        return tuple(seen.values())

    @property
    def variant(self) -> str:
        """The packed variant's name suffix: `_v8`, its pack widths (`_v4_8` when loops differ)."""
        return "_v" + "_".join(str(n) for n in sorted({p.lanes for p in self.plans}))


def instance_chain(body: Stmt, bound_only: bool = True) -> tuple[tuple[For, ...], Stmt]:
    """The perfectly nested loops at the top of `body` (worker-bound ones when `bound_only`)."""
    chain: list[For] = []
    s = body
    while isinstance(s, For) and (s.binding == "worker" or not bound_only):
        if any(free_vars(s.extent) & {c.var for c in chain}):
            break  # an extent that moves with an outer instance cannot be flattened
        chain.append(s)
        s = s.body
    return tuple(chain), s


class Realizer:
    """Chooses the realizations of one kernel against the catalog and options."""

    def __init__(self, program: str, k: Kernel, catalog: TargetCatalog, options: Mapping[str, Any]):
        self.program = program
        self.k = k
        self.catalog = catalog
        self.vectorize = VECTORIZE.read(options)
        self.reassociate = REASSOCIATE.read(options)
        self.attention = ATTENTION.read(options)
        self.gemm = GEMM.read(options)
        self.grid_ctas = GRID_CTAS_PER_SM.read(options)
        self.grid_packs = GRID_PACKS.read(options)
        self.smem_cap = min(STATIC_SMEM_BYTES, catalog.smem_bytes)
        self.dims: dict[str, str] = {}

    @property
    def name(self) -> str:
        return f"{self.program}__{self.k.name}"

    def refuse(self, what: str, why: str) -> PlanError:
        origin = f" ({', '.join(self.k.origin)})" if self.k.origin else ""
        return PlanError(
            f"cuda: kernel {self.k.name}{origin}: explicit {what} refused: {why}",
            where=self.k.name,
            expected=what,
            got=why,
        )

    def check_placement(self) -> None:
        """The author's Mesh scope: instance loops go to `cta` and `thread`; other levels are refused."""
        for axis in self.k.request:
            if axis not in PLACEMENTS:
                raise self.refuse(
                    f"placement on '{axis}'",
                    "the CUDA realization maps a kernel's instance loops onto cta and thread only; placing "
                    f"work on '{axis}' needs a coordinate factorization it does not implement",
                )

    def realize(self) -> list[Realization]:
        """The launches of the kernel, in order."""
        self.check_placement()
        for realizer in REALIZERS:
            found = realizer(self)
            if isinstance(found, list):
                for r in found:
                    packed = r.packs.var if r.packs is not None else None
                    region = plan_in_place(self.k, r.kind, r.chain, packed)
                    if region is not None:
                        r.notes.append(describe(region))
                        r.in_place = region if isinstance(region, InPlace) else None
                    _settle_thread_packs(r)
                    self.k.decisions.extend(r.notes)
                return found
            if found:
                self.k.decisions.append(found)
        raise AssertionError("the grid realization always applies")


Realize = Callable[[Realizer], "list[Realization] | str | None"]
REALIZERS: list[Realize] = []


def realizer(fn: Realize) -> Realize:
    """Register a realization, tried after those registered before it."""
    REALIZERS.append(fn)
    return fn


@realizer
def _placed(r: Realizer) -> list[Realization] | None:
    if "thread" not in r.k.request:
        return None
    body, notes = r.k.body, []
    if isinstance(body, AtomCall):
        if r.gemm == "atom":
            raise r.refuse("GEMM atom and placement on 'thread'", f"the atom {body.atom} chooses its own "
                           "launch geometry, the Mesh scope fixes another; drop one of the two requests")
        notes.append(f"cuda: the Mesh placement keeps the loop the atom {body.atom} replaced (the atom "
                     "chooses its own launch geometry)")
        body = body.replaces
    elif r.k.form == "attention" and r.attention == "atom":
        raise r.refuse("attention atom and placement on 'thread'", "the atom chooses its own launch "
                       "geometry, the Mesh scope fixes another; drop one of the two requests")
    chain, inner = instance_chain(body)
    grid = plan_placed(r.k.placement, chain, r.catalog, r.refuse)
    notes.append(grid.describe(chain))
    return [Realization("placed", r.name, r.k, chain, inner, threads=grid.threads, placed=grid, notes=notes)]


@realizer
def _atom(r: Realizer) -> list[Realization] | None:
    if not isinstance(r.k.body, AtomCall):
        return None
    atom = r.k.body
    notes = [f"cuda: atom {atom.atom}"]
    flags = {"reassociate": r.reassociate, "vectorize": r.vectorize}  # for a GEMM's prologue
    return [Realization("atom", r.name, r.k, (), atom, threads=0, notes=notes, **flags)]


@realizer
def _attention(r: Realizer) -> list[Realization] | str | None:
    if r.k.form != "attention" or r.attention == "loop":
        return None
    region = match_attention(r.k)
    why = region if isinstance(region, str) else atom_blocker(region)
    stages = 0
    if not isinstance(region, str) and why is None:
        itemsize = region.q.dtype.itemsize
        d = region.head_dim
        per_stage = ATTN_KEYS * (2 * d + 16 // itemsize) * itemsize
        fits = [s for s in (2, 1) if s * per_stage + ATTN_ROWS * d * 4 <= r.catalog.smem_bytes]
        stages = fits[0] if fits else 0
        if not stages:
            why = f"one K/V stage needs {per_stage} B of shared memory, over {r.catalog.smem_bytes} B"
    if why is not None:
        if r.attention == "atom":
            raise r.refuse("attention atom", why)
        return f"cuda: kept the attention loop: {why}"
    assert not isinstance(region, str)
    call = atom_call(region, r.k.body)
    call.params["stages"] = Const(stages)
    prefetch = (
        "CUDA-core tier: two-window K/V prefetch (2 stages in shared memory)"
        if stages == 2
        else "CUDA-core tier: one K/V stage: two do not fit shared memory, loads stay ordered"
    )
    if region.q.dtype.bits == 16 and region.head_dim in (64, 128):
        prefetch += "; aligned calls take the tensor-core tier (attention_mma.cuh), configured per call"
    note = (
        f"cuda: atom {call.atom}: attention region proved (q, k, v, out compact in memory, "
        f"{'causal' if region.causal else 'full'}, {'kv_len' if region.kv_len else 'all keys'}); {prefetch}"
    )
    return [Realization("atom", r.name, r.k, (), call, threads=0, notes=[note])]


@realizer
def _check(r: Realizer) -> list[Realization] | None:
    if r.k.form != "index check":
        return None
    nests = []
    for nest in _check_nests(r.k.body):
        chain, body = instance_chain(nest, bound_only=False)
        if any(isinstance(s, (For, Alloc)) for s in walk_stmts(body)):
            raise PlanError(f"cuda: kernel {r.k.name}: an index check holds loops below its element loops")
        nests.append((chain, body))
    messages = tuple(dict.fromkeys(s.message for s in walk_stmts(r.k.body) if isinstance(s, Check)))
    note = (
        f"cuda: index check, one launch for its {len(nests)} loop nest{'s' if len(nests) > 1 else ''}: each "
        "a grid-stride loop, one thread per checked element (rank-0 checks on thread 0); a violation "
        "records its check's id and value, raised after the kernel, or traps inside a CUDA-graph capture"
    )
    return [
        Realization("check", r.name, r.k, (), r.k.body, nests=tuple(nests), messages=messages, notes=[note])
    ]


def _check_nests(body: Stmt) -> list[Stmt]:
    """The loop nests of an index-check kernel, then its rank-0 checks together (thread 0 runs them)."""
    units = check_units(body)
    nests = [u for u in units if isinstance(u, For)]
    scalar = [u for u in units if not isinstance(u, For)]
    return [*nests, seq(*scalar)] if scalar else nests


def rows_smem(gc: GroupCode, body: Stmt, slots: int) -> int | None:
    """Static shared memory of a rows realization: group scratch per slot, plus the reduce workspaces."""
    total = 0
    for s in walk_stmts(body):
        if isinstance(s, Alloc):
            n = largest_count(s.buffer.shape)
            if n is None:
                return None
            total += n * s.buffer.dtype.itemsize * slots
    return total + gc.workspace_bytes(body)


@realizer
def _rows(r: Realizer) -> list[Realization] | str | None:
    chain, body = instance_chain(r.k.body)
    if any(isinstance(s, Check) for s in walk_stmts(body)):
        return None
    probe = GroupCode(SerialCode({}, r.k.name), 32, set(), r.reassociate, r.vectorize)
    if not probe.shares_work(body):
        return None
    extents = probe.shared_extents(body)
    widest = max((e if e is not None else WARP_ROW_EXTENT + 1 for e in extents), default=1)
    if widest <= WARP_ROW_EXTENT:
        group, threads, how = 32, 32 * ROW_WARPS_PER_CTA, f"a warp per instance, {ROW_WARPS_PER_CTA} per CTA"
    else:
        group = threads = min(1024, max(128, _pow2_ceil(widest // 16)))
        how = f"a CTA of {threads} threads per instance"
    gc = GroupCode(SerialCode({}, r.k.name), group, set(), r.reassociate, r.vectorize)
    smem = rows_smem(gc, body, threads // group)
    if smem is None or smem > r.smem_cap:
        need = "unbounded" if smem is None else f"{smem} B"
        return (
            f"cuda: rows refused: group scratch needs {need} of shared memory, over the "
            f"{r.smem_cap} B static budget; kept one thread per instance (ordered)"
        )
    axes = ", ".join(c.var for c in chain) or "none (one instance)"
    shared = "parallel loops, reassociable reductions and argmax scans shared by the lanes"
    notes = [f"cuda: rows over instance loops {axes}: {how}; {shared}"]
    packs = group_packs(r.k.name, body, group, r.reassociate) if r.vectorize else ()
    if packs:
        names = ", ".join(dict.fromkeys(b.name for p in packs for b in p.buffers))
        notes.append(
            f"cuda: shared loops {', '.join(p.var for p in packs)} in 16-byte packs ({names}); the host "
            "launches the scalar variant when a base address is not 16-byte aligned"
        )
    return [
        Realization(
            "rows",
            r.name,
            r.k,
            chain,
            body,
            threads=threads,
            group=group,
            row_packs=packs,
            smem_bytes=smem,
            reassociate=r.reassociate,
            notes=notes,
        )
    ]


@realizer
def _grid(r: Realizer) -> list[Realization]:
    chain, body = instance_chain(r.k.body)
    heavy = any(isinstance(s, For) for s in walk_stmts(body))
    threads = HEAVY_GRID_THREADS if heavy else GRID_THREADS
    notes = [
        f"cuda: flat grid over {', '.join(c.var for c in chain) or 'one instance'}, one thread per "
        f"instance, body in order"
    ]
    packs = None
    if chain and r.vectorize and not heavy:
        last = chain[-1]
        plan = plan_packs(last.var, last.extent, body, "g")
        if isinstance(plan, PackPlan):
            packs = share_partner_loads(share_folds(plan, last.extent), last.extent, body, "g")
            names = ", ".join(b.name for b in plan.buffers)
            notes.append(
                f"cuda: 16-byte packs of {plan.lanes} along {last.var} ({names}); the host launches "
                f"the scalar grid when a base address is not 16-byte aligned"
            )
            notes += [
                f"cuda: fold {f.name} shared by the {f.across} threads of its row (a pack each, combined by "
                f"shuffles)"
                if f.across > 1
                else f"cuda: fold {f.name} over its whole row in each pack"
                for f in packs.folds
            ]
            if r.grid_ctas is not None:
                notes.append(f"cuda: registers capped for {r.grid_ctas} CTAs an SM (grid_ctas_per_sm)")
            notes += [
                f"cuda: {x.name} computed over this thread's pack; the same value over the pack of the "
                f"thread {x.offset} away in its row read from its copy {x.name_x}, exchanged by shuffles"
                for x in packs.exchanges
            ]
        else:
            notes.append(f"cuda: no 16-byte packs along {last.var}: {plan}")
    min_ctas = r.grid_ctas if packs is not None and r.grid_ctas is not None else 0
    thread_packs = _thread_packs(r.grid_packs, packs) if packs is not None else 1
    return [
        Realization(
            "grid",
            r.name,
            r.k,
            chain,
            body,
            threads=threads,
            packs=packs,
            notes=notes,
            min_ctas=min_ctas,
            thread_packs=thread_packs,
        )
    ]


def _gathers(plan: PackPlan) -> bool:
    """Whether every packed load's address depends on a load (an embedding's rows by id): then all
    of a thread's bytes wait twice. rope's cos and sin rows are gathered by position, but its
    activations, most of its bytes, stream from the start."""

    def gathered(index: tuple[Expr, ...]) -> bool:
        return any(loads(i) or free_vars(i) & plan.hoisted for i in index)

    return bool(plan.loads) and all(gathered(a.index) for a in plan.loads)


def _settle_thread_packs(r: Realization) -> None:
    """Once a grid knows whether it may run in place: one pack a thread if so (a later pack's loads
    would come before an earlier pack's stores to the same buffer), and the note either way."""
    if r.thread_packs == 1:
        return
    if r.in_place is not None:
        r.thread_packs = 1
        r.notes.append("cuda: one pack a thread: the launch may update its outputs in place")
        return
    r.notes.append(
        f"cuda: {r.thread_packs} packs a thread, grid-strided, each pack's loads written before the "
        "arithmetic of the packs before it (grid_packs)"
    )


def _thread_packs(option: int | str, plan: PackPlan) -> int:
    """The packs a thread of this packed grid takes under option grid_packs."""
    if option != "auto":
        return int(option)
    return 2 if _gathers(plan) else 1


def _pow2_ceil(n: int) -> int:
    p = 1
    while p < n:
        p *= 2
    return p


def realize_kernel(
    program: str, k: Kernel, catalog: TargetCatalog, options: Mapping[str, Any]
) -> list[Realization]:
    """The launches that realize kernel `k` of `program`."""
    return Realizer(program, k, catalog, options).realize()
