"""The alias tables: Hugging Face `(out, in)` Linear weights read K-major through Preprocessed transposes."""

from __future__ import annotations

import pickle

import pytest
import torch

from tilefoundry.models import (
    DEMO_CONFIG,
    bert_alias,
    bert_encoder,
    causal_lm,
    causal_lm_alias,
    config_from_dict,
)
from tilefoundry.models.checkpoint import random_weights, write_random_checkpoint
from tilefoundry.models.hf_names import transposed
from tilefoundry.runtime import DictResource, Preprocessed, SafetensorsResource

CAUSAL_LINEAR = {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"}
BERT_LINEAR = {"query", "key", "value", "attn_out", "intermediate", "output"}

# Variants of the demo config covering every parameter list: Qwen3 (q/k norms), Qwen2 (q/k/v
# biases), Llama tied, and bf16 (the transpose keeps the element type).
VARIANTS = {
    "qwen3": DEMO_CONFIG,
    "qwen2": {**DEMO_CONFIG, "architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2"},
    "llama-tied": {
        **DEMO_CONFIG,
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "tie_word_embeddings": True,
    },
    "qwen3-bf16": {**DEMO_CONFIG, "dtype": "bfloat16"},
}

BERT = {
    "architectures": ["BertModel"],
    "vocab_size": 64,
    "hidden_size": 32,
    "intermediate_size": 96,
    "num_hidden_layers": 2,
    "num_attention_heads": 2,
    "max_position_embeddings": 16,
    "layer_norm_eps": 1e-12,
}


def _hf_key(alias: dict, name: str, prefix: str) -> str:
    value = alias.get(name, name)
    target = value.name if isinstance(value, Preprocessed) else value
    return getattr(target, "name", None) or prefix + target


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_1_5_causal_lm_linear_weights_load_k_major_through_preprocessed(variant):
    """seed 000 §1.5: a Preprocessed entry states that the checkpoint stores the tensor transposed;
    every Linear weight loads as declared, (in, out) contiguous, equal to the stored (out, in).T,
    and every other weight loads exactly as stored."""
    cfg = config_from_dict(VARIANTS[variant], source=variant)
    raw = random_weights(cfg, seed=3)
    alias = causal_lm_alias(cfg)
    sem = causal_lm(cfg, context=8)
    layer = DictResource(raw, alias=alias).subtree("layers.1")
    for name, declared in sem.layers[1].weights.items():
        got = layer.load(name)
        stored = raw[_hf_key(alias, name, "model.layers.1.")]
        assert tuple(got.shape) == declared.shape and got.is_contiguous() and got.dtype == stored.dtype
        expected = stored.t() if name in CAUSAL_LINEAR else stored
        assert torch.equal(got, expected), name
        assert isinstance(alias[name], Preprocessed) == (name in CAUSAL_LINEAR), name
    assert tuple(sem.weights["lm_head"].shape) == (cfg.hidden_size, cfg.vocab_size)


@pytest.mark.parametrize("tied", [True, False])
def test_lm_head_is_k_major_read_from_the_embedding_table_when_tied(tied):
    """Tied: lm_head is model.embed_tokens.weight transposed (the checkpoint has no lm_head.weight);
    untied: lm_head.weight transposed. Either way a (hidden, vocab) contiguous copy."""
    cfg = config_from_dict({**DEMO_CONFIG, "tie_word_embeddings": tied}, source="config")
    raw = random_weights(cfg, seed=5)
    assert ("lm_head.weight" in raw) != tied
    head = DictResource(raw, alias=causal_lm_alias(cfg)).load("lm_head")
    stored = raw["model.embed_tokens.weight" if tied else "lm_head.weight"]
    assert head.shape == (cfg.hidden_size, cfg.vocab_size) and head.is_contiguous()
    assert torch.equal(head, stored.t())
    assert head.untyped_storage().data_ptr() != stored.untyped_storage().data_ptr()


@pytest.mark.parametrize("prefix", ["", "bert."])
def test_1_5_bert_linear_weights_load_k_major_through_preprocessed(prefix):
    """seed 000 §1.5: BERT's Linear weights load (in, out), the rest as stored, with or without the
    `bert.` prefix of a task model's checkpoint."""
    cfg = config_from_dict(BERT, source="bert")
    sem = bert_encoder(cfg)
    alias = bert_alias(cfg, prefix=prefix)
    gen = torch.Generator().manual_seed(7)
    raw = {}
    for name, declared in sem.layers[0].weights.items():
        shape = declared.shape[::-1] if name in BERT_LINEAR else declared.shape
        raw[_hf_key(alias, name, f"{prefix}encoder.layer.0.")] = torch.randn(shape, generator=gen)
    layer = DictResource(raw, alias=alias).subtree("layers.0")
    for name, declared in sem.layers[0].weights.items():
        got = layer.load(name)
        stored = raw[_hf_key(alias, name, f"{prefix}encoder.layer.0.")]
        assert tuple(got.shape) == declared.shape and got.is_contiguous()
        assert torch.equal(got, stored.t() if name in BERT_LINEAR else stored), name
    # MiniLM's projections are square, so only the values tell a missing transpose apart.
    assert sem.layers[0].weights["query"].shape == (cfg.hidden_size, cfg.hidden_size)


def test_alias_tables_pickle_and_name_their_read():
    """The read is a named module-level function: the table pickles and prints what it does."""
    cfg = config_from_dict({**DEMO_CONFIG, "tie_word_embeddings": True}, source="config")
    alias = causal_lm_alias(cfg)
    assert pickle.loads(pickle.dumps(alias)) == alias
    assert "transposed" in repr(alias["gate_proj"]) and "model.embed_tokens.weight" in repr(alias["lm_head"])
    weight = torch.randn(3, 5, generator=torch.Generator().manual_seed(1)).to(torch.bfloat16)
    out = transposed(weight)
    assert out.shape == (5, 3) and out.is_contiguous() and out.dtype == torch.bfloat16
    assert torch.equal(out, weight.t())


def test_prepare_writes_k_major_weights_that_load_without_an_alias(tmp_path):
    """seed 000 §1.1.2: prepare over the Hugging Face directory (through the alias table) writes the
    declared, K-major weights; that directory loads with no alias and computes the same logits."""
    ckpt = write_random_checkpoint(tmp_path / "hf", seed=2, tokenizer=False)
    cfg = config_from_dict(DEMO_CONFIG, source="config")
    sem = causal_lm(cfg, context=8)
    hf = SafetensorsResource(str(ckpt), device="cpu", alias=causal_lm_alias(cfg))
    sem.prepare(hf, str(tmp_path / "prepared"))
    direct = sem.load(hf)
    prepared = sem.load(SafetensorsResource(str(tmp_path / "prepared"), device="cpu"))
    assert prepared.layers[0].constants["down_proj"].shape == (cfg.intermediate_size, cfg.hidden_size)
    ids = torch.randint(0, cfg.vocab_size, (5,), generator=torch.Generator().manual_seed(4))

    def prefill(model):
        return model(*model.prepare_inputs(ids, 0, model.init_caches(device="cpu"), device="cpu"))[0]

    assert torch.equal(prefill(prepared), prefill(direct))


@pytest.mark.parametrize("variant", ["qwen3", "qwen2", "llama-tied"])
def test_out_in_layout_reads_linear_weights_as_stored_and_computes_the_same_logits(tmp_path, variant):
    """linear_layout="out_in" (cuda's): every Linear weight loads as the checkpoint stores it, a tied
    LM head is the embedding table itself, and a prefill gives the in_out Module's logits."""
    cfg = config_from_dict(VARIANTS[variant], source="config")
    ckpt = write_random_checkpoint(tmp_path / "hf", seed=5, config=VARIANTS[variant], tokenizer=False)
    models = {}
    for layout in ("in_out", "out_in"):
        sem = causal_lm(cfg, context=8, linear_layout=layout)
        resource = SafetensorsResource(str(ckpt), device="cpu", alias=causal_lm_alias(cfg, layout))
        models[layout] = sem.load(resource)
    out_in = models["out_in"]
    for name in CAUSAL_LINEAR:
        stored = out_in.layers[0].constants[name]
        assert torch.equal(stored.t(), models["in_out"].layers[0].constants[name]), name
    if cfg.tie_word_embeddings:
        assert torch.equal(out_in.constants["lm_head"], out_in.constants["embed_tokens"])
    ids = torch.randint(0, cfg.vocab_size, (5,), generator=torch.Generator().manual_seed(6))
    logits = {
        layout: m(*m.prepare_inputs(ids, 0, m.init_caches(device="cpu"), device="cpu"))[0]
        for layout, m in models.items()
    }
    # The layouts differ in summation order only (x @ w.T against x @ w): f32 rounding, measured
    # against the logits' scale rather than element by element (small logits carry absolute error).
    err = (logits["out_in"] - logits["in_out"]).norm() / logits["in_out"].norm()
    assert err < 1e-5, f"relative L2 error {float(err):.2e} between the out_in and in_out logits"


def test_an_unknown_linear_layout_is_refused_by_name():
    """A layout neither target reads fails before anything is built, naming the accepted ones."""
    cfg = config_from_dict(DEMO_CONFIG, source="config")
    with pytest.raises(ValueError, match=r"linear_layout must be one of in_out, out_in, got 'kn'"):
        causal_lm(cfg, context=8, linear_layout="kn")
