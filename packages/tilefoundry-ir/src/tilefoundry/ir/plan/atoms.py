"""Atom selection: a proved whole region realized as one target atom, else the reference loop.

Seed 003 lets a target collapse a proved region into one opaque atom (a complete compact f32
GEMM as one library call) if it preserves the region's values, layout correspondence, alias
contract and numerical policy. The proof here is re-done on the actual Candidate body, not on
a marker: the kernel must be exactly

    for (batch..., m, n) parallel: acc = 0; for k reduce: acc += A[.., m, k] * B[.., k, n]; C[..] = acc

with A, B and C compact row-major buffers of one dtype equal to the atom's, A and B read
directly (no inlined producer), batch dims shared by all three, or B 2-D and shared by
every batch (x @ W: the batch dims fold into M). Without batch dims A may be read as A[k, m]
(M-major), and a 2-D B as B[n, k] (K-major, stored (N, K)); the region records these operand
majors with the MmaAtom fields' convention. A contraction reading a temp that a pure transpose
kernel filled reads the transpose's source in place when the catalog has an atom for the
resulting major-ness (`transposed_operands`); the copy and its temp are then dropped. The
catalog supplies the atom: an `MmaAtom` issued over global memory (`a_storage == "gmem"`)
whose dtypes and majors match. Option "gemm": "auto" (default: use a proved atom), "loop"
(keep the reference loop), "atom" (explicit: fail closed when no atom can be proved)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import PlanError
from ..target.catalog import MmaAtom, TargetCatalog
from ..target.options import GEMM, GEMM_FUSION
from ..tile.expr import Bin, Cast, Const, Expr, Load, Var, dim_expr, mul
from ..tile.stmt import Assign, AtomCall, Buffer, For, Kernel, Let, Program, Seq, Stmt, Store
from .transposed_operands import TransposeFold, drop_folded, find_fold, read_in_place

# The operand majors a region takes once the transpose feeding that operand is read in place.
TRANSPOSED_MAJOR = {"A": {"K": "M"}, "B": {"N": "K"}}


@dataclass(frozen=True)
class GemmRegion:
    """A proved `C[b, m, n] = sum_k A[b, m, k] * B[b, k, n]` over compact buffers.

    Attributes:
        a_major: "K" when A is stored (batch..., M, K), "M" when stored (K, M) (no batch).
        b_major: "N" when B is stored (batch..., K, N) or (K, N), "K" when stored (N, K) (2-D).
    """

    a: Buffer
    b: Buffer
    c: Buffer
    batch: tuple[Expr, ...]
    m: Expr
    n: Expr
    k: Expr
    a_major: str = "K"
    b_major: str = "N"

    @property
    def operands_text(self) -> str:
        """The operands' storage as index order, e.g. `A[m,k], B[n,k], C[m,n]`."""
        a = "m,k" if self.a_major == "K" else "k,m"
        b = "k,n" if self.b_major == "N" else "n,k"
        return f"A[{a}], B[{b}], C[m,n]"


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
    extents = [f.extent for f in loops]
    if la.index == (*batch, m, kv) and la.buffer.rank == len(batch) + 2:
        a_major, a_extents = "K", [*extents[:-1], red.extent]
    elif not batch and la.index == (kv, m) and la.buffer.rank == 2:
        a_major, a_extents = "M", [red.extent, extents[0]]
    else:
        return f"A ({la.buffer.name}) is not read as [batch..., m, k] with every batch dim"
    flat = bool(batch) and lb.buffer.rank == 2  # x @ W: one B shared by every batch
    if lb.index == ((kv, n) if flat else (*batch, kv, n)) and lb.buffer.rank == (2 if flat else len(vars_)):
        b_major, b_extents = "N", [*([] if flat else extents[:-2]), red.extent, extents[-1]]
    elif lb.buffer.rank == 2 and lb.index == (n, kv):
        b_major, b_extents = "K", [extents[-1], red.extent]
    else:
        return f"B ({lb.buffer.name}) is not read as [batch..., k, n] with every batch dim, nor as [k, n]"
    if store.index != tuple(vars_) or _unwrap_cast(store.value) != acc:
        return "C is not stored as [batch..., m, n] = acc"
    dtypes = {la.buffer.dtype, lb.buffer.dtype, store.buffer.dtype}
    if len(dtypes) != 1:
        return f"operand dtypes differ ({', '.join(sorted(str(d) for d in dtypes))})"
    covers = ((la.buffer, a_extents), (store.buffer, extents), (lb.buffer, b_extents))
    for buf, want in covers:
        if [dim_expr(d) for d in buf.shape] != want:
            return f"the loops do not cover {buf.name} exactly (its extents differ from the loop extents)"
    majors = {"a_major": a_major, "b_major": b_major}
    if flat:
        rows: Expr = loops[-2].extent
        for f in reversed(loops[:-2]):
            rows = mul(f.extent, rows)
        n_extent = loops[-1].extent
        return GemmRegion(la.buffer, lb.buffer, store.buffer, (), rows, n_extent, red.extent, **majors)
    return GemmRegion(
        la.buffer,
        lb.buffer,
        store.buffer,
        tuple(f.extent for f in loops[:-2]),
        loops[-2].extent,
        loops[-1].extent,
        red.extent,
        **majors,
    )


def mma_atom_named(catalog: TargetCatalog, name: str) -> MmaAtom | None:
    """The catalog's MMA atom called `name` (an AtomCall's `atom`), or None."""
    return next((a for a in catalog.atoms_of("mma") if isinstance(a, MmaAtom) and a.name == name), None)


# The kinds of GEMM fusion each value of option gemm_fusion turns on. "auto" leaves prologues off:
# on the H200 a decode step with the RMS norms computed in each GEMV's CTAs ran slower (520 tokens/s)
# than with the norms as their own kernels (556), docs/performance.md.
_FUSED_KINDS = {
    "auto": ("epilogue",),
    "all": ("epilogue", "prologue", "chain"),
    "epilogues": ("epilogue",),
    "chains": ("epilogue", "chain"),
    "prologues": ("prologue",),
    "none": (),
}


def fusing_gemms(
    program: Program, catalog: TargetCatalog, options: Mapping[str, Any] | None, kind: str
) -> list[tuple[Kernel, AtomCall]]:
    """The GEMM atom kernels whose catalog atom can take a `kind` ("epilogue", "prologue", "chain").

    None when option gemm_fusion turns that kind off; the program's notes then say so, if some
    GEMM could have taken it.
    """
    fusion = GEMM_FUSION.read(options or {})
    found = []
    for k in program.kernels:
        atom = k.body
        mma = mma_atom_named(catalog, atom.atom) if isinstance(atom, AtomCall) else None
        if mma is not None and getattr(mma, kind):
            found.append((k, atom))
    if found and kind not in _FUSED_KINDS[fusion]:
        fused = ", ".join(f"{k}s" for k in _FUSED_KINDS[fusion]) or "nothing"
        program.notes.append(f"no GEMM {kind}s: option gemm_fusion={fusion!r} fuses {fused}")
        return []
    return found


def gemm_atom(catalog: TargetCatalog, dtype: str, a_major: str = "K", b_major: str = "N") -> MmaAtom | None:
    """A whole-region GEMM atom of the catalog for `dtype` operands of those majors, or None."""
    for a in catalog.atoms_of("mma"):
        if (
            isinstance(a, MmaAtom)
            and a.a_storage == "gmem"
            and a.b_storage == "gmem"
            and a.a_dtype == a.b_dtype == a.c_dtype == a.d_dtype == dtype
            and (a.a_major, a.b_major) == (a_major, b_major)
        ):
            return a
    return None


@dataclass
class _Proof:
    """A GEMM region being proved: the body it reads and the transposes it reads in place."""

    kernel: Kernel
    body: Stmt
    region: GemmRegion
    folds: list[TransposeFold]
    notes: list[str]


def _read_transposes_in_place(
    program: Program, k: Kernel, region: GemmRegion, catalog: TargetCatalog
) -> _Proof:
    """The region with each transposed operand read from its source, where the catalog has the atom."""
    proof = _Proof(k, k.body, region, [], [])
    for operand in ("B", "A"):
        r = proof.region
        buf, major = (r.b, r.b_major) if operand == "B" else (r.a, r.a_major)
        flipped = TRANSPOSED_MAJOR[operand].get(major)
        majors = (r.a_major, flipped) if operand == "B" else (flipped, r.b_major)
        if flipped is None or gemm_atom(catalog, r.a.dtype.name, *majors) is None:
            continue
        fold = find_fold(program, k, buf)
        body = read_in_place(proof.body, fold) if isinstance(fold, TransposeFold) else fold
        if isinstance(body, Stmt):
            assert isinstance(fold, TransposeFold)
            folded = match_gemm(Kernel(k.name, k.form, body, k.reads, k.writes, k.origin))
            if isinstance(folded, GemmRegion):
                proof.body, proof.region = body, folded
                proof.folds.append(fold)
                continue
            body = folded
        if isinstance(body, str):
            proof.notes.append(f"kept {operand} ({buf.name}) as stored: {body}")
    return proof


def select_atoms(program: Program, catalog: TargetCatalog, options: Mapping[str, Any]) -> Program:
    """Replace each proved GEMM region by the catalog's atom, per option "gemm"."""
    choice = GEMM.read(options)
    dropped: list[tuple[Kernel, TransposeFold]] = []
    for k in program.kernels:
        if k.form != "contraction":
            continue
        if choice == "loop":
            k.decisions.append("kept the checked contraction loop (option gemm='loop')")
            continue
        region = match_gemm(k)
        atom = None
        if isinstance(region, GemmRegion):
            proof = _read_transposes_in_place(program, k, region, catalog)
            region = proof.region
            atom = gemm_atom(catalog, region.a.dtype.name, region.a_major, region.b_major)
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
        k.body = AtomCall(atom.name, (region.a, region.b, region.c), params, proof.body)
        k.decisions.extend(proof.notes)
        k.decisions.append(
            f"atom {atom.name}: whole GEMM region proved (compact row-major {region.operands_text}, "
            f"{region.a.dtype}, operands in memory, no alias)"
        )
        k.decisions.extend(str(f) for f in proof.folds)
        dropped.extend((k, f) for f in proof.folds)
    drop_folded(program, dropped)
    return program
