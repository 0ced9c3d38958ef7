"""plan/in_place.py: which cache updates may run in place, why not, and the region-only nest."""

from __future__ import annotations

from tilefoundry.dsl import DimVar, Tensor, f32, func, i64, tf
from tilefoundry.ir.lower import inline_calls, lower_to_tile
from tilefoundry.ir.plan.in_place import axis_loop, region_nest, update_in_place
from tilefoundry.ir.plan.partition import partition_kernels
from tilefoundry.ir.tile.expr import Load
from tilefoundry.ir.tile.printer import format_stmt
from tilefoundry.ir.tile.stmt import Program
from tilefoundry.ir.tile.values import hoist_shared_values

T = DimVar("T", 1, 33)
CACHE = Tensor[(1, 2, 32, 16), f32]
NEW = Tensor[(1, 2, T, 16), f32]
POS = Tensor[(), i64]


def _lower(fn) -> Program:
    return hoist_shared_values(lower_to_tile(partition_kernels(inline_calls(fn))))


@func
def append(k: CACHE, v: CACHE, pos: POS, new: NEW):
    return tf.cache_update(k, pos, tf.exp(new)), tf.cache_update(v, pos, new)


@func
def reread(k: CACHE, pos: POS, new: NEW):
    return tf.cache_update(k, pos, new), tf.sum(k, -1)


@func
def fused(k: CACHE, pos: POS, new: NEW):
    return tf.cache_update(k, pos, new), k * 2.0


@func
def attend(k: CACHE, pos: POS, new: NEW):
    return tf.attention(new, k, k, causal=False), tf.cache_update(k, pos, new)


@func
def twice(k: CACHE, pos: POS, new: NEW):
    return tf.cache_update(k, pos, new), tf.cache_update(k, pos, new * 2.0)


def test_lowering_names_the_cache_update_region() -> None:
    """The element grid storing both updates records operand, axis, start and length of each."""
    p = _lower(append)
    k, v, pos = p.inputs[:3]
    (grid,) = [q for q in p.kernels if q.updates]
    (u0, u1) = grid.updates
    assert (u0.output, u0.source, u1.output, u1.source) == (p.outputs[0], k, p.outputs[1], v)
    assert (u0.axis, u0.start, u0.length) == (2, Load(pos, ()), T)


def test_two_fused_cache_updates_run_in_place() -> None:
    """Both caches are outputs nothing else touches: updates kept, Program.updates maps out -> in."""
    p = update_in_place(_lower(append))
    (grid,) = [q for q in p.kernels if q.updates]
    assert len(grid.updates) == 2 and p.updates == {0: 0, 1: 1}
    assert grid.decisions[-1] == (
        "updates in place: out0 is k and out1 is v except at [pos[], pos[] + T) along axis 2, which "
        "this kernel writes; each output may be passed as its very input (EntryABI.updates), and when "
        "every one is, only that region runs (an index outside the extent skipped)"
    )


def test_a_cache_read_elsewhere_keeps_the_full_copy_and_says_why() -> None:
    """k is also read by the sum's kernel: no update, the reason in the decisions."""
    p = update_in_place(_lower(reread))
    (grid,) = [q for q in p.kernels if q.name.endswith("cache_update")]
    assert grid.updates == () and p.updates == {}
    assert grid.decisions[-1] == "keeps full copies (out0 of k): k1_reduce also reads k"


def test_a_kernel_storing_more_than_updates_keeps_the_full_copy() -> None:
    """k * 2.0 fuses into the update's grid: a region-only run would skip most of its rows."""
    p = update_in_place(_lower(fused))
    (grid,) = [q for q in p.kernels if q.form == "element grid"]
    assert p.updates == {}
    assert grid.decisions[-1] == (
        f"keeps full copies (out0 of k): {grid.name} also stores out1, which is not an update of an input"
    )


def test_a_cache_an_earlier_kernel_reads_keeps_the_full_copy() -> None:
    """Attention over the old cache reads k before the update would overwrite it."""
    p = update_in_place(_lower(attend))
    (grid,) = [q for q in p.kernels if q.name.endswith("cache_update")]
    assert p.updates == {} and grid.decisions[-1].endswith("k0_attention also reads k")


def test_one_input_updated_twice_keeps_both_copies() -> None:
    """Two outputs cannot both be k itself."""
    p = update_in_place(_lower(twice))
    assert p.updates == {}
    (grid,) = [q for q in p.kernels if q.name.endswith("cache_update")]
    why = "keeps full copies (out0 of k, out1 of k): k takes part in more than one update"
    assert grid.decisions[-1] == why


def test_region_nest_counts_the_region_and_skips_indices_outside_the_extent() -> None:
    """The axis loop runs T counts from pos; the body sits under 0 <= i2 < 32."""
    p = update_in_place(_lower(append))
    (grid,) = [q for q in p.kernels if q.updates]
    assert axis_loop(grid).var == "i2"
    text = format_stmt(region_nest(grid, frozenset({"i2_r"})))
    assert text[2:6] == [
        "    for i2_r_ in 0..T parallel:",
        "      let i2: i64 = (pos[] + i2_r_)",
        "      if ((i2 >= 0) && (i2 < 32)):",
        "        for i3 in 0..16 parallel:",
    ]
