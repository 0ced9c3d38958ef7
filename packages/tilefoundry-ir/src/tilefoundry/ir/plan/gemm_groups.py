"""GEMM groups: GEMM atoms that read the same A run as one atom call (q, k and v projections).

After atom selection, kernels whose bodies are calls of one catalog GEMM atom with the same A
buffer, the same M and K extents and no batch dims are merged into the first of them, when the
catalog's atom says one call may run several (`MmaAtom.shared_a_group`) and moving each later
member up to the first keeps the program's order of effects: no kernel in between writes A or
the member's B, or reads or writes the member's C.

    atom gemm_rcr(t0, q_proj, t2; m=T, n=2048, k=2048)            atom gemm_rcr(t0, q_proj, t2, k_proj, t5,
    ... k3 reads t2 ...                                 ==>                     v_proj, t8; m=T, k=2048,
    atom gemm_rcr(t0, k_proj, t5; m=T, n=1024, k=2048)                          n0=2048, n1=1024, n2=1024)
    atom gemm_rcr(t0, v_proj, t8; m=T, n=1024, k=2048)            ... k3 reads t2 ...

Each member keeps its own region (the group's `replaces` is their sequence), so a target
re-proves every member before writing code. A skinny (decode) call then streams every member's
B in one launch instead of one short launch per projection.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..target.catalog import TargetCatalog
from ..tile.expr import Const, Expr
from ..tile.stmt import AtomCall, Buffer, Kernel, Program, Seq, Stmt
from .atoms import mma_atom_named


@dataclass(frozen=True)
class GemmMember:
    """One GEMM of a (possibly one-member) group: C = A · B with N columns."""

    b: Buffer
    c: Buffer
    n: Expr
    replaces: Stmt


def gemm_members(atom: AtomCall) -> tuple[GemmMember, ...]:
    """The members of a GEMM atom call, in order; a plain call is a group of one."""
    group = atom.params.get("group")
    if group is None:
        _, b, c = atom.operands
        return (GemmMember(b, c, atom.params["n"], atom.replaces),)
    assert isinstance(group, Const) and isinstance(atom.replaces, Seq)
    ops, body, p = atom.operands, atom.replaces.body, atom.params
    count = int(group.value)
    return tuple(GemmMember(ops[1 + 2 * i], ops[2 + 2 * i], p[f"n{i}"], body[i]) for i in range(count))


def _key(k: Kernel) -> tuple | None:
    """What members of one group share: the atom, A, M and K; None for a kernel no group takes."""
    atom = k.body
    if not isinstance(atom, AtomCall) or k.request or "group" in atom.params:
        return None
    if set(atom.params) != {"m", "n", "k"} or len(atom.operands) != 3:
        return None  # batched GEMMs keep one call each
    return (atom.atom, id(atom.operands[0]), atom.params["m"], atom.params["k"])


def _movable(between: list[Kernel], member: Kernel) -> bool:
    """Whether `member` may run before every kernel of `between` (no effect order changes)."""
    atom = member.body
    assert isinstance(atom, AtomCall)
    a, b, c = atom.operands
    return not any(a in k.writes or b in k.writes or c in k.writes or c in k.reads for k in between)


def group_gemms(program: Program, catalog: TargetCatalog) -> Program:
    """Merge GEMM atom kernels sharing A into groups the catalog's atom runs in one call."""
    kernels = list(program.kernels)
    merged: dict[int, list[Kernel]] = {}  # id(first) -> its later members
    absorbed: set[int] = set()
    for i, first in enumerate(kernels):
        key = _key(first)
        if key is None or id(first) in absorbed:
            continue
        atom = mma_atom_named(catalog, key[0])
        room = (atom.shared_a_group if atom is not None else 1) - 1
        members: list[Kernel] = []
        for j in range(i + 1, len(kernels)):
            if room == 0:
                break
            k = kernels[j]
            if id(k) in absorbed or _key(k) != key:
                continue
            between = [x for x in kernels[i + 1 : j] if x not in members]
            if _movable(between, k):
                members.append(k)
                absorbed.add(id(k))
                room -= 1
        if members:
            merged[id(first)] = members
    for first in kernels:
        if id(first) in merged:
            _merge(first, merged[id(first)])
    program.kernels = tuple(k for k in kernels if id(k) not in absorbed)
    return program


def _merge(first: Kernel, members: list[Kernel]) -> None:
    """Make `first` the group's kernel: one atom call over every member's B and C."""
    calls = [k.body for k in (first, *members)]
    assert all(isinstance(c, AtomCall) for c in calls)
    a = calls[0].operands[0]  # type: ignore[union-attr]
    operands: list[Buffer] = [a]
    params: dict[str, Expr] = {"m": calls[0].params["m"], "k": calls[0].params["k"]}  # type: ignore[union-attr]
    for i, call in enumerate(calls):
        operands += call.operands[1:]  # type: ignore[union-attr]
        params[f"n{i}"] = call.params["n"]  # type: ignore[union-attr]
    params["group"] = Const(len(calls))
    replaced = Seq(tuple(c.replaces for c in calls))  # type: ignore[union-attr]
    first.body = AtomCall(calls[0].atom, tuple(operands), params, replaced)  # type: ignore[union-attr]
    names = ", ".join(k.name for k in (first, *members))
    first.reads = tuple(dict.fromkeys(b for k in (first, *members) for b in k.reads))
    first.writes = tuple(dict.fromkeys(b for k in (first, *members) for b in k.writes))
    first.origin = tuple(dict.fromkeys(o for k in (first, *members) for o in k.origin))
    first.decisions.append(
        f"grouped {names}: {len(calls)} GEMMs reading {a.name} as A (same M, K) in one call of "
        f"{calls[0].atom} (moved past kernels that neither write its A or B nor touch its C)"  # type: ignore[union-attr]
    )
