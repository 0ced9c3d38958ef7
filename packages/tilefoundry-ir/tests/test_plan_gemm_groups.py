"""plan/gemm_groups.py: GEMM atoms sharing A become one call where the catalog's atom allows it."""

from __future__ import annotations

import os
import sys

from tilefoundry.dsl import ConstTensor, DimVar, Tensor, bf16, func, tf
from tilefoundry.ir.lower import inline_calls, lower_to_tile
from tilefoundry.ir.plan.atoms import select_atoms
from tilefoundry.ir.plan.gemm_groups import gemm_members, group_gemms
from tilefoundry.ir.plan.partition import partition_kernels
from tilefoundry.ir.tile.expr import Const
from tilefoundry.ir.tile.stmt import AtomCall, Kernel, Program, Seq
from tilefoundry.ir.tile.values import hoist_shared_values

sys.path.insert(0, os.path.dirname(__file__))
from toy_targets import toy_gemm_catalog

M = DimVar("M", 1, 65)


def _plan(fn, group: int = 4) -> Program:
    catalog = toy_gemm_catalog("rcr", shared_a_group=group)
    candidate = hoist_shared_values(lower_to_tile(partition_kernels(inline_calls(fn))))
    return group_gemms(select_atoms(candidate, catalog, {}), catalog)


def _t(w):
    return tf.transpose(w, (1, 0))


@func
def qkv(
    x: Tensor[(M, 64), bf16],
    g: ConstTensor[(64,), bf16],
    wq: ConstTensor[(64, 64), bf16],
    wk: ConstTensor[(32, 64), bf16],
    wv: ConstTensor[(32, 64), bf16],
):
    h = tf.rms_norm(x, g, eps=1e-6)
    q = tf.rms_norm(h @ _t(wq), g, eps=1e-6)  # a row kernel between the q and k GEMMs
    return q, h @ _t(wk), h @ _t(wv)


def _gemm_kernels(p: Program) -> list[Kernel]:
    return [k for k in p.kernels if isinstance(k.body, AtomCall)]


def test_projections_of_one_activation_become_one_call() -> None:
    """q, k and v read the same normalized x with the same M and K: one group of three, in program order."""
    p = _plan(qkv)
    (k,) = _gemm_kernels(p)
    atom = k.body
    assert isinstance(atom, AtomCall) and atom.params["group"] == Const(3)
    members = gemm_members(atom)
    assert [m.b.name for m in members] == ["wq", "wk", "wv"]
    assert [m.n for m in members] == [Const(64), Const(32), Const(32)]
    assert all(atom.operands[0] is p.temps[0] for _ in members)
    assert isinstance(atom.replaces, Seq) and len(atom.replaces.body) == 3
    assert any(d.startswith("grouped k") and "3 GEMMs reading" in d for d in k.decisions)
    # The group runs before the q norm that reads its first member's C.
    q_norm = next(x for x in p.kernels if x.form == "row" and members[0].c in x.reads)
    assert p.kernels.index(k) < p.kernels.index(q_norm)


def test_a_one_gemm_atom_never_groups() -> None:
    """A catalog whose atom runs one GEMM per call (the cpu target's) leaves every GEMM alone."""
    p = _plan(qkv, group=1)
    assert len(_gemm_kernels(p)) == 3
    assert all("group" not in k.body.params for k in _gemm_kernels(p))  # type: ignore[union-attr]


def test_the_group_size_is_the_atoms() -> None:
    """Five projections of one x with groups of at most two: calls of 2, 2 and 1, in order."""
    W = ConstTensor[(16, 64), bf16]

    @func
    def fives(x: Tensor[(M, 64), bf16], w0: W, w1: W, w2: W, w3: W, w4: W):
        return x @ _t(w0), x @ _t(w1), x @ _t(w2), x @ _t(w3), x @ _t(w4)

    p = _plan(fives, group=2)
    sizes = [len(gemm_members(k.body)) for k in _gemm_kernels(p)]  # type: ignore[arg-type]
    assert sizes == [2, 2, 1]
    order = [m.b.name for k in _gemm_kernels(p) for m in gemm_members(k.body)]  # type: ignore[arg-type]
    assert order == ["w0", "w1", "w2", "w3", "w4"]


def test_different_k_or_a_keeps_separate_calls() -> None:
    """Only GEMMs with the same A buffer and the same M and K share a call."""

    @func
    def two(x: Tensor[(M, 64), bf16], y: Tensor[(M, 64), bf16], w: ConstTensor[(32, 64), bf16],
            u: ConstTensor[(32, 32), bf16]):
        a = x @ _t(w)
        return a, y @ _t(w), a @ _t(u)

    p = _plan(two)
    assert len(_gemm_kernels(p)) == 3


def test_a_member_is_not_moved_past_a_writer_of_its_a() -> None:
    """A kernel between the two GEMMs that rewrites A keeps the later GEMM where it is."""

    @func
    def pair(x: Tensor[(M, 64), bf16], w: ConstTensor[(32, 64), bf16], u: ConstTensor[(32, 64), bf16]):
        return x @ _t(w), x @ _t(u)

    catalog = toy_gemm_catalog("rcr", shared_a_group=4)
    candidate = hoist_shared_values(lower_to_tile(partition_kernels(inline_calls(pair))))
    p = select_atoms(candidate, catalog, {})
    first, second = _gemm_kernels(p)
    x = p.params[0]
    p.kernels = (first, Kernel("kx_fill", "element grid", Seq(()), (), (x,)), second)
    assert len(_gemm_kernels(group_gemms(p, catalog))) == 2

