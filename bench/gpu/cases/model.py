"""Model cases: a Qwen3-1.7B-shaped causal LM decoding, one step and a whole generation.

The model is `tilefoundry.models.causal_lm` of a config.json document with Qwen3-1.7B's shape
(random weights: no download), compiled with `tilefoundry.twin(sem, target=...)`; the peer is
Hugging Face transformers eager on the same weights. A decode step's fewest bytes are every
weight once (a tied table read once, by the LM head) plus the KV cache up to its position; the
weight-streaming limit of the model follows. Goal (issue 7): >= 1000 tok/s, batch 1.
"""

import math
from collections.abc import Mapping
from typing import Any

from tilefoundry.models import CausalLMConfig, config_from_dict
from tilefoundry.models.checkpoint import hf_shapes

from ..floors import ITEMSIZE, Work
from ..goals import Rate
from . import ModelCase

QWEN3_1_7B: dict[str, Any] = {
    "architectures": ["Qwen3ForCausalLM"],
    "model_type": "qwen3",
    "vocab_size": 151936,
    "hidden_size": 2048,
    "intermediate_size": 6144,
    "num_hidden_layers": 28,
    "num_attention_heads": 16,
    "num_key_value_heads": 8,
    "head_dim": 128,
    "hidden_act": "silu",
    "max_position_embeddings": 40960,
    "rms_norm_eps": 1e-6,
    "rope_parameters": {"rope_type": "default", "rope_theta": 1000000.0},
    "tie_word_embeddings": True,
    "attention_bias": False,
    "use_sliding_window": False,
    "dtype": "bfloat16",
    "bos_token_id": None,
    "eos_token_id": None,
}

# A model small enough for the evaluator and a CPU build in the tests; same family and options.
QWEN3_TINY: dict[str, Any] = {
    **QWEN3_1_7B,
    "vocab_size": 256,
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 16,
    "max_position_embeddings": 512,
}

GOAL_TOKENS_PER_S = 1000.0


def config_of(doc: Mapping[str, Any]) -> CausalLMConfig:
    """The parsed config of a document (a causal LM, or ValueError)."""
    cfg = config_from_dict(dict(doc), source="bench model config")
    if not isinstance(cfg, CausalLMConfig):
        raise ValueError(f"bench model config: expected a causal LM, got {cfg.architecture}")
    return cfg


def weight_work(cfg: CausalLMConfig) -> Work:
    """One token's weight traffic: every weight read once, two flops per matrix weight.

    A tied table is read once, by the LM head; an untied input table gives one row.
    """
    shapes = hf_shapes(cfg)
    params = sum(math.prod(s) for s in shapes.values())
    table = math.prod(shapes["model.embed_tokens.weight"])
    if cfg.tie_word_embeddings:
        read, matrix = params, params
    else:
        read, matrix = params - table + cfg.hidden_size, params - table
    return Work(2.0 * matrix, float(read * ITEMSIZE[cfg.dtype]), cfg.dtype)


def kv_work(cfg: CausalLMConfig, kv_len: int) -> Work:
    """One token's attention over `kv_len` cached positions in every layer: K and V read once."""
    size = ITEMSIZE[cfg.dtype]
    per_layer = 2 * cfg.num_kv_heads * kv_len * cfg.head_dim * size
    flops = 4.0 * cfg.num_heads * cfg.head_dim * kv_len * cfg.num_layers
    return Work(flops, float(per_layer * cfg.num_layers), cfg.dtype)


def _name(doc: Mapping[str, Any]) -> str:
    return "qwen3-1.7b" if doc["hidden_size"] == QWEN3_1_7B["hidden_size"] else "qwen3-tiny"


def decode_step(doc: Mapping[str, Any], *, context: int, position: int) -> ModelCase:
    """One token at `position` (the cache holds `position` earlier ones), batch 1."""
    cfg = config_of(doc)
    name = _name(doc)
    return ModelCase(
        id=f"model/{name}/decode_step/pos{position}",
        shape=f"1 tok @ pos {position}, ctx {context}",
        dtype=cfg.dtype,
        work=weight_work(cfg) + kv_work(cfg, position + 1),
        kernel=f"model/{name}/ctx{context}",
        config=dict(doc),
        context=context,
        kind="decode_step",
        position=position,
        goals=(Rate(GOAL_TOKENS_PER_S, tokens=1),),
    )


def generation(doc: Mapping[str, Any], *, context: int, prompt_len: int, new_tokens: int) -> ModelCase:
    """Greedy generation of `new_tokens` after a random prompt of `prompt_len`, batch 1."""
    cfg = config_of(doc)
    name = _name(doc)
    work = weight_work(cfg).times(new_tokens)
    for p in range(prompt_len, prompt_len + new_tokens):
        work = work + kv_work(cfg, p + 1)
    return ModelCase(
        id=f"model/{name}/generate/{new_tokens}",
        shape=f"prompt {prompt_len} + {new_tokens} tok, ctx {context}",
        dtype=cfg.dtype,
        work=work,
        kernel=f"model/{name}/ctx{context}",
        config=dict(doc),
        context=context,
        kind="generate",
        prompt_len=prompt_len,
        new_tokens=new_tokens,
        goals=(Rate(GOAL_TOKENS_PER_S, tokens=new_tokens),),
    )
