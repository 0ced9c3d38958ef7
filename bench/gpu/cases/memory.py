"""Memory-bound row and elementwise cases: pointwise chains, norms, softmax, argmax, RoPE (alone
and after a per-head RMS norm, as Qwen3's q and k take it), gather, KV update.

Every case here moves bytes and does next to no matrix work, so its limit is the copy bandwidth.
The torch eager peer is what a model's own code runs (Hugging Face's formulas); torch.compile
is the same function compiled. Goals (issue 7): >= 85% of copy bandwidth at >= 256 MB moved,
and >= 1.0x torch.compile.
"""

import math

import torch
import torch.nn.functional as F

from tilefoundry.dsl import ConstTensor, Tensor, bf16, func, i64, tf

from ..floors import Work, tensor_bytes
from ..goals import AtLimit, BeatsPeer
from . import PEERS, KernelCase, eager_and_compiled, generator, randn

GOALS = (AtLimit(0.85, min_bytes=256e6), BeatsPeer(PEERS["compile"], 1.0))
BF16 = torch.bfloat16
EPS_RMS = 1e-6
EPS_LN = 1e-5


def _moved(*tensors: tuple[tuple[int, ...], str]) -> Work:
    return Work(0.0, float(sum(tensor_bytes(s, d) for s, d in tensors)))


def _one_row(rows: int, cols: int):
    def make(device: torch.device, seed: int) -> tuple:
        return (randn(generator(device, seed), (rows, cols), BF16, device),)

    return make


def _two_rows(rows: int, cols: int):
    def make(device: torch.device, seed: int) -> tuple:
        g = generator(device, seed)
        return randn(g, (rows, cols), BF16, device), randn(g, (rows, cols), BF16, device)

    return make


# ---------------------------------------------------------------- pointwise chains


def _swiglu_torch(g: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
    return F.silu(g) * u


def swiglu(rows: int, cols: int) -> KernelCase:
    """silu(g) * u: the MLP's gate, two reads and one write."""

    def ours():
        @func
        def swiglu(g: Tensor[(rows, cols), bf16], u: Tensor[(rows, cols), bf16]):
            return tf.silu(g) * u

        return swiglu

    m = ((rows, cols), "bf16")
    return KernelCase(
        id=f"pointwise/swiglu/{rows}x{cols}",
        shape=f"{rows}x{cols}",
        dtype="bf16",
        work=_moved(m, m, m),
        kernel=f"swiglu/{rows}x{cols}",
        ours=ours,
        inputs=_two_rows(rows, cols),
        peers=eager_and_compiled(_swiglu_torch),
        goals=GOALS,
    )


def _gelu_chain_torch(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return F.gelu(x * 1.702 + y, approximate="tanh") * y - x


def gelu_chain(rows: int, cols: int) -> KernelCase:
    """gelu_tanh(x * 1.702 + y) * y - x: five elementwise ops, two reads and one write."""

    def ours():
        @func
        def gelu_chain(x: Tensor[(rows, cols), bf16], y: Tensor[(rows, cols), bf16]):
            return tf.gelu(x * 1.702 + y, approximate="tanh") * y - x

        return gelu_chain

    m = ((rows, cols), "bf16")
    return KernelCase(
        id=f"pointwise/gelu_chain/{rows}x{cols}",
        shape=f"{rows}x{cols}",
        dtype="bf16",
        work=_moved(m, m, m),
        kernel=f"gelu_chain/{rows}x{cols}",
        ours=ours,
        inputs=_two_rows(rows, cols),
        peers=eager_and_compiled(_gelu_chain_torch),
        goals=GOALS,
    )


# ---------------------------------------------------------------- norms and softmax


def _rms_norm_torch(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    # Hugging Face's Qwen3RMSNorm: f32 statistics, rounded, then scaled.
    xf = x.float()
    return w * (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + EPS_RMS)).to(x.dtype)


def _row_and_weights(rows: int, hidden: int, n_weights: int):
    def make(device: torch.device, seed: int) -> tuple:
        g = generator(device, seed)
        x = randn(g, (rows, hidden), BF16, device)
        ws = tuple((1 + 0.1 * randn(g, (hidden,), torch.float32, device)).to(BF16) for _ in range(n_weights))
        return (x, *ws)

    return make


def rms_norm(rows: int, hidden: int) -> KernelCase:
    """tf.rms_norm over the last dim."""

    def ours():
        @func
        def rms_norm(x: Tensor[(rows, hidden), bf16], w: ConstTensor[(hidden,), bf16]):
            return tf.rms_norm(x, w, eps=EPS_RMS)

        return rms_norm

    m = ((rows, hidden), "bf16")
    return KernelCase(
        id=f"rms_norm/{rows}x{hidden}",
        shape=f"{rows}x{hidden}",
        dtype="bf16",
        work=_moved(m, m, ((hidden,), "bf16")),
        kernel=f"rms_norm/{rows}x{hidden}",
        ours=ours,
        inputs=_row_and_weights(rows, hidden, 1),
        peers=eager_and_compiled(_rms_norm_torch),
        goals=GOALS,
    )


def _layer_norm_torch(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return F.layer_norm(x, (x.shape[-1],), w, b, EPS_LN)


def layer_norm(rows: int, hidden: int) -> KernelCase:
    """tf.layer_norm over the last dim, with weight and bias."""

    def ours():
        @func
        def layer_norm(
            x: Tensor[(rows, hidden), bf16], w: ConstTensor[(hidden,), bf16], b: ConstTensor[(hidden,), bf16]
        ):
            return tf.layer_norm(x, w, b, eps=EPS_LN)

        return layer_norm

    m, v = ((rows, hidden), "bf16"), ((hidden,), "bf16")
    return KernelCase(
        id=f"layer_norm/{rows}x{hidden}",
        shape=f"{rows}x{hidden}",
        dtype="bf16",
        work=_moved(m, m, v, v),
        kernel=f"layer_norm/{rows}x{hidden}",
        ours=ours,
        inputs=_row_and_weights(rows, hidden, 2),
        peers=eager_and_compiled(_layer_norm_torch),
        goals=GOALS,
    )


def _softmax_torch(x: torch.Tensor) -> torch.Tensor:
    return torch.softmax(x, -1)


def softmax(rows: int, cols: int) -> KernelCase:
    """tf.softmax over the last dim."""

    def ours():
        @func
        def softmax(x: Tensor[(rows, cols), bf16]):
            return tf.softmax(x, -1)

        return softmax

    m = ((rows, cols), "bf16")
    return KernelCase(
        id=f"softmax/{rows}x{cols}",
        shape=f"{rows}x{cols}",
        dtype="bf16",
        work=_moved(m, m),
        kernel=f"softmax/{rows}x{cols}",
        ours=ours,
        inputs=_one_row(rows, cols),
        peers=eager_and_compiled(_softmax_torch),
        goals=GOALS,
    )


def _argmax_torch(x: torch.Tensor) -> torch.Tensor:
    return torch.argmax(x, -1)


def argmax(rows: int, vocab: int) -> KernelCase:
    """tf.argmax over the last dim: greedy picks over rows of logits, exact indices."""

    def ours():
        @func
        def argmax(x: Tensor[(rows, vocab), bf16]):
            return tf.argmax(x, -1)

        return argmax

    return KernelCase(
        id=f"argmax/{rows}x{vocab}",
        shape=f"{rows}x{vocab}",
        dtype="bf16",
        work=_moved(((rows, vocab), "bf16"), ((rows,), "i64")),
        kernel=f"argmax/{rows}x{vocab}",
        ours=ours,
        inputs=_one_row(rows, vocab),
        peers=eager_and_compiled(_argmax_torch),
        goals=GOALS,
    )


# ---------------------------------------------------------------- RoPE, gather, cache update


def _rope_torch(
    x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, positions: torch.Tensor
) -> torch.Tensor:
    # Hugging Face's apply_rotary_pos_emb (rotate-half), in the activations' dtype.
    c, s = cos[positions], sin[positions]
    x1, x2 = x.chunk(2, dim=-1)
    return x * c + torch.cat((-x2, x1), dim=-1) * s


def _rotary(g: torch.Generator, table: int, s: int, d: int, device: torch.device) -> tuple:
    """bf16 cos and sin tables of `table` random angles per column, and `s` consecutive positions
    from a random start within them."""
    angles = randn(g, (table, d), torch.float32, device) * math.pi
    start = int(torch.randint(0, table - s + 1, (), generator=g, device=device))
    return angles.cos().to(BF16), angles.sin().to(BF16), torch.arange(start, start + s, device=device)


def rope(b: int, h: int, s: int, d: int) -> KernelCase:
    """tf.rope of (b, h, s, d) activations at positions start .. start + s - 1 of a longer table."""
    table = s + 512

    def ours():
        @func
        def rope(
            x: Tensor[(b, h, s, d), bf16],
            cos: Tensor[(table, d), bf16],
            sin: Tensor[(table, d), bf16],
            positions: Tensor[(s,), i64],
        ):
            return tf.rope(x, cos, sin, positions)

        return rope

    def make(device: torch.device, seed: int) -> tuple:
        g = generator(device, seed)
        cos, sin, positions = _rotary(g, table, s, d, device)
        return randn(g, (b, h, s, d), BF16, device), cos, sin, positions

    x, rows = ((b, h, s, d), "bf16"), ((s, d), "bf16")
    return KernelCase(
        id=f"rope/{b}x{h}x{s}x{d}",
        shape=f"{b}x{h}x{s}x{d}",
        dtype="bf16",
        work=_moved(x, x, rows, rows, ((s,), "i64")),
        kernel=f"rope/{b}x{h}x{s}x{d}",
        ours=ours,
        inputs=make,
        peers=eager_and_compiled(_rope_torch),
        goals=GOALS,
    )


def _head_norm_rope_torch(
    x: torch.Tensor, w: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, positions: torch.Tensor
) -> torch.Tensor:
    # Qwen3's q/k path: the per-head RMS norm, then apply_rotary_pos_emb.
    return _rope_torch(_rms_norm_torch(x, w), cos, sin, positions)


def head_norm_rope(b: int, h: int, s: int, d: int) -> KernelCase:
    """tf.rope(tf.rms_norm(x, w)) over heads of d: the norm has no kernel of its own, rope folds each
    head's sum of squares itself (compiling.md, recompute)."""
    table = s + 512

    def ours():
        @func
        def head_norm_rope(
            x: Tensor[(b, h, s, d), bf16],
            w: ConstTensor[(d,), bf16],
            cos: Tensor[(table, d), bf16],
            sin: Tensor[(table, d), bf16],
            positions: Tensor[(s,), i64],
        ):
            return tf.rope(tf.rms_norm(x, w, eps=EPS_RMS), cos, sin, positions)

        return head_norm_rope

    def make(device: torch.device, seed: int) -> tuple:
        g = generator(device, seed)
        cos, sin, positions = _rotary(g, table, s, d, device)
        w = (1 + 0.1 * randn(g, (d,), torch.float32, device)).to(BF16)
        return randn(g, (b, h, s, d), BF16, device), w, cos, sin, positions

    x, rows = ((b, h, s, d), "bf16"), ((s, d), "bf16")
    return KernelCase(
        id=f"head_norm_rope/{b}x{h}x{s}x{d}",
        shape=f"{b}x{h}x{s}x{d}",
        dtype="bf16",
        work=_moved(x, x, ((d,), "bf16"), rows, rows, ((s,), "i64")),
        kernel=f"head_norm_rope/{b}x{h}x{s}x{d}",
        ours=ours,
        inputs=make,
        peers=eager_and_compiled(_head_norm_rope_torch),
        goals=GOALS,
    )


def _embedding_torch(table: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    return F.embedding(ids, table)


def embedding(vocab: int, dim: int, tokens: int) -> KernelCase:
    """tf.embedding: `tokens` random rows of a (vocab, dim) table."""

    def ours():
        @func
        def embedding(table: ConstTensor[(vocab, dim), bf16], ids: Tensor[(tokens,), i64]):
            return tf.embedding(table, ids)

        return embedding

    def make(device: torch.device, seed: int) -> tuple:
        g = generator(device, seed)
        ids = torch.randint(0, vocab, (tokens,), generator=g, device=device)
        return randn(g, (vocab, dim), BF16, device), ids

    rows = ((tokens, dim), "bf16")
    return KernelCase(
        id=f"embedding/{vocab}x{dim}/t{tokens}",
        shape=f"V{vocab} D{dim} T{tokens}",
        dtype="bf16",
        work=_moved(rows, rows, ((tokens,), "i64")),
        kernel=f"embedding/{vocab}x{dim}/{tokens}",
        ours=ours,
        inputs=make,
        peers=eager_and_compiled(_embedding_torch),
        goals=GOALS,
    )


def _kv_update_torch(cache: torch.Tensor, pos: torch.Tensor, new: torch.Tensor) -> torch.Tensor:
    index = pos + torch.arange(new.shape[-2], device=new.device)
    return cache.index_copy(-2, index, new)


def kv_update(b: int, hkv: int, context: int, d: int, new_tokens: int) -> KernelCase:
    """tf.cache_update of a (b, hkv, context, d) cache with `new_tokens` rows at a random pos.

    The update is functional (a new cache), so the fewest bytes are the cache read and written;
    the peers compute the same function (`index_copy`, not the in-place `index_copy_`).
    """

    def ours():
        @func
        def kv_update(
            cache: Tensor[(b, hkv, context, d), bf16],
            pos: Tensor[(), i64],
            new: Tensor[(b, hkv, new_tokens, d), bf16],
        ):
            return tf.cache_update(cache, pos, new)

        return kv_update

    def make(device: torch.device, seed: int) -> tuple:
        g = generator(device, seed)
        pos = torch.randint(0, context - new_tokens + 1, (), generator=g, device=device)
        return (
            randn(g, (b, hkv, context, d), BF16, device),
            pos,
            randn(g, (b, hkv, new_tokens, d), BF16, device),
        )

    cache = ((b, hkv, context, d), "bf16")
    return KernelCase(
        id=f"kv_update/{b}x{hkv}x{context}x{d}/+{new_tokens}",
        shape=f"{b}x{hkv}x{context}x{d} +{new_tokens}",
        dtype="bf16",
        work=_moved(cache, cache, ((b, hkv, new_tokens, d), "bf16")),
        kernel=f"kv_update/{b}x{hkv}x{context}x{d}/{new_tokens}",
        ours=ours,
        inputs=make,
        peers=eager_and_compiled(_kv_update_torch),
        goals=GOALS,
    )
