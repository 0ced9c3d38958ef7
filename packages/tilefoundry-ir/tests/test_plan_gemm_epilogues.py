"""plan/gemm_epilogues.py: a GEMM atom's element-wise consumer becomes its epilogue, or why not."""

from __future__ import annotations

import os
import sys

from tilefoundry.dsl import ConstTensor, DimVar, Tensor, bf16, func, tf
from tilefoundry.ir.lower import inline_calls, lower_to_tile
from tilefoundry.ir.plan.atoms import select_atoms
from tilefoundry.ir.plan.gemm_epilogues import fuse_epilogues
from tilefoundry.ir.plan.gemm_groups import group_gemms
from tilefoundry.ir.plan.partition import partition_kernels
from tilefoundry.ir.tile.printer import format_program
from tilefoundry.ir.tile.stmt import AtomCall, Kernel, Program, Seq
from tilefoundry.ir.tile.values import hoist_shared_values

sys.path.insert(0, os.path.dirname(__file__))
from toy_targets import toy_gemm_catalog

M = DimVar("M", 1, 65)


def _plan(fn, epilogue: bool = True) -> Program:
    catalog = toy_gemm_catalog("rcr", shared_a_group=2, epilogue=epilogue)
    candidate = hoist_shared_values(lower_to_tile(partition_kernels(inline_calls(fn))))
    return fuse_epilogues(group_gemms(select_atoms(candidate, catalog, {}), catalog), catalog)


def _t(w):
    return tf.transpose(w, (1, 0))


Wi, Wo = ConstTensor[(128, 64), bf16], ConstTensor[(64, 128), bf16]


@func
def mlp(x: Tensor[(M, 64), bf16], gate: Wi, up: Wi, down: Wo):
    return x + (tf.silu(x @ _t(gate)) * (x @ _t(up))) @ _t(down)


def _atoms(p: Program) -> list[tuple[Kernel, AtomCall]]:
    return [(k, k.body) for k in p.kernels if isinstance(k.body, AtomCall)]


def test_pointwise_consumers_become_epilogues_and_stay_kernels() -> None:
    """silu(gate) * up reads both members of the gate/up group at its own (m, n): it is that call's
    epilogue; x + down(..) is the down GEMM's. Both kernels stay, to run where the atom cannot."""
    p = _plan(mlp)
    (g1, a1), (_, a2) = _atoms(p)
    assert a1.params["group"].value == 2
    assert a1.epilogue is not None and a1.epilogue.origin[0].startswith("mul@")
    assert a2.epilogue is not None and a2.epilogue.origin[0].startswith("add@")
    assert a1.epilogue in p.kernels and a2.epilogue in p.kernels
    assert f"then epilogue {a1.epilogue.name}" in format_program(p)
    assert any(d.startswith(f"epilogue of {g1.name}") for d in a1.epilogue.decisions)


def test_an_atom_without_epilogues_keeps_its_consumers_apart() -> None:
    """The catalog's atom cannot apply an epilogue (the cpu target's): nothing is named."""
    assert all(a.epilogue is None for _, a in _atoms(_plan(mlp, epilogue=False)))


def test_a_result_read_elsewhere_or_away_from_its_coordinates_is_not_fused() -> None:
    """A result that is also a function output, or that is read transposed, must reach memory."""

    @func
    def kept(x: Tensor[(M, 64), bf16], w: ConstTensor[(64, 64), bf16]):
        y = x @ _t(w)
        return y, y + 1.0

    @func
    def flipped(x: Tensor[(64, 64), bf16], w: ConstTensor[(64, 64), bf16]):
        return _t(x @ _t(w)) + x

    cases = ((kept, "a result is a function output"), (flipped, "reads t1 away from its own coordinates"))
    for fn, why in cases:
        ((g, a),) = _atoms(_plan(fn))
        assert a.epilogue is None
        assert any(d.startswith("no epilogue:") and why in d for d in g.decisions), g.decisions


def test_a_kernel_between_that_writes_an_input_blocks_the_move() -> None:
    """The consumer's work moves up to the GEMM: a kernel in between rewriting what it reads forbids it."""

    @func
    def resid(x: Tensor[(M, 64), bf16], w: ConstTensor[(64, 64), bf16], r: Tensor[(M, 64), bf16]):
        return r + x @ _t(w)

    catalog = toy_gemm_catalog("rcr", shared_a_group=2, epilogue=True)
    candidate = hoist_shared_values(lower_to_tile(partition_kernels(inline_calls(resid))))
    p = select_atoms(candidate, catalog, {})
    gemm, add = p.kernels
    r = p.params[2]
    p.kernels = (gemm, Kernel("kx_fill", "element grid", Seq(()), (), (r,)), add)
    fuse_epilogues(p, catalog)
    assert gemm.body.epilogue is None  # type: ignore[union-attr]
    assert any("kx_fill runs between them" in d for d in gemm.decisions)
