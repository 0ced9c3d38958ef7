"""Launch batching: consecutive independent kernels run as one launch, each on its own CTAs.

Every launch costs ~2 us on Hopper even replayed from a CUDA graph with programmatic dependent
launch, more than many decode kernels run (a per-head RMS norm of q, then of k; rope of q, then
the cache update of k and v). Kernels next to each other in program order whose realizations are
of one kind with a body over a span of CTAs (`kernels.BODIES`: rows, grid) and equal threads per
CTA (and lanes per instance) become one __global__ when they are independent: no member reads or
writes a buffer another member writes (`Kernel.reads` / `writes`; distinct buffers never alias:
temporaries are separate allocations and outputs are checked noalias at the entry). Then
no order between them is observable, and each member runs exactly the body it runs alone:

    __global__ void __launch_bounds__(128) f__k3_k6_batch(..., int64_t end0_) {
      pdl_begin();
      const int64_t cta_ = blockIdx.x;
      if (cta_ < end0_) {          // k3: CTAs [0, end0_), its grid-stride loop over them
        const int64_t span_ = cta_;  const int64_t spans_ = end0_;  ...k3's body...
      } else {                     // k6: CTAs [end0_, gridDim.x)
        const int64_t span_ = cta_ - end0_;  ...
      }
    }

The host sizes each member's range from its own work exactly as its own launch would (capped so
the sum fits gridDim.x; the loops stride over any count), and skips the launch when all are
empty. A member with a 16-byte packed variant (`Realization.packed_buffers`: a grid's packed
instance axis, a rows member's packed shared loops), which the host picks at run time, makes the
batch come in two variants: the packed one (packed members packed, the others as always) when
every packed member's base addresses are 16-byte aligned, else the scalar one for all. Members
branch on blockIdx.x, uniform over a CTA, so a rows member's CTA barriers stay whole; their
static shared memory adds up and must fit the budget.

An index check (the function's merged checks, run first) shares the launch of the kernel after
it when that kernel reads none of the buffers the check validates: then no member can index with
a value the check has not yet seen, and the host still reads the verdict (or, in a capture, the
check traps) before launching anything that does. The check's grid-stride loops take the batch's
threads, whatever they are; the others must agree on their geometry as above.

Not batched: atoms, placed kernels and any kernel with a Mesh scope (their launch is theirs), a
GEMM epilogue (launched only when its atom did not apply it); kernels are never moved past others
to meet. Option `batch_launches=False` launches every kernel alone.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from tilefoundry.ir.target import TargetCatalog
from tilefoundry.ir.tile.cexpr import cname, ctype
from tilefoundry.ir.tile.stmt import Buffer, Program

from .kernels import BODIES, Span, in_place_args, in_place_params, kernel_comment, launch_bounds
from .options import BATCH_LAUNCHES
from .realize import STATIC_SMEM_BYTES, Realization
from .serial import indent

# gridDim.x's limit: the members' CTA counts together stay within it.
MAX_CTAS = 2147483647


@dataclass(eq=False)
class Batch:
    """Kernels launched as one __global__, each over its own range of CTAs.

    Attributes:
        name: the __global__ function's name (`<program>__k3_k6_batch`).
        members: the realizations, in program order.
        notes: why they share a launch, printed above it.
    """

    name: str
    members: tuple[Realization, ...]
    notes: list[str] = field(default_factory=list)

    @property
    def threads(self) -> int:
        return _shaped(self.members)[0].threads

    @property
    def check(self) -> Realization | None:
        """The index check sharing the launch, if any."""
        return next((r for r in self.members if r.kind == "check"), None)

    @property
    def reads(self) -> tuple[Buffer, ...]:
        """Every buffer some member reads, once, by name (none is written: the members are independent)."""
        return _by_name(b for r in self.members for b in r.kernel.reads)

    @property
    def writes(self) -> tuple[Buffer, ...]:
        return _by_name(b for r in self.members for b in r.kernel.writes)

    @property
    def packed_buffers(self) -> tuple[Buffer, ...]:
        """The base addresses the packed variant needs 16-byte aligned (none: no packed variant)."""
        return _by_name(b for r in self.members for b in r.packed_buffers)

    @property
    def label(self) -> str:
        """The members' kernel names, for errors naming the launch."""
        return " + ".join(r.kernel.name for r in self.members)


Launch = Realization | Batch


def _by_name(buffers: Iterable[Buffer]) -> tuple[Buffer, ...]:
    seen: dict[str, Buffer] = {}
    for b in buffers:
        seen.setdefault(b.name, b)
    return tuple(sorted(seen.values(), key=lambda b: b.name))


def _short(kernel: str) -> str:
    """`k3_rms_norm` -> `k3`: kernel names are numbered, the number keeps batch names short."""
    found = re.match(r"k\d+(?=_)", kernel)
    return found.group(0) if found else kernel


def _shaped(members: Iterable[Realization]) -> list[Realization]:
    """The members whose geometry the batch takes: all but an index check (any threads serve it),
    or the check alone."""
    members = list(members)
    return [r for r in members if r.kind != "check"] or members


def _geometry(r: Realization) -> str:
    if r.kind == "rows":
        return f"rows of {r.threads} threads, {r.group} lanes per instance"
    return f"{r.kind} of {r.threads} threads"


def _loner(r: Realization, conditional: set[int]) -> bool:
    """True when `r` keeps a launch of its own whatever its neighbours."""
    return r.kind not in BODIES or bool(r.kernel.request) or id(r.kernel) in conditional


def _validated(check: Realization, other: Realization) -> str:
    """The buffers `other` reads that index check `check` validates, by name ("" if none)."""
    return ", ".join(b.name for b in other.kernel.reads if b in check.kernel.reads)


def _blocker(members: list[Realization], r: Realization, smem_cap: int) -> str | None:
    """Why `r` may not join `members` in one launch, or None."""
    for m in members:
        for b in r.kernel.reads:
            if b in m.kernel.writes:
                return f"it reads {b.name}, which {m.kernel.name} writes"
        for b in r.kernel.writes:
            if b in m.kernel.writes or b in m.kernel.reads:
                how = "writes" if b in m.kernel.writes else "reads"
                return f"it writes {b.name}, which {m.kernel.name} {how}"
        if m.kind == "check" and (names := _validated(m, r)):
            return f"it reads {names}, which the index check {m.kernel.name} validates first"
        if r.kind == "check" and (names := _validated(r, m)):
            return f"{m.kernel.name} reads {names}, which it validates first"
    shaped = _shaped(members)[0]
    if "check" not in (r.kind, shaped.kind) and (r.kind, r.threads, r.group) != (
        shaped.kind,
        shaped.threads,
        shaped.group,
    ):
        return f"{_geometry(r)}, not {_geometry(shaped)}"
    smem = sum(m.smem_bytes for m in members) + r.smem_bytes
    if smem > smem_cap:
        return f"together they need {smem} B of static shared memory, over the {smem_cap} B budget"
    return None


def plan_batches(
    program: Program,
    realizations: list[Realization],
    catalog: TargetCatalog,
    options: Mapping[str, Any],
    conditional: set[int],
) -> list[Launch]:
    """The launches of `program`: runs of consecutive independent realizations grouped into Batches.

    Args:
        conditional: ids of kernels the entry launches only under a condition (GEMM epilogues).
    """
    if not BATCH_LAUNCHES.read(options):
        return list(realizations)
    smem_cap = min(STATIC_SMEM_BYTES, catalog.smem_bytes)
    runs: list[list[Realization]] = []
    for r in realizations:
        last = runs[-1] if runs else None
        if last is not None and not _loner(r, conditional) and not _loner(last[0], conditional):
            why = _blocker(last, r, smem_cap)
            if why is None:
                last.append(r)
                continue
            r.kernel.decisions.append(f"cuda: not launched together with {last[-1].kernel.name}: {why}")
        runs.append([r])
    return [run[0] if len(run) == 1 else _batch(program, run) for run in runs]


def _batch(program: Program, run: list[Realization]) -> Batch:
    threads = _shaped(run)[0].threads
    run = [dataclasses.replace(r, threads=threads) if r.kind == "check" else r for r in run]
    name = f"{program.name}__{'_'.join(_short(r.kernel.name) for r in run)}_batch"
    kernels = ", ".join(r.kernel.name for r in run)
    writes = "; ".join(
        f"{r.kernel.name} writes {', '.join(b.name for b in r.kernel.writes) or 'nothing'}" for r in run
    )
    notes = [
        f"cuda: one launch for kernels {kernels} ({_geometry(_shaped(run)[0])} each): independent, none "
        f"reads or writes a buffer another writes ({writes}); the host gives each a range of CTAs sized by "
        "its own work, where it runs its own grid-stride loop"
    ]
    b = Batch(name, tuple(run), notes)
    if b.check is not None:
        notes.append(
            f"cuda: the index check {b.check.kernel.name} runs on {threads} threads here; no other member "
            "reads what it validates, and the host reads its verdict after the launch"
        )
    if b.packed_buffers:
        packed = ", ".join(r.kernel.name for r in run if r.packed_buffers)
        notes.append(
            f"cuda: {name}_packed runs {packed} in 16-byte packs when every packed base address "
            f"({', '.join(x.name for x in b.packed_buffers)}) is 16-byte aligned; else {name} runs every "
            "member scalar"
        )
    for i, r in enumerate(run):
        others = ", ".join(m.kernel.name for m in run if m is not r)
        r.kernel.decisions.append(f"cuda: launched with {others} as {name}, member {i} of its CTA ranges")
    return b


def batch_params(program: Program, b: Batch) -> str:
    """The batch kernel's parameters: every member's buffers once, the extents, the ranges' ends."""
    params = [f"const {ctype(x.dtype)}* __restrict__ {cname(x)}" for x in b.reads]
    params += [f"{ctype(x.dtype)}* __restrict__ {cname(x)}" for x in b.writes]
    params += [f"int64_t d_{d.var.name}" for d in program.dims]
    params += [p for r in b.members for p in in_place_params(r)]
    params += [f"int64_t end{i}_" for i in range(len(b.members) - 1)]
    params += ["IndexVerdict verdict_"] if b.check is not None else []
    return ", ".join(params)


def batch_args(program: Program, b: Batch) -> list[str]:
    """The host's arguments for `batch_params` (the ends are the `end<i>_` the host computed)."""
    args = [cname(x) for x in (*b.reads, *b.writes)] + [f"d_{d.var.name}" for d in program.dims]
    args += [a for r in b.members for a in in_place_args(r)]
    args += [f"end{i}_" for i in range(len(b.members) - 1)]
    return args + (["check_.verdict()"] if b.check is not None else [])


def _kernel(program: Program, b: Batch, packed: bool) -> list[str]:
    name = f"{b.name}_packed" if packed else b.name
    min_ctas = max((r.min_ctas for r in b.members), default=0) if packed else 0
    out = [
        f"__global__ void {launch_bounds(b.threads, min_ctas)}{name}({batch_params(program, b)}) {{",
        "  pdl_begin();  // launched with programmatic dependent launch: wait for the inputs",
        "  const int64_t cta_ = blockIdx.x;",
    ]
    last = len(b.members) - 1
    for i, r in enumerate(b.members):
        lo = f"end{i - 1}_" if i else "0"
        hi = f"end{i}_" if i < last else "static_cast<int64_t>(gridDim.x)"
        if i == 0:
            out.append(f"  if (cta_ < {hi}) {{  // {r.kernel.name}: CTAs [0, {hi})")
        else:
            branch = f"}} else if (cta_ < {hi}) {{" if i < last else "} else {"
            out.append(f"  {branch}  // {r.kernel.name}: CTAs [{lo}, {hi if i < last else 'gridDim.x'})")
        minus = f" - {lo}" if i else ""
        out += [f"    const int64_t span_ = cta_{minus};", f"    const int64_t spans_ = {hi}{minus};"]
        body = BODIES[r.kind](program, r, packed and bool(r.packed_buffers), Span("span_", "spans_"))
        out += indent(body, 1)
    return [*out, "  }", "}", ""]


def emit_batch(program: Program, b: Batch) -> list[str]:
    """The batch's __global__ function(s): the scalar one, and the packed one when a member has packs."""
    head = [f"// batch {b.name}: {b.label}", *(f"//   {n}" for n in b.notes)]
    for r in b.members:
        head += kernel_comment(r.kernel)
    out = [*head, *_kernel(program, b, False)]
    return out + (_kernel(program, b, True) if b.packed_buffers else [])
