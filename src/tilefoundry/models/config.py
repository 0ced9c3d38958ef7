"""Model configurations read from a Hugging Face checkpoint's own config.json.

    cfg = read_config("ckpt/")          # a CausalLMConfig or a BertConfig, by `architectures`
    cfg.num_layers, cfg.rope.kind       # only what the DSL models use, validated once here

Supported architectures: LlamaForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM (one causal-LM
family) and BertModel (an encoder). Anything else is refused, naming the supported ones. Both
the current `rope_parameters` form of config.json and the older `rope_theta` + `rope_scaling`
form are read.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tilefoundry.ir.errors import TileFoundryError

CAUSAL_LM_ARCHITECTURES = ("LlamaForCausalLM", "Qwen2ForCausalLM", "Qwen3ForCausalLM")
ENCODER_ARCHITECTURES = ("BertModel",)
SUPPORTED_ARCHITECTURES = CAUSAL_LM_ARCHITECTURES + ENCODER_ARCHITECTURES
ROPE_KINDS = ("default", "linear", "dynamic", "llama3", "yarn")

# config.json's dtype spellings -> DSL dtype names.
_DTYPES = {"float32": "f32", "bfloat16": "bf16", "float16": "f16"}


class ConfigError(TileFoundryError):
    """A config.json the models cannot build from: `where` is the file, `expected`/`got` the field."""


@dataclass(frozen=True)
class RopeConfig:
    """Rotary embedding parameters, as `rope_parameters` (or `rope_theta` + `rope_scaling`) give them.

    Attributes:
        kind: one of ROPE_KINDS.
        theta: the frequency base.
        factor: the context scaling factor (linear, dynamic, llama3, yarn).
        original_max_positions: the pretraining context (llama3, yarn).
        low_freq_factor, high_freq_factor: llama3's band edges.
        beta_fast, beta_slow: yarn's correction range, in rotations.
        attention_factor: yarn's cos/sin scale; None derives it from factor (and mscale).
        mscale, mscale_all_dim: yarn's optional terms of that derivation.
        truncate: yarn rounds its correction range to whole dims.
    """

    kind: str = "default"
    theta: float = 10000.0
    factor: float = 1.0
    original_max_positions: int | None = None
    low_freq_factor: float = 1.0
    high_freq_factor: float = 4.0
    beta_fast: float = 32.0
    beta_slow: float = 1.0
    attention_factor: float | None = None
    mscale: float | None = None
    mscale_all_dim: float | None = None
    truncate: bool = True


@dataclass(frozen=True)
class CausalLMConfig:
    """One decoder-only LM of the Llama / Qwen2 / Qwen3 family.

    Attributes:
        architecture: the `architectures` entry it was built from.
        qkv_bias: q/k/v projections carry a bias (Qwen2).
        qk_norm: per-head RMSNorm of q and k before the rotary embedding (Qwen3).
        tie_word_embeddings: the LM head reads the embedding table.
        dtype: the DSL dtype name of the weights ("f32", "bf16", "f16").
        eos_token_ids: the ids that end generation (possibly none).
    """

    architecture: str
    vocab_size: int
    hidden_size: int
    intermediate_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    rms_norm_eps: float
    max_positions: int
    rope: RopeConfig
    qkv_bias: bool
    qk_norm: bool
    tie_word_embeddings: bool
    dtype: str
    bos_token_id: int | None
    eos_token_ids: tuple[int, ...]

    @property
    def max_context(self) -> int:
        """The most positions one sequence may use.

        max_position_embeddings, except under `dynamic` rotary scaling, whose point is to
        stretch the trained context by its factor as a sequence outgrows it.
        """
        if self.rope.kind == "dynamic":
            return int(self.max_positions * self.rope.factor)
        return self.max_positions


@dataclass(frozen=True)
class BertConfig:
    """A BERT encoder (all-MiniLM-L6-v2 and its kin)."""

    architecture: str
    vocab_size: int
    hidden_size: int
    intermediate_size: int
    num_layers: int
    num_heads: int
    layer_norm_eps: float
    max_positions: int
    type_vocab_size: int
    dtype: str

    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.num_heads


ModelConfig = CausalLMConfig | BertConfig


def read_config(ckpt_dir: str | Path) -> ModelConfig:
    """The model configuration of the checkpoint directory `ckpt_dir` (its config.json).

    Raises:
        FileNotFoundError: the directory, or its config.json, does not exist.
        ConfigError: config.json is not JSON, names an unsupported architecture (the message
            lists the supported ones), or lacks or misstates a field the model needs.
    """
    path = Path(ckpt_dir)
    if not path.is_dir():
        raise FileNotFoundError(f"checkpoint directory {str(path)!r} does not exist")
    file = path / "config.json"
    if not file.is_file():
        held = ", ".join(sorted(p.name for p in path.iterdir())) or "nothing"
        raise FileNotFoundError(f"{str(path)!r} has no config.json (it holds: {held})")
    try:
        raw = json.loads(file.read_text())
    except json.JSONDecodeError as err:
        raise ConfigError(f"{file}: not valid JSON ({err})", where=str(file)) from None
    if not isinstance(raw, dict):
        raise ConfigError(f"{file}: expected a JSON object", where=str(file), got=type(raw).__name__)
    return config_from_dict(raw, source=str(file))


def config_from_dict(raw: dict[str, Any], *, source: str = "config.json") -> ModelConfig:
    """The model configuration a parsed config.json describes (see `read_config`)."""
    fields = _Fields(raw, source)
    architectures = raw.get("architectures") or []
    arch = next((a for a in architectures if a in SUPPORTED_ARCHITECTURES), None)
    if arch is None:
        raise ConfigError(
            f"{source}: architectures {architectures!r} holds no supported architecture; "
            f"supported: {', '.join(SUPPORTED_ARCHITECTURES)}",
            where=source,
            expected=SUPPORTED_ARCHITECTURES,
            got=architectures,
        )
    if arch in ENCODER_ARCHITECTURES:
        return _bert(fields, arch)
    return _causal_lm(fields, arch)


class _Fields:
    """Typed reads of config.json fields, each refusal naming the file and the field."""

    def __init__(self, raw: dict[str, Any], source: str) -> None:
        self.raw = raw
        self.source = source

    def refuse(self, field: str, expected: str, got: object) -> ConfigError:
        return ConfigError(
            f"{self.source}: {field} is {got!r}, expected {expected}",
            where=f"{self.source}:{field}",
            expected=expected,
            got=got,
        )

    def int(self, field: str, default: int | None = None, *, minimum: int = 1) -> int:
        value = self.raw.get(field, default)
        if value is None and default is None and field not in self.raw:
            raise ConfigError(
                f"{self.source}: missing field {field!r}", where=f"{self.source}:{field}", expected=field
            )
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            raise self.refuse(field, f"an int >= {minimum}", value)
        return value

    def float(self, field: str, default: float) -> float:
        value = self.raw.get(field, default)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
            raise self.refuse(field, "a number >= 0", value)
        return float(value)

    def flag(self, field: str, default: bool) -> bool:
        value = self.raw.get(field, default)
        if not isinstance(value, bool):
            raise self.refuse(field, "true or false", value)
        return value

    def dtype(self) -> str:
        value = self.raw.get("dtype") or self.raw.get("torch_dtype") or "float32"
        if value not in _DTYPES:
            raise self.refuse("dtype", f"one of {', '.join(_DTYPES)}", value)
        return _DTYPES[value]

    def token_ids(self, field: str) -> tuple[int, ...]:
        value = self.raw.get(field)
        items = [] if value is None else value if isinstance(value, list) else [value]
        if not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in items):
            raise self.refuse(field, "a token id, a list of them, or null", value)
        return tuple(items)


def _causal_lm(f: _Fields, arch: str) -> CausalLMConfig:
    act = f.raw.get("hidden_act", "silu")
    if act != "silu":
        raise f.refuse("hidden_act", f'"silu" (the SwiGLU MLP of {arch})', act)
    for field in ("mlp_bias", "use_sliding_window"):
        if f.flag(field, False):
            raise f.refuse(field, f"false (the causal-LM family of {arch} does not support it)", True)
    if arch != "Qwen2ForCausalLM" and f.flag("attention_bias", False):
        raise f.refuse(
            "attention_bias", f"false (an output-projection bias is not supported for {arch})", True
        )
    hidden = f.int("hidden_size")
    heads = f.int("num_attention_heads")
    kv_heads = f.int("num_key_value_heads", heads)
    if heads % kv_heads:
        raise f.refuse("num_key_value_heads", f"a divisor of num_attention_heads ({heads})", kv_heads)
    head_dim = f.raw.get("head_dim") or hidden // heads
    if not isinstance(head_dim, int) or head_dim % 2:
        raise f.refuse("head_dim", "an even int (the rotary embedding rotates pairs)", head_dim)
    eos = f.token_ids("eos_token_id")
    bos = f.token_ids("bos_token_id")
    return CausalLMConfig(
        architecture=arch,
        vocab_size=f.int("vocab_size"),
        hidden_size=hidden,
        intermediate_size=f.int("intermediate_size"),
        num_layers=f.int("num_hidden_layers"),
        num_heads=heads,
        num_kv_heads=kv_heads,
        head_dim=head_dim,
        rms_norm_eps=f.float("rms_norm_eps", 1e-6),
        max_positions=f.int("max_position_embeddings"),
        rope=_rope(f),
        qkv_bias=arch == "Qwen2ForCausalLM",
        qk_norm=arch == "Qwen3ForCausalLM",
        tie_word_embeddings=f.flag("tie_word_embeddings", False),
        dtype=f.dtype(),
        bos_token_id=bos[0] if bos else None,
        eos_token_ids=eos,
    )


def _rope(f: _Fields) -> RopeConfig:
    params = dict(f.raw.get("rope_parameters") or f.raw.get("rope_scaling") or {})
    field = "rope_parameters" if "rope_parameters" in f.raw else "rope_scaling"
    kind = params.get("rope_type", params.get("type", "default"))
    if kind not in ROPE_KINDS:
        raise f.refuse(f"{field}.rope_type", f"one of {', '.join(ROPE_KINDS)}", kind)
    partial = params.get("partial_rotary_factor", f.raw.get("partial_rotary_factor", 1.0))
    if partial != 1.0:
        raise f.refuse("partial_rotary_factor", "1.0 (the rotary embedding covers the whole head)", partial)
    sub = _Fields(params, f"{f.source}:{field}")
    theta = params.get("rope_theta", f.raw.get("rope_theta", 10000.0))
    if isinstance(theta, bool) or not isinstance(theta, (int, float)) or theta <= 1:
        raise f.refuse("rope_theta", "a number > 1", theta)
    scaled = kind != "default"
    factor = sub.float("factor", 1.0) if scaled else 1.0
    if scaled and "factor" not in params and kind != "yarn":
        raise f.refuse(f"{field}.factor", f"a scaling factor for rope_type {kind!r}", None)
    original = None
    if kind in ("llama3", "yarn"):
        original = f.raw.get("original_max_position_embeddings") or params.get(
            "original_max_position_embeddings", f.raw.get("max_position_embeddings")
        )
        original = _Fields({"original_max_position_embeddings": original}, sub.source).int(
            "original_max_position_embeddings"
        )
        if kind == "yarn" and "factor" not in params:
            # NOTE: as transformers does: the scaling is the ratio of the two contexts.
            factor = f.int("max_position_embeddings") / original
    attention_factor = params.get("attention_factor")
    return RopeConfig(
        kind=kind,
        theta=float(theta),
        factor=factor,
        original_max_positions=original,
        low_freq_factor=sub.float("low_freq_factor", 1.0),
        high_freq_factor=sub.float("high_freq_factor", 4.0),
        beta_fast=float(params.get("beta_fast") or 32.0),
        beta_slow=float(params.get("beta_slow") or 1.0),
        attention_factor=None if attention_factor is None else float(attention_factor),
        mscale=params.get("mscale"),
        mscale_all_dim=params.get("mscale_all_dim"),
        truncate=bool(params.get("truncate", True)),
    )


def _bert(f: _Fields, arch: str) -> BertConfig:
    act = f.raw.get("hidden_act", "gelu")
    if act != "gelu":
        raise f.refuse("hidden_act", f'"gelu" (the erf GELU of {arch})', act)
    kind = f.raw.get("position_embedding_type", "absolute")
    if kind != "absolute":
        raise f.refuse("position_embedding_type", '"absolute"', kind)
    hidden = f.int("hidden_size")
    heads = f.int("num_attention_heads")
    if hidden % heads:
        raise f.refuse("num_attention_heads", f"a divisor of hidden_size ({hidden})", heads)
    return BertConfig(
        architecture=arch,
        vocab_size=f.int("vocab_size"),
        hidden_size=hidden,
        intermediate_size=f.int("intermediate_size"),
        num_layers=f.int("num_hidden_layers"),
        num_heads=heads,
        layer_norm_eps=f.float("layer_norm_eps", 1e-12),
        max_positions=f.int("max_position_embeddings"),
        type_vocab_size=f.int("type_vocab_size", 2),
        dtype=f.dtype(),
    )
