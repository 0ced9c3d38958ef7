"""GEMM chains: a GEMM atom reading another's epilogue output, run with it as one.

A decoder MLP is two GEMMs through an element-wise epilogue, each with its epilogue fused
(`ir.plan.gemm_epilogues`):

    atom gemm_rcr(t0, gate, t2, up, t4; m=T, k=2048, n0=6144, n1=6144, group=2) then epilogue k5_mul
    atom gemm_rcr(t5, down, t7; m=T, n=2048, k=6144) then epilogue k8_add

At decode (M = 1) both are GEMVs bound by their weights, and the second cannot start streaming
down's weights until all of t5 is written. When the catalog's GEMM atom can chain
(`MmaAtom.chain`), this pass names the second GEMM the first's chain:

    atom gemm_rcr(t0, gate, t2, up, t4; ...) then epilogue k5_mul chained with k7_matmul

The target may then run the pair as one computation split over their shared dimension (t5's
columns), each part computing its slice of t5 and that slice's share of the second product,
and where it cannot (a shape or an M it does not take), it runs the two calls as before. Either
way every epilogue sees the same values: results rounded to C's dtype.

Conditions, each a reason in the first GEMM kernel's decisions when it fails: the first call
has an epilogue and no prologue, and that epilogue writes one temporary, the second call's A,
which nothing else reads; the second call is one GEMM (no group, no batch dims) with an epilogue
and no prologue, over the same M, whose K is the first's N; and the four kernels (first GEMM,
its epilogue, second GEMM, its epilogue) run back to back, so moving the work of the last three
up to the first changes no order of effects.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..target.catalog import TargetCatalog
from ..tile.stmt import AtomCall, Kernel, Program
from .atoms import fusing_gemms
from .gemm_groups import gemm_members


def _blocker(program: Program, first: Kernel, atom: AtomCall, second: Kernel) -> str | None:
    """Why `second` cannot be the chain of `first`, or None."""
    ep = atom.epilogue
    assert ep is not None
    nxt = second.body
    assert isinstance(nxt, AtomCall)
    if atom.prologue is not None or nxt.prologue is not None:
        return "a GEMM of the pair has a prologue"
    if nxt.epilogue is None:
        return f"{second.name} has no epilogue"
    if "group" in nxt.params or any(p.startswith("batch") for p in (*atom.params, *nxt.params)):
        return f"{second.name} is a group or a GEMM of the pair has batch dims"
    if nxt.atom != atom.atom or nxt.params["m"] != atom.params["m"]:
        return f"{second.name} is another atom or another M"
    if any(m.n != nxt.params["k"] for m in gemm_members(atom)):
        return f"{second.name}'s K is not every member's N"
    kernels = list(program.kernels)
    at = kernels.index(first)
    if kernels[at + 1 : at + 4] != [ep, second, nxt.epilogue]:
        return f"{ep.name}, {second.name} and {nxt.epilogue.name} do not run right after {first.name}"
    return None


def chain_gemms(
    program: Program, catalog: TargetCatalog, options: Mapping[str, Any] | None = None
) -> Program:
    """Name the GEMM reading each GEMM atom's epilogue output its chain, where the atom can run both."""
    for g, atom in fusing_gemms(program, catalog, options, "chain"):
        ep = atom.epilogue
        if ep is None or len(ep.writes) != 1 or ep.writes[0] not in program.temps:
            continue
        (h,) = ep.writes
        readers = [k for k in program.kernels if h in k.reads]
        if len(readers) != 1 or not isinstance(readers[0].body, AtomCall):
            continue
        (second,) = readers
        nxt = second.body
        assert isinstance(nxt, AtomCall)
        if nxt.operands[0] is not h:
            continue
        why = _blocker(program, g, atom, second)
        if why is not None:
            g.decisions.append(f"no chain: {why}")
            continue
        atom.chain = second
        g.decisions.append(
            f"chained with {second.name}: it reads only what epilogue {ep.name} writes; run with this "
            f"atom as one, split over {h.name}'s columns, where the target can, else after it as before"
        )
        second.decisions.append(f"chain of {g.name}: called on its own only when the pair did not run as one")
    return program
