"""Alias tables from the models' declared weight names to Hugging Face checkpoint keys.

A model reads a Hugging Face directory as it is, through `SafetensorsResource(ckpt_dir,
alias=...)`: no renamed copy is written. The tables below give the resource one entry per
declared name, resolved in the resource's lookup order (seed 000 §1.5):

    causal LM   embed_tokens            -> model.embed_tokens.weight
                layers.3                -> model.layers.3             (a subtree segment)
                  q_proj (in layers.3)  -> model.layers.3.self_attn.q_proj.weight
                lm_head                 -> lm_head.weight, or Absolute("model.embed_tokens.weight")
                                           when the embeddings are tied (the checkpoint stores
                                           the table once)
    BERT        word_embeddings         -> embeddings.word_embeddings.weight
                layers.3                -> encoder.layer.3
                  query (in layers.3)   -> encoder.layer.3.attention.self.query.weight

Every weight keeps the layout and dtype the checkpoint stores; the DSL models declare Linear
weights as Hugging Face does, `(out_features, in_features)`, so no entry needs a converter.
"""

from __future__ import annotations

from tilefoundry.runtime.resource import Absolute, AliasValue

from .config import BertConfig, CausalLMConfig

# Declared weight of one decoder layer -> its key under `model.layers.N.`.
CAUSAL_LM_LAYER = {
    "input_layernorm": "input_layernorm.weight",
    "q_proj": "self_attn.q_proj.weight",
    "k_proj": "self_attn.k_proj.weight",
    "v_proj": "self_attn.v_proj.weight",
    "o_proj": "self_attn.o_proj.weight",
    "q_proj_bias": "self_attn.q_proj.bias",
    "k_proj_bias": "self_attn.k_proj.bias",
    "v_proj_bias": "self_attn.v_proj.bias",
    "q_norm": "self_attn.q_norm.weight",
    "k_norm": "self_attn.k_norm.weight",
    "post_attention_layernorm": "post_attention_layernorm.weight",
    "gate_proj": "mlp.gate_proj.weight",
    "up_proj": "mlp.up_proj.weight",
    "down_proj": "mlp.down_proj.weight",
}

# Declared weight of the causal-LM root -> its key.
CAUSAL_LM_ROOT = {
    "embed_tokens": "model.embed_tokens.weight",
    "norm": "model.norm.weight",
    "lm_head": "lm_head.weight",
}

# Declared weight of one BERT layer -> its key under `encoder.layer.N.`.
BERT_LAYER = {
    "query": "attention.self.query.weight",
    "query_bias": "attention.self.query.bias",
    "key": "attention.self.key.weight",
    "key_bias": "attention.self.key.bias",
    "value": "attention.self.value.weight",
    "value_bias": "attention.self.value.bias",
    "attn_out": "attention.output.dense.weight",
    "attn_out_bias": "attention.output.dense.bias",
    "attn_norm": "attention.output.LayerNorm.weight",
    "attn_norm_bias": "attention.output.LayerNorm.bias",
    "intermediate": "intermediate.dense.weight",
    "intermediate_bias": "intermediate.dense.bias",
    "output": "output.dense.weight",
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


def causal_lm_alias(cfg: CausalLMConfig) -> dict[str, AliasValue]:
    """The alias table that reads a Llama / Qwen2 / Qwen3 Hugging Face checkpoint."""
    table: dict[str, AliasValue] = dict(CAUSAL_LM_ROOT)
    if cfg.tie_word_embeddings:
        table["lm_head"] = Absolute(CAUSAL_LM_ROOT["embed_tokens"])
    table.update({f"layers.{i}": f"model.layers.{i}" for i in range(cfg.num_layers)})
    table.update(CAUSAL_LM_LAYER)
    return table


def bert_alias(cfg: BertConfig, *, prefix: str = "") -> dict[str, AliasValue]:
    """The alias table that reads a BERT checkpoint whose keys start with `prefix` ("" or "bert.")."""
    table: dict[str, AliasValue] = {name: prefix + key for name, key in BERT_ROOT.items()}
    table.update({f"layers.{i}": f"{prefix}encoder.layer.{i}" for i in range(cfg.num_layers)})
    table.update(BERT_LAYER)
    return table
