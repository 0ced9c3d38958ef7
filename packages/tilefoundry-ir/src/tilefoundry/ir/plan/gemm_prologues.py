"""GEMM prologues: the row kernel that writes a GEMM atom's A, computed by the atom itself.

A decode step's projections each read a freshly normalized row (the RMS norm before q/k/v, the
one before gate/up): a short kernel whose whole output is the GEMM's A and nothing else's.
When the catalog's GEMM atom can compute its A itself (`MmaAtom.prologue`), this pass names
that kernel the atom's prologue:

    kernel k0_rms_norm: for i0 < T: ... t0[i0, j] = bf16(x[i0, j] * inv * w[j])
    atom gemm_rcr(t0, wq, t2, wk, t4, wv, t6; m=T, k=2048, ...) after prologue k0_rms_norm

The atom may then run the kernel's row statements for each of A's rows inside its own launch,
skipping both the kernel's launch and A's round trip through memory; where it cannot (a tier
that tiles A from memory), the kernel runs before it, as before. Either way the values are the
same: the prologue rounds each element to A's dtype, as the store would.

Conditions, each a reason in the GEMM kernel's decisions when it fails: A is a temporary the
kernel alone writes and the atom alone reads; the kernel writes nothing else, is an unplaced
"row" kernel of one instance loop over A's rows, and stores A only in the row it is on; and
moving its work down to the GEMM keeps the order of effects (no kernel in between writes what it
reads).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..target.catalog import TargetCatalog
from ..tile.expr import Var, dim_expr
from ..tile.stmt import AtomCall, Check, For, Kernel, Program, Store, walk_stmts
from .atoms import fusing_gemms


def prologue_row(k: Kernel) -> For | None:
    """The one instance loop over A's rows of a row kernel, or None."""
    loop = k.body
    return loop if isinstance(loop, For) and loop.kind == "parallel" else None


def _blocker(program: Program, gemm: Kernel, atom: AtomCall, p: Kernel) -> str | None:
    """Why `p` cannot be the prologue of `gemm`, or None."""
    a = atom.operands[0]
    if p.form != "row" or p.request:
        return f"{p.name}, which writes A, is not an unplaced row kernel"
    if p.writes != (a,):
        return f"{p.name} writes more than A"
    if "batch0" in atom.params:
        return "the GEMM has batch dims"
    row = prologue_row(p)
    if row is None or row.extent != atom.params["m"] or dim_expr(a.shape[1]) != atom.params["k"]:
        return f"{p.name} is not one loop over A's rows"
    for s in walk_stmts(row.body):
        if isinstance(s, Check) or (isinstance(s, For) and s.kind == "parallel" and s.var == row.var):
            return f"{p.name} checks indices or nests another loop over the rows"
        if isinstance(s, Store) and s.buffer is a and s.index[0] != Var(row.var):
            return f"{p.name} stores A away from the row it is on"
    kernels = list(program.kernels)
    between = kernels[kernels.index(p) + 1 : kernels.index(gemm)]
    for k in between:
        touched = [b.name for b in p.reads if b in k.writes]
        if touched:
            return f"{k.name} runs between them and writes {', '.join(touched)}, which {p.name} reads"
    return None


def fuse_prologues(
    program: Program, catalog: TargetCatalog, options: Mapping[str, Any] | None = None
) -> Program:
    """Name the row kernel writing each GEMM atom's A its prologue, where the atom can apply it."""
    for g, atom in fusing_gemms(program, catalog, options, "prologue"):
        a = atom.operands[0]
        if a not in program.temps:
            continue
        writers = [k for k in program.kernels if a in k.writes]
        readers = [k for k in program.kernels if a in k.reads and k is not g]
        if len(writers) != 1 or readers or (atom.epilogue is not None and a in atom.epilogue.reads):
            continue
        (p,) = writers
        why = _blocker(program, g, atom, p)
        if why is not None:
            g.decisions.append(f"no prologue: {why}")
            continue
        atom.prologue = p
        g.decisions.append(
            f"prologue {p.name}: the row kernel writing A, which only this atom reads; computed by the "
            f"atom where its tier can, else run as its own kernel before it"
        )
        p.decisions.append(f"prologue of {g.name}: launched only when the atom will not compute A itself")
    return program
