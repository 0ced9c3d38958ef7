"""Pointwise ops: type inference (accepted and refused operands) and evaluation against torch.

Tolerances: f32 results equal torch's f32 result within 1e-6 (the evaluator runs the same
kernel); bf16 results (computed in f32, rounded once) agree with torch's native bf16 kernel
within one bf16 ulp (rtol 1/128, atol 1e-2 for values near zero).
"""

from __future__ import annotations

import pytest
import torch

from tilefoundry.ir import ops as _ops  # noqa: F401  (fills the registries)
from tilefoundry.ir.dims import DimVar
from tilefoundry.ir.dtypes import bf16, boolean, dtype_of, f32, fp8e4m3, i32, i64, u8
from tilefoundry.ir.errors import DSLError
from tilefoundry.ir.ops import pointwise as pw
from tilefoundry.ir.ops.base import evaluate, infer
from tilefoundry.ir.types import TensorType

T = DimVar("tokens", 1, 8193)
TOL = {torch.float32: dict(atol=1e-6, rtol=1e-6), torch.bfloat16: dict(atol=1e-2, rtol=1 / 128)}
FLOAT_DTYPES = [torch.float32, torch.bfloat16]
NUMERIC_NAMES = "f64 f32 f16 bf16 i64 i32 i16 i8 u8"
DTYPE_ORDER = NUMERIC_NAMES.split()


def rand(*shape: int, dtype: torch.dtype = torch.float32, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g).to(dtype)


def positive(*shape: int, dtype: torch.dtype = torch.float32, seed: int = 0) -> torch.Tensor:
    return (rand(*shape, seed=seed).abs() + 0.1).to(dtype)


UNARY = [
    (pw.Neg(), torch.neg, rand),
    (pw.Abs(), torch.abs, rand),
    (pw.Exp(), torch.exp, rand),
    (pw.Exp2(), torch.exp2, rand),
    (pw.Log(), torch.log, positive),
    (pw.Log2(), torch.log2, positive),
    (pw.Sqrt(), torch.sqrt, positive),
    (pw.Rsqrt(), torch.rsqrt, positive),
    (pw.Tanh(), torch.tanh, rand),
    (pw.Sigmoid(), torch.sigmoid, rand),
    (pw.Silu(), torch.nn.functional.silu, rand),
    (pw.Gelu(), torch.nn.functional.gelu, rand),
    (pw.Gelu(approximate="tanh"), lambda t: torch.nn.functional.gelu(t, approximate="tanh"), rand),
    (pw.Relu(), torch.relu, rand),
    (pw.Softplus(), torch.nn.functional.softplus, rand),
]


@pytest.mark.parametrize(("op", "ref", "make"), UNARY, ids=lambda v: getattr(v, "name", ""))
def test_unary_infer_keeps_shape_and_dtype(op, ref, make):
    t = infer(op, TensorType((T, 4), bf16))
    assert t == TensorType((T, 4), bf16)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize(("op", "ref", "make"), UNARY, ids=lambda v: getattr(v, "name", ""))
def test_unary_evaluates_like_torch(op, ref, make, dtype):
    x = make(5, 7, dtype=dtype, seed=1)
    out = evaluate(op, x)
    assert out.dtype == dtype and out.shape == x.shape
    torch.testing.assert_close(out, ref(x), **TOL[dtype])


@pytest.mark.parametrize(("op", "ref", "make"), UNARY, ids=lambda v: getattr(v, "name", ""))
def test_unary_refuses_bool_naming_the_accepted_dtypes(op, ref, make):
    accepted = " ".join(d.name for d in sorted(op.accepted, key=lambda d: DTYPE_ORDER.index(d.name)))
    with pytest.raises(DSLError) as e:
        infer(op, TensorType((T,), boolean))
    assert str(e.value) == f"{op.name}: x has dtype bool; accepted: {accepted}"


def test_unary_refuses_integer_for_float_math():
    with pytest.raises(DSLError) as e:
        infer(pw.Exp(), TensorType((4,), i32))
    assert str(e.value) == "exp: x has dtype i32; accepted: f64 f32 f16 bf16"
    assert e.value.expected == "f64 f32 f16 bf16" and e.value.got == i32


def test_unary_refuses_fp8_arithmetic():
    with pytest.raises(DSLError, match=r"^sqrt: x has dtype fp8e4m3; accepted: f64 f32 f16 bf16$"):
        infer(pw.Sqrt(), TensorType((4,), fp8e4m3))


def test_neg_refuses_unsigned():
    with pytest.raises(DSLError, match=r"^neg: x has dtype u8; accepted: f64 f32 f16 bf16 i64 i32 i16 i8$"):
        infer(pw.Neg(), TensorType((4,), u8))


def test_integer_unary_ops_evaluate_natively():
    x = torch.randint(-50, 50, (9,), generator=torch.Generator().manual_seed(2), dtype=torch.int32)
    assert torch.equal(evaluate(pw.Abs(), x), x.abs())
    assert torch.equal(evaluate(pw.Relu(), x), x.clamp(min=0))
    assert infer(pw.Relu(), TensorType((9,), i32)).dtype == i32


def test_gelu_refuses_unknown_approximation():
    with pytest.raises(DSLError, match=r"^gelu: approximate must be one of 'none', 'tanh', got 'erf'$"):
        infer(pw.Gelu(approximate="erf"), TensorType((4,), f32))


def test_logical_not_takes_bool_only():
    assert infer(pw.LogicalNot(), TensorType((3,), boolean)).dtype == boolean
    with pytest.raises(DSLError, match=r"^logical_not: x has dtype f32; accepted: bool$"):
        infer(pw.LogicalNot(), TensorType((3,), f32))
    x = rand(6, seed=3) > 0
    assert torch.equal(evaluate(pw.LogicalNot(), x), ~x)


BINARY = [
    (pw.Add(), torch.add),
    (pw.Sub(), torch.sub),
    (pw.Mul(), torch.mul),
    (pw.Div(), torch.div),
    (pw.Maximum(), torch.maximum),
    (pw.Minimum(), torch.minimum),
]


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize(("op", "ref"), BINARY, ids=lambda v: getattr(v, "name", ""))
def test_binary_broadcasts_like_torch(op, ref, dtype):
    a, b = rand(4, 1, 6, dtype=dtype, seed=4), rand(3, 1, dtype=dtype, seed=5)
    assert infer(op, TensorType((4, 1, 6), dtype), TensorType((3, 1), dtype)) == TensorType((4, 3, 6), dtype)
    out = evaluate(op, a, b)
    assert out.dtype == dtype
    torch.testing.assert_close(out, ref(a, b), **TOL[dtype])


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_pow_evaluates_like_torch(dtype):
    a, b = positive(3, 5, dtype=dtype, seed=6), rand(5, dtype=dtype, seed=7)
    torch.testing.assert_close(evaluate(pw.Pow(), a, b), torch.pow(a, b), **TOL[dtype])


ALL_BINARY = [*BINARY, (pw.Pow(), torch.pow)]


@pytest.mark.parametrize(("op", "ref"), ALL_BINARY, ids=lambda v: getattr(v, "name", ""))
def test_binary_refuses_mixed_dtypes_per_op(op, ref):
    with pytest.raises(DSLError) as e:
        infer(op, TensorType((T, 4), bf16), TensorType((4,), f32))
    assert str(e.value) == (
        f"{op.name}: operands must share a dtype (no silent promotion), got a bf16 and b f32; "
        "cast one with tf.cast"
    )


def test_broadcast_keeps_symbolic_dims():
    t = infer(pw.Add(), TensorType((T, 1), f32), TensorType((1, 8), f32))
    assert t == TensorType((T, 8), f32)
    assert infer(pw.Mul(), TensorType((T * 2, 3), f32), TensorType((T + T, 1), f32)).shape == (2 * T, 3)


def test_binary_refuses_mixed_dtypes_naming_both():
    with pytest.raises(DSLError) as e:
        infer(pw.Add(), TensorType((4,), f32), TensorType((4,), bf16))
    assert str(e.value) == (
        "add: operands must share a dtype (no silent promotion), got a f32 and b bf16; cast one with tf.cast"
    )
    assert (e.value.expected, e.value.got) == (f32, bf16)


def test_binary_refuses_shapes_that_do_not_broadcast():
    with pytest.raises(DSLError) as e:
        infer(pw.Mul(), TensorType((T, 4), f32), TensorType((3,), f32))
    assert str(e.value) == "mul: shapes (tokens, 4) and (3,) do not broadcast: dim -1 is 4 vs 3"


def test_symbolic_dim_does_not_stretch_against_a_static_extent():
    with pytest.raises(DSLError) as e:
        infer(pw.Sub(), TensorType((T,), f32), TensorType((5,), f32))
    assert str(e.value) == "sub: shapes (tokens,) and (5,) do not broadcast: dim -1 is tokens vs 5"


def test_div_refuses_integers():
    with pytest.raises(DSLError, match=r"^div: a has dtype i64; accepted: f64 f32 f16 bf16$"):
        infer(pw.Div(), TensorType((4,), i64), TensorType((4,), i64))


def test_add_refuses_bool():
    with pytest.raises(DSLError, match=rf"^add: a has dtype bool; accepted: {NUMERIC_NAMES}$"):
        infer(pw.Add(), TensorType((4,), boolean), TensorType((4,), boolean))


def test_integer_arithmetic_stays_in_its_dtype():
    g = torch.Generator().manual_seed(8)
    a = torch.randint(-100, 100, (7,), generator=g, dtype=torch.int32)
    b = torch.randint(-100, 100, (7,), generator=g, dtype=torch.int32)
    out = evaluate(pw.Mul(), a, b)
    assert out.dtype == torch.int32 and torch.equal(out, a * b)


COMPARISONS = [
    (pw.Eq(), torch.eq),
    (pw.Ne(), torch.ne),
    (pw.Lt(), torch.lt),
    (pw.Le(), torch.le),
    (pw.Gt(), torch.gt),
    (pw.Ge(), torch.ge),
]


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize(("op", "ref"), COMPARISONS, ids=lambda v: getattr(v, "name", ""))
def test_comparisons_yield_bool(op, ref, dtype):
    a, b = rand(4, 5, dtype=dtype, seed=9), rand(5, dtype=dtype, seed=10)
    a[0] = b  # some equal elements, so eq/le/ge have both outcomes
    assert infer(op, TensorType((4, 5), dtype), TensorType((5,), dtype)) == TensorType((4, 5), boolean)
    out = evaluate(op, a, b)
    assert out.dtype == torch.bool and torch.equal(out, ref(a, b))


@pytest.mark.parametrize(("op", "ref"), COMPARISONS, ids=lambda v: getattr(v, "name", ""))
def test_comparisons_refuse_mixed_dtypes(op, ref):
    with pytest.raises(DSLError, match=rf"^{op.name}: operands must share a dtype .*, got a i32 and b i64"):
        infer(op, TensorType((4,), i32), TensorType((4,), i64))


def test_ordering_comparison_refuses_bool():
    with pytest.raises(DSLError, match=rf"^lt: a has dtype bool; accepted: {NUMERIC_NAMES}$"):
        infer(pw.Lt(), TensorType((4,), boolean), TensorType((4,), boolean))
    assert infer(pw.Eq(), TensorType((4,), boolean), TensorType((4,), boolean)).dtype == boolean


LOGICAL = [
    (pw.LogicalAnd(), torch.logical_and),
    (pw.LogicalOr(), torch.logical_or),
    (pw.LogicalXor(), torch.logical_xor),
]


@pytest.mark.parametrize(("op", "ref"), LOGICAL, ids=lambda v: getattr(v, "name", ""))
def test_logical_binary_ops(op, ref):
    a, b = rand(3, 4, seed=11) > 0, rand(4, seed=12) > 0
    assert infer(op, TensorType((3, 4), boolean), TensorType((4,), boolean)) == TensorType((3, 4), boolean)
    assert torch.equal(evaluate(op, a, b), ref(a, b))
    with pytest.raises(DSLError, match=rf"^{op.name}: a has dtype i32; accepted: bool$"):
        infer(op, TensorType((4,), i32), TensorType((4,), i32))


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_where_selects_and_broadcasts(dtype):
    cond = rand(4, 1, seed=13) > 0
    a, b = rand(4, 6, dtype=dtype, seed=14), rand(6, dtype=dtype, seed=15)
    t = infer(pw.Where(), TensorType((4, 1), boolean), TensorType((4, 6), dtype), TensorType((6,), dtype))
    assert t == TensorType((4, 6), dtype)
    assert torch.equal(evaluate(pw.Where(), cond, a, b), torch.where(cond, a, b))


def test_where_refuses_non_bool_condition_and_mixed_branches():
    with pytest.raises(DSLError, match=r"^where: cond has dtype f32; accepted: bool$"):
        infer(pw.Where(), TensorType((4,), f32), TensorType((4,), f32), TensorType((4,), f32))
    with pytest.raises(DSLError, match=r"^where: operands must share a dtype .*, got a f32 and b i32"):
        infer(pw.Where(), TensorType((4,), boolean), TensorType((4,), f32), TensorType((4,), i32))


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_clamp_evaluates_like_torch(dtype):
    x = rand(5, 5, dtype=dtype, seed=16)
    assert infer(pw.Clamp(lo=-0.5, hi=0.5), TensorType((5, 5), dtype)) == TensorType((5, 5), dtype)
    torch.testing.assert_close(evaluate(pw.Clamp(lo=-0.5, hi=0.5), x), x.clamp(-0.5, 0.5), **TOL[dtype])
    torch.testing.assert_close(evaluate(pw.Clamp(hi=0.25), x), x.clamp(max=0.25), **TOL[dtype])


def test_clamp_refuses_bad_bounds():
    with pytest.raises(DSLError, match=r"^clamp: give lo, hi or both, got neither$"):
        infer(pw.Clamp(), TensorType((4,), f32))
    with pytest.raises(DSLError, match=r"^clamp: bound lo must be an int for x of dtype i32, got 0.5$"):
        infer(pw.Clamp(lo=0.5), TensorType((4,), i32))
    with pytest.raises(DSLError, match=r"^clamp: lo 2 exceeds hi 1$"):
        infer(pw.Clamp(lo=2, hi=1), TensorType((4,), f32))


@pytest.mark.parametrize(
    ("src", "dst"),
    [
        (torch.float32, torch.bfloat16),
        (torch.bfloat16, torch.float32),
        (torch.float32, torch.int32),
        (torch.float32, torch.bool),
        (torch.float32, torch.float8_e4m3fn),
    ],
)
def test_cast_converts_like_torch(src, dst):
    x = (rand(4, 6, seed=17) * 10).to(src)
    op = pw.Cast(dtype_of(dst))
    assert infer(op, TensorType((4, 6), dtype_of(src))) == TensorType((4, 6), dtype_of(dst))
    out = evaluate(op, x)
    assert out.dtype == dst and torch.equal(out.float(), x.to(dst).float())


def test_cast_takes_a_dtype_name():
    assert pw.Cast("bf16").dtype is bf16
