"""A kernel the author placed on a Mesh over `thread` (and `cta`): one launch of exactly that geometry.

Seed 000 §2.1-§2.3 and §2.10, realized: gridDim is the mesh's `cta` extent (1 without one),
blockDim its `thread` extent. Each (cta, thread) instance reads its coordinate on every mesh
axis from `program_id<T>()` as `(id / stride) % extent` and runs its local block of the
kernel's instance loops serially, in order: an axis cutting loop d of extent n into p parts
owns the contiguous block of ceil(n / p) iterations at its coordinate (the cut `local()` makes
of a Split tensor axis; axes cutting one loop nest, the outermost taking the largest blocks).
For `grid[Split(0), Split(1)]` over (128, 64) with cta:4 x thread:32:

    const int64_t cta_c_ = tilefoundry::program_id<tilefoundry::TopologyScope::cta>();
    const int64_t thread_c_ = tilefoundry::program_id<tilefoundry::TopologyScope::thread>();
    const int64_t i0_lo_ = (cta_c_ * 32);        // cta: block 32 of 128
    const int64_t i0_hi_ = (i0_lo_ + 32);
    ...                                          // thread: block 2 of 64 along i1
    for (int64_t i0 = i0_lo_; i0 < i0_hi_; ++i0) for (int64_t i1 = i1_lo_; i1 < i1_hi_; ++i1) body

What it cannot honor fails closed with the reason (seed 003, Execution bridge): a thread extent
over the catalog's limit, an axis whose layout does not cut the domain into blocks (Broadcast,
Partial, a strided Split: every instance along it would run the same iterations), an axis
cutting a loop the kernel does not have. (A GEMM atom the planner chose on its own gives way to
the loop it replaced, realize.py; one the options demanded conflicts and is refused there.)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from tilefoundry.ir.errors import PlanError
from tilefoundry.ir.target import TargetCatalog
from tilefoundry.ir.tile.cexpr import CExpr
from tilefoundry.ir.tile.expr import Const, Expr, Var, add, floordiv, maximum, minimum, mul, sub
from tilefoundry.ir.tile.stmt import For, MeshCut

# The topology levels a placed launch realizes: gridDim (cta) and blockDim (thread).
LEVELS = ("cta", "thread")
Refuse = Callable[[str, str], PlanError]


@dataclass(frozen=True)
class PlacedGrid:
    """The launch of a placed kernel.

    Attributes:
        ctas, threads: gridDim and blockDim (the mesh's cta and thread sizes, 1 when absent).
        cuts: per instance loop (outermost first), the mesh axes cutting it, largest blocks first.
        axes: every mesh axis, for the coordinates.
    """

    ctas: int
    threads: int
    cuts: tuple[tuple[MeshCut, ...], ...]
    axes: tuple[MeshCut, ...]

    def describe(self, chain: tuple[For, ...]) -> str:
        """One line: the geometry and which axis cuts which loop."""
        cut = "; ".join(
            f"{loop.var} cut by {' then '.join(c.axis for c in cs)}"
            for loop, cs in zip(chain, self.cuts, strict=True)
            if cs
        )
        return (
            f"cuda: placed on the Mesh: <<<{self.ctas}, {self.threads}>>>, each (cta, thread) runs its "
            f"local block of the instance loops in order ({cut})"
        )


def plan_placed(
    placement: tuple[MeshCut, ...], chain: tuple[For, ...], catalog: TargetCatalog, refuse: Refuse
) -> PlacedGrid:
    """The launch that honors a kernel's `placement` over its instance loops `chain`.

    Raises:
        PlanError: from `refuse(what, why)`, naming the mesh axis that blocks it.
    """
    size = {level: 1 for level in LEVELS}
    for c in placement:
        size[c.topology] *= c.extent
    limit = catalog.axis("thread").max_extent
    if limit is not None and size["thread"] > limit:
        raise refuse(
            f"placement on 'thread' ({size['thread']} threads)",
            f"a CTA holds at most {limit} threads on {catalog.arch}",
        )
    for c in placement:
        if c.loop is None:
            why = (
                f"its layout {c.attr} cuts no instance loop into contiguous blocks"
                if c.attr
                else "the kernel has no instance loop for it to cut"
            )
            raise refuse(
                f"placement of mesh axis '{c.axis}' ({c.topology})",
                f"{why}, so every instance along it would run the same iterations; the CUDA "
                "realization honors Split placements into blocks only",
            )
        if c.loop >= len(chain):
            loops = ", ".join(f.var for f in chain) or "none"
            raise refuse(
                f"placement of mesh axis '{c.axis}' ({c.topology})",
                f"it cuts instance loop {c.loop}, and the kernel's instance loops are {loops}",
            )
    cuts = tuple(
        tuple(sorted((c for c in placement if c.loop == d), key=lambda c: c.depth)) for d in range(len(chain))
    )
    return PlacedGrid(size["cta"], size["thread"], cuts, placement)


def _coordinate(c: MeshCut, size: int) -> str:
    """Seed 000 §2.3: the axis' coordinate from its topology's id, `(id / stride) % extent`."""
    text = f"static_cast<int64_t>(tilefoundry::program_id<tilefoundry::TopologyScope::{c.topology}>())"
    if c.stride != 1:
        text = f"({text} / {c.stride})"
    return text if c.extent * c.stride == size else f"({text} % {c.extent})"


def local_loops(grid: PlacedGrid, chain: tuple[For, ...], cx: CExpr) -> tuple[list[str], list[str]]:
    """The declarations of the coordinates and local blocks, and the loop heads (outermost first).

    Blocks of static extents fold to constants; a tail block is clamped to the loop's end.
    """
    size = {"cta": grid.ctas, "thread": grid.threads}
    out = [f"const int64_t {c.axis}_c_ = {_coordinate(c, size[c.topology])};" for c in grid.axes]
    heads = []
    for loop, cuts in zip(chain, grid.cuts, strict=True):
        lo: Expr = Const(0)
        hi: Expr = loop.extent
        width: Expr = loop.extent
        for j, c in enumerate(cuts):
            block = floordiv(add(width, c.extent - 1), c.extent)
            exact = isinstance(width, Const) and width.value % c.extent == 0
            out.append(
                f"const int64_t {loop.var}_lo{j}_ = {cx(add(lo, mul(Var(f'{c.axis}_c_'), block)))};"
                f"  // {c.axis}: {c.extent} blocks of {loop.var}"
            )
            end = add(Var(f"{loop.var}_lo{j}_"), block)
            out.append(f"const int64_t {loop.var}_hi{j}_ = {cx(end if exact else minimum(hi, end))};")
            lo, hi = Var(f"{loop.var}_lo{j}_"), Var(f"{loop.var}_hi{j}_")
            # A tail block cut again may start past its end: its width is 0, not negative.
            width = block if exact else maximum(sub(hi, lo), Const(0))
        start = "0" if not cuts else cx(lo)
        heads.append(f"for (int64_t {loop.var} = {start}; {loop.var} < {cx(hi)}; ++{loop.var}) {{")
    return out, heads
