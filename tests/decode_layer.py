"""A tiny Qwen3-shaped decoder layer for cuda tests: its attention function and seeded inputs.

Hidden 256, 4 query heads and 2 kv heads of 64, a 128-position cache, bf16, weights (out, in) as
the cuda causal LMs declare them. The attention program has every piece a decode step runs:
index checks, RMS norms, q/k/v projections, per-head q/k norms, rope, the cache update,
attention and the output projection with the residual add.
"""

from __future__ import annotations

import torch

from tilefoundry.ir.hir import Function
from tilefoundry.ir.module import Module
from tilefoundry.models.causal_lm import causal_lm
from tilefoundry.models.config import config_from_dict

QWEN3_TINY = dict(
    architectures=["Qwen3ForCausalLM"],
    model_type="qwen3",
    vocab_size=256,
    hidden_size=256,
    intermediate_size=768,
    num_hidden_layers=1,
    num_attention_heads=4,
    num_key_value_heads=2,
    head_dim=64,
    max_position_embeddings=128,
    rms_norm_eps=1e-6,
    rope_theta=1e6,
    tie_word_embeddings=True,
    torch_dtype="bfloat16",
)
CONTEXT = 128


def decode_attention() -> Function:
    """The layer's `attention` function."""
    lm = causal_lm(config_from_dict(QWEN3_TINY), context=CONTEXT, linear_layout="out_in")
    return Module.of(lm.layers[0]).functions["attention"]


def attention_args(tokens: int, gen: torch.Generator) -> list[torch.Tensor]:
    """Seeded inputs of `decode_attention()` on the GPU: `tokens` new tokens at position 40."""

    def w(*shape: int, scale: float = 0.05) -> torch.Tensor:
        return (torch.randn(*shape, generator=gen) * scale).to(torch.bfloat16).cuda()

    i64 = {"dtype": torch.int64, "device": "cuda"}
    return [
        w(tokens, 256, scale=1.0),  # x
        w(CONTEXT, 64, scale=1.0),  # cos
        w(CONTEXT, 64, scale=1.0),  # sin
        torch.randint(0, CONTEXT, (tokens,), generator=gen).to(**i64),  # positions
        torch.tensor(40, **i64),  # pos
        torch.tensor(40 + tokens, **i64),  # kv_len
        w(1, 2, CONTEXT, 64, scale=1.0),  # k_cache
        w(1, 2, CONTEXT, 64, scale=1.0),  # v_cache
        w(256, scale=1.0),  # input_layernorm
        w(256, 256),  # q_proj
        w(128, 256),  # k_proj
        w(128, 256),  # v_proj
        w(256, 256),  # o_proj
        w(64, scale=1.0),  # q_norm
        w(64, scale=1.0),  # k_norm
    ]
