"""Alias tables from the models' declared weight names to Hugging Face checkpoint keys.

A model reads a Hugging Face directory as it is, through `SafetensorsResource(ckpt_dir,
alias=...)`: no renamed copy is written. The tables below give the resource one entry per
declared name, resolved in the resource's lookup order (seed 000 §1.5):

    causal LM   embed_tokens            -> model.embed_tokens.weight
                layers.3                -> model.layers.3             (a subtree segment)
                  q_proj (in layers.3)  -> Preprocessed(model.layers.3.self_attn.q_proj.weight,
                                                        transposed)
                lm_head                 -> Preprocessed(lm_head.weight, transposed), or
                                           Preprocessed(Absolute("model.embed_tokens.weight"),
                                           transposed) when the embeddings are tied (the
                                           checkpoint stores the table once)
    BERT        word_embeddings         -> embeddings.word_embeddings.weight
                layers.3                -> encoder.layer.3
                  query (in layers.3)   -> Preprocessed(encoder.layer.3.attention.self.query.weight,
                                                        transposed)

Hugging Face stores a Linear weight `(out_features, in_features)`. A Module declared with
linear_layout="in_out" (the cpu target's) takes it `(in_features, out_features)` and computes
`x @ w`, the row-major `(K, N)` operand its GEMM atoms take in place, so each Linear weight's entry
is a `Preprocessed` transpose, applied once at load rather than on every call. With "out_in"
(cuda's) the weights are read as stored and the Module computes `x @ w.T`. Every other weight
(embeddings, norms, biases) keeps the checkpoint's layout; every one keeps its dtype.
"""

from __future__ import annotations

import torch

from tilefoundry.runtime.resource import Absolute, AliasValue, Preprocessed

from .config import BertConfig, CausalLMConfig


def transposed(weight: torch.Tensor) -> torch.Tensor:
    """A stored `(out_features, in_features)` Linear weight as declared: `(in, out)`, contiguous.

    Contiguous because compiled code takes dense row-major weights; the copy is made once, at load.
    """
    return weight.t().contiguous()


# Declared weight of one decoder layer -> its key under `model.layers.N.`.
CAUSAL_LM_LAYER: dict[str, AliasValue] = {
    "input_layernorm": "input_layernorm.weight",
    "q_proj": Preprocessed("self_attn.q_proj.weight", transposed),
    "k_proj": Preprocessed("self_attn.k_proj.weight", transposed),
    "v_proj": Preprocessed("self_attn.v_proj.weight", transposed),
    "o_proj": Preprocessed("self_attn.o_proj.weight", transposed),
    "q_proj_bias": "self_attn.q_proj.bias",
    "k_proj_bias": "self_attn.k_proj.bias",
    "v_proj_bias": "self_attn.v_proj.bias",
    "q_norm": "self_attn.q_norm.weight",
    "k_norm": "self_attn.k_norm.weight",
    "post_attention_layernorm": "post_attention_layernorm.weight",
    "gate_proj": Preprocessed("mlp.gate_proj.weight", transposed),
    "up_proj": Preprocessed("mlp.up_proj.weight", transposed),
    "down_proj": Preprocessed("mlp.down_proj.weight", transposed),
}

# Declared weight of the causal-LM root -> its key (lm_head: see causal_lm_alias).
CAUSAL_LM_ROOT: dict[str, AliasValue] = {
    "embed_tokens": "model.embed_tokens.weight",
    "norm": "model.norm.weight",
}

# Declared weight of one BERT layer -> its key under `encoder.layer.N.`.
BERT_LAYER: dict[str, AliasValue] = {
    "query": Preprocessed("attention.self.query.weight", transposed),
    "query_bias": "attention.self.query.bias",
    "key": Preprocessed("attention.self.key.weight", transposed),
    "key_bias": "attention.self.key.bias",
    "value": Preprocessed("attention.self.value.weight", transposed),
    "value_bias": "attention.self.value.bias",
    "attn_out": Preprocessed("attention.output.dense.weight", transposed),
    "attn_out_bias": "attention.output.dense.bias",
    "attn_norm": "attention.output.LayerNorm.weight",
    "attn_norm_bias": "attention.output.LayerNorm.bias",
    "intermediate": Preprocessed("intermediate.dense.weight", transposed),
    "intermediate_bias": "intermediate.dense.bias",
    "output": Preprocessed("output.dense.weight", transposed),
    "output_bias": "output.dense.bias",
    "output_norm": "output.LayerNorm.weight",
    "output_norm_bias": "output.LayerNorm.bias",
}

# Declared weight of the BERT root -> its key.
BERT_ROOT = {
    "word_embeddings": "embeddings.word_embeddings.weight",
    "position_embeddings": "embeddings.position_embeddings.weight",
    "token_type_embeddings": "embeddings.token_type_embeddings.weight",
    "embed_norm": "embeddings.LayerNorm.weight",
    "embed_norm_bias": "embeddings.LayerNorm.bias",
}


def causal_lm_alias(cfg: CausalLMConfig, linear_layout: str = "in_out") -> dict[str, AliasValue]:
    """The alias table that reads a Llama / Qwen2 / Qwen3 Hugging Face checkpoint.

    Args:
        linear_layout: the Module's ("in_out" transposes each Linear weight at load; "out_in"
            reads them as stored).
    """
    table: dict[str, AliasValue] = dict(CAUSAL_LM_ROOT)
    # Tied: the LM head is the embedding table, which the checkpoint stores once, at the root.
    head: str | Absolute = "lm_head.weight"
    if cfg.tie_word_embeddings:
        head = Absolute("model.embed_tokens.weight")
    table["lm_head"] = Preprocessed(head, transposed) if linear_layout == "in_out" else head
    table.update({f"layers.{i}": f"model.layers.{i}" for i in range(cfg.num_layers)})
    for name, value in CAUSAL_LM_LAYER.items():
        as_stored = isinstance(value, Preprocessed) and linear_layout == "out_in"
        table[name] = value.name if as_stored else value  # type: ignore[union-attr]
    return table


def bert_alias(cfg: BertConfig, *, prefix: str = "") -> dict[str, AliasValue]:
    """The alias table that reads a BERT checkpoint whose keys start with `prefix` ("" or "bert.")."""
    table: dict[str, AliasValue] = {name: prefix + key for name, key in BERT_ROOT.items()}
    table.update({f"layers.{i}": f"{prefix}encoder.layer.{i}" for i in range(cfg.num_layers)})
    table.update(BERT_LAYER)
    return table
