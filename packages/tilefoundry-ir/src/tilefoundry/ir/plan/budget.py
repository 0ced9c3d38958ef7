"""Resource budget: every kernel's local scratch, at its largest extents, against the catalog.

A local buffer lives once per instance of the axis that runs the kernel body (a CPU worker, a
GPU thread block). Its bytes at the DimVars' upper bounds are summed per kernel and compared
with the capacity of the catalog's shared resource, or, on a target without one, of the
smallest per-worker cache. Over a shared resource's capacity the kernel cannot run: PlanError.
Over a cache's it still runs (the scratch spills to memory), and the decision says so.

    k3_attention: scratch 512 B (k3_acc0 128 f32) within l1d 48 KiB per worker
"""

from __future__ import annotations

from ..dims import dim_bounds
from ..errors import PlanError
from ..target.catalog import Resource, TargetCatalog
from ..tile.stmt import Alloc, Program, walk_stmts


def _capacity(catalog: TargetCatalog) -> tuple[Resource | None, bool]:
    shared = catalog.resource("shared")
    if shared is not None:
        return shared, True
    caches = [r for r in catalog.resources if r.kind == "cache" and r.instance != "device"]
    return (min(caches, key=lambda r: r.capacity_bytes) if caches else None), False


def _bytes(a: Alloc) -> int | None:
    n = a.buffer.dtype.itemsize
    for d in a.buffer.shape:
        b = dim_bounds(d)
        if b is None:
            return None
        n *= max(b[1], 0)
    return n


def check_budget(program: Program, catalog: TargetCatalog) -> Program:
    """Record (or refuse) each kernel's local scratch against the catalog capacity."""
    resource, hard = _capacity(catalog)
    for k in program.kernels:
        allocs = [s for s in walk_stmts(k.body) if isinstance(s, Alloc)]
        if not allocs:
            continue
        sizes = [_bytes(a) for a in allocs]
        names = ", ".join(f"{a.buffer.name} {a.buffer.dtype}" for a in allocs)
        if any(s is None for s in sizes):
            if hard:
                raise PlanError(
                    f"{catalog.target}: kernel {k.name}: scratch ({names}) has no static bound "
                    f"to check against "
                    f"{resource.name}",  # type: ignore[union-attr]
                    where=k.name,
                    expected="bounded extents",
                    got=names,
                )
            k.decisions.append(f"scratch ({names}) unbounded: allocated per instance from memory")
            continue
        total = sum(s for s in sizes if s is not None)
        if resource is None:
            k.decisions.append(f"scratch {total} B ({names}): the catalog lists no per-instance resource")
            continue
        within = total <= resource.capacity_bytes
        if not within and hard:
            raise PlanError(
                f"{catalog.target}: kernel {k.name}: scratch needs {total} B ({names}), more than "
                f"{resource.name} holds ({resource.capacity_bytes} B)",
                where=k.name,
                expected=f"<= {resource.capacity_bytes} B",
                got=total,
            )
        verdict = "within" if within else "exceeds"
        k.decisions.append(
            f"scratch {total} B ({names}) {verdict} {resource.name} {resource.capacity_bytes} B per instance"
        )
    return program
