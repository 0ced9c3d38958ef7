"""Whole-region atoms: a proved region realized as one call into the runtime's atom templates.

Seed 003 lets a target collapse a proved region into one opaque atom if it keeps the region's
values, layout correspondence, alias contract and numerical policy. Selection happened in
planning (`ir.plan.atoms` for GEMMs, by the catalog's atoms); here the proof is re-done on the
final body before any code is written, so stale metadata cannot change what runs. Each atom
family registers an `AtomKind` (matched by name prefix): its re-check, its host launch and the
macros its templates need. The families live beside this registry: `gemm_atom.py` (the GEMM
tiers of atoms/gemm.cuh) and `attention_atom.py` (atoms/attention.cuh). The atom template picks
its tier from the facts at the call (device, extents, alignment): one public entry per atom, as
seed 000 §3 asks of runtime ops.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from tilefoundry.ir.errors import PlanError
from tilefoundry.ir.tile.cexpr import CExpr
from tilefoundry.ir.tile.stmt import AtomCall, Program

from .realize import Realization


@dataclass(frozen=True)
class AtomKind:
    """What the code generator knows about one family of catalog atoms (matched by name prefix).

    Attributes:
        device: device code the call needs beside the runtime's templates (an epilogue functor).
    """

    prefix: str
    recheck: Callable[[Realization], None]
    launch: Callable[[Program, Realization, CExpr], list[str]]
    macros: tuple[str, ...] = ()
    device: Callable[[Program, Realization], list[str]] | None = None


KINDS: list[AtomKind] = []


def register(kind: AtomKind) -> None:
    """Add an atom family; families are matched in registration order."""
    KINDS.append(kind)


def _kind(r: Realization) -> AtomKind:
    atom = r.body
    assert isinstance(atom, AtomCall)
    for k in KINDS:
        if atom.atom.startswith(k.prefix):
            return k
    raise PlanError(
        f"cuda: kernel {r.kernel.name}: the atom {atom.atom} has no CUDA realization; known atom families: "
        f"{', '.join(k.prefix for k in KINDS)}",
        where=r.kernel.name,
        expected=[k.prefix for k in KINDS],
        got=atom.atom,
    )


def features(r: Realization) -> tuple[str, ...]:
    """Macros the atom's templates need defined before <tilefoundry/runtime.h>."""
    return _kind(r).macros


def emit_device(program: Program, r: Realization) -> list[str]:
    """Device code of an atom: a comment marking the kernel, and what its family adds to the templates."""
    kind = _kind(r)
    kind.recheck(r)
    k = r.kernel
    lines = [f"// kernel {k.name} [{k.form}]" + (f": {', '.join(k.origin)}" if k.origin else "")]
    lines += [f"//   {d}" for d in k.decisions]
    return [*lines, *(kind.device(program, r) if kind.device is not None else []), ""]


def launch(program: Program, r: Realization, cx: CExpr) -> list[str]:
    """Host lines calling the atom."""
    return _kind(r).launch(program, r, cx)
