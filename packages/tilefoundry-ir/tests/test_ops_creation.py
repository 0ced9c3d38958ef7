"""full and arange: inference with DimVars, refused attributes, values and device placement."""

from __future__ import annotations

import pytest
import torch

from tilefoundry.ir import ops as _ops  # noqa: F401  (fills the registries)
from tilefoundry.ir.dims import DimVar
from tilefoundry.ir.dtypes import bf16, boolean, f32, i64, u8
from tilefoundry.ir.errors import DSLError
from tilefoundry.ir.ops.base import evaluate, evaluating_on, infer, resolve_dims
from tilefoundry.ir.ops.creation import Arange, Full
from tilefoundry.ir.types import TensorType

T = DimVar("tokens", 1, 8193)


@pytest.mark.parametrize(
    ("dtype", "value"), [(f32, -1.75), (bf16, 0.3), (i64, -7), (u8, 255), (boolean, True)]
)
def test_full_evaluates_like_torch(dtype, value):
    op = Full((2, 3), value, dtype)
    assert infer(op) == TensorType((2, 3), dtype)
    assert torch.equal(evaluate(op), torch.full((2, 3), value, dtype=dtype.torch))


def test_full_takes_dimvars_and_dtype_names():
    assert infer(Full((T, 4), 0.5, "bf16")) == TensorType((T, 4), bf16)
    assert infer(Full((), 2.0, "f32")) == TensorType((), f32)


def test_full_takes_a_dimvar_value_resolved_when_evaluated():
    op = Full((), T - 1, i64)
    assert infer(op) == TensorType((), i64)
    assert (
        evaluate(
            resolve_dims(op, {T: 9}),
        ).item()
        == 8
    )
    with pytest.raises(DSLError, match=r"^full: value tokens does not fit dtype bool$"):
        infer(Full((), T, boolean))


def test_full_refuses_values_that_do_not_fit():
    with pytest.raises(DSLError, match=r"^full: value 1.5 does not fit dtype i64$"):
        infer(Full((2,), 1.5, i64))
    with pytest.raises(DSLError, match=r"^full: value 256 does not fit dtype u8$"):
        infer(Full((2,), 256, u8))
    with pytest.raises(DSLError, match=r"^full: value 1 does not fit dtype bool$"):
        infer(Full((2,), 1, boolean))
    with pytest.raises(
        DSLError, match=r"^full: shape must be a tuple of extents >= 0 and DimVars, got \(-1, 2\)$"
    ):
        infer(Full((-1, 2), 1.0, f32))


def test_creation_ops_place_results_on_the_eval_device():
    with evaluating_on("meta"):
        assert evaluate(Full((3,), 1.0, f32)).device.type == "meta"
        assert evaluate(Arange(0, 4)).device.type == "meta"
    assert evaluate(Arange(0, 4)).device.type == "cpu"


@pytest.mark.parametrize(
    ("start", "stop", "step", "dtype"),
    [(0, 7, 1, i64), (2, 11, 3, i64), (9, 1, -2, i64), (0, 6, 1, f32), (0, 5, 2, bf16)],
)
def test_arange_evaluates_like_torch(start, stop, step, dtype):
    op = Arange(start, stop, step, dtype)
    want = torch.arange(start, stop, step, dtype=dtype.torch)
    assert infer(op) == TensorType(tuple(want.shape), dtype)
    assert torch.equal(evaluate(op), want)


def test_arange_with_symbolic_bounds():
    assert infer(Arange(0, T)) == TensorType((T,), i64)
    assert infer(Arange(1, T + 1, 1, "i32")).shape == (T,)
    assert infer(Arange(0, T, 2)).shape == ((T + 1) // 2,)


def test_arange_refuses_bad_attributes():
    with pytest.raises(DSLError, match=r"^arange: step must be a nonzero int, got 0$"):
        infer(Arange(0, 4, 0))
    with pytest.raises(DSLError, match=r"^arange: the result has dtype bool; accepted: f64 f32 f16 bf16 i64"):
        infer(Arange(0, 4, 1, boolean))
    with pytest.raises(DSLError) as e:
        infer(Arange(0, T, -1))
    assert str(e.value) == (
        "arange: with symbolic bounds, step must be positive and start <= stop provable, "
        "got start 0, stop tokens, step -1"
    )
