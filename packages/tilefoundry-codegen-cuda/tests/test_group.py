"""group.py: which loops the lanes of a group share, and the reductions that combine them."""

from __future__ import annotations

from tilefoundry.codegen.cuda.group import (
    GroupCode,
    ReduceChain,
    group_packs,
    reduce_chain,
    shareable_parallel,
    unflatten,
)
from tilefoundry.codegen.cuda.serial import SerialCode
from tilefoundry.ir.dtypes import f32
from tilefoundry.ir.tile.expr import Const, Load, Var, binary
from tilefoundry.ir.tile.stmt import Assign, Buffer, For, Let, Seq, Store

X = Buffer("x", f32, (8, 4096), "input")
OUT = Buffer("out", f32, (8,), "output")
I, R = Var("i"), Var("r")
ACC = Var("acc", f32)


def _sum(reassociable: bool) -> For:
    body = Assign("acc", binary("add", ACC, Load(X, (I, R))))
    return For("r", Const(4096), body, "reduce", reassociable, (("acc", "add"),))


def test_a_sum_is_shared_only_when_it_may_be_reassociated() -> None:
    """The lanes reorder a reduction: only a reassociable one (or options reassociate=True) is shared."""
    assert isinstance(reduce_chain(_sum(True), False), ReduceChain)
    assert reduce_chain(_sum(False), False) == "r: its op does not allow reassociating the reduction"
    assert isinstance(reduce_chain(_sum(False), True), ReduceChain)


def test_a_parallel_loop_updating_an_outer_scalar_is_not_shared() -> None:
    """Iterations that assign a scalar declared outside the loop are not independent: kept uniform."""
    updates = For("j", Const(8), Assign("acc", Const(1.0, f32)))
    local = For("j", Const(8), Seq((Let("v", Const(1.0, f32), mutable=True), Assign("v", Const(2.0, f32)))))
    assert not shareable_parallel(updates) and shareable_parallel(local)


def test_cta_group_reduces_through_shared_workspace() -> None:
    """A CTA-wide group (256 lanes) combines its partials through a shared workspace, in a fixed order."""
    gc = GroupCode(SerialCode({}, "k0"), 256, set(), reassociate=False, vectorize=True)
    body = Seq((Let("acc", Const(0.0, f32), mutable=True), _sum(True), Store(OUT, (I,), ACC)))
    text = "\n".join(gc.stmt(body, 0, {}))
    assert "for (; r_b + 3072 < (int64_t(4096LL)); r_b += 4096) {" in text  # 4 packs a lane in flight
    assert "acc = acc + group_reduce<256>(add_combine{}, acc_p_, ws_float_);" in text
    assert "if (lane_ == 0) {\n  b_out[i] = acc;" in text
    assert gc.workspaces == {"ws_float_": ("float", 4)}


def test_unflatten_is_row_major() -> None:
    """A flat index splits into its axes row-major: the last axis fastest."""
    assert unflatten("f", [("a", "A"), ("b", "B"), ("c", "C")]) == [
        "int64_t f_r = f;",
        "const int64_t c = f_r % (C);",
        "f_r /= (C);",
        "const int64_t b = f_r % (B);",
        "f_r /= (B);",
        "const int64_t a = f_r;",
    ]


def test_group_packs_are_the_plans_the_emitted_body_packs() -> None:
    """group_packs plans what GroupCode packs, in body order: a reduction over x, then a store loop."""
    store = For(
        "j", Const(4096), Store(Buffer("y", f32, (8, 4096), "output"), (I, Var("j")), Load(X, (I, Var("j"))))
    )
    body = Seq((Let("acc", Const(0.0, f32), mutable=True), _sum(True), store))
    plans = group_packs("k0", body, 32, reassociate=False)
    assert [(p.var, p.lanes) for p in plans] == [("r", 4), ("j", 4)]
    assert [[b.name for b in p.buffers] for p in plans] == [["x"], ["x", "y"]]


def _lane_sum(cols: int, loads: int = 1) -> str:
    """A 256-lane group's shared sum over a row of `cols` f32 (of x, or of x * y for 2 loads)."""
    x = Buffer("x", f32, (8, cols), "input")
    value = Load(x, (I, R))
    if loads == 2:
        value = binary("mul", value, Load(Buffer("y", f32, (8, cols), "input"), (I, R)))
    loop = For("r", Const(cols), Assign("acc", binary("add", ACC, value)), "reduce", True, (("acc", "add"),))
    gc = GroupCode(SerialCode({}, "k0"), 256, set(), reassociate=False, vectorize=True)
    return "\n".join(gc.stmt(Seq((Let("acc", Const(0.0, f32), mutable=True), loop)), 0, {}))


def test_a_long_shared_reduction_keeps_four_packs_of_a_lane_in_flight() -> None:
    """5120 f32 over 256 lanes in packs of 4 is 5 packs a lane: 4 loaded before any is folded, folded
    in the one-pack loop's order (the same sums), then the fifth alone."""
    text = _lane_sum(5120)
    main, rest = text.split("for (; r_b < (int64_t(5120LL)); r_b += 1024) {")
    assert "for (; r_b + 3072 < (int64_t(5120LL)); r_b += 4096) {" in main
    loads = [main.index(f"load_pack<4>(b_x + (i) * int64_t(5120LL) + r_b{u}, p0l0_{u});") for u in range(4)]
    folds = [main.index(f"acc_p_ = (acc_p_ + p0l0_{u}[l_]);") for u in range(4)]
    assert loads == sorted(loads) and max(loads) < min(folds) and folds == sorted(folds)
    assert "load_pack<4>(b_x + (i) * int64_t(5120LL) + r_b, p0l0_);" in rest


def test_packs_in_flight_share_four_among_the_loads_and_need_several_packs_a_lane() -> None:
    """Two loads a pack keep two packs each in flight; a lane with one pack keeps the plain loop."""
    assert "r_b1" in _lane_sum(8192, loads=2) and "r_b2" not in _lane_sum(8192, loads=2)
    assert "for (int64_t r_b = lane_ * 4; r_b < int64_t(1024LL); r_b += 1024) {" in _lane_sum(1024)
