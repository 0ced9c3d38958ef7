"""vector.py: when a loop may move 16-byte packs, and the code a pack is (partners.py: the values a
row's threads exchange)."""

from __future__ import annotations

from tilefoundry.codegen.cuda.partners import share_partner_loads
from tilefoundry.codegen.cuda.vector import PackCode, plan_packs, share_folds
from tilefoundry.ir.dtypes import bf16, f32, i64
from tilefoundry.ir.tile.cexpr import CExpr
from tilefoundry.ir.tile.expr import Const, Fold, Load, Select, Var, binary, cast, fold, unary
from tilefoundry.ir.tile.stmt import Assign, Buffer, For, Let, Seq, Store

X = Buffer("x", f32, (8, 64), "input")
Y = Buffer("y", f32, (64,), "input")
OUT = Buffer("out", f32, (8, 64), "output")
Z = Buffer("z", f32, (8, 64), "input")
I, J = Var("i"), Var("j")


def _store(value) -> Seq:
    return Seq((Store(OUT, (I, J), value),))


def test_contiguous_body_packs_four_f32_lanes() -> None:
    """Loads and stores at [..., j] of buffers whose last extent is a multiple of 4 move 4 f32 per pack."""
    plan = plan_packs("j", Const(64), _store(binary("add", Load(X, (I, J)), Load(Y, (J,)))), "g")
    assert plan.lanes == 4 and [a.buffer.name for a in plan.loads] == ["x", "y"]
    assert [a.buffer.name for a in plan.stores] == ["out"]


def test_bf16_packs_eight_lanes_and_mixed_widths_take_the_narrowest() -> None:
    """N = 16 bytes / the smallest itemsize: bf16 read into an f32 output packs 8 lanes (32 bytes of f32)."""
    h = Buffer("h", bf16, (8, 64), "input")
    plan = plan_packs("j", Const(64), _store(cast(Load(h, (I, J)), f32)), "g")
    assert plan.lanes == 8 and {a.buffer.name for a in (*plan.loads, *plan.stores)} == {"h", "out"}


def test_loads_under_a_select_that_splits_a_pack_stay_scalar() -> None:
    """A branch may read out of bounds when it is not taken: where lanes of one pack may take
    different branches (j < 30 with packs of 4, or a data-dependent condition), only the
    unconditional loads are packed."""
    for cond in (binary("lt", J, Const(30)), binary("lt", Load(Y, (J,)), Const(0.0, f32))):
        value = Select(cond, Load(X, (I, J)), Const(0.0, f32))
        plan = plan_packs("j", Const(64), _store(value), "g")
        assert [a.buffer.name for a in plan.loads] == ([] if cond.a == J else ["y"])
        assert [a.buffer.name for a in plan.stores] == ["out"]


def test_rotate_half_loads_one_whole_pack_at_the_index_its_branch_selects() -> None:
    """`j < 32 ? -x[i, j + 32] : x[i, j - 32]` over 64 columns: the condition flips at a multiple
    of 4, so a pack's lanes take one branch, and that branch's shifted read is one whole pack.
    The two branches' reads of x become one load at the index the pack's branch selects, read
    by both branches' lanes (merge_branch_loads)."""
    lo, hi = Load(X, (I, binary("add", J, Const(32)))), Load(X, (I, binary("sub", J, Const(32))))
    body = _store(Select(binary("lt", J, Const(32)), unary("neg", lo), hi))
    plan = plan_packs("j", Const(64), body, "g")
    assert plan.lanes == 4 and len(plan.loads) == 1 and plan.loads[0].guard == ()
    assert plan.loads[0].reads == (lo.index, hi.index)
    cx = CExpr({})
    x = "b_x + (i) * int64_t(64LL)"
    code = PackCode(plan, "j_b")
    assert code.prologue(cx, body) == [
        "float gl0_[4];",
        f"load_pack<4>({x} + ((j_b < int64_t(32LL)) ? (j_b + int64_t(32LL)) : (j_b - int64_t(32LL))), gl0_);",
        "float gs0_[4];",
    ]
    # The lanes test the pack-uniform condition once, at the pack's base.
    assert plan.uniform == {binary("lt", J, Const(32))}
    assert "gs0_[l_] = ((j_b < int64_t(32LL)) ? (-gl0_[l_]) : gl0_[l_]);" in code.lanes(body, cx)[3]
    # A shift off the pack grid keeps the access scalar.
    off = Load(X, (I, binary("add", J, Const(2))))
    odd = _store(Select(binary("lt", J, Const(32)), off, Const(0.0, f32)))
    assert plan_packs("j", Const(64), odd, "g").loads == ()


def test_a_condition_that_flips_inside_a_pack_stays_per_lane() -> None:
    """`j < 30` flips between lanes 1 and 2 of the pack at 28 (f32: 4 lanes): each lane tests it at
    its own j; `j < 32` in the same body is tested at the pack's base."""
    body = _store(
        binary(
            "add",
            Select(binary("lt", J, Const(30)), Load(X, (I, J)), Const(0.0, f32)),
            Select(binary("lt", J, Const(32)), Const(1.0, f32), Const(2.0, f32)),
        )
    )
    plan = plan_packs("j", Const(64), body, "g")
    assert plan.lanes == 4 and plan.uniform == {binary("lt", J, Const(32))}
    lanes = "\n".join(PackCode(plan, "j_b").lanes(body, CExpr({})))
    assert "(j < int64_t(30LL))" in lanes and "(j_b < int64_t(32LL))" in lanes
    assert "j_b < int64_t(30LL)" not in lanes and "(j < int64_t(32LL))" not in lanes


def test_two_buffers_read_in_the_two_branches_of_one_condition_share_a_lane_array() -> None:
    """`i < 4 ? x[i, j] : z[i, j]` (a cache update's region test): two loads, each under its side of
    the condition, filling one lane array that the second names by reference; a third buffer
    under an unrelated condition keeps an array of its own."""
    c, d = binary("lt", I, Const(4)), binary("lt", I, Const(2))
    region = Select(c, Load(X, (I, J)), Load(Z, (I, J)))
    body = _store(binary("add", region, Select(d, Load(Y, (J,)), Const(0.0, f32))))
    plan = plan_packs("j", Const(64), body, "g")
    guards = [(a.buffer.name, a.guard) for a in plan.loads]
    assert guards == [("x", ((c, True),)), ("z", ((c, False),)), ("y", ((d, True),))]
    prologue = PackCode(plan, "j_b").prologue(CExpr({}), body)
    assert prologue[:4] == [
        "float gl0_[4];",
        "if ((i < int64_t(4LL))) load_pack<4>(b_x + (i) * int64_t(64LL) + j_b, gl0_);",
        "float (&gl1_)[4] = gl0_;",
        "if (!((i < int64_t(4LL)))) load_pack<4>(b_z + (i) * int64_t(64LL) + j_b, gl0_);",
    ]
    assert prologue[4:6] == ["float gl2_[4];", "if ((i < int64_t(2LL))) load_pack<4>(b_y + j_b, gl2_);"]


def test_branch_loads_merge_only_across_one_condition_of_one_buffer() -> None:
    """Nested branches merge level by level into one load; reads of two buffers, or under two
    conditions that are not one's two sides, keep loads of their own, each under its guard."""
    a, b = binary("lt", J, Const(16)), binary("lt", J, Const(48))
    at = [Load(X, (I, binary("add", J, Const(k)))) for k in (0, 16, 32)]
    nested = _store(Select(a, at[0], Select(b, at[1], at[2])))
    plan = plan_packs("j", Const(64), nested, "g")
    assert len(plan.loads) == 1 and plan.loads[0].guard == ()
    assert set(plan.loads[0].reads) == {x.index for x in at}
    two = _store(Select(a, Load(X, (I, J)), Load(Z, (I, J))))
    assert [(x.buffer.name, x.guard[0][1]) for x in plan_packs("j", Const(64), two, "g").loads] == [
        ("x", True),
        ("z", False),
    ]
    apart = _store(binary("add", Select(a, at[0], Const(0.0, f32)), Select(b, Const(0.0, f32), at[1])))
    assert [x.guard for x in plan_packs("j", Const(64), apart, "g").loads] == [((a, True),), ((b, False),)]


def test_a_cache_update_reads_the_new_row_or_the_cache_a_pack_at_a_time() -> None:
    """A condition free of j (whether row i is in the updated region) is uniform over every pack:
    both branches' reads are packs, each guarded by its side of the condition."""
    new = Buffer("new", f32, (1, 64), "input")
    pos = Var("pos")
    inside = binary("and", binary("ge", I, pos), binary("lt", I, binary("add", pos, Const(1))))
    body = Seq((Store(OUT, (I, J), Select(inside, Load(new, (binary("sub", I, pos), J)), Load(X, (I, J)))),))
    plan = plan_packs("j", Const(64), body, "g")
    assert [(a.buffer.name, a.guard[0][1]) for a in plan.loads] == [("new", True), ("x", False)]


def test_one_element_read_under_two_branches_stays_scalar() -> None:
    """The same element under different branch sets would need a disjunction: it is read per lane."""
    a, b = binary("lt", I, Const(2)), binary("lt", I, Const(5))
    x = Load(X, (I, J))
    body = _store(binary("add", Select(a, x, Const(0.0, f32)), Select(b, Const(1.0, f32), x)))
    plan = plan_packs("j", Const(64), body, "g")
    assert plan.loads == () and [s.buffer.name for s in plan.stores] == ["out"]


def test_refusals_name_their_reason() -> None:
    """A ragged extent, a store elsewhere than [..., j], or a read of a written buffer: no packs, and why."""
    body = _store(Load(X, (I, J)))
    assert plan_packs("j", Const(62), body, "g") == "its extent is not a static multiple of 4"
    assert plan_packs("j", Var("T"), body, "g") == "its extent is not a static multiple of 4"
    shifted = Seq((Store(OUT, (I, binary("add", J, Const(1))), Load(X, (I, J))),))
    assert plan_packs("j", Const(64), shifted, "g") == "a store is not at [..., j] of a buffer in memory"
    reread = _store(Load(OUT, (I, J)))
    assert plan_packs("j", Const(64), reread, "g") == "it reads a buffer it writes"
    looped = Seq((For("k", Const(4), Store(OUT, (I, J), Const(0.0, f32))),))
    assert plan_packs("j", Const(64), looped, "g") == (
        "its body holds more than value definitions, stores and carry updates"
    )


def test_a_gathered_row_index_is_hoisted_before_the_pack() -> None:
    """A definition that does not move with j (an embedding's row id) is computed once, before the loads."""
    ids = Buffer("ids", i64, (8,), "input")
    table = Buffer("table", f32, (100, 64), "input")
    body = Seq((Let("row", Load(ids, (I,))), Store(OUT, (I, J), Load(table, (Var("row"), J)))))
    plan = plan_packs("j", Const(64), body, "g")
    assert plan.hoisted == {"row"} and [a.buffer.name for a in plan.loads] == ["table"]
    code = PackCode(plan, "j_b")
    cx = CExpr({})
    lines = code.prologue(cx, body)
    assert lines[0] == "const int64_t row = b_ids[i];"
    assert lines[2] == "load_pack<4>(b_table + (row) * int64_t(64LL) + j_b, gl0_);"
    assert not any("row =" in x for x in code.lanes(body, cx))


def test_pack_code_is_loads_unrolled_lanes_and_stores() -> None:
    """One pack: lane arrays loaded whole, N unrolled lanes computing from them, the stores written whole."""
    body = _store(unary("exp", Load(X, (I, J))))
    plan = plan_packs("j", Const(64), body, "g")
    code = PackCode(plan, "j_b")
    cx = CExpr({"T": "d_T"})
    assert code.prologue(cx, body) == [
        "float gl0_[4];",
        "load_pack<4>(b_x + (i) * int64_t(64LL) + j_b, gl0_);",
        "float gs0_[4];",
    ]
    assert code.lanes(body, cx) == [
        "#pragma unroll",
        "for (int l_ = 0; l_ < 4; ++l_) {",
        "  const int64_t j = j_b + l_;",
        "  gs0_[l_] = std::exp(gl0_[l_]);",
        "}",
    ]
    assert code.epilogue(cx) == ["store_pack<4>(b_out + (i) * int64_t(64LL) + j_b, gs0_);"]


def test_reduction_body_packs_with_its_carry() -> None:
    """A distributed reduction's fold may pack: the partial carry is updated once per lane."""
    body = Seq((Assign("acc", binary("add", Var("acc", f32), Load(X, (I, J)))),))
    plan = plan_packs("j", Const(64), body, "p", frozenset({"acc"}))
    assert plan.stores == () and [a.buffer.name for a in plan.loads] == ["x"]
    lines = PackCode(plan, "j_b").lanes(body, CExpr({"acc": "acc_p_"}))
    assert lines[3] == "  acc_p_ = (acc_p_ + pl0_[l_]);"


def _sum_of_squares(row: Buffer, at) -> Fold:
    """A row's sum of squares as a reader folds it: `at(r)` is the row index of element r."""
    square = lambda r: binary("mul", Load(row, at(r)), Load(row, at(r)))  # noqa: E731
    return fold("add", Const(64), square, Const(0.0, f32))


def test_an_offset_that_is_a_multiple_of_the_pack_still_moves_whole_packs() -> None:
    """`x[i, h * 64 + j]` (a head's columns of a projection) packs; `h * 3 + j` does not."""
    wide = Buffer("wide", f32, (8, 256), "input")
    h = Var("h")
    aligned = _store(Load(wide, (I, binary("add", binary("mul", h, Const(64)), J))))
    assert [a.buffer.name for a in plan_packs("j", Const(64), aligned, "g").loads] == ["wide"]
    ragged = _store(Load(wide, (I, binary("add", binary("mul", h, Const(3)), J))))
    assert plan_packs("j", Const(64), ragged, "g").loads == ()


def test_a_row_fold_is_folded_once_per_pack_in_packs_of_its_own() -> None:
    """A norm recomputed by rotate-half reads its row's Fold three times (j, j + 32, j - 32): the
    pack folds it once, before its lanes, loading the row 4 f32 at a time, and the lanes read the
    scalar."""
    s = _sum_of_squares(X, lambda r: (I, r))
    norm = lambda j: binary("mul", Load(X, (I, j)), unary("rsqrt", s))  # noqa: E731
    lo, hi = norm(binary("add", J, Const(32))), norm(binary("sub", J, Const(32)))
    body = _store(binary("add", norm(J), Select(binary("lt", J, Const(32)), unary("neg", lo), hi)))
    plan = plan_packs("j", Const(64), body, "g")
    (f,) = plan.folds
    assert (f.guards, f.lanes, [a.buffer.name for a in f.loads]) == ((), 4, ["x"])
    code = PackCode(plan, "j_b")
    cx = CExpr({})
    prologue = code.prologue(cx, body)
    start = prologue.index("float gf0_ = 0.0f;")  # after the pack's own loads, which are in flight
    assert all("gl" not in line for line in prologue[start:])
    assert prologue[start : start + 7] == [
        "float gf0_ = 0.0f;",
        "{",
        "  #pragma unroll",
        "  for (int64_t f0_b = 0; f0_b < int64_t(64LL); f0_b += 4) {",
        "    float gf0_l0_[4];",
        "    load_pack<4>(b_x + (i) * int64_t(64LL) + f0_b, gf0_l0_);",
        "    #pragma unroll",
    ]
    lanes = "\n".join(code.lanes(body, cx))
    assert "rsqrt(gf0_)" in lanes and "f0_" not in lanes.replace("gf0_", "")


def test_a_fold_under_a_region_branch_is_folded_only_when_the_branch_is_taken() -> None:
    """A cache update's new row is a norm of row i - pos: outside the region that row may not exist,
    so the pack folds only when i is inside (one guard: the set implied by its other reads)."""
    new = Buffer("new", f32, (1, 64), "input")
    pos = Var("pos")
    row = binary("sub", I, pos)
    inside = binary("and", binary("ge", I, pos), binary("lt", I, binary("add", pos, Const(1))))
    s = _sum_of_squares(new, lambda r: (row, r))
    lo = binary("mul", Load(new, (row, binary("add", J, Const(32)))), s)
    rotated = Select(binary("lt", J, Const(32)), lo, binary("mul", Load(new, (row, J)), s))
    body = Seq((Store(OUT, (I, J), Select(inside, binary("add", rotated, s), Load(X, (I, J)))),))
    plan = plan_packs("j", Const(64), body, "g")
    (f,) = plan.folds
    assert [[c for c, _ in g] for g in f.guards] == [[inside]]
    prologue = PackCode(plan, "j_b").prologue(CExpr({}), body)
    start = prologue.index("float gf0_ = 0.0f;")
    assert prologue[start + 1] == "if ((((i >= pos) && (i < (pos + int64_t(1LL)))))) {"


def test_a_fold_that_moves_with_the_pack_axis_or_reads_through_a_gather_is_handled_apart() -> None:
    """A Fold over column j's own data cannot be shared by a pack's lanes (no packs); one whose row
    index is gathered folds in a scalar loop."""
    moving = fold("add", Const(8), lambda r: Load(X, (r, J)), Const(0.0, f32))
    assert plan_packs("j", Const(64), _store(moving), "g") == "a fold moves with j"
    ids = Buffer("ids", i64, (64,), "input")
    gathered = fold("add", Const(64), lambda r: Load(X, (I, Load(ids, (r,)))), Const(0.0, f32))
    plan = plan_packs("j", Const(64), _store(binary("mul", Load(X, (I, J)), gathered)), "g")
    (f,) = plan.folds
    assert f.lanes == 1 and f.loads == ()
    prologue = PackCode(plan, "j_b").prologue(CExpr({}), _store(gathered))
    start = prologue.index("float gf0_ = 0.0f;")
    loop = "  for (int64_t f0_ = 0; f0_ < int64_t(64LL); ++f0_) gf0_ = (gf0_ + "
    assert prologue[start + 2].startswith(loop)


def test_a_row_fold_spanning_the_loop_is_shared_by_the_threads_of_the_row() -> None:
    """In a flat grid the 16 packs of a 64-f32 row run on 16 consecutive threads: each folds the
    pack it moves and the row's threads combine their partials by shuffles. A fold under a branch
    that splits the row, or one that spans another extent, keeps the whole-row loop."""
    s = _sum_of_squares(X, lambda r: (I, r))
    body = _store(binary("mul", Load(X, (I, J)), unary("rsqrt", s)))
    plan = share_folds(plan_packs("j", Const(64), body, "g"), Const(64))
    (f,) = plan.folds
    assert f.across == 16
    prologue = PackCode(plan, "j_b").prologue(CExpr({}), body)
    start = prologue.index("float gf0_ = 0.0f;")
    own = ["  float gf0_l0_[4];", "  load_pack<4>(b_x + (i) * int64_t(64LL) + j_b, gf0_l0_);"]
    assert prologue[start + 2 : start + 4] == own
    assert prologue[-2] == "gf0_ = lane_group_reduce<16>(add_combine{}, gf0_);"
    assert not any("f0_b" in line for line in prologue)
    split = _store(Select(binary("lt", J, Const(32)), binary("mul", Load(X, (I, J)), s), Const(0.0, f32)))
    assert share_folds(plan_packs("j", Const(64), split, "g"), Const(64)).folds[0].across == 1
    short = fold("add", Const(32), lambda r: Load(X, (I, r)), Const(0.0, f32))
    other = plan_packs("j", Const(64), _store(binary("mul", Load(X, (I, J)), short)), "g")
    assert share_folds(other, Const(64)).folds[0].across == 1


def test_definitions_reading_a_fold_follow_the_pack_loads_and_the_fold() -> None:
    """A gathered row id is defined before the loads that need it; the row's inverse RMS, which
    reads the fold, after the fold, itself after the pack's loads."""
    ids = Buffer("ids", i64, (8,), "input")
    table = Buffer("table", f32, (100, 64), "input")
    s = _sum_of_squares(X, lambda r: (I, r))
    body = Seq(
        (
            Let("inv", unary("rsqrt", s)),
            Let("row", Load(ids, (I,))),
            Store(OUT, (I, J), binary("mul", Load(table, (Var("row"), J)), Var("inv", f32))),
        )
    )
    plan = plan_packs("j", Const(64), body, "g")
    lines = PackCode(plan, "j_b").prologue(CExpr({}), body)
    keys = ("const int64_t row", "load_pack<4>(b_table", "float gf0_ =", "const float inv")
    at = {key: next(i for i, x in enumerate(lines) if x.startswith(key)) for key in keys}
    assert list(at.values()) == sorted(at.values())
    assert lines[at["const float inv"]] == "const float inv = rsqrt(gf0_);"


def _shared(body: Seq):
    """The flat grid's plan of a 64-column row: folds and partner packs shared by its threads."""
    plan = share_folds(plan_packs("j", Const(64), body, "g"), Const(64))
    return share_partner_loads(plan, Const(64), body, "g")


def _rotated(value) -> Select:
    """Rotate-half over 64 columns: `j < 32 ? -value(j + 32) : value(j - 32)`."""
    return Select(
        binary("lt", J, Const(32)),
        unary("neg", value(binary("add", J, Const(32)))),
        value(binary("sub", J, Const(32))),
    )


def test_the_rotated_half_is_the_pack_the_partner_thread_loads_as_its_own() -> None:
    """A 64-f32 row is 16 packs on 16 consecutive threads; pack p's rotated half is pack p ^ 8,
    which thread p ^ 8 loads as its own. Read bare, it is still loaded (a shuffle would follow
    the partner's load on the pack's path and save no register)."""
    body = _store(binary("add", Load(X, (I, J)), _rotated(lambda c: Load(X, (I, c)))))
    plan = _shared(body)
    own, rotated = plan.loads
    assert own.partner is None and rotated.partner == (own.name, 16, 8) and plan.exchanges == ()
    prologue = PackCode(plan, "j_b").prologue(CExpr({}), body)
    assert sum("load_pack<4>(b_x" in line for line in prologue) == 2
    assert not any("lane_group_exchange" in line for line in prologue)
    # Not on the xor pattern (a shift by a quarter row), or across a non-power-of-two row: loaded.
    quarter = _store(
        Select(
            binary("lt", J, Const(48)),
            Load(X, (I, binary("add", J, Const(16)))),
            Load(X, (I, binary("sub", J, Const(48)))),
        )
    )
    both = _store(binary("add", Load(X, (I, J)), quarter.body[0].value))
    off = share_partner_loads(plan_packs("j", Const(64), both, "g"), Const(64), both, "g")
    assert len(off.loads) == 2 and all(a.partner is None for a in off.loads)
    row = Buffer("r", f32, (8, 48), "input")
    half = Select(
        binary("lt", J, Const(24)),
        Load(row, (I, binary("add", J, Const(24)))),
        Load(row, (I, binary("sub", J, Const(24)))),
    )
    out = Buffer("o", f32, (8, 48), "output")
    twelve = Seq((Store(out, (I, J), binary("add", Load(row, (I, J)), half)),))
    plan = plan_packs("j", Const(48), twelve, "g")
    assert len(plan.loads) == 2  # 12 packs a row: no power-of-two group of threads to shuffle in
    assert all(a.partner is None for a in share_partner_loads(plan, Const(48), twelve, "g").loads)

def test_a_value_over_the_partner_pack_is_computed_by_the_partner_and_exchanged() -> None:
    """`x * s * y` of the rotated half (s uniform over the row) is the partner thread's own
    `x * s * y`: computed once per pack into a lane array, exchanged whole (one shuffle a word),
    and read by both branches; neither the partner's x nor its y is then held."""
    scale = Buffer("scale", f32, (8,), "input")
    s = Var("s", f32)

    def normed(c):
        return binary("mul", binary("mul", Load(X, (I, c)), s), Load(Y, (c,)))

    body = Seq((Let("s", Load(scale, (I,))), Store(OUT, (I, J), binary("add", normed(J), _rotated(normed)))))
    plan = _shared(body)
    (x,) = plan.exchanges
    assert x.own == normed(J) and (x.across, x.offset) == (16, 8) and len(x.partner) == 2
    code = PackCode(plan, "j_b")
    prologue = code.prologue(CExpr({}), body)
    assert "lane_group_exchange<16, 8>(ge0_, ge0x_);" in prologue
    assert sum("load_pack<4>(" in line for line in prologue) == 2  # this thread's x and y only
    assert "for (int l_ = 0; l_ < 4; ++l_) ge0_[l_] = ((gl0_[l_] * s) * gl1_[l_]);" in prologue
    lanes = "\n".join(code.lanes(body, CExpr({})))
    assert "(ge0_[l_] + ((j_b < int64_t(32LL)) ? (-ge0x_[l_]) : ge0x_[l_]))" in lanes
