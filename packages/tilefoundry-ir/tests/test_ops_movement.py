"""Shape and data movement ops: type inference (accepted and refused) and exact evaluation.

Movement copies elements, so results must equal torch's bit for bit, in f32 and bf16.
"""

from __future__ import annotations

import pytest
import torch

from tilefoundry.ir import ops as _ops  # noqa: F401  (fills the registries)
from tilefoundry.ir.dims import DimVar
from tilefoundry.ir.dtypes import bf16, dtype_of, f32, i32
from tilefoundry.ir.errors import DSLError
from tilefoundry.ir.ops.base import evaluate, infer
from tilefoundry.ir.ops.movement import (
    BroadcastTo,
    Concat,
    RepeatInterleave,
    Reshape,
    Slice,
    Stack,
    Transpose,
)
from tilefoundry.ir.types import TensorType

T = DimVar("tokens", 1, 8193)
DTYPES = [torch.float32, torch.bfloat16]


def rand(*shape: int, dtype: torch.dtype = torch.float32, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g).to(dtype)


def ty(shape: tuple, dtype: torch.dtype) -> TensorType:
    return TensorType(shape, dtype_of(dtype))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    ("src", "dst"), [((4, 6), (24,)), ((4, 6), (2, 3, 4)), ((2, 3, 4), (-1, 4)), ((5,), (1, 5, 1))]
)
def test_reshape_evaluates_like_torch(src, dst, dtype):
    x = rand(*src, dtype=dtype, seed=1)
    out = evaluate(Reshape(dst), x)
    assert torch.equal(out, x.reshape(dst))
    assert infer(Reshape(dst), ty(src, dtype)) == ty(tuple(out.shape), dtype)


def test_reshape_with_dimvars_and_inferred_hole():
    x = TensorType((T, 32, 128), bf16)
    assert infer(Reshape((T, 4096)), x) == TensorType((T, 4096), bf16)
    assert infer(Reshape((-1, 4096)), x) == TensorType((T, 4096), bf16)
    assert infer(Reshape((T * 32, -1)), x) == TensorType((T * 32, 128), bf16)


def test_reshape_refuses_wrong_element_count():
    with pytest.raises(DSLError) as e:
        infer(Reshape((T, 100)), TensorType((T, 32, 4), f32))
    assert str(e.value) == (
        "reshape: cannot reshape (tokens, 32, 4) (128*tokens elements) to (tokens, 100) "
        "(100*tokens elements)"
    )


def test_reshape_refuses_bad_holes():
    with pytest.raises(DSLError, match=r"^reshape: at most one -1 in shape, got \(-1, -1\)$"):
        infer(Reshape((-1, -1)), TensorType((4, 4), f32))
    with pytest.raises(
        DSLError, match=r"^reshape: cannot infer -1 in \(-1, 5\): 12 elements of \(3, 4\) do not divide by 5$"
    ):
        infer(Reshape((-1, 5)), TensorType((3, 4), f32))
    with pytest.raises(
        DSLError, match=r"^reshape: shape entries must be extents >= 0, DimVars or one -1, got -2"
    ):
        infer(Reshape((-2, 6)), TensorType((3, 4), f32))


@pytest.mark.parametrize("dtype", DTYPES)
def test_transpose_evaluates_like_permute(dtype):
    x = rand(2, 3, 4, dtype=dtype, seed=2)
    op = Transpose((2, 0, -2))
    assert torch.equal(evaluate(op, x), x.permute(2, 0, 1))
    assert infer(op, TensorType((T, 3, 4), dtype_of(dtype))) == TensorType((4, T, 3), dtype_of(dtype))


def test_transpose_refuses_non_permutation():
    with pytest.raises(
        DSLError, match=r"^transpose: perm \(0, 0\) is not a permutation of the 2 axes of \(4, 5\)$"
    ):
        infer(Transpose((0, 0)), TensorType((4, 5), f32))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    ("axis", "start", "stop", "step"), [(0, 1, 5, 1), (1, 0, 7, 2), (-1, 2, 3, 3), (1, 4, 4, 1)]
)
def test_slice_evaluates_like_python_slicing(axis, start, stop, step, dtype):
    x = rand(6, 7, dtype=dtype, seed=3)
    op = Slice(axis=axis, start=start, stop=stop, step=step)
    want = x[:, start:stop:step] if axis % 2 else x[start:stop:step]
    assert torch.equal(evaluate(op, x), want)
    assert infer(op, ty((6, 7), dtype)) == ty(tuple(want.shape), dtype)


def test_slice_with_symbolic_bounds():
    x = TensorType((T, 64), f32)
    assert infer(Slice(axis=0, start=0, stop=T - 1), x) == TensorType((T - 1, 64), f32)
    assert infer(Slice(axis=0, start=1, stop=T, step=2), x).shape == ((T - 1 + 1) // 2, 64)
    assert infer(Slice(axis=1, start=8, stop=40, step=2), x) == TensorType((T, 16), f32)


def test_slice_refuses_unprovable_bounds():
    with pytest.raises(DSLError) as e:
        infer(Slice(axis=0, start=0, stop=4), TensorType((T, 8), f32))
    assert str(e.value) == (
        "slice: bounds [0, 4) do not provably lie within axis 0 of extent tokens "
        "(need 0 <= start <= stop <= extent)"
    )
    with pytest.raises(DSLError, match=r"^slice: step must be an int >= 1, got -1$"):
        infer(Slice(axis=0, start=0, stop=4, step=-1), TensorType((8,), f32))


@pytest.mark.parametrize("dtype", DTYPES)
def test_concat_and_stack_evaluate_like_torch(dtype):
    a, b = rand(3, 4, dtype=dtype, seed=4), rand(3, 2, dtype=dtype, seed=5)
    assert torch.equal(evaluate(Concat(axis=-1), a, b), torch.cat([a, b], -1))
    assert infer(Concat(axis=1), ty((3, 4), dtype), ty((3, 2), dtype)) == ty((3, 6), dtype)
    c = rand(3, 4, dtype=dtype, seed=6)
    assert torch.equal(evaluate(Stack(axis=1), a, c), torch.stack([a, c], 1))
    assert infer(Stack(axis=-1), ty((3, 4), dtype), ty((3, 4), dtype)) == ty((3, 4, 2), dtype)


def test_concat_sums_symbolic_extents():
    t = infer(Concat(axis=0), TensorType((T, 4), f32), TensorType((T, 4), f32), TensorType((1, 4), f32))
    assert t == TensorType((2 * T + 1, 4), f32)


def test_concat_refuses_mismatches():
    with pytest.raises(DSLError, match=r"^concat: dim 0 of xs\[0\] and xs\[1\] must match, got 3 and 2$"):
        infer(Concat(axis=1), TensorType((3, 4), f32), TensorType((2, 4), f32))
    with pytest.raises(
        DSLError, match=r"^concat: operands must share a dtype .*, got xs\[0\] f32 and xs\[1\] bf16"
    ):
        infer(Concat(axis=0), TensorType((3, 4), f32), TensorType((3, 4), bf16))
    with pytest.raises(DSLError, match=r"^stack: xs\[1\] has rank 1, xs\[0\] has rank 2$"):
        infer(Stack(axis=0), TensorType((3, 4), f32), TensorType((4,), f32))


@pytest.mark.parametrize("dtype", DTYPES)
def test_repeat_interleave_evaluates_like_torch(dtype):
    x = rand(2, 3, 5, dtype=dtype, seed=7)
    assert torch.equal(evaluate(RepeatInterleave(repeats=4, axis=1), x), torch.repeat_interleave(x, 4, dim=1))
    assert infer(RepeatInterleave(repeats=4, axis=-2), ty((2, 3, 5), dtype)) == ty((2, 12, 5), dtype)


def test_repeat_interleave_refuses_bad_repeats():
    with pytest.raises(DSLError, match=r"^repeat_interleave: repeats must be an int >= 1, got 0$"):
        infer(RepeatInterleave(repeats=0), TensorType((4,), f32))


@pytest.mark.parametrize("dtype", DTYPES)
def test_broadcast_to_evaluates_like_torch(dtype):
    x = rand(3, 1, dtype=dtype, seed=8)
    assert torch.equal(evaluate(BroadcastTo((2, 3, 5)), x), torch.broadcast_to(x, (2, 3, 5)))
    assert infer(BroadcastTo((T, 3, 5)), ty((3, 1), dtype)) == ty((T, 3, 5), dtype)


def test_broadcast_to_refuses_incompatible_shape():
    with pytest.raises(DSLError, match=r"^broadcast_to: cannot broadcast \(3, 2\) to \(3, 4\)$"):
        infer(BroadcastTo((3, 4)), TensorType((3, 2), i32))
    with pytest.raises(DSLError, match=r"^broadcast_to: cannot broadcast \(3, 2\) to \(2,\)$"):
        infer(BroadcastTo((2,)), TensorType((3, 2), i32))
