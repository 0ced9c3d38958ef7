"""row_registers.py: a pack that several walks of one instance read is loaded once and held."""

from __future__ import annotations

import re

from tilefoundry.codegen.cuda.group import GroupCode
from tilefoundry.codegen.cuda.serial import SerialCode
from tilefoundry.ir.dtypes import f32
from tilefoundry.ir.tile.expr import Const, Expr, Load, Un, Var, binary
from tilefoundry.ir.tile.stmt import Assign, Buffer, For, If, Let, Seq, Stmt, Store

I, ACC = Var("i"), Var("acc", f32)


def _rows(cols: int) -> tuple[Buffer, Buffer]:
    return Buffer("x", f32, (8, cols), "input"), Buffer("y", f32, (8, cols), "output")


def _walks(x: Buffer, y: Buffer, branch: bool = False, exp: bool = True) -> Stmt:
    """acc = sum of exp(x[i, :]), then y[i, j] = exp(x[i, j]) * acc: two walks of row i of x
    applying one transcendental (or, `exp` False, only reading x)."""
    cols = Const(x.shape[1])

    def at(j: str) -> Expr:
        return Un("exp", Load(x, (I, Var(j)))) if exp else Load(x, (I, Var(j)))

    total = For("r", cols, Assign("acc", binary("add", ACC, at("r"))), "reduce", True, (("acc", "add"),))
    scale = For("j", cols, Store(y, (I, Var("j")), binary("mul", at("j"), ACC)))
    second: Stmt = If(binary("gt", ACC, Const(0.0, f32)), scale) if branch else scale
    return Seq((Let("acc", Const(0.0, f32), mutable=True), total, second))


def _emit(body: Stmt, group: int = 256) -> str:
    return "\n".join(GroupCode(SerialCode({}, "k0"), group, set(), False, True).instance(body, 0, {}))


def _x_loads(text: str) -> set[str]:
    """The pack bases x is loaded at: each walk that loads the row itself names its own."""
    return set(re.findall(r"load_pack<4>\(b_x \+ \(i\) \* int64_t\(\d+LL\) \+ (\w+),", text))


# The sum's walk takes 4 packs a lane in flight, then the rest one at a time; the scale's walk one.
EACH_WALK_LOADS = {"r_b0", "r_b1", "r_b2", "r_b3", "r_b", "j_b"}


def test_a_row_two_walks_read_is_loaded_once_and_held() -> None:
    """4096 f32 over 256 lanes in packs of 4: 4 packs a lane (64 B), loaded by the sum, read by the scale."""
    text = _emit(_walks(*_rows(4096)))
    assert text.startswith("float h0_[4][4];  // held in registers")
    assert text.count("load_pack<4>(b_x") == 1
    assert "load_pack<4>(b_x + (i) * int64_t(4096LL) + r_b, h0_[r_i]);" in text
    assert "for (int j_i = 0; j_i < 4; ++j_i) {\n  const int64_t j_b = lane_ * 4 + j_i * 1024;" in text
    assert "(std::exp(h0_[j_i][l_]) * acc)" in text


def test_walks_only_reading_a_row_load_it_each() -> None:
    """Without a transcendental to compute once, holding saves only L1 re-reads: not held."""
    text = _emit(_walks(*_rows(4096), exp=False))
    assert "h0_" not in text and _x_loads(text) == EACH_WALK_LOADS


def test_a_row_not_a_multiple_of_the_walk_guards_its_last_packs() -> None:
    """1536 columns take two walks' worth of 1024: the second pack of a lane exists only below 1536."""
    text = _emit(_walks(*_rows(1536)))
    assert "float h0_[2][4];" in text
    assert text.count("if (j_b < 1536) {") == 1 and text.count("if (r_b < 1536) {") == 1


def test_a_row_the_body_writes_is_read_by_each_walk() -> None:
    """A store into x (after the walks) may change what a later instance's walk reads: nothing held."""
    x, y = _rows(4096)
    body = Seq((_walks(x, y), Store(x, (I, Const(0)), Const(1.0, f32))))
    text = _emit(body)
    assert "h0_" not in text and _x_loads(text) == EACH_WALK_LOADS


def test_a_walk_under_a_branch_loads_its_own_packs() -> None:
    """Only walks at the instance's top level share packs: one under an If loads again."""
    text = _emit(_walks(*_rows(4096), branch=True))
    assert "h0_" not in text and _x_loads(text) == EACH_WALK_LOADS


def test_a_row_over_the_register_budget_is_loaded_by_each_walk() -> None:
    """8192 f32 would hold 8 packs (128 B) a lane: over ROW_REGISTER_BYTES, the walks load it each."""
    text = _emit(_walks(*_rows(8192)))
    assert "h0_" not in text and _x_loads(text) == EACH_WALK_LOADS
