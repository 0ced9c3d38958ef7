"""Golden program: grouped-query attention written longhand, with an online (blockwise) softmax.

The loop over key blocks runs at trace time: it unrolls into BLOCKS copies of the update
    m' = max(m, rowmax(s)),  l' = l * exp(m - m') + rowsum(exp(s - m')),  acc' = acc * exp(m - m') + p @ v
so the graph holds no data-dependent control flow.
"""

import math

import torch

from tilefoundry.dsl import DimVar, Tensor, f32, func, tf

B, HQ, HKV, D, KV, BLOCK = 1, 4, 2, 16, 32, 8
Q = DimVar("queries", 1, 129)
SCALE = 1 / math.sqrt(D)


@func
def gqa_attention(
    q: Tensor[(B, HQ, Q, D), f32], k: Tensor[(B, HKV, KV, D), f32], v: Tensor[(B, HKV, KV, D), f32]
) -> Tensor[(B, HQ, Q, D), f32]:
    # Each group of HQ // HKV query heads reads one key/value head.
    k = tf.repeat_interleave(k, HQ // HKV, axis=1)
    v = tf.repeat_interleave(v, HQ // HKV, axis=1)
    m = tf.full((B, HQ, Q, 1), -math.inf, f32)
    l = tf.zeros((B, HQ, Q, 1), f32)
    acc = tf.zeros((B, HQ, Q, D), f32)
    for start in range(0, KV, BLOCK):
        kb, vb = k[:, :, start : start + BLOCK, :], v[:, :, start : start + BLOCK, :]
        s = (q @ kb.transpose(2, 3)) * SCALE
        m_new = tf.maximum(m, tf.max(s, axis=-1, keepdim=True))
        p = tf.exp(s - m_new)
        correction = tf.exp(m - m_new)
        l = l * correction + tf.sum(p, axis=-1, keepdim=True)
        acc = acc * correction + p @ vb
        m = m_new
    return acc / l


PROGRAM = run = gqa_attention


def inputs(g: torch.Generator) -> tuple[torch.Tensor, ...]:
    return (
        torch.randn(B, HQ, 6, D, generator=g),
        torch.randn(B, HKV, KV, D, generator=g),
        torch.randn(B, HKV, KV, D, generator=g),
    )


def reference(q, k, v):
    k, v = k.repeat_interleave(HQ // HKV, dim=1), v.repeat_interleave(HQ // HKV, dim=1)
    return torch.softmax(q @ k.transpose(2, 3) * SCALE, dim=-1) @ v
