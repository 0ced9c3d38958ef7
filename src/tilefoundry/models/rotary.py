"""Rotary-embedding tables for the causal-LM family: inverse frequencies per scaling kind.

The DSL model takes `cos` and `sin` tables `(P, D)` as activation inputs and `tf.rope` gathers
the rows at each token's position. This module computes those tables on the host side, as the
model's own `prepare_inputs` does every step:

    cos, sin = rotary_tables(cfg.rope, head_dim=64, max_positions=2048, length=P, seq_len=n,
                             dtype=torch.float32, device="cpu")

Each scaling kind (`default linear dynamic llama3 yarn`) is one entry of INV_FREQ, computed as
Hugging Face transformers computes it, so the tables agree with a transformers run of the same
config.json. `seq_len` (positions used so far, this step included) matters only to `dynamic`.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable

import torch

from .config import RopeConfig

# kind -> (rope, head_dim, max_positions, seq_len) -> (inverse frequencies (D/2,) f32, cos/sin scale)
InvFreq = Callable[[RopeConfig, int, int, int], tuple[torch.Tensor, float]]
INV_FREQ: dict[str, InvFreq] = {}


def _register(kind: str) -> Callable[[InvFreq], InvFreq]:
    def deco(fn: InvFreq) -> InvFreq:
        INV_FREQ[kind] = fn
        return fn

    return deco


def _base_inv_freq(theta: float, dim: int) -> torch.Tensor:
    return 1.0 / (theta ** (torch.arange(0, dim, 2, dtype=torch.int64).to(torch.float32) / dim))


@_register("default")
def _default(rope: RopeConfig, dim: int, max_positions: int, seq_len: int) -> tuple[torch.Tensor, float]:
    return _base_inv_freq(rope.theta, dim), 1.0


@_register("linear")
def _linear(rope: RopeConfig, dim: int, max_positions: int, seq_len: int) -> tuple[torch.Tensor, float]:
    # Scaling positions by 1/factor is scaling the frequencies by it.
    return _base_inv_freq(rope.theta, dim) / rope.factor, 1.0


@_register("dynamic")
def _dynamic(rope: RopeConfig, dim: int, max_positions: int, seq_len: int) -> tuple[torch.Tensor, float]:
    # NTK-aware: the base grows once the sequence outgrows the trained context, never shrinks below it.
    n = max(seq_len, max_positions)
    base = rope.theta * ((rope.factor * n / max_positions) - (rope.factor - 1)) ** (dim / (dim - 2))
    return _base_inv_freq(base, dim), 1.0


@_register("llama3")
def _llama3(rope: RopeConfig, dim: int, max_positions: int, seq_len: int) -> tuple[torch.Tensor, float]:
    inv_freq = _base_inv_freq(rope.theta, dim)
    old = rope.original_max_positions or max_positions
    low_wavelen = old / rope.low_freq_factor
    high_wavelen = old / rope.high_freq_factor
    wavelen = 2 * math.pi / inv_freq
    # Long wavelengths are divided by the factor, short ones kept, the band between interpolated.
    scaled = torch.where(wavelen > low_wavelen, inv_freq / rope.factor, inv_freq)
    smooth = (old / wavelen - rope.low_freq_factor) / (rope.high_freq_factor - rope.low_freq_factor)
    smoothed = (1 - smooth) * scaled / rope.factor + smooth * scaled
    medium = ~(wavelen < high_wavelen) * ~(wavelen > low_wavelen)
    return torch.where(medium, smoothed, scaled), 1.0


def _yarn_mscale(scale: float, mscale: float = 1.0) -> float:
    return 1.0 if scale <= 1 else 0.1 * mscale * math.log(scale) + 1.0


@_register("yarn")
def _yarn(rope: RopeConfig, dim: int, max_positions: int, seq_len: int) -> tuple[torch.Tensor, float]:
    factor = rope.factor
    if rope.attention_factor is not None:
        attention_factor = rope.attention_factor
    elif rope.mscale and rope.mscale_all_dim:
        attention_factor = _yarn_mscale(factor, rope.mscale) / _yarn_mscale(factor, rope.mscale_all_dim)
    else:
        attention_factor = _yarn_mscale(factor)
    original = rope.original_max_positions or max_positions

    def correction_dim(rotations: float) -> float:
        return (dim * math.log(original / (rotations * 2 * math.pi))) / (2 * math.log(rope.theta))

    low, high = correction_dim(rope.beta_fast), correction_dim(rope.beta_slow)
    if rope.truncate:
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, dim - 1)
    if low == high:
        high += 0.001  # a zero-width ramp would divide by zero
    ramp = torch.clamp((torch.arange(dim // 2, dtype=torch.float32) - low) / (high - low), 0, 1)
    pos_freqs = rope.theta ** (torch.arange(0, dim, 2).to(torch.float32) / dim)
    extrapolation = 1 - ramp  # 1 keeps a dim's original frequency, 0 interpolates it fully
    inv_freq = (1.0 / (factor * pos_freqs)) * (1 - extrapolation) + (1.0 / pos_freqs) * extrapolation
    return inv_freq, float(attention_factor)


def rotary_tables(
    rope: RopeConfig,
    *,
    head_dim: int,
    max_positions: int,
    length: int,
    seq_len: int,
    dtype: torch.dtype,
    device: torch.device | str,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The `cos` and `sin` tables `(length, head_dim)` for positions `0 .. length - 1`.

    Row p is `cos(p * inv_freq)` (and sin) repeated over both halves of the head, times the
    kind's attention factor, computed in f32 and rounded once to `dtype`. Calls that come to the
    same frequencies share the tables: read them, never write them.

    Args:
        max_positions: the config's max_position_embeddings.
        seq_len: how many positions the sequence uses after this step (for `dynamic`).
    """
    inv_freq, scale = INV_FREQ[rope.kind](rope, head_dim, max_positions, seq_len)
    return _tables(tuple(inv_freq.tolist()), scale, length, dtype, str(device))


@functools.lru_cache(maxsize=16)
def _tables(
    inv_freq: tuple[float, ...], scale: float, length: int, dtype: torch.dtype, device: str
) -> tuple[torch.Tensor, torch.Tensor]:
    """The tables of one set of frequencies, built once: a decode step asks for them every token,
    and building them copies the frequencies to the device, a copy that waits for the GPU."""
    positions = torch.arange(length, dtype=torch.float32, device=device)
    freqs = torch.outer(positions, torch.tensor(inv_freq, dtype=torch.float32).to(device))
    emb = torch.cat((freqs, freqs), dim=-1)
    return (emb.cos() * scale).to(dtype), (emb.sin() * scale).to(dtype)
