"""A BERT encoder in the DSL (all-MiniLM-L6-v2 and its kin), pooled as sentence-transformers does.

    cfg = read_config(minilm_dir)                 # architectures: ["BertModel"]
    sem = bert_encoder(cfg)
    model = sem.load(SafetensorsResource(minilm_dir, device="cpu", alias=bert_alias(cfg)))
    vector = model(*model.prepare_inputs(token_ids, device="cpu"))     # (hidden,), unit length

The tree mirrors the checkpoint: a root with `embed` (word + position + token-type embeddings,
LayerNorm) and `pool` (mean over the tokens, then L2 normalization — sentence-transformers'
Pooling(mean) and Normalize modules), and children `layers.0` ... each with `attention`
(bidirectional multi-head self-attention, output projection, residual, post-LayerNorm) and `ffn`
(GELU MLP, residual, post-LayerNorm). One sentence is encoded per call, so no padding mask is
needed; its token count is the DimVar `tokens`. Linear weights are declared K-major,
`(in_features, out_features)`, and used as `x @ w + b`; the alias table transposes the
checkpoint's `(out_features, in_features)` tensors once, at load (hf_names.py).
"""

import math
from typing import Any

import torch

from tilefoundry.dsl import ConstTensor, DimVar, Tensor, func, i64, module, tf
from tilefoundry.ir.dtypes import dtype_of
from tilefoundry.ir.module import Module

from .config import BertConfig


def bert_encoder(cfg: BertConfig) -> Module:
    """The semantic Module of `cfg`'s encoder; `forward(ids, positions, token_types) -> (hidden,)`."""
    dt, h, eps = dtype_of(cfg.dtype), cfg.hidden_size, cfg.layer_norm_eps
    T = DimVar("tokens", 1, cfg.max_positions + 1)
    X = Tensor[(T, h), dt]
    Ids = Tensor[(T,), i64]
    Vec = ConstTensor[(h,), dt]

    @func
    def embed(
        ids: Ids,
        positions: Ids,
        token_types: Ids,
        word_embeddings: ConstTensor[(cfg.vocab_size, h), dt],
        position_embeddings: ConstTensor[(cfg.max_positions, h), dt],
        token_type_embeddings: ConstTensor[(cfg.type_vocab_size, h), dt],
        embed_norm: Vec,
        embed_norm_bias: Vec,
    ):
        x = (
            tf.embedding(word_embeddings, ids)
            + tf.embedding(position_embeddings, positions)
            + tf.embedding(token_type_embeddings, token_types)
        )
        return tf.layer_norm(x, embed_norm, embed_norm_bias, eps=eps)

    @func
    def pool(x: X):
        mean = tf.mean(x, 0)
        return mean / tf.maximum(tf.sqrt(tf.sum(mean * mean, 0)), 1e-12)

    def forward(self: Any, ids: Any, positions: Any, token_types: Any) -> Any:
        """The normalized mean-pooled embedding `(hidden,)` of one sentence's token ids."""
        x = self.embed(ids, positions, token_types)
        for layer in self.layers:
            x = layer.ffn(layer.attention(x))
        return self.pool(x)

    def prepare_inputs(self: Any, ids: torch.Tensor, *, device: Any = "cpu") -> tuple:
        """forward's inputs for one sentence's 1-D token ids (with [CLS] and [SEP] already in place).

        Raises:
            ValueError: more tokens than the encoder has positions.
        """
        n = int(ids.numel())
        if not 1 <= n <= cfg.max_positions:
            raise ValueError(f"{cfg.architecture}: {n} tokens do not fit its {cfg.max_positions} positions")
        return (
            ids.reshape(n).to(device=device, dtype=torch.int64, copy=True),
            torch.arange(n, dtype=torch.int64, device=device),
            torch.zeros(n, dtype=torch.int64, device=device),
        )

    layer = _encoder_layer(cfg, T)
    ns = {"embed": embed, "pool": pool, "layers": (layer,) * cfg.num_layers}
    return module(type("BertEncoder", (), {**ns, "forward": forward, "prepare_inputs": prepare_inputs}))


def _encoder_layer(cfg: BertConfig, T: DimVar) -> Module:
    """One post-LayerNorm encoder layer: `attention` and `ffn`."""
    dt, h, n, d, inter, eps = (
        dtype_of(cfg.dtype),
        cfg.hidden_size,
        cfg.num_heads,
        cfg.head_dim,
        cfg.intermediate_size,
        cfg.layer_norm_eps,
    )
    X = Tensor[(T, h), dt]
    W, Vec = ConstTensor[(h, h), dt], ConstTensor[(h,), dt]

    def heads(y: Any) -> Any:
        # (T, n*D) -> (1, n, T, D)
        return tf.transpose(tf.reshape(y, (1, T, n, d)), (0, 2, 1, 3))

    @func
    def attention(
        x: X,
        query: W,
        query_bias: Vec,
        key: W,
        key_bias: Vec,
        value: W,
        value_bias: Vec,
        attn_out: W,
        attn_out_bias: Vec,
        attn_norm: Vec,
        attn_norm_bias: Vec,
    ):
        q = heads(x @ query + query_bias)
        k = heads(x @ key + key_bias)
        v = heads(x @ value + value_bias)
        o = tf.attention(q, k, v, scale=1 / math.sqrt(d), causal=False)
        o = tf.reshape(tf.transpose(o, (0, 2, 1, 3)), (T, h))
        return tf.layer_norm(x + o @ attn_out + attn_out_bias, attn_norm, attn_norm_bias, eps=eps)

    @func
    def ffn(
        x: X,
        intermediate: ConstTensor[(h, inter), dt],
        intermediate_bias: ConstTensor[(inter,), dt],
        output: ConstTensor[(inter, h), dt],
        output_bias: Vec,
        output_norm: Vec,
        output_norm_bias: Vec,
    ):
        up = tf.gelu(x @ intermediate + intermediate_bias)
        return tf.layer_norm(x + up @ output + output_bias, output_norm, output_norm_bias, eps=eps)

    return module(type("EncoderLayer", (), {"attention": attention, "ffn": ffn}))
