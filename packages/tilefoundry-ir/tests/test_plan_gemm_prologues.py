"""plan/gemm_prologues.py: the row kernel writing a GEMM atom's A becomes its prologue, or why not."""

from __future__ import annotations

import os
import sys

from tilefoundry.dsl import ConstTensor, DimVar, Tensor, bf16, func, tf
from tilefoundry.ir.lower import inline_calls, lower_to_tile
from tilefoundry.ir.plan.atoms import select_atoms
from tilefoundry.ir.plan.gemm_epilogues import fuse_epilogues
from tilefoundry.ir.plan.gemm_groups import group_gemms
from tilefoundry.ir.plan.gemm_prologues import fuse_prologues
from tilefoundry.ir.plan.partition import partition_kernels
from tilefoundry.ir.tile.printer import format_program
from tilefoundry.ir.tile.stmt import AtomCall, Kernel, Program, Seq
from tilefoundry.ir.tile.values import hoist_shared_values

sys.path.insert(0, os.path.dirname(__file__))
from toy_targets import toy_gemm_catalog

M = DimVar("M", 1, 65)
W = ConstTensor[(128, 64), bf16]
ALL = {"gemm_fusion": "all"}  # the default ("auto") names no prologue


def _candidate(fn) -> Program:
    return hoist_shared_values(lower_to_tile(partition_kernels(inline_calls(fn))))


def _plan(fn, prologue: bool = True, options: dict | None = ALL) -> Program:
    catalog = toy_gemm_catalog("rcr", shared_a_group=2, epilogue=True, prologue=prologue)
    p = fuse_epilogues(group_gemms(select_atoms(_candidate(fn), catalog, {}), catalog), catalog, options)
    return fuse_prologues(p, catalog, options)


def _t(w):
    return tf.transpose(w, (1, 0))


def _atoms(p: Program) -> list[tuple[Kernel, AtomCall]]:
    return [(k, k.body) for k in p.kernels if isinstance(k.body, AtomCall)]


@func
def gated(x: Tensor[(M, 64), bf16], norm: ConstTensor[(64,), bf16], gate: W, up: W):
    h = tf.rms_norm(x, norm, eps=1e-6)
    return tf.silu(h @ _t(gate)) * (h @ _t(up))


def test_the_norm_before_a_projection_becomes_its_prologue_and_stays_a_kernel() -> None:
    """rms_norm writes the gate/up group's A and nothing else reads it: it is that call's prologue
    (beside the silu * up epilogue), and it stays in the program to run where the atom cannot."""
    p = _plan(gated)
    ((g, a),) = _atoms(p)
    assert a.prologue is not None and a.prologue.origin[0].startswith("rms_norm@")
    assert a.epilogue is not None
    assert a.prologue in p.kernels and p.kernels.index(a.prologue) < p.kernels.index(g)
    assert f"after prologue {a.prologue.name} then epilogue {a.epilogue.name}" in format_program(p)
    assert any(d.startswith(f"prologue of {g.name}") for d in a.prologue.decisions)


def test_an_atom_without_prologues_keeps_the_norm_apart() -> None:
    """The catalog's atom cannot compute its A (the cpu target's): nothing is named."""
    assert all(a.prologue is None for _, a in _atoms(_plan(gated, prologue=False)))


def test_option_gemm_fusion_keeps_prologues_or_epilogues_or_both_apart() -> None:
    """The default ("auto") and "epilogues" name no prologue, "prologues" no epilogue, "none"
    neither, "all" both; the program's notes say which the option turned off."""
    cases = (
        (None, False, True, "epilogues"),
        ("auto", False, True, "epilogues"),
        ("all", True, True, ""),
        ("epilogues", False, True, "epilogues"),
        ("prologues", True, False, "prologues"),
        ("none", False, False, "nothing"),
    )
    for fusion, prologue, epilogue, fused in cases:
        p = _plan(gated, options={} if fusion is None else {"gemm_fusion": fusion})
        ((_, a),) = _atoms(p)
        assert (a.prologue is not None, a.epilogue is not None) == (prologue, epilogue), fusion
        off = [kind for kind, on in (("prologues", prologue), ("epilogues", epilogue)) if not on]
        assert [n for n in p.notes if n.startswith("no GEMM")] == [
            f"no GEMM {kind}: option gemm_fusion={fusion or 'auto'!r} fuses {fused}" for kind in reversed(off)
        ]


def test_a_normalized_row_read_elsewhere_or_an_element_wise_producer_is_not_fused() -> None:
    """A that is also a function output must reach memory; a producer that is not a row kernel
    (here an element-wise scale) is not a prologue: each says why in the GEMM's decisions."""

    @func
    def kept(x: Tensor[(M, 64), bf16], norm: ConstTensor[(64,), bf16], w: W):
        h = tf.rms_norm(x, norm, eps=1e-6)
        return h @ _t(w), h

    @func
    def scaled(x: Tensor[(M, 64), bf16], s: ConstTensor[(64,), bf16], w: W):
        return tf.exp(x * s) @ _t(w)

    ((_, a),) = _atoms(_plan(kept))
    assert a.prologue is None
    ((g, a),) = _atoms(_plan(scaled))
    assert a.prologue is None
    assert any(d.startswith("no prologue:") and "not an unplaced row kernel" in d for d in g.decisions)


def test_a_kernel_between_that_writes_the_row_s_input_blocks_the_move() -> None:
    """The norm's work moves down to the GEMM: a kernel in between rewriting x forbids it."""

    @func
    def proj(x: Tensor[(M, 64), bf16], norm: ConstTensor[(64,), bf16], w: W):
        return tf.rms_norm(x, norm, eps=1e-6) @ _t(w)

    catalog = toy_gemm_catalog("rcr", prologue=True)
    p = select_atoms(_candidate(proj), catalog, {})
    norm, gemm = p.kernels
    x = p.params[0]
    p.kernels = (norm, Kernel("kx_fill", "element grid", Seq(()), (), (x,)), gemm)
    fuse_prologues(p, catalog, ALL)
    assert gemm.body.prologue is None  # type: ignore[union-attr]
    assert any("kx_fill runs between them and writes x" in d for d in gemm.decisions), gemm.decisions


def test_a_program_without_gemms_has_no_fusion_note() -> None:
    """The note says what the option turned off only where some GEMM could have taken it."""

    @func
    def scale(x: Tensor[(M, 64), bf16], norm: ConstTensor[(64,), bf16]):
        return tf.rms_norm(x, norm, eps=1e-6)

    for fusion in ("auto", "epilogues", "none"):
        p = _plan(scale, options={"gemm_fusion": fusion})
        assert not [n for n in p.notes if n.startswith("no GEMM")], fusion
