"""A Qwen3-style decoder layer in the DSL evaluates to the plain-torch computation (rel_l2 < 1e-5, f32)."""

from __future__ import annotations

import math
import os
import sys

import pytest
import torch

from tilefoundry.check import rel_l2
from tilefoundry.ir.module import Module
from tilefoundry.runtime import DictResource

sys.path.insert(0, os.path.join(os.path.dirname(__file__), os.pardir, "examples"))
import qwen3_layer as q3


def weights(seed: int) -> dict[str, torch.Tensor]:
    """Random weights keyed by checkpoint path; norm gains near 1 as in trained models."""
    g = torch.Generator().manual_seed(seed)

    def rand(*shape: int, scale: float) -> torch.Tensor:
        return torch.randn(*shape, generator=g) * scale

    h, d, inter = q3.HIDDEN, q3.HEAD_DIM, q3.INTER
    return {
        "self_attn.input_layernorm": 1 + rand(h, scale=0.1),
        "self_attn.q_proj": rand(q3.HEADS * d, h, scale=h**-0.5),
        "self_attn.k_proj": rand(q3.KV_HEADS * d, h, scale=h**-0.5),
        "self_attn.v_proj": rand(q3.KV_HEADS * d, h, scale=h**-0.5),
        "self_attn.o_proj": rand(h, q3.HEADS * d, scale=(q3.HEADS * d) ** -0.5),
        "self_attn.q_norm": 1 + rand(d, scale=0.1),
        "self_attn.k_norm": 1 + rand(d, scale=0.1),
        "mlp.post_attention_layernorm": 1 + rand(h, scale=0.1),
        "mlp.gate_proj": rand(inter, h, scale=h**-0.5),
        "mlp.up_proj": rand(inter, h, scale=h**-0.5),
        "mlp.down_proj": rand(h, inter, scale=inter**-0.5),
    }


def rotary(max_pos: int, dim: int, theta: float = 1e6) -> tuple[torch.Tensor, torch.Tensor]:
    inv = 1.0 / theta ** (torch.arange(0, dim, 2, dtype=torch.float64) / dim)
    angles = torch.outer(torch.arange(max_pos, dtype=torch.float64), inv)
    emb = torch.cat([angles, angles], dim=-1)
    return emb.cos().float(), emb.sin().float()


# ---------------------------------------------------------------- the same layer in plain torch


def rms_norm(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + q3.EPS) * w


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat([-x[..., half:], x[..., :half]], dim=-1)


def torch_layer(x, cos, sin, positions, w):
    b, s, _ = x.shape
    d = q3.HEAD_DIM
    h = rms_norm(x, w["self_attn.input_layernorm"])
    q = (h @ w["self_attn.q_proj"].T).view(b, s, q3.HEADS, d).transpose(1, 2)
    k = (h @ w["self_attn.k_proj"].T).view(b, s, q3.KV_HEADS, d).transpose(1, 2)
    v = (h @ w["self_attn.v_proj"].T).view(b, s, q3.KV_HEADS, d).transpose(1, 2)
    q, k = rms_norm(q, w["self_attn.q_norm"]), rms_norm(k, w["self_attn.k_norm"])
    c, sn = cos[positions][None, None], sin[positions][None, None]
    q, k = q * c + rotate_half(q) * sn, k * c + rotate_half(k) * sn
    groups = q3.HEADS // q3.KV_HEADS
    k, v = k.repeat_interleave(groups, dim=1), v.repeat_interleave(groups, dim=1)
    scores = (q @ k.transpose(-1, -2)) / math.sqrt(d)
    mask = torch.ones(s, s, dtype=torch.bool).tril()
    probs = scores.masked_fill(~mask, float("-inf")).softmax(-1)
    o = (probs @ v).transpose(1, 2).reshape(b, s, q3.HEADS * d)
    x = x + o @ w["self_attn.o_proj"].T
    h = rms_norm(x, w["mlp.post_attention_layernorm"])
    gate, up = h @ w["mlp.gate_proj"].T, h @ w["mlp.up_proj"].T
    return x + (torch.nn.functional.silu(gate) * up) @ w["mlp.down_proj"].T


# ---------------------------------------------------------------- tests


def inputs(seq: int, seed: int) -> tuple[torch.Tensor, ...]:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(q3.BATCH, seq, q3.HIDDEN, generator=g)
    positions = torch.arange(3, 3 + seq, dtype=torch.int64)
    return (x, *rotary(q3.MAX_POS, q3.HEAD_DIM), positions)


def args_of(fn_name: str, child: Module, w: dict[str, torch.Tensor], prefix: str) -> list[torch.Tensor]:
    return [w[f"{prefix}.{p.name}"] for p in child.functions[fn_name].weights]


def test_layer_is_a_module_tree_with_hf_style_weight_paths():
    layer = q3.Qwen3DecoderLayer
    assert [c.name for c in layer.children] == ["self_attn", "mlp"]
    keys = [f"{path}.{name}" for path, node in layer.walk() for name in node.weights]
    assert sorted(keys) == sorted(weights(0))


@pytest.mark.parametrize("seq", [1, 7])
def test_qwen3_layer_matches_torch(seq):
    layer = q3.Qwen3DecoderLayer
    w = weights(seed=seq)
    x, cos, sin, positions = inputs(seq, seed=100 + seq)
    attn_weights = args_of("attention", layer.self_attn, w, "self_attn")
    attn = layer.self_attn.attention(x, cos, sin, positions, *attn_weights)
    out = layer.mlp.mlp(attn, *args_of("mlp", layer.mlp, w, "mlp"))
    expected = torch_layer(x, cos, sin, positions, w)
    assert out.shape == expected.shape == (q3.BATCH, seq, q3.HIDDEN)
    result = rel_l2(max=1e-5).measure(out, expected)
    assert result.passed, result


def test_the_comparison_sees_a_small_weight_change():
    """Guards the tests above: the two sides agree closely, so prove the bound can fail."""
    w = weights(seed=3)
    x, cos, sin, positions = inputs(4, seed=4)
    nudged = dict(w, **{"self_attn.k_norm": w["self_attn.k_norm"] * 1.01})
    out = q3.Qwen3DecoderLayer.load(DictResource(w)).forward(x, cos, sin, positions)
    assert not rel_l2(max=1e-5).measure(out, torch_layer(x, cos, sin, positions, nudged)).passed


def test_loaded_layer_forward_matches_torch():
    w = weights(seed=11)
    x, cos, sin, positions = inputs(5, seed=12)
    loaded = q3.Qwen3DecoderLayer.load(DictResource(w))
    out = loaded.forward(x, cos, sin, positions)
    result = rel_l2(max=1e-5).measure(out, torch_layer(x, cos, sin, positions, w))
    assert result.passed, result
