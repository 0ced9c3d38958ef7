"""plan/atoms.py: GEMM regions with their operand majors, and transposes read in place by the atom."""

from __future__ import annotations

import os
import sys

import pytest

from tilefoundry.dsl import ConstTensor, DimVar, Tensor, bf16, func, tf
from tilefoundry.ir.errors import PlanError
from tilefoundry.ir.lower import inline_calls, lower_to_tile
from tilefoundry.ir.plan.atoms import GemmRegion, match_gemm, select_atoms
from tilefoundry.ir.plan.partition import partition_kernels
from tilefoundry.ir.target import TargetCatalog
from tilefoundry.ir.tile.expr import Expr, Load, Var, loads, transform
from tilefoundry.ir.tile.stmt import Assign, AtomCall, Kernel, Program, Stmt, map_stmt, stmt_exprs, walk_stmts
from tilefoundry.ir.tile.values import hoist_shared_values

sys.path.insert(0, os.path.dirname(__file__))
from toy_targets import toy_gemm_catalog

M = DimVar("M", 1, 65)


TN = toy_gemm_catalog("rrr", "rcr")
RRR_ONLY = toy_gemm_catalog("rrr")


def _select(fn, catalog: TargetCatalog = TN, **options) -> Program:
    candidate = hoist_shared_values(lower_to_tile(partition_kernels(inline_calls(fn))))
    return select_atoms(candidate, catalog, options)


@func
def linear(x: Tensor[(M, 64), bf16], w: ConstTensor[(32, 64), bf16]):
    return x @ tf.transpose(w, (1, 0))


@func
def shared(x: Tensor[(M, 64), bf16], y: Tensor[(M, 64), bf16], w: ConstTensor[(32, 64), bf16]):
    wt = tf.transpose(w, (1, 0))
    return x @ wt, y @ wt


def test_transposed_weight_is_read_in_place_by_a_k_major_atom() -> None:
    """seed 003: x @ w.T is one atom reading w (N, K) K-major; the copy kernel and its temp are gone."""
    p = _select(linear)
    (k,) = p.kernels
    x, w, out0 = p.params
    assert isinstance(k.body, AtomCall) and k.body.atom == "toy_gemm_bf16_rcr"
    assert k.body.operands == (x, w, out0) and p.temps == ()
    assert set(k.reads) == {x, w}
    assert k.decisions == [
        "atom toy_gemm_bf16_rcr: whole GEMM region proved (compact row-major A[m,k], B[n,k], C[m,n], bf16, "
        "operands in memory, no alias)",
        "t0 read in place as w transposed (kernel k0_transpose is exactly t0[i, j] = w[j, i] over all of t0, "
        "and nothing else reads t0); k0_transpose and t0 dropped",
    ]
    region = _region(k, k.body.replaces)
    assert isinstance(region, GemmRegion) and (region.a_major, region.b_major) == ("K", "K")
    # the body the atom stands for reads w[n, k] where it read t0[k, n]
    reads = {ld.buffer.name: ld.index for s in walk_stmts(k.body.replaces) for ld in _loads(s)}
    assert reads["w"] == (Var("i1"), Var("r3"))


def _loads(s: Stmt) -> list[Load]:
    return [ld for e in stmt_exprs(s) for ld in loads(e)]


def _region(k: Kernel, body: Stmt) -> GemmRegion | str:
    return match_gemm(Kernel(k.name, k.form, body, k.reads, k.writes))


def test_batched_x_folds_into_m_and_reads_the_shared_weight_in_place() -> None:
    """x (3, M, K) @ w.T: B is one 2-D weight for every batch, so the batch folds into M as before."""

    @func
    def batched(x: Tensor[(3, M, 64), bf16], w: ConstTensor[(32, 64), bf16]):
        return x @ tf.transpose(w, (1, 0))

    (k,) = _select(batched).kernels
    assert k.body.atom == "toy_gemm_bf16_rcr"
    assert str(k.body.params["m"]) == str(3 * Var("M"))


def test_without_a_k_major_atom_the_copy_stays_and_nothing_is_said() -> None:
    """A catalog with only row-major atoms (the cpu target's) keeps today's program and decisions."""
    p = _select(linear, RRR_ONLY)
    assert [k.name for k in p.kernels] == ["k0_transpose", "k1_matmul"]
    (t0,) = p.temps
    assert p.kernels[1].body.atom == "toy_gemm_bf16_rrr" and p.kernels[1].body.operands[1] is t0
    assert p.kernels[1].decisions == [
        "atom toy_gemm_bf16_rrr: whole GEMM region proved (compact row-major A[m,k], B[k,n], C[m,n], bf16, "
        "operands in memory, no alias)"
    ]


def test_a_temp_with_another_reader_keeps_its_copy() -> None:
    """Two GEMMs reading one transposed weight: dropping the copy would starve the other one."""
    p = _select(shared)
    assert [k.name for k in p.kernels] == ["k0_transpose", "k1_matmul", "k2_matmul"]
    assert [k.body.atom for k in p.kernels[1:]] == ["toy_gemm_bf16_rrr"] * 2
    assert p.kernels[1].decisions[0] == "kept B (t0) as stored: t0 is also read by k2_matmul"
    assert p.kernels[2].decisions[0] == "kept B (t0) as stored: t0 is also read by k1_matmul"


def test_a_copy_that_is_not_a_pure_transpose_is_not_read_through() -> None:
    """t0[i, j] = w[j, i] * 2 is not a transpose of a buffer in memory: the kernel stays, silently."""

    @func
    def scaled(x: Tensor[(M, 64), bf16], w: ConstTensor[(32, 64), bf16]):
        return x @ tf.transpose(w * 2.0, (1, 0))

    p = _select(scaled)
    assert [k.name for k in p.kernels] == ["k0_transpose", "k1_matmul"]
    assert p.kernels[1].body.atom == "toy_gemm_bf16_rrr" and len(p.kernels[1].decisions) == 1


def test_a_transpose_returned_as_an_output_is_not_dropped() -> None:
    """wt is also an output of the function: its kernel must still write it."""

    @func
    def both(x: Tensor[(M, 64), bf16], w: ConstTensor[(32, 64), bf16]):
        wt = tf.transpose(w, (1, 0))
        return x @ wt, wt

    p = _select(both)
    assert [k.name for k in p.kernels] == ["k0_transpose", "k1_matmul"]
    assert p.kernels[1].body.atom == "toy_gemm_bf16_rrr"


def test_x_times_its_own_transpose_reads_x_twice() -> None:
    """x @ x.T: A and B are one buffer, only read; the kernel lists it once."""

    @func
    def gram(x: Tensor[(M, 64), bf16]):
        return x @ tf.transpose(x, (1, 0))

    p = _select(gram)
    (k,) = p.kernels
    x, out0 = p.params
    assert k.body.operands == (x, x, out0) and k.reads == (x,)


def test_a_transposed_a_operand_needs_an_m_major_atom() -> None:
    """The A side works the same way when the catalog has an A M-major atom, and not otherwise."""

    @func
    def at(x: Tensor[(64, M), bf16], w: ConstTensor[(64, 32), bf16]):
        return tf.transpose(x, (1, 0)) @ w

    assert [k.name for k in _select(at).kernels] == ["k0_transpose", "k1_matmul"]
    (k,) = _select(at, toy_gemm_catalog("rrr", "crr")).kernels
    assert k.body.atom == "toy_gemm_bf16_crr"
    assert [b.name for b in k.body.operands] == ["x", "w", "out0"]


def test_option_gemm_loop_keeps_the_copy_and_the_loop() -> None:
    """gemm='loop' asks for the reference contraction: nothing is read in place either."""
    p = _select(linear, gemm="loop")
    assert [k.name for k in p.kernels] == ["k0_transpose", "k1_matmul"]
    assert not isinstance(p.kernels[1].body, AtomCall)


def test_explicit_atom_without_any_gemm_atom_fails_closed_naming_the_kernel() -> None:
    """gemm='atom' on a catalog without a bf16 atom refuses, naming the kernel and why."""
    with pytest.raises(PlanError, match=r"toy: kernel k1_matmul \(matmul@.*\): explicit GEMM atom refused: "
                                        r"the catalog has no GEMM atom for bf16"):  # fmt: skip
        _select(linear, toy_gemm_catalog(), gemm="atom")


def test_batched_b_read_k_major_is_not_a_region() -> None:
    """Batched B stays N-major only: B[b, n, k] per batch is refused with the reason."""

    @func
    def per_batch(x: Tensor[(3, M, 64), bf16], w: Tensor[(3, 32, 64), bf16]):
        return x @ tf.transpose(w, (0, 2, 1))

    p = _select(per_batch)
    assert p.kernels[1].body.atom == "toy_gemm_bf16_rrr"  # the 3-D copy is no 2-D transpose: kept
    k, w, (t0,) = p.kernels[1], p.params[1], p.temps

    def per_batch_k_major(e: Expr) -> Expr | None:  # t0[b, k, n] read as w[b, n, k]
        if isinstance(e, Load) and e.buffer is t0:
            return Load(w, (e.index[0], e.index[2], e.index[1]))
        return None

    def update(s: Stmt) -> Stmt | None:
        return Assign(s.name, transform(s.value, per_batch_k_major)) if isinstance(s, Assign) else None

    assert _region(k, map_stmt(k.body.replaces, update)) == (
        "B (w) is not read as [batch..., k, n] with every batch dim, nor as [k, n]"
    )
