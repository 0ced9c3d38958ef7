"""Region launches of kernels that update outputs in place (`ir.plan.in_place`).

A kernel whose updates the planner kept (a KV-cache update: `out1` is `k_cache` but at rows
[pos, pos + T) of axis 2) is launched as always, with one more argument: `<kernel>_in_place_`,
which the host entry sets when every output it updates is passed as the very tensor of its
source. Then the axis loop counts `length` iterations from the region's start instead of its
extent, in the host's work and the kernel's grid-stride loop alike, so the launch covers T rows,
not the cache's capacity; an index outside [0, extent) is skipped, so a start the index check
refuses writes nothing, even before the check reports (inside a CUDA-graph capture it traps):

    const int64_t k10_start_ = b_pos[0];
    const int64_t work_ = ((int64_t(2LL) * (k10_in_place_ ? d_tokens : int64_t(128LL))) * int64_t(64LL));
    for (int64_t lin_ = ...) {
      ... const int64_t i2_r = lin__r % ((k10_in_place_ ? d_tokens : int64_t(128LL))); ...
      const int64_t i2 = k10_in_place_ ? (k10_start_ + i2_r) : i2_r;
      if (i2 < 0 || i2 >= int64_t(128LL)) continue;
      ... the unchanged body ...

One kernel serves both cases, so launch batching and the 16-byte packed variant need nothing
more: a batch member passes its flag, and packs stay along the innermost axis. Where the axis
loop is not an instance loop of the realization (shared by a row's lanes), or is the packed one,
the kernel always runs whole; it still accepts an output passed as its source, since it reads
each source element only where it writes that element (the planner's proof).
"""

from __future__ import annotations

from dataclasses import dataclass

from tilefoundry.ir.dims import format_dim
from tilefoundry.ir.dtypes import boolean
from tilefoundry.ir.plan.in_place import axis_loop, region_counter
from tilefoundry.ir.tile.cexpr import CExpr, cname
from tilefoundry.ir.tile.expr import Expr, Select, Var, dim_expr
from tilefoundry.ir.tile.stmt import For, Kernel


@dataclass(frozen=True)
class InPlace:
    """How one realization runs only its kernel's region.

    Attributes:
        flag: the host variable and kernel parameter saying every updated output is its source.
        position: the axis loop's position among the realization's instance loops.
        loop: that loop.
        counter: the name the loop's counter takes; the loop variable becomes start + counter.
    """

    kernel: Kernel
    flag: str
    position: int
    loop: For
    counter: str

    def extents(self, extents: list[Expr]) -> list[Expr]:
        """The instance extents with the axis loop's counting `length` when the flag is set."""
        u = self.kernel.updates[0]
        out = list(extents)
        out[self.position] = Select(Var(self.flag, boolean), dim_expr(u.length), out[self.position])
        return out

    def names(self, names: list[str]) -> list[str]:
        """The instance variables with the axis loop's replaced by its counter."""
        return [self.counter if i == self.position else n for i, n in enumerate(names)]

    @property
    def start(self) -> str:
        """The kernel variable holding the region's start."""
        return f"{self.kernel.name}_start_"

    def before_loop(self, cx: CExpr) -> list[str]:
        """Before the instance loop: the region's start, read once. Inside the loop its load (the
        position tensor's element) came after the loop index's divisions, and ptxas kept it behind
        their branches; here it leaves right after the PDL wait, and the body's other reads of the
        same element reuse it. The planner proved it reads no loop variable and only the kernel's
        inputs (ir.plan.in_place), so it may be read whether or not the flag is set or the thread
        has work."""
        return [f"const int64_t {self.start} = {cx(self.kernel.updates[0].start)};"]

    def lines(self, cx: CExpr) -> list[str]:
        """After the instance variables: the axis variable, and skipping an index outside the extent."""
        v = self.loop.var
        return [
            f"const int64_t {v} = {self.flag} ? ({self.start} + {self.counter}) : {self.counter};",
            f"if ({v} < 0 || {v} >= {cx(self.loop.extent)}) continue;  // outside the tensor",
        ]

    def host_flag(self) -> str:
        """The host line setting the flag: every updated output's pointer is its source's."""
        same = " && ".join(f"{cname(u.output)} == {cname(u.source)}" for u in self.kernel.updates)
        return f"const bool {self.flag} = {same};"


def plan_in_place(
    kernel: Kernel, kind: str, chain: tuple[For, ...], packed_var: str | None
) -> InPlace | str | None:
    """The region launch of a realization of `kernel` (`kind` over instance loops `chain`), or why
    it has none; None for a kernel without updates."""
    if not kernel.updates:
        return None
    target = axis_loop(kernel)
    if kind not in ("grid", "rows"):
        return f"a {kind} realization has no region launch"
    if target not in chain:
        return f"its axis loop {target.var} is not an instance loop of the launch"
    if target.var == packed_var:
        return f"its axis loop {target.var} is the one moved in 16-byte packs"
    return InPlace(kernel, f"{kernel.name}_in_place_", chain.index(target), target, region_counter(kernel))


def describe(plan: InPlace | str) -> str:
    """The decision printed above the kernel."""
    if isinstance(plan, str):
        return f"cuda: always runs whole, also when its outputs are their sources: {plan}"
    pairs = ", ".join(f"{u.output.name} == {u.source.name}" for u in plan.kernel.updates)
    u = plan.kernel.updates[0]
    return (
        f"cuda: in place when {pairs} ({plan.flag}): {plan.loop.var} counts {format_dim(u.length)} from the "
        "region's "
        "start, skipping indices outside the extent; else the whole domain"
    )
