"""The cpu GEMM atom: selected only when proved, honoring option "gemm", exact across shapes.

One module holds every case, so the suite builds one library per option set.
"""

from __future__ import annotations

import pytest
import torch

import tilefoundry
from tilefoundry.check import allclose, check
from tilefoundry.dsl import ConstTensor, DimVar, Tensor, bf16, f16, f32, func, module, tf
from tilefoundry.ir.errors import PlanError
from tilefoundry.ir.target import get_target
from tilefoundry.runtime.loader import CompiledFunction, load_linked_module

T = DimVar("T", 1, 200)
ATOM = "cpu_avx512_gemm_6x64_f32_rrr"
needs_atom = pytest.mark.skipif(
    not any(a.name == ATOM for a in get_target("cpu").catalog.atoms), reason="the host has no AVX-512"
)


pytestmark = pytest.mark.usefixtures("fresh_build_cache")


@module
class Gemms:
    @func
    def plain(a: Tensor[(T, 70), f32], w: ConstTensor[(70, 130), f32]):
        return a @ w

    @func
    def batched(a: Tensor[(3, T, 33), f32], b: Tensor[(3, 33, 65), f32], wf: ConstTensor[(33, 17), f32]):
        return a @ b, a @ wf

    @func
    def halves(a: Tensor[(T, 71), bf16], wh: ConstTensor[(71, 130), bf16]):
        return a @ wh

    @func
    def refused(x: Tensor[(T, 16), f32], wr: ConstTensor[(16, 8), f32], wb: ConstTensor[(16, 8), f16]):
        return (x * 2.0) @ wr, tf.cast(x, "f16") @ wb, tf.transpose(wr, (1, 0)) @ x[0]


def _decisions(options: dict) -> dict[str, list[str]]:
    """`function.kernel` -> planning decisions, read from the 'check budget' stage of a compile."""
    seen: dict[str, list[str]] = {}

    def dump(stage: str, text: str) -> None:
        if stage != "check budget":
            return
        program = kernel = ""
        for line in text.splitlines():
            words = line.split()
            if line.startswith("program "):
                program = words[1].split("(")[0]
            elif words[:1] == ["kernel"]:
                kernel = f"{program}.{words[1]}"
                seen[kernel] = []
            elif words[:1] == ["#"] and kernel:
                seen[kernel].append(line.strip()[2:])

    tilefoundry.compile(Gemms, target="cpu", options=options, dump=dump)
    return seen


def _check(fn_name: str, options: dict, sizes: tuple[int, ...]) -> None:
    linked = tilefoundry.compile(Gemms, target="cpu", options=options)
    fn = Gemms.functions[fn_name]
    body = CompiledFunction(load_linked_module(linked, fn_name), fn.returns_tuple)
    gen = torch.Generator().manual_seed(7)
    for n in sizes:
        args = tuple(
            torch.randn(tuple(n if not isinstance(d, int) else d for d in p.type.shape), generator=gen).to(
                p.type.dtype.torch
            )
            for p in fn.params
        )
        outs = fn(*args)
        names = [f"output[{i}]" for i in range(len(outs))] if isinstance(outs, tuple) else ["output"]
        # bf16 results: the atom's f32 sums run in another order than torch's, so a result may
        # round to the neighbouring bf16 value (2**-8 relative).
        tol = 1e-2 if any(p.type.dtype.name == "bf16" for p in fn.params) else 1e-4
        report = check(body, fn, args, expect={name: [allclose(atol=tol, rtol=tol)] for name in names})
        assert report.passed, f"{fn_name} at T={n}:\n{report}"


@needs_atom
@pytest.mark.parametrize("name", ["plain", "batched", "halves"])
def test_gemm_atom_matches_evaluator_across_ragged_shapes(name: str) -> None:
    """The atom's results match the evaluator at T = 1 (bound), 7, 64 and 199 (bound): ragged
    M (not a multiple of 6 rows) and N (not a multiple of 64 columns), batched and flattened, f32
    and bf16 (B read in place below 48 rows, packed above; an odd K pads the last bf16 pair)."""
    _check(name, {}, (1, 7, 64, 199))


@needs_atom
def test_gemm_atom_is_selected_only_for_proved_regions() -> None:
    """seed 003: f32 and bf16 compact operands read from memory take the atom (a batched A against
    an unbatched B as one GEMM of batch*M rows); an f16 GEMM and a 1-D operand keep the checked
    loop, each with its reason."""
    d = _decisions({})

    def atom(kernel: str) -> str | None:
        return next((x for x in d[kernel] if x.startswith("atom ")), None)

    for kernel in ("plain.k0_matmul", "batched.k0_matmul", "batched.k1_matmul", "refused.k1_matmul"):
        assert atom(kernel).startswith(f"atom {ATOM}: whole GEMM region proved"), (kernel, d[kernel])
    assert atom("halves.k0_matmul").startswith("atom cpu_avx512_gemm_6x64_bf16_rrr: whole GEMM region proved")
    kept = "kept the checked contraction loop: "
    assert kept + "the catalog has no GEMM atom for f16" in d["refused.k3_matmul"]
    assert atom("refused.k6_matmul") is None
    assert kept + "the body is not a rank >= 2 output loop around one K sum" in d["refused.k6_matmul"]
    _check("refused", {}, (1, 9))


@needs_atom
def test_gemm_loop_option_keeps_the_checked_loop() -> None:
    """Option gemm='loop' keeps the reference contraction loop, and it matches the evaluator."""
    d = _decisions({"gemm": "loop"})
    assert all(not x.startswith("atom ") for v in d.values() for x in v)
    assert any("kept the checked contraction loop (option gemm='loop')" in x for v in d.values() for x in v)
    _check("plain", {"gemm": "loop"}, (5,))


def test_gemm_atom_request_fails_closed_naming_the_blocker() -> None:
    """seed 003: an explicit gemm='atom' that cannot be honored raises PlanError naming why."""

    @func
    def half(x: Tensor[(T, 16), f16], w: ConstTensor[(16, 8), f16]):
        return x @ w

    with pytest.raises(
        PlanError,
        match=r"cpu: kernel k0_matmul \(matmul@.*\): explicit GEMM atom refused: the catalog has no GEMM "
        r"atom for f16",
    ):
        tilefoundry.compile(half, target="cpu", options={"gemm": "atom"})

    @func
    def narrow(x: Tensor[(T, 16), f32], w: ConstTensor[(16, 8), f32]):
        return x @ w

    with pytest.raises(PlanError, match=r"explicit GEMM atom refused: the catalog has no GEMM atom for f32"):
        tilefoundry.compile(narrow, target="cpu", options={"gemm": "atom", "isa": "avx2"})
    with pytest.raises(PlanError, match=r"option gemm must be one of auto, loop, atom, got 'blas'"):
        tilefoundry.compile(narrow, target="cpu", options={"gemm": "blas"})


@needs_atom
def test_stale_gemm_atom_is_rechecked_before_emission() -> None:
    """seed 003: the proof is re-done on the region the atom stands for; a stale atom is refused."""
    from tilefoundry.codegen.cpu.atoms import atom_lines
    from tilefoundry.ir.pipeline import schedule_function
    from tilefoundry.ir.tile.cexpr import CExpr
    from tilefoundry.ir.tile.expr import Const
    from tilefoundry.ir.tile.stmt import AtomCall

    catalog = get_target("cpu").catalog
    program = schedule_function(Gemms.functions["plain"], catalog, {})
    (kernel,) = program.kernels
    atom = kernel.body
    assert isinstance(atom, AtomCall)
    call = "gemm(b_a, b_w, b_out0, int64_t(1LL), d_T, int64_t(130LL), int64_t(70LL));"
    assert atom_lines(kernel, atom, CExpr({"T": "d_T"})) == [f"{call}  // {ATOM}: C = A . B, f32 sums"]
    stale = AtomCall(atom.atom, atom.operands, {**atom.params, "k": Const(69)}, atom.replaces)
    with pytest.raises(PlanError, match=rf"atom {ATOM} no longer matches its region: the atom's extents"):
        atom_lines(kernel, stale, CExpr({}))
