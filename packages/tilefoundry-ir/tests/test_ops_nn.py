"""Model ops: rms_norm, layer_norm, rope, attention, embedding against direct torch computations.

References are written independently of the evaluator: torch.nn.functional.rms_norm, the
layer-norm formula in f64, Hugging Face's rotate-half formula, and torch's
scaled_dot_product_attention with an explicit boolean mask. Tolerances: f32 within 1e-5
(2e-5 for attention); bf16 against the f32 reference rounded to bf16 within one bf16 ulp
(rtol 1/128, atol 1e-2).
"""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from tilefoundry.ir import ops as _ops  # noqa: F401  (fills the registries)
from tilefoundry.ir.dims import DimVar
from tilefoundry.ir.dtypes import bf16, dtype_of, f32, i32, i64
from tilefoundry.ir.errors import DSLError, EvalError
from tilefoundry.ir.ops.base import evaluate, infer
from tilefoundry.ir.ops.nn import Attention, Embedding, LayerNorm, RmsNorm, Rope
from tilefoundry.ir.types import TensorType

T = DimVar("tokens", 1, 8193)
B = DimVar("batch", 1, 65)
TOL = {torch.float32: dict(atol=1e-5, rtol=1e-5), torch.bfloat16: dict(atol=1e-2, rtol=1 / 128)}
DTYPES = [torch.float32, torch.bfloat16]


def rand(*shape: int, dtype: torch.dtype = torch.float32, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g).to(dtype)


def ty(shape: tuple, dtype: torch.dtype) -> TensorType:
    return TensorType(shape, dtype_of(dtype))


# ---------------------------------------------------------------- norms


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("w_shape", [(16,), (4, 16)])
def test_rms_norm_matches_torch(w_shape, dtype):
    x, w = rand(3, 4, 16, dtype=dtype, seed=1), rand(*w_shape, dtype=dtype, seed=2)
    want = F.rms_norm(x.float(), w_shape, w.float(), eps=1e-6).to(dtype)
    torch.testing.assert_close(evaluate(RmsNorm(eps=1e-6), x, w), want, **TOL[dtype])
    assert infer(RmsNorm(), ty((T, 4, 16), dtype), ty(w_shape, dtype)) == ty((T, 4, 16), dtype)


def test_rms_norm_refuses_weight_of_wrong_shape():
    with pytest.raises(DSLError) as e:
        infer(RmsNorm(), TensorType((T, 2048), bf16), TensorType((1024,), bf16))
    assert str(e.value) == (
        "rms_norm: w has shape (1024,), expected (2048,) to match the trailing dims of x (tokens, 2048)"
    )
    assert (e.value.expected, e.value.got) == ("(2048,)", "(1024,)")


def test_rms_norm_refuses_mixed_dtypes_integers_and_bad_eps():
    with pytest.raises(DSLError, match=r"^rms_norm: operands must share a dtype .*, got x bf16 and w f32"):
        infer(RmsNorm(), TensorType((T, 8), bf16), TensorType((8,), f32))
    with pytest.raises(DSLError, match=r"^rms_norm: x has dtype i32; accepted: f64 f32 f16 bf16$"):
        infer(RmsNorm(), TensorType((T, 8), i32), TensorType((8,), i32))
    with pytest.raises(DSLError, match=r"^rms_norm: eps must be a number >= 0, got -1.0$"):
        infer(RmsNorm(eps=-1.0), TensorType((T, 8), f32), TensorType((8,), f32))


@pytest.mark.parametrize("dtype", DTYPES)
def test_layer_norm_matches_formula(dtype):
    x, w, b = rand(5, 32, dtype=dtype, seed=3), rand(32, dtype=dtype, seed=4), rand(32, dtype=dtype, seed=5)
    xd = x.double()
    mean, var = xd.mean(-1, keepdim=True), xd.var(-1, unbiased=False, keepdim=True)
    want = ((xd - mean) / torch.sqrt(var + 1e-5) * w.double() + b.double()).to(dtype)
    torch.testing.assert_close(evaluate(LayerNorm(), x, w, b), want, **TOL[dtype])
    assert infer(LayerNorm(), ty((T, 32), dtype), ty((32,), dtype), ty((32,), dtype)) == ty((T, 32), dtype)


def test_layer_norm_refuses_bias_of_wrong_shape():
    with pytest.raises(DSLError, match=r"^layer_norm: b has shape \(16,\), expected \(32,\) to match"):
        infer(LayerNorm(), TensorType((T, 32), f32), TensorType((32,), f32), TensorType((16,), f32))
    with pytest.raises(
        DSLError, match=r"^layer_norm: w has rank 2, expected 1 to 1 to cover trailing dims of x \(32,\)$"
    ):
        infer(LayerNorm(), TensorType((32,), f32), TensorType((2, 32), f32), TensorType((2, 32), f32))


# ---------------------------------------------------------------- rope


def hf_rope(
    x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, position_ids: torch.Tensor
) -> torch.Tensor:
    """Hugging Face's apply_rotary_pos_emb (unsqueeze_dim=1) on gathered tables, in f32."""
    c = cos[position_ids].float().unsqueeze(1)
    s = sin[position_ids].float().unsqueeze(1)
    xf = x.float()
    half = xf.shape[-1] // 2
    rotated = torch.cat((-xf[..., half:], xf[..., :half]), dim=-1)
    return xf * c + rotated * s


def tables(p: int, d: int, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    inv_freq = 1.0 / (10000 ** (torch.arange(0, d, 2).float() / d))
    freqs = torch.outer(torch.arange(p).float(), inv_freq)
    emb = torch.cat((freqs, freqs), dim=-1)
    return emb.cos().to(dtype), emb.sin().to(dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("batched_positions", [False, True])
def test_rope_matches_hugging_face(batched_positions, dtype):
    x = rand(2, 3, 5, 8, dtype=dtype, seed=6)
    cos, sin = tables(16, 8, dtype)
    g = torch.Generator().manual_seed(7)
    pos = torch.randint(0, 16, (2, 5) if batched_positions else (5,), generator=g)
    want = hf_rope(x, cos, sin, pos if batched_positions else pos.expand(2, 5)).to(dtype)
    torch.testing.assert_close(evaluate(Rope(), x, cos, sin, pos), want, **TOL[dtype])
    t = infer(Rope(), ty((B, 3, T, 8), dtype), ty((16, 8), dtype), ty((16, 8), dtype), TensorType((T,), i64))
    assert t == ty((B, 3, T, 8), dtype)


def test_rope_refuses_bad_shapes():
    x, tab = TensorType((2, 3, T, 8), f32), TensorType((16, 8), f32)
    with pytest.raises(DSLError, match=r"^rope: x must have rank 4 \(B, H, S, D\), got shape \(tokens, 8\)$"):
        infer(Rope(), TensorType((T, 8), f32), tab, tab, TensorType((T,), i64))
    with pytest.raises(DSLError, match=r"^rope: D of x and of sin must match, got 8 and 6$"):
        infer(Rope(), x, tab, TensorType((16, 6), f32), TensorType((T,), i64))
    with pytest.raises(DSLError, match=r"^rope: S of x and of positions must match, got tokens and 5$"):
        infer(Rope(), x, tab, tab, TensorType((5,), i64))
    with pytest.raises(DSLError, match=r"^rope: positions has dtype f32; accepted: i64 i32 i16 i8 u8$"):
        infer(Rope(), x, tab, tab, TensorType((T,), f32))
    with pytest.raises(DSLError, match=r"^rope: head dim D of x must be even, got 7$"):
        infer(
            Rope(),
            TensorType((2, 3, 4, 7), f32),
            TensorType((16, 7), f32),
            TensorType((16, 7), f32),
            TensorType((4,), i64),
        )
    with pytest.raises(DSLError, match=r"^rope: operands must share a dtype .*, got x bf16 and cos f32"):
        infer(Rope(), TensorType((2, 3, 4, 8), bf16), tab, tab, TensorType((4,), i64))


def test_rope_refuses_position_outside_table_when_run():
    cos, sin = tables(4, 8, torch.float32)
    with pytest.raises(EvalError, match=r"^rope: positions holds 4, outside \[0, 4\)$"):
        evaluate(Rope(), rand(1, 1, 2, 8, seed=8), cos, sin, torch.tensor([3, 4]))


# ---------------------------------------------------------------- attention


def sdpa_reference(q, k, v, *, scale=None, causal=False, kv_len=None) -> torch.Tensor:
    """torch sdpa in f32 with an explicit bool mask built from the documented rule."""
    b, _, sq, _ = q.shape
    skv = k.shape[2]
    lens = torch.full((b,), skv) if kv_len is None else kv_len.expand(b)
    mask = torch.zeros(b, 1, sq, skv, dtype=torch.bool)
    for n in range(b):
        for i in range(sq):
            last = min(int(lens[n]) - 1, i + int(lens[n]) - sq) if causal else int(lens[n]) - 1
            mask[n, 0, i, : last + 1] = True
    out = F.scaled_dot_product_attention(
        q.float(), k.float(), v.float(), attn_mask=mask, scale=scale, enable_gqa=True
    )
    return torch.where(mask.any(-1, keepdim=True), out, 0.0)


CASES = [
    dict(shape=(2, 4, 5, 4, 5, 8), causal=False),  # (B, Hq, Sq, Hkv, Skv, D): plain MHA
    dict(shape=(2, 4, 5, 2, 5, 8), causal=True),  # GQA, square causal
    dict(shape=(2, 4, 1, 1, 7, 8), causal=True),  # decode: one query sees every key
    dict(shape=(1, 2, 3, 2, 6, 8), causal=True, scale=0.3),  # chunked prefill: bottom-right aligned
]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c['shape']}-causal{c['causal']}")
def test_attention_matches_sdpa(case, dtype):
    b, hq, sq, hkv, skv, d = case["shape"]
    q, k, v = (
        rand(b, hq, sq, d, dtype=dtype, seed=9),
        rand(b, hkv, skv, d, dtype=dtype, seed=10),
        rand(b, hkv, skv, d, dtype=dtype, seed=11),
    )
    op = Attention(scale=case.get("scale"), causal=case["causal"])
    want = sdpa_reference(q, k, v, scale=case.get("scale"), causal=case["causal"]).to(dtype)
    tol = TOL[dtype] if dtype != torch.float32 else dict(atol=2e-5, rtol=2e-5)
    torch.testing.assert_close(evaluate(op, q, k, v), want, **tol)


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("per_batch", [False, True])
def test_attention_kv_len_masks_the_cache_tail(causal, per_batch):
    q, k, v = rand(3, 4, 2, 8, seed=12), rand(3, 2, 9, 8, seed=13), rand(3, 2, 9, 8, seed=14)
    kv_len = torch.tensor([5, 9, 2], dtype=torch.int32) if per_batch else torch.tensor(6, dtype=torch.int32)
    out = evaluate(Attention(causal=causal), q, k, v, kv_len)
    want = sdpa_reference(q, k, v, causal=causal, kv_len=kv_len)
    torch.testing.assert_close(out, want, atol=2e-5, rtol=2e-5)
    if not per_batch:  # keys past kv_len must not matter: scramble them, get the same result
        k2, v2 = k.clone(), v.clone()
        k2[:, :, 6:], v2[:, :, 6:] = rand(3, 2, 3, 8, seed=15), rand(3, 2, 3, 8, seed=16)
        torch.testing.assert_close(evaluate(Attention(causal=causal), q, k2, v2, kv_len), out)


def test_attention_query_that_sees_no_key_yields_zeros():
    q, k, v = rand(1, 1, 3, 4, seed=17), rand(1, 1, 4, 4, seed=18), rand(1, 1, 4, 4, seed=19)
    out = evaluate(Attention(causal=True), q, k, v, torch.tensor(2))
    # L=2, Sq=3: query 0 sees keys j <= 0 + 2 - 3 = -1, none.
    assert torch.equal(out[0, 0, 0], torch.zeros(4)) and torch.isfinite(out).all()


def test_attention_infers_gqa_shapes():
    q, kv = TensorType((B, 32, T, 128), bf16), TensorType((B, 8, T, 128), bf16)
    assert infer(Attention(causal=True), q, kv, kv) == TensorType((B, 32, T, 128), bf16)
    v = TensorType((B, 8, T, 64), bf16)
    assert infer(Attention(), q, kv, v, TensorType((B,), i32)) == TensorType((B, 32, T, 64), bf16)


def test_attention_refuses_bad_operands():
    q, kv = TensorType((2, 6, 4, 8), f32), TensorType((2, 4, 4, 8), f32)
    with pytest.raises(DSLError, match=r"^attention: Hq 6 of q must be a multiple of Hkv 4 of k$"):
        infer(Attention(), q, kv, kv)
    with pytest.raises(DSLError, match=r"^attention: D of q and of k must match, got 8 and 16$"):
        infer(Attention(), q, TensorType((2, 6, 4, 16), f32), TensorType((2, 6, 4, 16), f32))
    with pytest.raises(
        DSLError, match=r"^attention: k must have rank 4 \(B, Hkv, Skv, D\), got shape \(4, 8\)$"
    ):
        infer(Attention(), q, TensorType((4, 8), f32), kv)
    with pytest.raises(
        DSLError, match=r"^attention: kv_len must have shape \(\) or \(B,\) = \(2,\), got \(3,\)$"
    ):
        infer(Attention(), q, q, q, TensorType((3,), i32))
    with pytest.raises(DSLError, match=r"^attention: kv_len has dtype f32; accepted: i64 i32 i16 i8 u8$"):
        infer(Attention(), q, q, q, TensorType((), f32))
    with pytest.raises(DSLError, match=r"^attention: operands must share a dtype .*, got q f32 and k bf16"):
        infer(Attention(), q, TensorType((2, 6, 4, 8), bf16), q)


def test_attention_refuses_kv_len_beyond_the_cache_when_run():
    q = rand(1, 1, 1, 4, seed=20)
    with pytest.raises(EvalError, match=r"^attention: kv_len holds 5, outside \[0, 4\]$"):
        evaluate(Attention(), q, rand(1, 1, 4, 4, seed=21), rand(1, 1, 4, 4, seed=22), torch.tensor(5))


def test_attention_default_scale_is_inverse_sqrt_d():
    q, k, v = rand(1, 2, 3, 16, seed=23), rand(1, 2, 3, 16, seed=24), rand(1, 2, 3, 16, seed=25)
    torch.testing.assert_close(
        evaluate(Attention(), q, k, v), evaluate(Attention(scale=1 / math.sqrt(16)), q, k, v)
    )


# ---------------------------------------------------------------- embedding


@pytest.mark.parametrize("dtype", DTYPES)
def test_embedding_matches_torch(dtype):
    table = rand(11, 6, dtype=dtype, seed=26)
    ids = torch.randint(0, 11, (2, 3), generator=torch.Generator().manual_seed(27), dtype=torch.int32)
    assert torch.equal(evaluate(Embedding(), table, ids), F.embedding(ids.long(), table))
    assert infer(Embedding(), ty((11, 6), dtype), TensorType((B, T), i32)) == ty((B, T, 6), dtype)


def test_embedding_refuses_bad_operands():
    with pytest.raises(DSLError, match=r"^embedding: ids has dtype f32; accepted: i64 i32 i16 i8 u8$"):
        infer(Embedding(), TensorType((11, 6), bf16), TensorType((T,), f32))
    with pytest.raises(DSLError, match=r"^embedding: table must have rank 2 \(V, D\), got shape \(11,\)$"):
        infer(Embedding(), TensorType((11,), bf16), TensorType((T,), i64))
    with pytest.raises(EvalError, match=r"^embedding: ids holds 11, outside \[0, 11\)$"):
        evaluate(Embedding(), rand(11, 6, seed=28), torch.tensor([0, 11]))
