"""Whole-region atoms of the cpu target: each atom family's re-check and its call into the runtime.

Planning (`tilefoundry.ir.plan.atoms`) replaced a proved region by an `AtomCall`; before any code
is written the proof is re-done on the region the atom stands for, so stale metadata cannot
change what runs. A family is keyed by its atom-name prefix and realized by one runtime entry:

    atom cpu_avx512_gemm_6x64_f32_rrr(a, w, out0; batch0=3, m=T, n=128, k=64)
      ->  gemm(b_a, b_w, b_out0, 3, d_T, 128, 64);   // tilefoundry/runtime/cpu/gemm.h
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from tilefoundry.ir.errors import PlanError
from tilefoundry.ir.plan.atoms import GemmRegion, match_gemm
from tilefoundry.ir.tile.cexpr import CExpr, cname
from tilefoundry.ir.tile.expr import Const, Expr, mul
from tilefoundry.ir.tile.stmt import AtomCall, Kernel


@dataclass(frozen=True)
class AtomFamily:
    """How the cpu code generator realizes the atoms whose names start with `prefix`.

    Attributes:
        recheck: the reason the atom no longer matches the region it replaces, or None.
        call: the C++ statements of the call, given the atom and an expression printer.
    """

    prefix: str
    recheck: Callable[[Kernel, AtomCall], str | None]
    call: Callable[[AtomCall, CExpr], list[str]]


FAMILIES: list[AtomFamily] = []
# Operand dtypes `gemm` (tilefoundry/runtime/cpu/gemm.h) has an overload for.
GEMM_DTYPES = ("f32", "bf16")


def _family(kernel: Kernel, atom: AtomCall) -> AtomFamily:
    for f in FAMILIES:
        if atom.atom.startswith(f.prefix):
            return f
    raise PlanError(
        f"cpu: kernel {kernel.name}: the atom {atom.atom} has no cpu realization; known atom families: "
        f"{', '.join(f.prefix for f in FAMILIES)}",
        where=kernel.name,
        expected=[f.prefix for f in FAMILIES],
        got=atom.atom,
    )


def atom_lines(kernel: Kernel, atom: AtomCall, cx: CExpr) -> list[str]:
    """The C++ statements realizing `atom` in `kernel`, after re-checking its proof.

    Raises:
        PlanError: no family realizes the atom, or its region no longer matches it.
    """
    family = _family(kernel, atom)
    why = family.recheck(kernel, atom)
    if why is not None:
        raise PlanError(
            f"cpu: kernel {kernel.name}: atom {atom.atom} no longer matches its region: {why}",
            where=kernel.name,
            expected="the region the atom was proved for",
            got=why,
        )
    return family.call(atom, cx)


# ---------------------------------------------------------------- GEMM


def _gemm_recheck(kernel: Kernel, atom: AtomCall) -> str | None:
    k = kernel
    region = match_gemm(Kernel(k.name, k.form, atom.replaces, k.reads, k.writes, k.origin))
    if isinstance(region, str):
        return region
    if (region.a, region.b, region.c) != atom.operands:
        return "the atom's operands are not the region's A, B and C"
    if region.a.dtype.name not in GEMM_DTYPES:
        return f"dtype {region.a.dtype} is not one of {', '.join(GEMM_DTYPES)}"
    if _params(region) != atom.params:
        return "the atom's extents are not the region's"
    return None


def _params(region: GemmRegion) -> dict[str, Expr]:
    params = {"m": region.m, "n": region.n, "k": region.k}
    params.update({f"batch{i}": e for i, e in enumerate(region.batch)})
    return params


def _gemm_call(atom: AtomCall, cx: CExpr) -> list[str]:
    a, b, c = atom.operands
    batch: Expr = Const(1)
    for name, e in atom.params.items():
        if name.startswith("batch"):
            batch = mul(batch, e)
    dims = ", ".join(cx(e) for e in (batch, atom.params["m"], atom.params["n"], atom.params["k"]))
    return [f"gemm({cname(a)}, {cname(b)}, {cname(c)}, {dims});  // {atom.atom}: C = A . B, f32 sums"]


FAMILIES.append(AtomFamily("cpu_avx512_gemm_", _gemm_recheck, _gemm_call))
