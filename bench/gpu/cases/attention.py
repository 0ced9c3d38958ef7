"""Attention cases: prefill (causal and full, multi-head) and decode (grouped-query, one query).

Both use `tf.attention` in sdpa layout, q (B, Hq, Sq, D), k and v (B, Hkv, Skv, D). Batch and
sequence are DimVars, so one build serves every size of a variant. Prefill is held to torch
sdpa with the flash backend forced (>= 0.9x, issue 7); decode reads the whole cache for one
token and is held to >= 80% of HBM bandwidth, beside torch sdpa with enable_gqa.
"""

import contextlib
import math

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from tilefoundry.dsl import DimVar, Tensor, bf16, func, tf

from ..floors import attention_work
from ..goals import AtLimit, BeatsPeer
from . import PEERS, KernelCase, Peer, generator, randn

BF16 = torch.bfloat16
MAX_BATCH = 8
MAX_SEQ = 32768


def _qkv(b: int, hq: int, hkv: int, sq: int, skv: int, d: int):
    def make(device: torch.device, seed: int) -> tuple:
        g = generator(device, seed)
        return (
            randn(g, (b, hq, sq, d), BF16, device),
            randn(g, (b, hkv, skv, d), BF16, device),
            randn(g, (b, hkv, skv, d), BF16, device),
        )

    return make


def _flash(causal: bool, scale: float):
    def run(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        # NOTE: flash exists on CUDA only; a CPU smoke run gets torch's own choice.
        forced = sdpa_kernel(SDPBackend.FLASH_ATTENTION) if q.is_cuda else contextlib.nullcontext()
        with forced:
            return F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale)

    return run


def prefill(b: int, h: int, s: int, d: int, *, causal: bool) -> KernelCase:
    """Self-attention over s tokens, h heads of dim d; causal or full."""
    scale = 1 / math.sqrt(d)
    mask = "causal" if causal else "full"

    def ours():
        B, S = DimVar("batch", 1, MAX_BATCH + 1), DimVar("seq", 1, MAX_SEQ + 1)

        @func
        def attention_prefill(
            q: Tensor[(B, h, S, d), bf16], k: Tensor[(B, h, S, d), bf16], v: Tensor[(B, h, S, d), bf16]
        ):
            return tf.attention(q, k, v, scale=scale, causal=causal)

        return attention_prefill

    return KernelCase(
        id=f"attention/prefill/{mask}/b{b}-h{h}-s{s}",
        shape=f"B{b} H{h} S{s} D{d}",
        dtype="bf16",
        work=attention_work(b, h, h, s, s, d, causal=causal),
        kernel=f"attention/prefill/{mask}/h{h}d{d}",
        ours=ours,
        inputs=_qkv(b, h, h, s, s, d),
        peers=(Peer("sdpa", lambda: _flash(causal, scale)),),
        goals=(BeatsPeer(PEERS["sdpa"], 0.9),),
    )


def _sdpa_gqa(scale: float):
    def run(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return F.scaled_dot_product_attention(q, k, v, scale=scale, enable_gqa=True)

    return run


def decode(b: int, hq: int, hkv: int, context: int, d: int) -> KernelCase:
    """One query token per sequence over a cache of `context` keys, Hq / Hkv query heads per kv head."""
    scale = 1 / math.sqrt(d)

    def ours():
        B, S = DimVar("batch", 1, MAX_BATCH + 1), DimVar("context", 1, MAX_SEQ + 1)

        @func
        def attention_decode(
            q: Tensor[(B, hq, 1, d), bf16], k: Tensor[(B, hkv, S, d), bf16], v: Tensor[(B, hkv, S, d), bf16]
        ):
            return tf.attention(q, k, v, scale=scale)

        return attention_decode

    return KernelCase(
        id=f"attention/decode/b{b}-ctx{context}",
        shape=f"B{b} Hq{hq} Hkv{hkv} ctx{context} D{d}",
        dtype="bf16",
        work=attention_work(b, hq, hkv, 1, context, d, causal=False),
        kernel=f"attention/decode/hq{hq}hkv{hkv}d{d}",
        ours=ours,
        inputs=_qkv(b, hq, hkv, 1, context, d),
        peers=(Peer("sdpa_gqa", lambda: _sdpa_gqa(scale)),),
        goals=(AtLimit(0.8),),
    )
