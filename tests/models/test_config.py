"""config.json reading: both rotary spellings, the family features, and every refusal's message."""

from __future__ import annotations

import json

import pytest

from tilefoundry.models.config import BertConfig, CausalLMConfig, ConfigError, config_from_dict, read_config

LLAMA = {
    "architectures": ["LlamaForCausalLM"],
    "vocab_size": 128,
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "max_position_embeddings": 64,
    "eos_token_id": [2, 7],
    "dtype": "bfloat16",
}


def test_current_and_legacy_rotary_spellings_read_alike():
    """`rope_parameters` (rope_theta inside) and `rope_theta` + `rope_scaling` give one RopeConfig."""
    scaling = {
        "factor": 8.0,
        "low_freq_factor": 1.0,
        "high_freq_factor": 4.0,
        "original_max_position_embeddings": 16,
    }
    current = config_from_dict(
        {**LLAMA, "rope_parameters": {"rope_type": "llama3", "rope_theta": 5e5, **scaling}}
    )
    legacy = config_from_dict({**LLAMA, "rope_theta": 5e5, "rope_scaling": {"type": "llama3", **scaling}})
    assert current.rope == legacy.rope
    assert (current.rope.kind, current.rope.theta, current.rope.original_max_positions) == ("llama3", 5e5, 16)


def test_family_features_follow_the_architecture():
    llama = config_from_dict(LLAMA)
    qwen2 = config_from_dict({**LLAMA, "architectures": ["Qwen2ForCausalLM"]})
    qwen3 = config_from_dict({**LLAMA, "architectures": ["Qwen3ForCausalLM"], "head_dim": 32})
    assert isinstance(llama, CausalLMConfig)
    assert (llama.qkv_bias, llama.qk_norm, llama.head_dim, llama.dtype) == (False, False, 16, "bf16")
    assert (qwen2.qkv_bias, qwen2.qk_norm) == (True, False)
    assert (qwen3.qkv_bias, qwen3.qk_norm, qwen3.head_dim) == (False, True, 32)
    assert llama.eos_token_ids == (2, 7) and not llama.tie_word_embeddings


def test_dynamic_scaling_stretches_the_context():
    """Under dynamic NTK scaling the model may run past max_position_embeddings by its factor."""
    plain = config_from_dict(LLAMA)
    dynamic = config_from_dict({**LLAMA, "rope_scaling": {"rope_type": "dynamic", "factor": 2.0}})
    assert (plain.max_context, dynamic.max_context) == (64, 128)


def test_bert_reads_as_an_encoder():
    bert = config_from_dict(
        {
            "architectures": ["BertModel"],
            "vocab_size": 30522,
            "hidden_size": 384,
            "intermediate_size": 1536,
            "num_hidden_layers": 6,
            "num_attention_heads": 12,
            "max_position_embeddings": 512,
            "layer_norm_eps": 1e-12,
        }
    )
    assert isinstance(bert, BertConfig)
    assert (bert.head_dim, bert.type_vocab_size, bert.dtype) == (32, 2, "f32")


def test_unsupported_architecture_names_the_supported():
    with pytest.raises(ConfigError) as err:
        config_from_dict({**LLAMA, "architectures": ["MistralForCausalLM"]})
    assert str(err.value).startswith("config.json: architectures ['MistralForCausalLM'] holds no supported")
    assert "supported: LlamaForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM, BertModel" in str(err.value)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"hidden_act": "gelu"}, "hidden_act is 'gelu', expected \"silu\""),
        ({"use_sliding_window": True}, "use_sliding_window is True, expected false"),
        ({"attention_bias": True}, "attention_bias is True, expected false (an output-projection bias"),
        (
            {"num_key_value_heads": 3},
            "num_key_value_heads is 3, expected a divisor of num_attention_heads (4)",
        ),
        ({"head_dim": 15}, "head_dim is 15, expected an even int"),
        (
            {"rope_scaling": {"rope_type": "longrope"}},
            "rope_scaling.rope_type is 'longrope', expected one of",
        ),
        ({"rope_scaling": {"rope_type": "linear"}}, "rope_scaling.factor is None, expected a scaling factor"),
        ({"partial_rotary_factor": 0.5}, "partial_rotary_factor is 0.5, expected 1.0"),
        ({"dtype": "float8"}, "dtype is 'float8', expected one of float32, bfloat16, float16"),
        ({"vocab_size": 0}, "vocab_size is 0, expected an int >= 1"),
    ],
)
def test_unsupported_fields_are_refused_by_name(change, message):
    with pytest.raises(ConfigError) as err:
        config_from_dict({**LLAMA, **change})
    assert message in str(err.value)


def test_missing_field_is_named():
    without = {k: v for k, v in LLAMA.items() if k != "intermediate_size"}
    with pytest.raises(ConfigError, match=r"config\.json: missing field 'intermediate_size'"):
        config_from_dict(without)


def test_read_config_reports_missing_directory_and_file(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"checkpoint directory '.*nowhere' does not exist"):
        read_config(tmp_path / "nowhere")
    (tmp_path / "model.safetensors").write_bytes(b"")
    with pytest.raises(FileNotFoundError, match=r"has no config.json \(it holds: model.safetensors\)"):
        read_config(tmp_path)
    (tmp_path / "config.json").write_text("{not json")
    with pytest.raises(ConfigError, match=r"config\.json: not valid JSON"):
        read_config(tmp_path)
    (tmp_path / "config.json").write_text(json.dumps(LLAMA))
    assert read_config(tmp_path).num_layers == 2
