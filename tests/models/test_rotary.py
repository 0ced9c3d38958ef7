"""Rotary tables: every scaling kind's inverse frequencies and attention factor equal transformers'."""

from __future__ import annotations

import pytest
import torch

from tilefoundry.models.config import ROPE_KINDS, config_from_dict
from tilefoundry.models.rotary import INV_FREQ, rotary_tables

BASE = {
    "architectures": ["LlamaForCausalLM"],
    "vocab_size": 32,
    "hidden_size": 128,
    "intermediate_size": 256,
    "num_hidden_layers": 1,
    "num_attention_heads": 2,
    "num_key_value_heads": 1,
    "max_position_embeddings": 256,
}

SCALINGS = {
    "default": {"rope_type": "default", "rope_theta": 500000.0},
    "linear": {"rope_type": "linear", "factor": 2.5, "rope_theta": 10000.0},
    "dynamic": {"rope_type": "dynamic", "factor": 3.0, "rope_theta": 10000.0},
    "llama3": {
        "rope_type": "llama3",
        "factor": 8.0,
        "low_freq_factor": 1.0,
        "high_freq_factor": 4.0,
        "original_max_position_embeddings": 64,
        "rope_theta": 500000.0,
    },
    "yarn": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 64, "rope_theta": 1e6},
    "yarn-mscale": {
        "rope_type": "yarn",
        "factor": 4.0,
        "original_max_position_embeddings": 64,
        "mscale": 0.707,
        "mscale_all_dim": 1.0,
        "beta_fast": 16,
        "truncate": False,
        "rope_theta": 10000.0,
    },
}


def test_every_supported_kind_has_a_rule():
    assert set(INV_FREQ) == set(ROPE_KINDS)


@pytest.mark.parametrize("name", list(SCALINGS))
@pytest.mark.parametrize("seq_len", [100, 700])
def test_inv_freq_matches_transformers(name, seq_len):
    """Inverse frequencies and cos/sin scale as transformers computes them (dynamic grows past 256)."""
    from transformers import LlamaConfig
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    params = SCALINGS[name]
    cfg = config_from_dict({**BASE, "rope_parameters": dict(params)})
    hf = LlamaConfig(**{k: v for k, v in BASE.items() if k != "architectures"}, rope_parameters=dict(params))
    kind = params["rope_type"]
    if kind == "default":
        theirs, their_scale = 1.0 / (params["rope_theta"] ** (torch.arange(0, 64, 2).float() / 64)), 1.0
    else:
        theirs, their_scale = ROPE_INIT_FUNCTIONS[kind](hf, "cpu", seq_len=seq_len)
    ours, scale = INV_FREQ[kind](cfg.rope, cfg.head_dim, cfg.max_positions, seq_len)
    torch.testing.assert_close(ours, theirs, rtol=1e-6, atol=0)
    assert scale == pytest.approx(their_scale, rel=1e-12)


def test_tables_are_cos_and_sin_of_position_times_frequency():
    """Row p is cos(p * inv_freq) over both halves, scaled, rounded once to the dtype."""
    cfg = config_from_dict({**BASE, "rope_parameters": dict(SCALINGS["yarn"])})
    cos, sin = rotary_tables(
        cfg.rope, head_dim=64, max_positions=256, length=10, seq_len=10, dtype=torch.bfloat16, device="cpu"
    )
    inv_freq, scale = INV_FREQ["yarn"](cfg.rope, 64, 256, 10)
    angles = torch.arange(10).float()[:, None] * inv_freq
    assert cos.shape == sin.shape == (10, 64) and cos.dtype == torch.bfloat16
    torch.testing.assert_close(cos, (torch.cat((angles, angles), -1).cos() * scale).bfloat16())
    torch.testing.assert_close(sin[:, 32:], (angles.sin() * scale).bfloat16())
