"""GEMM epilogues: the element-wise consumer of a GEMM atom's results, applied by the atom.

A decode step's GEMMs are each followed by a short element-wise kernel over their output
(the residual `x + o_proj(..)`, `silu(gate) * up`). When the catalog's GEMM atom can apply
an epilogue (`MmaAtom.epilogue`), this pass names that consumer the atom's epilogue:

    atom gemm_rcr(t0, gate, t2, up, t4; m=T, k=2048, n0=6144, n1=6144, group=2) then epilogue k5_mul
    kernel k5_mul: for i0 < T, i1 < 6144: t5[i0, i1] = bf16(silu(f32(t2[i0, i1])) * f32(t4[i0, i1]))

The atom may then compute the kernel's stores itself from its results while they are still in
registers, and skip both writing them and launching the kernel; where it cannot (a tier that
writes C from a tiled mainloop), it writes C and the kernel runs as before. Either way the
values are the same: the epilogue sees each result rounded to C's dtype, as a read of C would.

Conditions, each a reason in the GEMM kernel's decisions when it fails: the kernel is the only
reader of every member's C (so C need not reach memory) and reads each exactly at its own
coordinates; it is a 2-D element grid over (M, N) with every member's N equal; and moving its
work up to the GEMM keeps the order of effects (no kernel in between writes what it reads or
touches what it writes).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..target.catalog import TargetCatalog
from ..tile.expr import Var, loads
from ..tile.stmt import Alloc, AtomCall, Check, For, Kernel, Program, stmt_exprs, walk_stmts
from .atoms import fusing_gemms
from .gemm_groups import gemm_members


def epilogue_chain(k: Kernel) -> tuple[For, For] | None:
    """The two instance loops (m, n) of a 2-D element-grid kernel, or None."""
    outer = k.body
    if not (isinstance(outer, For) and isinstance(outer.body, For)):
        return None
    inner = outer.body
    if outer.kind != "parallel" or inner.kind != "parallel":
        return None
    if any(isinstance(s, (For, Alloc, Check)) for s in walk_stmts(inner.body)):
        return None
    return outer, inner


def _blocker(program: Program, gemm: Kernel, atom: AtomCall, e: Kernel) -> str | None:
    """Why `e` cannot be the epilogue of `gemm`, or None."""
    members = gemm_members(atom)
    cs = [m.c for m in members]
    if e.form != "element grid" or e.request:
        return f"{e.name} is not an unplaced element grid"
    if any(c not in program.temps for c in cs) or any(c in e.writes for c in cs):
        return "a result is a function output or is rewritten"
    if any(c not in e.reads for c in cs):
        return f"{e.name} does not read every member's result"
    if "batch0" in atom.params:
        return "the GEMM has batch dims"
    chain = epilogue_chain(e)
    if chain is None:
        return f"{e.name} is not a 2-D loop nest of element-wise statements"
    m, n = chain
    if m.extent != atom.params["m"] or any(x.n != n.extent for x in members):
        return f"{e.name}'s domain is not every member's (M, N)"
    own = (Var(m.var), Var(n.var))
    for s in walk_stmts(n.body):
        for x in (ld for ex in stmt_exprs(s) for ld in loads(ex)):
            if x.buffer in cs and x.index != own:
                return f"{e.name} reads {x.buffer.name} away from its own coordinates"
    kernels = list(program.kernels)
    between = kernels[kernels.index(gemm) + 1 : kernels.index(e)]
    others = [b for b in e.reads if b not in cs]
    for k in between:
        if any(b in k.writes for b in others) or any(b in k.reads or b in k.writes for b in e.writes):
            return f"{k.name} runs between them and touches what {e.name} reads or writes"
    return None


def fuse_epilogues(
    program: Program, catalog: TargetCatalog, options: Mapping[str, Any] | None = None
) -> Program:
    """Name each GEMM atom's element-wise consumer its epilogue, where the atom can apply it."""
    for g, atom in fusing_gemms(program, catalog, options, "epilogue"):
        cs = {id(m.c) for m in gemm_members(atom)}
        readers = [k for k in program.kernels if k is not g and any(id(b) in cs for b in k.reads)]
        if len(readers) != 1:
            continue
        (e,) = readers
        why = _blocker(program, g, atom, e)
        if why is not None:
            g.decisions.append(f"no epilogue: {why}")
            continue
        atom.epilogue = e
        g.decisions.append(
            f"epilogue {e.name}: its only reader, element-wise over (M, N) at each result's own "
            f"coordinates; applied by the atom where its tier can, else run as its own kernel"
        )
        e.decisions.append(f"epilogue of {g.name}: launched only when the atom did not apply it")
    return program
