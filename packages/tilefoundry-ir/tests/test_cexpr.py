"""cexpr.py: the C++ text of TileIR expressions, shared by the cpu and cuda targets."""

from __future__ import annotations

import math
from fractions import Fraction

import pytest
import torch

from tilefoundry.ir.dtypes import bf16, f16, f32, f64, i32
from tilefoundry.ir.dtypes import boolean as b1
from tilefoundry.ir.tile.cexpr import CExpr
from tilefoundry.ir.tile.expr import Bin, Cast, Const, Load, Un, Var
from tilefoundry.ir.tile.stmt import Buffer

cx = CExpr({})


def _rounded(op: str, a, b, wide=f32, to=None):
    """`op` of a and b computed in `wide` and cast to `to` (the operands' dtype by default)."""
    to = to or a.dtype
    return Cast(Bin(op, Cast(a, wide), Cast(b, wide), wide), to)


@pytest.mark.parametrize("op", ["add", "sub", "mul"])
@pytest.mark.parametrize("half", [bf16, f16])
@pytest.mark.parametrize("wide", [f32, f64])
def test_a_16_bit_add_sub_or_mul_rounded_back_prints_as_the_16_bit_operation(op, half, wide) -> None:
    text = cx(_rounded(op, Var("a", half), Var("b", half), wide))
    assert text == f"{op}_rn(a, b)"


def test_rounded_operations_nest_and_keep_their_16_bit_operands() -> None:
    """gelu_chain's tail: (g * y) - x, each rounded, where g is itself a rounded f32 value."""
    g = Cast(Un("tanh", Var("v", f32), f32), bf16)
    text = cx(_rounded("sub", _rounded("mul", g, Var("y", bf16)), Var("x", bf16)))
    assert text == "sub_rn(mul_rn(cast<bf16>(std::tanh(v)), y), x)"


@pytest.mark.parametrize(
    "expr",
    [
        _rounded("div", Var("a", bf16), Var("b", bf16)),  # a quotient is not exact in f32
        _rounded("mul", Var("a", bf16), Var("b", f16), to=bf16),  # operands of two dtypes
        _rounded("add", Var("a", f16), Var("b", f16), to=bf16),  # rounded to another 16-bit type
        _rounded("mul", Var("a", bf16), Var("b", bf16), to=f32),  # not rounded to 16 bits
        _rounded("add", Var("a", i32), Var("b", i32), to=f16),  # integers widened to f32
        Cast(Bin("mul", Cast(Var("a", bf16), f32), Const(1.702, f32), f32), bf16),  # an f32 constant
        Cast(Bin("max", Cast(Var("a", bf16), f32), Cast(Var("b", bf16), f32), f32), bf16),
    ],
)
def test_other_conversions_stay_casts(expr) -> None:
    assert cx(expr).startswith("cast<"), cx(expr)


# The form's premise, checked exactly: for two 16-bit floats, rounding the f32 sum, difference or
# product to 16 bits gives the correctly rounded 16-bit result (what a 16-bit instruction computes).
FORMATS = {torch.bfloat16: (8, -126, 127), torch.float16: (11, -14, 15)}  # significand bits, exponents


def _round_nearest_even(x: Fraction, bits: int, emin: int, emax: int) -> float:
    """`x` correctly rounded to a binary format (subnormals and overflow to infinity included)."""
    if x == 0:
        return 0.0
    mag = abs(x)
    e = mag.numerator.bit_length() - mag.denominator.bit_length()  # 2^e <= mag < 2^(e+2)
    if Fraction(2) ** e > mag:
        e -= 1
    ulp = Fraction(2) ** (max(e, emin) - (bits - 1))
    q, r = divmod(mag, ulp)
    if r * 2 > ulp or (r * 2 == ulp and q % 2 == 1):
        q += 1
    out = q * ulp
    if out >= Fraction(2) ** (emax + 1):
        return math.copysign(math.inf, x)
    return math.copysign(float(out), x)


@pytest.mark.parametrize("dtype", list(FORMATS), ids=["bf16", "f16"])
def test_rounding_the_f32_result_is_the_correctly_rounded_16_bit_result(dtype) -> None:
    g = torch.Generator().manual_seed(11)
    bits = torch.randint(-(1 << 15), 1 << 15, (2, 3000), generator=g, dtype=torch.int16)
    a, b = bits.view(dtype)
    keep = a.isfinite() & b.isfinite()
    a, b = a[keep], b[keep]
    ops = {
        "add": (torch.add, Fraction.__add__),
        "sub": (torch.sub, Fraction.__sub__),
        "mul": (torch.mul, Fraction.__mul__),
    }
    for name, (wide, exact) in ops.items():
        via_f32 = wide(a.float(), b.float()).to(dtype).tolist()
        for x, y, got in zip(a.tolist(), b.tolist(), via_f32, strict=True):
            want = _round_nearest_even(exact(Fraction(x), Fraction(y)), *FORMATS[dtype])
            assert got == want, f"{name}({x!r}, {y!r}): via f32 {got!r}, correctly rounded {want!r}"


def test_and_or_of_register_tests_are_evaluated_whole() -> None:
    """An argmax scan's `v > best || (v != v && best == best)`: no short circuit, so no branch
    (past which ptxas sinks the loop's loads to their uses)."""
    v, best = Var("v", f32), Var("best", f32)
    nan_first = Bin("and", Bin("ne", v, v, b1), Bin("eq", best, best, b1), b1)
    assert (
        cx(Bin("or", Bin("gt", v, best, b1), nan_first, b1)) == "((v > best) | ((v != v) & (best == best)))"
    )


@pytest.mark.parametrize(
    "guarded",
    [
        Load(Buffer("x", f32, (8,), "input"), (Var("i", i32),)),  # a read a bounds test guards
        Bin("div", Var("n", i32), Var("d", i32), i32),  # a division a zero test guards
        Bin("add", Var("n", i32), Const(1, i32), i32),  # an integer that may overflow
        Cast(Var("v", f32), i32),  # a conversion a range test guards
    ],
)
def test_and_or_keep_their_short_circuit_over_an_operand_that_may_fault(guarded) -> None:
    test = Bin("gt", guarded, Const(0, guarded.dtype), b1)
    assert cx(Bin("and", Bin("lt", Var("i", i32), Const(8, i32), b1), test, b1)).count("&&") == 1
    assert cx(Bin("or", test, Var("c", b1), b1)).count("||") == 1
