"""A Qwen3-style decoder layer in the DSL: the worked example of docs/authoring.md.

    x   (B, S, HIDDEN) f32        S is the DimVar `seq` in [1, 65)
    cos, sin (MAX_POS, HEAD_DIM)  rotary tables, rows indexed by position
    positions (S,) i64

`self_attn.attention`: RMSNorm, q/k/v projections, per-head q/k RMSNorm, rotary embedding,
grouped-query causal attention, o_proj, residual. `mlp.mlp`: RMSNorm, SwiGLU, residual.
Linear weights are declared as Hugging Face stores them, `(out_features, in_features)`, so
checkpoint keys line up: `self_attn.q_proj`, `mlp.gate_proj`, ...

    layer = Qwen3DecoderLayer
    y = layer.mlp.mlp(layer.self_attn.attention(x, cos, sin, positions, *attn_weights), *mlp_weights)
    y = layer.load(DictResource(weights)).forward(x, cos, sin, positions)   # the same, loaded
"""

from __future__ import annotations

from typing import Any

from tilefoundry.dsl import ConstTensor, DimVar, Tensor, f32, func, i64, module, tf

BATCH, HIDDEN, HEADS, KV_HEADS, HEAD_DIM, INTER, MAX_POS = 2, 64, 4, 2, 16, 128, 64
EPS = 1e-6
S = DimVar("seq", 1, 65)

X = Tensor[(BATCH, S, HIDDEN), f32]
Table = Tensor[(MAX_POS, HEAD_DIM), f32]
Positions = Tensor[(S,), i64]
Norm = ConstTensor[(HIDDEN,), f32]
HeadNorm = ConstTensor[(HEAD_DIM,), f32]
Wq = ConstTensor[(HEADS * HEAD_DIM, HIDDEN), f32]
Wkv = ConstTensor[(KV_HEADS * HEAD_DIM, HIDDEN), f32]
Wo = ConstTensor[(HIDDEN, HEADS * HEAD_DIM), f32]


def linear(x: Any, w: Any) -> Any:
    """`x @ w.T` for a weight stored `(out_features, in_features)`."""
    return x @ w.T


def split_heads(y: Any, n: int) -> Any:
    """(B, S, n*D) -> (B, n, S, D)."""
    return y.reshape(BATCH, S, n, HEAD_DIM).transpose(1, 2)


def merge_heads(o: Any) -> Any:
    """(B, H, S, D) -> (B, S, H*D)."""
    return o.transpose(1, 2).reshape(BATCH, S, HEADS * HEAD_DIM)


@module(entry="attention")
class Qwen3Attention:
    @func
    def attention(
        x: X,
        cos: Table,
        sin: Table,
        positions: Positions,
        input_layernorm: Norm,
        q_proj: Wq,
        k_proj: Wkv,
        v_proj: Wkv,
        o_proj: Wo,
        q_norm: HeadNorm,
        k_norm: HeadNorm,
    ) -> X:
        h = tf.rms_norm(x, input_layernorm, eps=EPS)
        # Qwen3 normalizes each head of q and k before the rotary embedding.
        q = tf.rms_norm(split_heads(linear(h, q_proj), HEADS), q_norm, eps=EPS)
        k = tf.rms_norm(split_heads(linear(h, k_proj), KV_HEADS), k_norm, eps=EPS)
        v = split_heads(linear(h, v_proj), KV_HEADS)
        q = tf.rope(q, cos, sin, positions)
        k = tf.rope(k, cos, sin, positions)
        o = tf.attention(q, k, v, scale=HEAD_DIM**-0.5, causal=True)
        return x + linear(merge_heads(o), o_proj)


@module(entry="mlp")
class Qwen3Mlp:
    @func
    def mlp(
        x: X,
        post_attention_layernorm: Norm,
        gate_proj: ConstTensor[(INTER, HIDDEN), f32],
        up_proj: ConstTensor[(INTER, HIDDEN), f32],
        down_proj: ConstTensor[(HIDDEN, INTER), f32],
    ) -> X:
        h = tf.rms_norm(x, post_attention_layernorm, eps=EPS)
        return x + linear(tf.silu(linear(h, gate_proj)) * linear(h, up_proj), down_proj)


@module
class Qwen3DecoderLayer:
    self_attn = Qwen3Attention
    mlp = Qwen3Mlp

    def forward(self, x: Any, cos: Any, sin: Any, positions: Any) -> Any:
        # On a loaded reading, each function takes activations alone (weights come from the load).
        return self.mlp.mlp(self.self_attn.attention(x, cos, sin, positions))
