"""Reductions: type inference (accepted and refused operands) and evaluation against torch.

Tolerances: f32 within 1e-5 of torch in f32 (summation order may differ); bf16 results equal
the f32 computation rounded once to bf16 within one bf16 ulp (rtol 1/128, atol 1e-2).
"""

from __future__ import annotations

import pytest
import torch

from tilefoundry.ir import ops as _ops  # noqa: F401  (fills the registries)
from tilefoundry.ir.dims import DimVar
from tilefoundry.ir.dtypes import bf16, boolean, f32, i32, i64
from tilefoundry.ir.errors import DSLError
from tilefoundry.ir.ops.base import evaluate, infer
from tilefoundry.ir.ops.reduction import Argmax, LogSoftmax, Reduce, Softmax
from tilefoundry.ir.types import TensorType

T = DimVar("tokens", 1, 8193)
TOL = {torch.float32: dict(atol=1e-5, rtol=1e-5), torch.bfloat16: dict(atol=1e-2, rtol=1 / 128)}
FLOAT_DTYPES = [torch.float32, torch.bfloat16]


def rand(*shape: int, dtype: torch.dtype = torch.float32, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g).to(dtype)


REFERENCE = {
    "sum": lambda x, d, k: x.float().sum(d, keepdim=k),
    "mean": lambda x, d, k: x.float().mean(d, keepdim=k),
    "max": lambda x, d, k: x.float().amax(d, keepdim=k),
    "min": lambda x, d, k: x.float().amin(d, keepdim=k),
    "absmax": lambda x, d, k: x.float().abs().amax(d, keepdim=k),
}


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("axes", [-1, 0, (0, 2), (-1, -3), None])
@pytest.mark.parametrize("kind", list(REFERENCE))
def test_reduce_evaluates_like_torch(kind, axes, keepdim, dtype):
    x = rand(3, 5, 7, dtype=dtype, seed=1)
    op = Reduce(axes=axes, keepdim=keepdim, kind=kind)
    out = evaluate(op, x)
    dims = tuple(range(3)) if axes is None else axes
    want = REFERENCE[kind](x, dims, keepdim).to(dtype)
    assert out.dtype == dtype
    torch.testing.assert_close(out, want, **TOL[dtype])
    assert infer(op, TensorType((3, 5, 7), dtype)) == TensorType(tuple(want.shape), dtype)


def test_reduce_keeps_symbolic_dims_and_normalizes_negative_axes():
    x = TensorType((T, 8, 4), bf16)
    assert infer(Reduce(axes=-1, keepdim=True, kind="mean"), x) == TensorType((T, 8, 1), bf16)
    assert infer(Reduce(axes=(-1, 1), kind="max"), x) == TensorType((T,), bf16)
    assert infer(Reduce(axes=None, kind="sum"), x) == TensorType((), bf16)


def test_reduce_16bit_accumulates_in_f32():
    # A bf16 accumulator stalls at 256 (256 + 1 rounds back to 256); an f32 one does not.
    x = torch.ones(4096, dtype=torch.bfloat16)
    assert evaluate(Reduce(axes=0, kind="sum"), x).item() == 4096


def test_reduce_integer_sum_stays_in_dtype():
    x = torch.randint(-9, 9, (4, 6), generator=torch.Generator().manual_seed(2), dtype=torch.int32)
    out = evaluate(Reduce(axes=1, kind="sum"), x)
    assert out.dtype == torch.int32 and torch.equal(out, x.sum(1, dtype=torch.int32))
    assert infer(Reduce(axes=1, kind="sum"), TensorType((4, 6), i32)).dtype == i32


def test_reduce_over_no_axes_is_identity():
    x = rand(3, 4, seed=3)
    assert infer(Reduce(axes=(), kind="sum"), TensorType((3, 4), f32)) == TensorType((3, 4), f32)
    assert torch.equal(evaluate(Reduce(axes=(), kind="sum"), x), x)


def test_reduce_refuses_unknown_kind():
    with pytest.raises(DSLError) as e:
        infer(Reduce(axes=0, kind="prod"), TensorType((4,), f32))
    assert str(e.value) == "reduce: kind must be one of sum, mean, max, min, absmax, got 'prod'"


def test_reduce_refuses_bad_axes():
    with pytest.raises(DSLError, match=r"^reduce: axis 2 is out of range for rank 2 \(accepted -2\.\.1\)$"):
        infer(Reduce(axes=2), TensorType((4, 4), f32))
    with pytest.raises(DSLError, match=r"^reduce: axes \(1, -1\) name an axis twice$"):
        infer(Reduce(axes=(1, -1)), TensorType((4, 4), f32))
    with pytest.raises(DSLError, match=r"^reduce: axis must be an int, got 'x'$"):
        infer(Reduce(axes="x"), TensorType((4, 4), f32))


def test_reduce_refuses_dtypes_per_kind():
    with pytest.raises(DSLError, match=r"^reduce\(mean\): x has dtype i32; accepted: f64 f32 f16 bf16$"):
        infer(Reduce(axes=0, kind="mean"), TensorType((4,), i32))
    with pytest.raises(DSLError, match=r"^reduce\(max\): x has dtype bool; accepted: f64 f32 f16 bf16 i64"):
        infer(Reduce(axes=0, kind="max"), TensorType((4,), boolean))


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("keepdim", [False, True])
def test_argmax_returns_i64_indices_like_torch(dtype, keepdim):
    x = rand(4, 9, dtype=dtype, seed=4)
    out = evaluate(Argmax(axis=-1, keepdim=keepdim), x)
    assert out.dtype == torch.int64 and torch.equal(out, torch.argmax(x, -1, keepdim=keepdim))
    want = (T, 1) if keepdim else (T,)
    assert infer(Argmax(axis=1, keepdim=keepdim), TensorType((T, 9), dtype)) == TensorType(want, i64)


def test_argmax_takes_the_first_maximum_on_ties():
    x = torch.tensor([[1.0, 3.0, 3.0, 0.5, 3.0], [7.0, 7.0, 1.0, 7.0, 2.0]])
    assert evaluate(Argmax(axis=1), x).tolist() == [1, 0]


def test_argmax_refuses_bool():
    with pytest.raises(DSLError) as e:
        infer(Argmax(axis=0), TensorType((4,), boolean))
    assert str(e.value) == "argmax: x has dtype bool; accepted: f64 f32 f16 bf16 i64 i32 i16 i8 u8"


SOFTMAXES = [
    (Softmax(axis=-1), torch.softmax),
    (LogSoftmax(axis=1), torch.log_softmax),
    (Softmax(axis=0), torch.softmax),
]


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize(("op", "ref"), SOFTMAXES, ids=["softmax-1", "log_softmax1", "softmax0"])
def test_softmax_evaluates_like_torch(op, ref, dtype):
    x = (rand(6, 11, seed=5) * 4).to(dtype)
    want = ref(x.float(), op.axis).to(dtype)
    torch.testing.assert_close(evaluate(op, x), want, **TOL[dtype])
    assert infer(op, TensorType((T, 11), dtype)) == TensorType((T, 11), dtype)


def test_softmax_is_numerically_stable():
    x = torch.tensor([[1000.0, 1001.0, 999.0], [-1000.0, -1000.0, -1000.0]])
    out = evaluate(Softmax(axis=-1), x)
    assert torch.isfinite(out).all()
    torch.testing.assert_close(out[1], torch.full((3,), 1 / 3))
    assert torch.isfinite(evaluate(LogSoftmax(axis=-1), x)).all()


def test_softmax_refuses_integers_and_bad_axis():
    with pytest.raises(DSLError, match=r"^log_softmax: x has dtype i64; accepted: f64 f32 f16 bf16$"):
        infer(LogSoftmax(axis=0), TensorType((4,), i64))
    with pytest.raises(DSLError, match=r"^softmax: axis -3 is out of range for rank 2 \(accepted -2\.\.1\)$"):
        infer(Softmax(axis=-3), TensorType((4, 4), f32))
