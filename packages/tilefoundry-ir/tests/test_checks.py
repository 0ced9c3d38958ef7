"""plan/checks.py: index checks over unwritten inputs merge into one kernel, run first."""

from __future__ import annotations

from tilefoundry.dsl import ConstTensor, DimVar, Tensor, f32, func, i64, tf
from tilefoundry.ir.dtypes import boolean
from tilefoundry.ir.lower import inline_calls, lower_to_tile
from tilefoundry.ir.plan.checks import CHECKS_KERNEL, check_units, merge_checks
from tilefoundry.ir.plan.partition import partition_kernels
from tilefoundry.ir.tile.expr import Bin, Const, Var
from tilefoundry.ir.tile.printer import format_stmt
from tilefoundry.ir.tile.stmt import Check, For, Let, Program, Seq, walk_stmts
from tilefoundry.ir.tile.values import hoist_shared_values

T = DimVar("T", 1, 33)
IDS = "embedding: ids holds a value outside [0, V) of the table: "
POSITIONS = "rope: positions holds a value outside [0, P) of the cos table: "
POS = "cache_update: pos + new's extent does not fit the cache; pos = "


def _lower(fn) -> Program:
    return hoist_shared_values(lower_to_tile(partition_kernels(inline_calls(fn))))


def _messages(p: Program) -> list[str]:
    return [s.message for k in p.kernels for s in walk_stmts(k.body) if isinstance(s, Check)]


@func
def decode(
    table: ConstTensor[(50, 16), f32],
    ids: Tensor[(T,), i64],
    cos: ConstTensor[(32, 16), f32],
    sin: ConstTensor[(32, 16), f32],
    positions: Tensor[(T,), i64],
    cache: Tensor[(1, 1, 64, 16), f32],
    pos: Tensor[(), i64],
):
    x = tf.reshape(tf.softmax(tf.embedding(table, ids), -1), (1, 1, T, 16))
    q = tf.rope(x, cos, sin, positions)
    k = tf.rope(tf.softmax(x, -1), cos, sin, positions)
    return tf.softmax(q, -1), tf.cache_update(cache, pos, k)


def test_parameter_checks_merge_into_one_kernel_placed_first() -> None:
    """Three check kernels over ids, positions and pos become one `checks` kernel before every other."""
    before = _lower(decode)
    assert [k.name for k in before.kernels if k.form == "index check"] == ["k0_check", "k2_check", "k3_check"]
    after = merge_checks(before)
    first, *rest = after.kernels
    assert (first.name, first.form) == (CHECKS_KERNEL, "index check")
    assert [k.form for k in rest].count("index check") == 0
    assert [k.name for k in rest] == [k.name for k in before.kernels if k.form != "index check"]
    assert [b.name for b in first.reads] == ["ids", "pos", "positions"] and first.writes == ()
    assert first.decisions[0] == (
        "merged the index checks of k0_check, k2_check, k3_check into one kernel run first (3 checks, "
        "1 exact duplicate dropped): they read only the inputs ids, pos, positions, which no kernel writes, "
        "so every value they validate is available at entry"
    )
    origins = [o for k in before.kernels if k.form == "index check" for o in k.origin]
    assert list(first.origin) == list(dict.fromkeys(origins))


def test_exact_duplicate_checks_are_dropped_once_renamed() -> None:
    """rope and cache_update both check positions: kept once, every name in the merged kernel unique."""
    after = merge_checks(_lower(decode))
    assert _messages(after) == [IDS, POSITIONS, POS]
    body = after.kernels[0].body
    names = [s.var if isinstance(s, For) else s.name for s in walk_stmts(body) if isinstance(s, (For, Let))]
    assert names == ["c0", "v0", "c1", "v1", "v2"]
    assert format_stmt(body)[-1] == f"check ((v2 >= 0) && (v2 < (65 + (-1 * T)))) else {POS!r} v2"


def test_checks_that_differ_in_their_bound_are_both_kept() -> None:
    """One message, two tables: ids < 50 and ids < 40 are different checks, not duplicates."""

    @func
    def two_tables(a: ConstTensor[(50, 16), f32], b: ConstTensor[(40, 16), f32], ids: Tensor[(T,), i64]):
        return tf.softmax(tf.embedding(a, ids), -1) + tf.softmax(tf.embedding(b, ids), -1)

    after = merge_checks(_lower(two_tables))
    text = "\n".join(format_stmt(after.kernels[0].body))
    assert _messages(after) == [IDS, IDS]
    assert "(v0 < 50)" in text and "(v1 < 40)" in text


def test_a_check_reading_a_computed_index_stays_in_place() -> None:
    """argmax's ids are a temporary: its check stays before the gather; the parameter check goes first."""

    @func
    def picked(table: ConstTensor[(50, 16), f32], scores: Tensor[(T, 50), f32], ids: Tensor[(T,), i64]):
        rows = tf.embedding(table, tf.argmax(scores, -1))
        return tf.softmax(rows, -1) + tf.softmax(tf.embedding(table, ids), -1)

    before = _lower(picked)
    after = merge_checks(before)
    names = [k.name for k in after.kernels]
    assert names == [CHECKS_KERNEL, "k0_argmax", "k1_check", "k1_softmax", "k2_softmax", "k3_add"]
    assert [b.name for b in after.kernels[2].reads] == ["t0"]
    assert after.kernels[2] is before.kernels[1]
    assert after.kernels[0].decisions[0].endswith("; kept in place, reading a computed index: k1_check")


def test_a_program_without_checks_is_unchanged() -> None:
    """No index check: the very same program comes back."""

    @func
    def plain(x: Tensor[(T, 16), f32]):
        return tf.softmax(x, -1)

    p = _lower(plain)
    assert merge_checks(p) is p


def test_a_scalar_two_checks_read_stays_with_both() -> None:
    """A Let two rank-0 checks share is one unit with both checks, so none reads an undeclared name."""
    v0, v1 = Var("v0"), Var("v1")
    ok0, ok1 = Bin("ge", v0, Const(0), boolean), Bin("ge", v1, Const(0), boolean)
    loop = For("c0", Const(4), Check(ok0, "a", v0), kind="serial")
    shared = Seq((Let("v0", Const(3)), Check(ok0, "a", v0), loop, Check(ok0, "b", v0)))
    assert [len(u.body) for u in check_units(shared)] == [4]  # type: ignore[attr-defined]
    alone = Seq((Let("v0", Const(3)), Check(ok0, "a", v0), Let("v1", Const(5)), Check(ok1, "b", v1)))
    assert [len(u.body) for u in check_units(alone)] == [2, 2]  # type: ignore[attr-defined]
