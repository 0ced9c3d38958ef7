"""matmul: torch.matmul's shape rules (1-D operands, batch broadcasting) and its values.

Tolerances: f32 within 1e-5 of torch.matmul in f32; bf16 equals the f32 product rounded once
to bf16 within one bf16 ulp (rtol 1/128, atol 1e-2).
"""

from __future__ import annotations

import pytest
import torch

from tilefoundry.ir import ops as _ops  # noqa: F401  (fills the registries)
from tilefoundry.ir.dims import DimVar
from tilefoundry.ir.dtypes import bf16, dtype_of, f32, i32
from tilefoundry.ir.errors import DSLError
from tilefoundry.ir.ops.base import evaluate, infer
from tilefoundry.ir.ops.contraction import Matmul
from tilefoundry.ir.types import TensorType

T = DimVar("tokens", 1, 8193)
TOL = {torch.float32: dict(atol=1e-5, rtol=1e-5), torch.bfloat16: dict(atol=1e-2, rtol=1 / 128)}


def rand(*shape: int, dtype: torch.dtype = torch.float32, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g).to(dtype)


SHAPES = [
    ((16,), (16,)),
    ((5, 16), (16,)),
    ((16,), (16, 7)),
    ((5, 16), (16, 7)),
    ((3, 5, 16), (16, 7)),
    ((16,), (3, 16, 7)),
    ((2, 1, 5, 16), (4, 16, 7)),
    ((3, 5, 16), (16,)),
]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize(("sa", "sb"), SHAPES, ids=str)
def test_matmul_follows_torch_matmul(sa, sb, dtype):
    a, b = rand(*sa, dtype=dtype, seed=1), rand(*sb, dtype=dtype, seed=2)
    want = torch.matmul(a.float(), b.float()).to(dtype)
    t = infer(Matmul(), TensorType(sa, dtype_of(dtype)), TensorType(sb, dtype_of(dtype)))
    assert t == TensorType(tuple(want.shape), dtype_of(dtype))
    out = evaluate(Matmul(), a, b)
    assert out.dtype == dtype
    torch.testing.assert_close(out, want, **TOL[dtype])


def test_matmul_keeps_symbolic_rows():
    t = infer(Matmul(), TensorType((T, 2048), bf16), TensorType((2048, 6144), bf16))
    assert t == TensorType((T, 6144), bf16)


def test_matmul_refuses_mismatched_k():
    with pytest.raises(DSLError) as e:
        infer(Matmul(), TensorType((T, 64), f32), TensorType((32, 16), f32))
    assert str(e.value) == "matmul: contracted dims must match: a (tokens, 64) has K=64, b (32, 16) has K=32"
    assert (e.value.expected, e.value.got) == ("64", "32")


def test_matmul_refuses_mixed_dtypes_and_integers():
    with pytest.raises(DSLError, match=r"^matmul: operands must share a dtype .*, got a f32 and b bf16"):
        infer(Matmul(), TensorType((4, 4), f32), TensorType((4, 4), bf16))
    with pytest.raises(DSLError, match=r"^matmul: a has dtype i32; accepted: f64 f32 f16 bf16$"):
        infer(Matmul(), TensorType((4, 4), i32), TensorType((4, 4), i32))


def test_matmul_refuses_scalars_and_unbroadcastable_batches():
    with pytest.raises(DSLError, match=r"^matmul: b must have rank >= 1, got shape \(\)$"):
        infer(Matmul(), TensorType((4,), f32), TensorType((), f32))
    with pytest.raises(DSLError) as e:
        infer(Matmul(), TensorType((2, 4, 8), f32), TensorType((3, 8, 4), f32))
    assert str(e.value) == "matmul: shapes (2,) and (3,) do not broadcast: dim -1 is 2 vs 3"
