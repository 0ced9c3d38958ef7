"""Writing a small random-weight causal LM as a Hugging Face checkpoint directory.

    write_random_checkpoint("demo-ckpt/", seed=0)     # config.json + model.safetensors + tokenizer.json

The directory looks like what `save_pretrained` writes for the same config — the real key names,
`(out_features, in_features)` Linear weights, an omitted `lm_head.weight` when the embeddings are
tied — so everything that reads a downloaded checkpoint reads this one. It needs no download and
no `transformers`. The tokenizer is byte-level (one token per byte, no merges), so any text
round-trips and `--prompt` works on the result.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import save_file

from .config import CausalLMConfig, config_from_dict

# The demo model: Qwen3-shaped (GQA, q/k norms), small enough to run on the reference evaluator.
DEMO_CONFIG: dict[str, Any] = {
    "architectures": ["Qwen3ForCausalLM"],
    "model_type": "qwen3",
    "vocab_size": 256,
    "hidden_size": 128,
    "intermediate_size": 384,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 32,
    "hidden_act": "silu",
    "max_position_embeddings": 512,
    "rms_norm_eps": 1e-6,
    "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0},
    "tie_word_embeddings": False,
    "attention_bias": False,
    "use_sliding_window": False,
    "dtype": "float32",
    "bos_token_id": None,
    "eos_token_id": None,
}

_TORCH_DTYPES = {"f32": torch.float32, "bf16": torch.bfloat16, "f16": torch.float16}


def hf_shapes(cfg: CausalLMConfig) -> dict[str, tuple[int, ...]]:
    """Every key a Hugging Face checkpoint of `cfg` holds, with its shape."""
    h, d = cfg.hidden_size, cfg.head_dim
    q, kv = cfg.num_heads * d, cfg.num_kv_heads * d
    shapes: dict[str, tuple[int, ...]] = {
        "model.embed_tokens.weight": (cfg.vocab_size, h),
        "model.norm.weight": (h,),
    }
    if not cfg.tie_word_embeddings:
        shapes["lm_head.weight"] = (cfg.vocab_size, h)
    for i in range(cfg.num_layers):
        p = f"model.layers.{i}."
        layer = {
            "input_layernorm.weight": (h,),
            "self_attn.q_proj.weight": (q, h),
            "self_attn.k_proj.weight": (kv, h),
            "self_attn.v_proj.weight": (kv, h),
            "self_attn.o_proj.weight": (h, q),
            "post_attention_layernorm.weight": (h,),
            "mlp.gate_proj.weight": (cfg.intermediate_size, h),
            "mlp.up_proj.weight": (cfg.intermediate_size, h),
            "mlp.down_proj.weight": (h, cfg.intermediate_size),
        }
        if cfg.qkv_bias:
            layer.update(
                {
                    "self_attn.q_proj.bias": (q,),
                    "self_attn.k_proj.bias": (kv,),
                    "self_attn.v_proj.bias": (kv,),
                }
            )
        if cfg.qk_norm:
            layer.update({"self_attn.q_norm.weight": (d,), "self_attn.k_norm.weight": (d,)})
        shapes.update({p + k: s for k, s in layer.items()})
    return shapes


def random_weights(cfg: CausalLMConfig, *, seed: int) -> dict[str, torch.Tensor]:
    """Seeded random weights for every key of `hf_shapes(cfg)`, in the config's dtype.

    Matrices are drawn with std `fan_in ** -0.5` (embeddings with std 1) and norm weights around
    1, so activations keep their scale through the layers and the logits have clear maxima.
    """
    gen = torch.Generator().manual_seed(seed)
    dtype = _TORCH_DTYPES[cfg.dtype]
    out = {}
    for key, shape in sorted(hf_shapes(cfg).items()):
        x = torch.randn(shape, generator=gen, dtype=torch.float32)
        if key.endswith(("norm.weight", "layernorm.weight")):
            x = 1 + 0.1 * x
        elif key.endswith(".bias"):
            x = 0.1 * x
        elif "embed_tokens" not in key:
            x = x * shape[-1] ** -0.5
        out[key] = x.to(dtype)
    return out


def byte_tokenizer() -> dict[str, Any]:
    """A tokenizer.json document: byte-level, token id = byte value, no merges, no specials."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers

    alphabet = pre_tokenizers.ByteLevel.alphabet()
    # ByteLevel maps byte b to a printable character; order the vocabulary by byte value.
    by_byte = sorted(alphabet, key=lambda ch: _byte_of(ch))
    tok = Tokenizer(models.BPE(vocab={ch: i for i, ch in enumerate(by_byte)}, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    tok.decoder = decoders.ByteLevel()
    return json.loads(tok.to_str())


def _byte_of(ch: str) -> int:
    # GPT-2's byte-to-unicode table: printable Latin-1 bytes map to themselves, the rest to 256 + k.
    printable = [
        *range(ord("!"), ord("~") + 1),
        *range(ord("¡"), ord("¬") + 1),
        *range(ord("®"), ord("ÿ") + 1),
    ]
    if ord(ch) in printable:
        return ord(ch)
    rest = [b for b in range(256) if b not in printable]
    return rest[ord(ch) - 256]


def write_random_checkpoint(
    out_dir: str | Path, *, seed: int = 0, config: dict[str, Any] | None = None, tokenizer: bool = True
) -> Path:
    """Write config.json, model.safetensors (and tokenizer.json) of a random-weight causal LM.

    Args:
        out_dir: the directory to write (created if missing; existing files are replaced).
        seed: seeds the weights, so one seed always writes the same checkpoint.
        config: a config.json document; defaults to DEMO_CONFIG.
        tokenizer: also write the byte-level tokenizer (needs a vocabulary of at least 256).

    Returns:
        The directory.

    Raises:
        ConfigError: `config` is not a supported causal-LM configuration.
        ValueError: a tokenizer was asked for with a vocabulary under 256.
    """
    doc = dict(DEMO_CONFIG if config is None else config)
    cfg = config_from_dict(doc, source="config")
    if not isinstance(cfg, CausalLMConfig):
        raise ValueError(f"write_random_checkpoint writes causal LMs, got architecture {cfg.architecture}")
    if tokenizer and cfg.vocab_size < 256:
        raise ValueError(f"a byte-level tokenizer needs vocab_size >= 256, got {cfg.vocab_size}")
    path = Path(out_dir)
    path.mkdir(parents=True, exist_ok=True)
    (path / "config.json").write_text(json.dumps(doc, indent=2) + "\n")
    save_file(random_weights(cfg, seed=seed), str(path / "model.safetensors"), metadata={"format": "pt"})
    if tokenizer:
        (path / "tokenizer.json").write_text(json.dumps(byte_tokenizer()) + "\n")
    return path
