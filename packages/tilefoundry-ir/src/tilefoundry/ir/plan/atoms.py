"""Atom selection: a proved whole region realized as one target atom, else the reference loop.

Seed 003 lets a target collapse a proved region into one opaque atom (a complete compact f32
GEMM as one library call) if it preserves the region's values, layout correspondence, alias
contract and numerical policy. The proof here is re-done on the actual Candidate body, not on
a marker: the kernel must be exactly

    for (batch..., m, n) parallel: acc = 0; for k reduce: acc += A[.., m, k] * B[.., k, n]; C[..] = acc

with A, B and C compact row-major buffers of one dtype equal to the atom's, A and B read
directly (no inlined producer), batch dims shared by all three, or B 2-D and shared by
every batch (x @ W: the batch dims fold into M). The catalog supplies the
atom: an `MmaAtom` issued by the worker axis over global memory (`a_storage == "gmem"`) whose
dtypes match. Option "gemm": "auto" (default: use a proved atom), "loop" (keep the reference
loop), "atom" (explicit: fail closed when no atom can be proved).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import PlanError
from ..target.catalog import MmaAtom, TargetCatalog
from ..tile.expr import Bin, Cast, Const, Expr, Load, Var, dim_expr, mul
from ..tile.stmt import Assign, AtomCall, Buffer, For, Kernel, Let, Program, Seq, Stmt, Store

GEMM_CHOICES = ("auto", "loop", "atom")


@dataclass(frozen=True)
class GemmRegion:
    """A proved `C[b, m, n] = sum_k A[b, m, k] * B[b, k, n]` over compact buffers."""

    a: Buffer
    b: Buffer
    c: Buffer
    batch: tuple[Expr, ...]
    m: Expr
    n: Expr
    k: Expr


def _unwrap_cast(e: Expr) -> Expr:
    return e.a if isinstance(e, Cast) else e


def match_gemm(k: Kernel) -> GemmRegion | str:
    """The GEMM region of a contraction kernel, or the reason it is not one."""
    loops: list[For] = []
    s: Stmt = k.body
    while isinstance(s, For) and s.kind == "parallel":
        loops.append(s)
        s = s.body
    if len(loops) < 2 or not isinstance(s, Seq) or len(s.body) != 3:
        return "the body is not a rank >= 2 output loop around one K sum"
    init, red, store = s.body
    if not (
        isinstance(init, Let) and init.mutable and isinstance(init.value, Const) and init.value.value == 0
    ):
        return "the accumulator does not start at 0"
    if not (isinstance(red, For) and red.kind == "reduce" and isinstance(store, Store)):
        return "the K loop or the store is missing"
    update = red.body
    acc = Var(init.name, init.value.dtype)
    if not (isinstance(update, Assign) and update.name == init.name):
        return "the K loop does more than accumulate"
    value = update.value
    if not (
        isinstance(value, Bin)
        and value.op == "add"
        and value.a == acc
        and isinstance(value.b, Bin)
        and value.b.op == "mul"
    ):
        return "the K loop does not accumulate a product"
    la, lb = _unwrap_cast(value.b.a), _unwrap_cast(value.b.b)
    if not (isinstance(la, Load) and isinstance(lb, Load)):
        return "an operand is an inlined expression, not a buffer in memory"
    if la.buffer.role == "local" or lb.buffer.role == "local":
        return "an operand is kernel scratch"
    vars_ = [Var(f.var) for f in loops]
    kv = Var(red.var)
    *batch, m, n = vars_
    if la.index != (*batch, m, kv) or la.buffer.rank != len(batch) + 2:
        return f"A ({la.buffer.name}) is not read as [batch..., m, k] with every batch dim"
    flat = bool(batch) and lb.index == (kv, n) and lb.buffer.rank == 2
    if not flat and (lb.index != (*batch, kv, n) or lb.buffer.rank != len(batch) + 2):
        return f"B ({lb.buffer.name}) is not read as [batch..., k, n] with every batch dim, nor as [k, n]"
    if store.index != tuple(vars_) or _unwrap_cast(store.value) != acc:
        return "C is not stored as [batch..., m, n] = acc"
    dtypes = {la.buffer.dtype, lb.buffer.dtype, store.buffer.dtype}
    if len(dtypes) != 1:
        return f"operand dtypes differ ({', '.join(sorted(str(d) for d in dtypes))})"
    extents = [f.extent for f in loops]
    b_extents = [*([] if flat else extents[:-2]), red.extent, extents[-1]]
    covers = ((la.buffer, [*extents[:-1], red.extent]), (store.buffer, extents), (lb.buffer, b_extents))
    for buf, want in covers:
        if [dim_expr(d) for d in buf.shape] != want:
            return f"the loops do not cover {buf.name} exactly (its extents differ from the loop extents)"
    if flat:
        rows: Expr = loops[-2].extent
        for f in reversed(loops[:-2]):
            rows = mul(f.extent, rows)
        return GemmRegion(la.buffer, lb.buffer, store.buffer, (), rows, loops[-1].extent, red.extent)
    return GemmRegion(
        la.buffer,
        lb.buffer,
        store.buffer,
        tuple(f.extent for f in loops[:-2]),
        loops[-2].extent,
        loops[-1].extent,
        red.extent,
    )


def gemm_atom(catalog: TargetCatalog, dtype: str) -> MmaAtom | None:
    """A whole-region GEMM atom of the catalog for `dtype` operands, or None."""
    for a in catalog.atoms_of("mma"):
        if (
            isinstance(a, MmaAtom)
            and a.a_storage == "gmem"
            and a.b_storage == "gmem"
            and a.a_dtype == a.b_dtype == a.c_dtype == a.d_dtype == dtype
            and a.b_major == "N"
        ):
            return a
    return None


def select_atoms(program: Program, catalog: TargetCatalog, options: Mapping[str, Any]) -> Program:
    """Replace each proved GEMM region by the catalog's atom, per option "gemm"."""
    choice = options.get("gemm", "auto")
    if choice not in GEMM_CHOICES:
        raise PlanError(
            f"option gemm must be one of {', '.join(GEMM_CHOICES)}, got {choice!r}",
            expected=GEMM_CHOICES,
            got=choice,
        )
    for k in program.kernels:
        if k.form != "contraction":
            continue
        if choice == "loop":
            k.decisions.append("kept the checked contraction loop (option gemm='loop')")
            continue
        region = match_gemm(k)
        atom = gemm_atom(catalog, region.a.dtype.name) if isinstance(region, GemmRegion) else None
        if isinstance(region, str) or atom is None:
            why = region if isinstance(region, str) else f"the catalog has no GEMM atom for {region.a.dtype}"
            if choice == "atom":
                raise PlanError(
                    f"{catalog.target}: kernel {k.name} ({', '.join(k.origin)}): explicit GEMM atom "
                    f"refused: {why}",
                    where=k.name,
                    expected="a proved GEMM region",
                    got=why,
                )
            k.decisions.append(f"kept the checked contraction loop: {why}")
            continue
        params = {"m": region.m, "n": region.n, "k": region.k}
        params.update({f"batch{i}": e for i, e in enumerate(region.batch)})
        k.body = AtomCall(atom.name, (region.a, region.b, region.c), params, k.body)
        k.decisions.append(
            f"atom {atom.name}: whole GEMM region proved (compact row-major A[m,k], B[k,n], "
            f"C[m,n], {region.a.dtype}, operands in memory, no alias)"
        )
    return program
