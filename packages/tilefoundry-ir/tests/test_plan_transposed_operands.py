"""plan/transposed_operands.py: when a contraction may read a transpose kernel's source in place."""

from __future__ import annotations

from tilefoundry.dsl import ConstTensor, DimVar, Tensor, bf16, func, tf
from tilefoundry.ir.lower import inline_calls, lower_to_tile
from tilefoundry.ir.plan.partition import partition_kernels
from tilefoundry.ir.plan.transposed_operands import TransposeFold, find_fold, read_in_place, transpose_source
from tilefoundry.ir.tile.expr import Var, loads
from tilefoundry.ir.tile.stmt import Kernel, Program, Seq, stmt_exprs, walk_stmts
from tilefoundry.ir.tile.values import hoist_shared_values

M = DimVar("M", 1, 65)


def _lower(fn) -> Program:
    return hoist_shared_values(lower_to_tile(partition_kernels(inline_calls(fn))))


@func
def linear(x: Tensor[(M, 64), bf16], w: ConstTensor[(32, 64), bf16]):
    return x @ tf.transpose(w, (1, 0))


def test_the_copy_is_proved_a_transpose_of_all_of_its_source() -> None:
    """t0[i, j] = w[j, i] with t0 (64, 32) and w (32, 64): temp and source, proved on the body."""
    p = _lower(linear)
    (t0,), w = p.temps, p.params[1]
    assert transpose_source(p.kernels[0]) == (t0, w)
    assert transpose_source(p.kernels[1]) is None


def test_a_transpose_of_part_of_a_buffer_is_not_its_source_transposed() -> None:
    """w[:, :32] transposed reads w (32, 64) as if it were (32, 32): reading w in place would be wrong."""

    @func
    def part(x: Tensor[(M, 32), bf16], w: ConstTensor[(32, 64), bf16]):
        return x @ tf.transpose(w[:, :32], (1, 0))

    p = _lower(part)
    assert transpose_source(p.kernels[0]) is None
    assert find_fold(p, p.kernels[1], p.temps[0]) is None


def test_a_source_rewritten_before_the_gemm_cannot_be_read_later() -> None:
    """The GEMM would read w after a later kernel overwrote it: the copy stays, and the reason is given."""
    p = _lower(linear)
    w = p.params[1]
    writer, gemm = p.kernels
    p.kernels = (writer, Kernel("kx_fill", "element grid", Seq(()), (), (w,)), gemm)
    assert find_fold(p, gemm, p.temps[0]) == "w is written by kx_fill after k0_transpose copies it"


def test_an_explicitly_placed_copy_keeps_its_realization() -> None:
    """seed 003: explicit execution bindings retain their original realization."""
    p = _lower(linear)
    p.kernels[0].request = ("cta",)
    assert find_fold(p, p.kernels[1], p.temps[0]) == (
        "its writer k0_transpose has an explicit placement, which keeps its realization"
    )


def test_parameters_are_never_folded() -> None:
    """Only a temp the program owns can disappear; a parameter operand has nothing to fold."""
    p = _lower(linear)
    assert find_fold(p, p.kernels[1], p.params[0]) is None


def test_reading_in_place_swaps_the_index_and_leaves_no_read_of_the_temp() -> None:
    """Every t0[k, n] of the contraction becomes w[n, k]; nothing reads t0 afterwards."""
    p = _lower(linear)
    fold = find_fold(p, p.kernels[1], p.temps[0])
    assert isinstance(fold, TransposeFold) and fold.writer is p.kernels[0]
    body = read_in_place(p.kernels[1].body, fold)
    read = [ld for s in walk_stmts(body) for e in stmt_exprs(s) for ld in loads(e)]
    assert [(ld.buffer.name, ld.index) for ld in read] == [
        ("x", (Var("i0"), Var("r3"))),
        ("w", (Var("i1"), Var("r3"))),
    ]
