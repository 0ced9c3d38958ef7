"""Launch chaining: consecutive small launches that read each other's results run as one cluster.

A decode layer's per-head q/k RMS norms (one batch) and the rope + cache update reading them (the
next) are two launches of a CTA or two each, and each launch costs ~2 us on Hopper even replayed
from a CUDA graph with programmatic dependent launch. Batching (batching.py) cannot join them:
the second reads what the first writes. A chain runs such launches, its *stages*, in one launch
of a thread-block cluster (sm_90): the stages in program order, a stage's members side by side
on their own ranges of the cluster's CTAs as in a batch, each with its own grid-stride loop, and a
cluster barrier between stages (release / acquire at cluster scope: a stage's stores are visible
to every CTA of the next):

    __global__ void __launch_bounds__(256) f__k3_k6_k9_k10_chain(..., int64_t e0_0_, int64_t e1_0_) {
      pdl_begin();
      const int64_t cta_ = blockIdx.x;
      if (cta_ < e0_0_) { ...k3's body over CTAs [0, e0_0_)... } else { ...k6's over the rest... }
      chain_barrier();
      if (cta_ < e1_0_) { ...k9's body... } else { ...k10's... }
    }

The host decides at run time: when every stage's members, side by side, cover their work with at
most `kChainCtas` (8, the portable cluster size) of the chain's CTAs and this module's sm_90 code
runs on the device, it launches the chain as a cluster of as many CTAs as the largest stage needs;
otherwise (a prefill, an sm_80 device) each stage launches as it would alone. Both give the same
values: every member runs exactly its own body over its own instances.

Stages: launches next to each other, each a kernel with a body over a span of CTAs
(`kernels.BODIES`: rows, grid) or a batch of them, none an index check (the host reads a check's
verdict before any launch that may index with what it validated) nor launched only under a
condition (a GEMM epilogue or prologue), nor placed. The chain runs on the largest stage's thread
count; a member with fewer threads takes the chain's where its instances never synchronize the
CTA (a grid, rows of at most 32 lanes), else it ends the chain. Static shared memory adds up and
must fit the budget. Option `chain_launches=False` launches every stage alone.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from tilefoundry.ir.target import TargetCatalog
from tilefoundry.ir.tile.cexpr import cname, ctype
from tilefoundry.ir.tile.stmt import Buffer, Program

from .batching import Batch, Launch, short_name, split_ctas
from .kernels import BODIES, WHOLE_GRID, in_place_params
from .options import CHAIN_LAUNCHES
from .realize import STATIC_SMEM_BYTES, Realization
from .serial import indent

# Lanes of an instance that stay within one warp: its body never waits on the whole CTA.
_WARP = 32


@dataclass(eq=False)
class Chain:
    """Launches run in order by one cluster, a cluster barrier between them.

    Attributes:
        name: the __global__ function's name (`<program>__k3_k6_k9_k10_chain`).
        stages: the launches, in program order, as they run when the chain does not.
        threads: threads per CTA of the chain.
        notes: why they share a launch, printed above it.
    """

    name: str
    stages: tuple[Launch, ...]
    threads: int
    notes: list[str] = field(default_factory=list)

    def stage_members(self) -> list[tuple[Realization, ...]]:
        """Each stage's members on the chain's threads, in program order."""
        return [tuple(_on(r, self.threads) for r in _members(s)) for s in self.stages]

    @property
    def members(self) -> tuple[Realization, ...]:
        return tuple(r for stage in self.stage_members() for r in stage)

    @property
    def writes(self) -> tuple[Buffer, ...]:
        return _by_name(b for r in self.members for b in r.kernel.writes)

    @property
    def reads(self) -> tuple[Buffer, ...]:
        """The buffers some member reads and none writes (a written one is passed once, writable)."""
        written = {b.name for b in self.writes}
        return _by_name(b for r in self.members for b in r.kernel.reads if b.name not in written)

    @property
    def packed_buffers(self) -> tuple[Buffer, ...]:
        """The base addresses the packed variant needs 16-byte aligned (none: no packed variant)."""
        return _by_name(b for r in self.members for b in r.packed_buffers)

    @property
    def label(self) -> str:
        """The stages' kernel names (` | ` between stages), for errors naming the launch."""
        return " | ".join(" + ".join(r.kernel.name for r in _members(s)) for s in self.stages)


def _members(launch: Launch) -> tuple[Realization, ...]:
    return launch.members if isinstance(launch, Batch) else (launch,)


def _by_name(buffers: Iterable[Buffer]) -> tuple[Buffer, ...]:
    seen: dict[str, Buffer] = {}
    for b in buffers:
        seen.setdefault(b.name, b)
    return tuple(sorted(seen.values(), key=lambda b: b.name))


def _on(r: Realization, threads: int) -> Realization:
    """`r` on `threads` threads a CTA (a rows member then holds more instances per CTA)."""
    return r if r.threads == threads else dataclasses.replace(r, threads=threads)


def _smem(r: Realization, threads: int) -> int:
    """Static shared memory of `r` on `threads` threads: a rows member's scratch is per instance slot."""
    return r.smem_bytes * threads // r.threads if r.kind == "rows" else r.smem_bytes


def _stageable(launch: Launch, conditional: set[int]) -> bool:
    """True when `launch` may be a stage: bodies over CTA spans, no index check, unconditional."""
    return all(
        r.kind in BODIES and r.kind != "check" and not r.kernel.request and id(r.kernel) not in conditional
        for r in _members(launch)
    )


def _blocker(stages: list[Launch], launch: Launch, smem_cap: int) -> str | None:
    """Why `launch` may not join `stages` as the chain's next stage, or None."""
    members = [r for s in [*stages, launch] for r in _members(s)]
    threads = max(r.threads for r in members)
    for r in members:
        if r.threads != threads and (r.kind != "grid" and r.group > _WARP):
            return (
                f"{r.kernel.name} synchronizes its CTA of {r.threads} threads, and the chain runs {threads}"
            )
    smem = sum(_smem(r, threads) for r in members)
    if smem > smem_cap:
        return f"together they need {smem} B of static shared memory, over the {smem_cap} B budget"
    return None


def plan_chains(
    program: Program,
    launches: list[Launch],
    catalog: TargetCatalog,
    options: Mapping[str, Any],
    conditional: set[int],
) -> list[Launch | Chain]:
    """The launches of `program` with runs of consecutive small-body launches grouped into Chains.

    Args:
        conditional: ids of kernels the entry launches only under a condition (GEMM epilogues).
    """
    if not CHAIN_LAUNCHES.read(options) or "clusters" not in catalog.capabilities:
        return list(launches)
    smem_cap = min(STATIC_SMEM_BYTES, catalog.smem_bytes)
    runs: list[list[Launch]] = []
    for launch in launches:
        last = runs[-1] if runs else None
        if last is not None and _stageable(launch, conditional) and _stageable(last[0], conditional):
            why = _blocker(last, launch, smem_cap)
            if why is None:
                last.append(launch)
                continue
            for r in _members(launch):
                r.kernel.decisions.append(
                    f"cuda: not chained after {_members(last[-1])[-1].kernel.name}: {why}"
                )
        runs.append([launch])
    return [run[0] if len(run) == 1 else _chain(program, run) for run in runs]


def _chain(program: Program, stages: list[Launch]) -> Chain:
    threads = max(r.threads for s in stages for r in _members(s))
    names = [short_name(r.kernel.name) for s in stages for r in _members(s)]
    chain = Chain(f"{program.name}__{'_'.join(names)}_chain", tuple(stages), threads)
    chain.notes.append(
        f"cuda: {chain.name} runs stages {chain.label} in order in one cluster of {threads}-thread CTAs, "
        "a cluster barrier between stages, when every member covers its work with at most kChainCtas "
        "CTAs and sm_90 code runs; else each stage launches alone"
    )
    if chain.packed_buffers:
        chain.notes.append(
            f"cuda: {chain.name}_packed runs the packed members in 16-byte packs when every packed base "
            f"address ({', '.join(b.name for b in chain.packed_buffers)}) is 16-byte aligned; else "
            f"{chain.name} runs every member scalar"
        )
    for i, s in enumerate(stages):
        for r in _members(s):
            r.kernel.decisions.append(f"cuda: stage {i} of chain {chain.name}")
    return chain


def stage_ends(c: Chain) -> list[list[str]]:
    """Per stage, the C++ names of its members' CTA ranges' ends (`e<stage>_<member>_`, one fewer
    than the members: the last runs to gridDim.x), which the host computes and passes."""
    return [[f"e{s}_{i}_" for i in range(len(stage) - 1)] for s, stage in enumerate(c.stage_members())]


def chain_params(program: Program, c: Chain) -> str:
    """The chain kernel's parameters: every member's buffers once, the extents, in-place flags, the
    ranges' ends."""
    params = [f"const {ctype(x.dtype)}* __restrict__ {cname(x)}" for x in c.reads]
    params += [f"{ctype(x.dtype)}* __restrict__ {cname(x)}" for x in c.writes]
    params += [f"int64_t d_{d.var.name}" for d in program.dims]
    params += [p for r in c.members for p in in_place_params(r)]
    params += [f"int64_t {e}" for ends in stage_ends(c) for e in ends]
    return ", ".join(params)


def _kernel(program: Program, c: Chain, packed: bool) -> list[str]:
    name = f"{c.name}_packed" if packed else c.name
    out = [
        f"__global__ void __launch_bounds__({c.threads}) {name}({chain_params(program, c)}) {{",
        "  pdl_begin();  // launched with programmatic dependent launch: wait for the inputs",
        "  const int64_t cta_ = blockIdx.x;",
    ]
    for i, (stage, ends) in enumerate(zip(c.stage_members(), stage_ends(c), strict=True)):
        if i:
            out.append("  chain_barrier();  // the stage before stored everything this one reads")
        out.append(f"  // stage {i}: {' + '.join(r.kernel.name for r in stage)}")
        if len(stage) > 1:
            out += split_ctas(program, stage, packed, ends)
            continue
        (r,) = stage
        body = BODIES[r.kind](program, r, packed and bool(r.packed_buffers), WHOLE_GRID)
        out += ["  {", *indent(body, 1), "  }"]
    return [*out, "}", ""]


def emit_chain(program: Program, c: Chain) -> list[str]:
    """The chain's __global__ function(s): the scalar one, and the packed one when a member has packs.

    Each stage also launches alone (the host's other path): its own kernels, emitted beside these,
    carry the members' comments.
    """
    head = [f"// chain {c.name}: {c.label}", *(f"//   {n}" for n in c.notes)]
    return [*head, *_kernel(program, c, False), *(_kernel(program, c, True) if c.packed_buffers else [])]
