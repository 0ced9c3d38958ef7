"""plan/permuted_stores.py: a permutation copy's writer stores at its destination, or why not."""

from __future__ import annotations

from tilefoundry.dsl import ConstTensor, DimVar, Tensor, bf16, func, tf
from tilefoundry.ir.lower import inline_calls, lower_to_tile
from tilefoundry.ir.plan.partition import partition_kernels
from tilefoundry.ir.plan.permuted_stores import PermutationCopy, permutation_copy, permute_stores
from tilefoundry.ir.tile.expr import Const, Var
from tilefoundry.ir.tile.printer import format_program
from tilefoundry.ir.tile.stmt import Kernel, Program, Seq, Store, walk_stmts
from tilefoundry.ir.tile.values import hoist_shared_values

T = DimVar("T", 1, 65)
Q = Tensor[(1, 4, T, 32), bf16]
KV = Tensor[(1, 2, T, 32), bf16]


def _lower(fn) -> Program:
    return hoist_shared_values(lower_to_tile(partition_kernels(inline_calls(fn))))


@func
def attend(q: Q, k: KV, v: KV, w: ConstTensor[(16, 128), bf16]):
    o = tf.attention(q, k, v, causal=True)
    return tf.reshape(tf.transpose(o, (0, 2, 1, 3)), (T, 128)) @ tf.transpose(w, (1, 0))


def _stores(k: Kernel) -> list[Store]:
    return [s for s in walk_stmts(k.body) if isinstance(s, Store) and s.buffer.role != "local"]


def test_the_attention_reshape_copy_is_folded_into_the_attention_stores() -> None:
    """out[b, h, s, d] goes straight to t1[b * T + s, h * 32 + d]: the reshape kernel and t0 are gone."""
    p = _lower(attend)
    t0, t1 = p.temps[:2]
    attention, copy = p.kernels[:2]
    permute_stores(p)
    assert [k.name for k in p.kernels] == ["k0_attention", "k2_transpose", "k3_matmul"]
    assert t0 not in p.temps and t1 in p.temps
    assert attention.writes == (t1,)
    (store,) = _stores(attention)
    b, h, s, d = (Var(n) for n in ("i0", "i1", "i2", "e15"))
    assert store.buffer is t1 and store.index == (b * Var("T") + s, h * 32 + d)
    assert attention.decisions == [
        "stores t0[x0, x1, x2, x3] at t1[((x0 * T) + x2), ((x1 * 32) + x3)]: kernel k1_reshape was exactly "
        "that permutation copy over all of t0 (compact layouts, a bijection), the only reader of t0, and "
        "nothing between them touches t1; k1_reshape and t0 dropped"
    ]
    assert copy not in p.kernels


def test_the_copy_is_proved_a_bijection_of_compact_layouts() -> None:
    """The load t0[i0 // T, i1 // 32, i0 % T, i1 % 32] is a mixed-radix split of each loop variable."""
    p = _lower(attend)
    copy = permutation_copy(p.kernels[1])
    assert isinstance(copy, PermutationCopy) and (copy.temp, copy.dest) == tuple(p.temps[:2])
    assert copy.strides == (((0, Var("T")), (2, Const(1))), ((1, Const(32)), (3, Const(1))))
    assert permutation_copy(p.kernels[0]) is None and permutation_copy(p.kernels[3]) is None


def test_a_temp_with_another_reader_keeps_the_copy() -> None:
    """t0 is still needed as it is by a second reader: the copy stays, the reason on it."""
    p = _lower(attend)
    t0 = p.temps[0]
    attention, copy, *rest = p.kernels
    p.kernels = (attention, copy, Kernel("kx_read", "element grid", Seq(()), (t0,), ()), *rest)
    permute_stores(p)
    assert copy in p.kernels and copy.decisions == ["kept the copy: t0 is also read by kx_read"]
    assert attention.decisions == [] and [s.buffer for s in _stores(attention)] == [t0]


def test_a_destination_touched_in_between_keeps_the_copy() -> None:
    """A kernel between the writer and the copy writes t1: moving the stores up would reorder them."""
    p = _lower(attend)
    t1 = p.temps[1]
    attention, copy, *rest = p.kernels
    p.kernels = (attention, Kernel("kx_fill", "element grid", Seq(()), (), (t1,)), copy, *rest)
    permute_stores(p)
    assert copy in p.kernels
    assert copy.decisions == ["kept the copy: kx_fill touches t1 between k0_attention and k1_reshape"]


def test_a_copy_of_part_of_the_temp_is_not_a_permutation() -> None:
    """Two of four heads reshaped: the copy reads part of t0, so t0 cannot be stored in its place."""

    @func
    def part(q: Q, k: KV, v: KV):
        o = tf.attention(q, k, v)
        return tf.reshape(tf.transpose(o, (0, 2, 1, 3))[:, :, :2], (T, 64))

    p = _lower(part)
    before = format_program(p)
    permute_stores(p)
    why = "kept the copy: not a permutation of all of t0: the digits of i1 cover 128 values, i1 has 64"
    assert p.kernels[1].decisions == [why]
    assert format_program(p).replace(f"    # {why}\n", "") == before


def test_an_explicitly_placed_copy_keeps_its_realization() -> None:
    """seed 003: explicit execution bindings retain their original realization."""
    p = _lower(attend)
    p.kernels[1].request = ("cta",)
    permute_stores(p)
    assert p.kernels[1].decisions == [
        "kept the copy: k1_reshape has an explicit placement, which keeps its realization"
    ]


def test_programs_without_a_permutation_copy_are_unchanged() -> None:
    """A transpose of a parameter is no temp's copy and a plain attention has none: nothing changes."""

    @func
    def plain(q: Q, k: KV, v: KV, w: ConstTensor[(16, 32), bf16]):
        return tf.attention(q, k, v) @ tf.transpose(w, (1, 0))

    p = _lower(plain)
    before = format_program(p)
    assert format_program(permute_stores(p)) == before
