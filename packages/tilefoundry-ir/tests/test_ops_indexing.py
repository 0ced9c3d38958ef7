"""index_select, gather and cache_update: inference, exact evaluation, run-time range checks."""

from __future__ import annotations

import pytest
import torch

from tilefoundry.ir import ops as _ops  # noqa: F401  (fills the registries)
from tilefoundry.ir.dims import DimVar
from tilefoundry.ir.dtypes import bf16, dtype_of, f32, i32, i64
from tilefoundry.ir.errors import DSLError, EvalError
from tilefoundry.ir.ops.base import evaluate, infer
from tilefoundry.ir.ops.indexing import CacheUpdate, Gather, IndexSelect
from tilefoundry.ir.types import TensorType

T = DimVar("tokens", 1, 8193)
DTYPES = [torch.float32, torch.bfloat16]


def rand(*shape: int, dtype: torch.dtype = torch.float32, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g).to(dtype)


def randint(high: int, *shape: int, dtype: torch.dtype = torch.int64, seed: int = 0) -> torch.Tensor:
    return torch.randint(0, high, shape, generator=torch.Generator().manual_seed(seed), dtype=dtype)


@pytest.mark.parametrize("index_dtype", [torch.int64, torch.int32])
@pytest.mark.parametrize("dtype", DTYPES)
def test_index_select_evaluates_like_torch(dtype, index_dtype):
    x, idx = rand(7, 5, dtype=dtype, seed=1), randint(5, 9, dtype=index_dtype, seed=2)
    assert torch.equal(evaluate(IndexSelect(axis=-1), x, idx), torch.index_select(x, 1, idx))
    t = infer(
        IndexSelect(axis=0), TensorType((7, 5), dtype_of(dtype)), TensorType((T,), dtype_of(index_dtype))
    )
    assert t == TensorType((T, 5), dtype_of(dtype))


def test_index_select_refuses_bad_index():
    with pytest.raises(DSLError, match=r"^index_select: index has dtype f32; accepted: i64 i32 i16 i8 u8$"):
        infer(IndexSelect(axis=0), TensorType((7, 5), f32), TensorType((3,), f32))
    with pytest.raises(DSLError, match=r"^index_select: index must have rank 1 \(N,\), got shape \(3, 2\)$"):
        infer(IndexSelect(axis=0), TensorType((7, 5), f32), TensorType((3, 2), i64))


def test_index_select_checks_index_range_when_run():
    with pytest.raises(EvalError, match=r"^index_select: index holds 7, outside \[0, 7\)$"):
        evaluate(IndexSelect(axis=0), rand(7, 5, seed=3), torch.tensor([1, 7]))


@pytest.mark.parametrize("dtype", DTYPES)
def test_gather_evaluates_like_torch(dtype):
    x, idx = rand(4, 6, dtype=dtype, seed=4), randint(6, 3, 2, seed=5)
    assert torch.equal(evaluate(Gather(axis=1), x, idx), torch.gather(x, 1, idx))
    assert infer(Gather(axis=1), TensorType((4, 6), dtype_of(dtype)), TensorType((3, 2), i64)) == TensorType(
        (3, 2), dtype_of(dtype)
    )


def test_gather_refuses_bad_index():
    with pytest.raises(DSLError, match=r"^gather: index extent 5 on axis 0 may exceed x's extent 4$"):
        infer(Gather(axis=1), TensorType((4, 6), f32), TensorType((5, 2), i64))
    with pytest.raises(
        DSLError, match=r"^gather: index must have rank 2 \(the rank of x \(4, 6\)\), got shape \(5,\)$"
    ):
        infer(Gather(axis=1), TensorType((4, 6), f32), TensorType((5,), i64))
    with pytest.raises(EvalError, match=r"^gather: index holds -1, outside \[0, 6\)$"):
        evaluate(Gather(axis=1), rand(4, 6, seed=6), torch.tensor([[0, -1]]))


@pytest.mark.parametrize("dtype", DTYPES)
def test_cache_update_writes_a_copy_at_pos(dtype):
    cache, new = rand(2, 3, 10, 4, dtype=dtype, seed=7), rand(2, 3, 4, 4, dtype=dtype, seed=8)
    before = cache.clone()
    out = evaluate(CacheUpdate(), cache, torch.tensor(5, dtype=torch.int32), new)
    want = before.clone()
    want[:, :, 5:9] = new
    assert torch.equal(out, want)
    assert torch.equal(cache, before), "cache_update must not mutate its input"
    t = infer(
        CacheUpdate(),
        TensorType((2, 3, 10, 4), dtype_of(dtype)),
        TensorType((), i32),
        TensorType((2, 3, T, 4), dtype_of(dtype)),
    )
    assert t == TensorType((2, 3, 10, 4), dtype_of(dtype))


def test_cache_update_along_another_axis():
    cache, new = rand(2, 10, 3, 4, seed=9), rand(2, 1, 3, 4, seed=10)
    want = cache.clone()
    want[:, 9:10] = new
    assert torch.equal(evaluate(CacheUpdate(axis=1), cache, torch.tensor(9), new), want)


def test_cache_update_refuses_bad_shapes():
    cache = TensorType((2, 3, 10, 4), bf16)
    with pytest.raises(DSLError, match=r"^cache_update: dim 1 of cache and new must match, got 3 and 2$"):
        infer(CacheUpdate(), cache, TensorType((), i32), TensorType((2, 2, 1, 4), bf16))
    with pytest.raises(
        DSLError, match=r"^cache_update: new has extent 11 on axis 2, more than the cache's 10$"
    ):
        infer(CacheUpdate(), cache, TensorType((), i32), TensorType((2, 3, 11, 4), bf16))
    with pytest.raises(DSLError, match=r"^cache_update: pos must have rank 0 \(\), got shape \(2,\)$"):
        infer(CacheUpdate(), cache, TensorType((2,), i32), TensorType((2, 3, 1, 4), bf16))
    with pytest.raises(DSLError, match=r"^cache_update: pos has dtype f32; accepted: i64 i32 i16 i8 u8$"):
        infer(CacheUpdate(), cache, TensorType((), f32), TensorType((2, 3, 1, 4), bf16))
    with pytest.raises(
        DSLError, match=r"^cache_update: operands must share a dtype .*, got cache bf16 and new f32"
    ):
        infer(CacheUpdate(), cache, TensorType((), i32), TensorType((2, 3, 1, 4), f32))


def test_cache_update_refuses_overflow_when_run():
    cache, new = rand(1, 1, 8, 2, seed=11), rand(1, 1, 3, 2, seed=12)
    with pytest.raises(EvalError) as e:
        evaluate(CacheUpdate(), cache, torch.tensor(6), new)
    assert str(e.value) == "cache_update: pos 6 + new extent 3 does not fit the cache extent 8 on axis 2"
