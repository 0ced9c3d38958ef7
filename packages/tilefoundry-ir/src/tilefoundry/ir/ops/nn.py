"""Model ops: rms_norm, layer_norm, rope, attention, embedding.

Each computes in f32 for 16-bit float inputs (f64 stays f64) and rounds once to the input
dtype. Operands share one dtype (no silent promotion); integer operands (positions, kv_len,
ids) take any integer dtype.

    rms_norm(x: [(T, 2048), bf16], w: [(2048,), bf16], eps=1e-6)               -> [(T, 2048), bf16]
    attention(q: [(B, 32, T, 128), bf16], k, v: [(B, 8, T, 128), bf16], causal) -> [(B, 32, T, 128), bf16]
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from ..dims import dims_equal, format_dim
from ..errors import DSLError, EvalError
from ..types import TensorType
from .base import Op, evaluate, infer
from .indexing import check_index_range
from .operands import (
    FLOATS,
    INTEGERS,
    accumulation_dtype,
    exact_quotient,
    format_shape,
    require_dims_equal,
    require_dtype,
    require_rank,
    require_same_dtype,
)


def _require_eps(op: str, eps: object) -> None:
    if isinstance(eps, bool) or not isinstance(eps, (int, float)) or not eps >= 0:
        raise DSLError(f"{op}: eps must be a number >= 0, got {eps!r}", expected=">= 0", got=eps)


def _require_trailing(op: str, what: str, x: TensorType, w: TensorType) -> None:
    """Refuse `w` unless its shape equals the trailing dims of x."""
    k = w.rank
    if not 1 <= k <= x.rank:
        raise DSLError(
            f"{op}: {what} has rank {k}, expected 1 to {x.rank} to cover trailing dims of x "
            f"{format_shape(x.shape)}",
            expected=f"1..{x.rank}",
            got=k,
        )
    if not all(dims_equal(a, b) for a, b in zip(x.shape[-k:], w.shape, strict=True)):
        want = format_shape(x.shape[-k:])
        raise DSLError(
            f"{op}: {what} has shape {format_shape(w.shape)}, expected {want} to match the trailing dims "
            f"of x {format_shape(x.shape)}",
            expected=want,
            got=format_shape(w.shape),
        )


# ---------------------------------------------------------------- norms


@dataclass(frozen=True)
class RmsNorm(Op):
    """`x / sqrt(mean(x**2) + eps) * w` over the trailing dims that w covers.

    w's shape equals x's trailing dims, e.g. x (T, 2048) with w (2048,). The whole expression is
    computed in f32 for 16-bit inputs and rounded once (Hugging Face rounds before the weight
    multiply; the difference is one rounding).
    """

    name = "rms_norm"
    inputs = ("x", "w")
    eps: float = 1e-6


@infer.register(RmsNorm)
def _infer_rms_norm(op: RmsNorm, x: TensorType, w: TensorType) -> TensorType:
    require_dtype("rms_norm", "x", x, FLOATS)
    require_same_dtype("rms_norm", (("x", x), ("w", w)))
    _require_eps("rms_norm", op.eps)
    _require_trailing("rms_norm", "w", x, w)
    return TensorType(x.shape, x.dtype)


@evaluate.register(RmsNorm)
def _eval_rms_norm(op: RmsNorm, x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    xf = x.to(accumulation_dtype(x.dtype))
    dims = tuple(range(-w.dim(), 0))
    y = xf * torch.rsqrt(xf.square().mean(dims, keepdim=True) + op.eps) * w.to(xf.dtype)
    return y.to(x.dtype)


@dataclass(frozen=True)
class LayerNorm(Op):
    """`(x - mean) / sqrt(var + eps) * w + b` over the trailing dims that w covers (biased var).

    w and b have the same shape, equal to x's trailing dims.
    """

    name = "layer_norm"
    inputs = ("x", "w", "b")
    eps: float = 1e-5


@infer.register(LayerNorm)
def _infer_layer_norm(op: LayerNorm, x: TensorType, w: TensorType, b: TensorType) -> TensorType:
    require_dtype("layer_norm", "x", x, FLOATS)
    require_same_dtype("layer_norm", (("x", x), ("w", w), ("b", b)))
    _require_eps("layer_norm", op.eps)
    _require_trailing("layer_norm", "w", x, w)
    _require_trailing("layer_norm", "b", x, b)
    return TensorType(x.shape, x.dtype)


@evaluate.register(LayerNorm)
def _eval_layer_norm(op: LayerNorm, x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    acc = accumulation_dtype(x.dtype)
    y = torch.nn.functional.layer_norm(x.to(acc), tuple(w.shape), w.to(acc), b.to(acc), op.eps)
    return y.to(x.dtype)


# ---------------------------------------------------------------- rope


@dataclass(frozen=True)
class Rope(Op):
    """Rotary position embedding, rotate-half form (Hugging Face's apply_rotary_pos_emb).

    x is `(B, H, S, D)` with D even; cos and sin are tables `(P, D)` in x's dtype; positions is
    integer, `(S,)` (shared by the batch) or `(B, S)`. With `c = cos[positions]` and
    `s = sin[positions]` broadcast over heads, the result is `x * c + rotate_half(x) * s` where
    `rotate_half(x) = concat(-x[..., D/2:], x[..., :D/2])`. A position outside [0, P) is an
    EvalError.
    """

    name = "rope"
    inputs = ("x", "cos", "sin", "positions")


@infer.register(Rope)
def _infer_rope(
    op: Rope, x: TensorType, cos: TensorType, sin: TensorType, positions: TensorType
) -> TensorType:
    require_dtype("rope", "x", x, FLOATS)
    require_same_dtype("rope", (("x", x), ("cos", cos), ("sin", sin)))
    require_rank("rope", "x", x, 4, "(B, H, S, D)")
    b, _, s, d = x.shape
    if isinstance(d, int) and d % 2:
        raise DSLError(f"rope: head dim D of x must be even, got {d}", expected="an even D", got=d)
    for what, table in (("cos", cos), ("sin", sin)):
        require_rank("rope", what, table, 2, "(P, D)")
        require_dims_equal("rope", f"D of x and of {what}", d, table.shape[1])
    require_dims_equal("rope", "P of cos and of sin", cos.shape[0], sin.shape[0])
    require_dtype("rope", "positions", positions, INTEGERS)
    if positions.rank not in (1, 2):
        raise DSLError(
            f"rope: positions must be (S,) or (B, S), got shape {format_shape(positions.shape)}",
            expected="(S,) or (B, S)",
            got=format_shape(positions.shape),
        )
    require_dims_equal("rope", "S of x and of positions", s, positions.shape[-1])
    if positions.rank == 2:
        require_dims_equal("rope", "B of x and of positions", b, positions.shape[0])
    return TensorType(x.shape, x.dtype)


@evaluate.register(Rope)
def _eval_rope(
    op: Rope, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, positions: torch.Tensor
) -> torch.Tensor:
    check_index_range("rope", "positions", positions, cos.shape[0])
    acc = accumulation_dtype(x.dtype)
    # (S, D) -> (1, 1, S, D) or (B, S, D) -> (B, 1, S, D): broadcast over heads.
    c = cos.to(acc)[positions.long()].unsqueeze(-3)
    s = sin.to(acc)[positions.long()].unsqueeze(-3)
    xf = x.to(acc)
    x1, x2 = xf.chunk(2, dim=-1)
    return (xf * c + torch.cat((-x2, x1), dim=-1) * s).to(x.dtype)


# ---------------------------------------------------------------- attention


@dataclass(frozen=True)
class Attention(Op):
    """Scaled dot-product attention laid out like torch's scaled_dot_product_attention.

    q is `(B, Hq, Sq, D)`, k `(B, Hkv, Skv, D)`, v `(B, Hkv, Skv, Dv)`, all one float dtype;
    Hq is a multiple of Hkv and query head h reads kv head `h // (Hq // Hkv)` (grouped-query).
    `scale` defaults to `1 / sqrt(D)`. The optional last operand `kv_len`, an integer tensor of
    shape `()` or `(B,)`, masks keys at positions `>= kv_len` (a cache's valid prefix; values
    must lie in [0, Skv]). With `causal`, query i sees keys `j <= i + L - Sq`, where L is kv_len
    (or Skv): the last query aligns with the last valid key. A query that sees no key yields
    zeros. Computed in f32 (f64 stays f64); the result `(B, Hq, Sq, Dv)` has q's dtype.
    """

    name = "attention"
    inputs = ("q", "k", "v", "*kv_len")
    scale: float | None = None
    causal: bool = False


@infer.register(Attention)
def _infer_attention(
    op: Attention, q: TensorType, k: TensorType, v: TensorType, *kv_len: TensorType
) -> TensorType:
    require_dtype("attention", "q", q, FLOATS)
    require_same_dtype("attention", (("q", q), ("k", k), ("v", v)))
    require_rank("attention", "q", q, 4, "(B, Hq, Sq, D)")
    require_rank("attention", "k", k, 4, "(B, Hkv, Skv, D)")
    require_rank("attention", "v", v, 4, "(B, Hkv, Skv, Dv)")
    b, hq, sq, d = q.shape
    require_dims_equal("attention", "B of q and of k", b, k.shape[0])
    require_dims_equal("attention", "B of q and of v", b, v.shape[0])
    require_dims_equal("attention", "D of q and of k", d, k.shape[3])
    require_dims_equal("attention", "Hkv of k and of v", k.shape[1], v.shape[1])
    require_dims_equal("attention", "Skv of k and of v", k.shape[2], v.shape[2])
    if exact_quotient(hq, k.shape[1]) is None:
        raise DSLError(
            f"attention: Hq {format_dim(hq)} of q must be a multiple of Hkv {format_dim(k.shape[1])} of k",
            expected=f"a multiple of {format_dim(k.shape[1])}",
            got=format_dim(hq),
        )
    if op.scale is not None and (isinstance(op.scale, bool) or not isinstance(op.scale, (int, float))):
        raise DSLError(
            f"attention: scale must be a number or None, got {op.scale!r}", expected="a float", got=op.scale
        )
    if len(kv_len) > 1:
        raise DSLError(
            f"attention: takes at most one kv_len, got {len(kv_len)}", expected="0 or 1", got=len(kv_len)
        )
    for lens in kv_len:
        require_dtype("attention", "kv_len", lens, INTEGERS)
        if not (lens.rank == 0 or (lens.rank == 1 and dims_equal(lens.shape[0], b))):
            raise DSLError(
                f"attention: kv_len must have shape () or (B,) = {format_shape((b,))}, "
                f"got {format_shape(lens.shape)}",
                expected=f"() or {format_shape((b,))}",
                got=format_shape(lens.shape),
            )
    return TensorType((b, hq, sq, v.shape[3]), q.dtype)


def _visible(op: Attention, b: int, sq: int, skv: int, kv_len: torch.Tensor | None, device: torch.device):
    """Bool mask `(B, 1, Sq, Skv)`: which keys each query may read."""
    if kv_len is None:
        lens = torch.full((b,), skv, dtype=torch.long, device=device)
    else:
        lens = kv_len.long().to(device).expand(b)
        lo, hi = int(lens.min()), int(lens.max())
        if lo < 0 or hi > skv:
            bad = lo if lo < 0 else hi
            raise EvalError(
                f"attention: kv_len holds {bad}, outside [0, {skv}]", expected=f"[0, {skv}]", got=bad
            )
    i = torch.arange(sq, device=device).view(1, sq, 1)
    j = torch.arange(skv, device=device).view(1, 1, skv)
    mask = j < lens.view(b, 1, 1)
    if op.causal:
        mask = mask & (j <= i + (lens.view(b, 1, 1) - sq))
    return mask.unsqueeze(1)


@evaluate.register(Attention)
def _eval_attention(
    op: Attention, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *kv_len: torch.Tensor
) -> torch.Tensor:
    acc = accumulation_dtype(q.dtype)
    b, hq, sq, d = q.shape
    group = hq // k.shape[1]
    qf = q.to(acc)
    kf = k.to(acc).repeat_interleave(group, dim=1)
    vf = v.to(acc).repeat_interleave(group, dim=1)
    scale = 1 / math.sqrt(d) if op.scale is None else op.scale
    scores = torch.matmul(qf, kf.transpose(-1, -2)) * scale
    visible = _visible(op, b, sq, k.shape[2], kv_len[0] if kv_len else None, q.device)
    probs = torch.softmax(scores.masked_fill(~visible, -math.inf), dim=-1)
    # A fully masked row is 0/0 = NaN after softmax; it reads nothing, so it yields zeros.
    probs = torch.where(visible.any(-1, keepdim=True), probs, 0.0)
    return torch.matmul(probs, vf).to(q.dtype)


# ---------------------------------------------------------------- embedding


@dataclass(frozen=True)
class Embedding(Op):
    """Rows of `table` `(V, D)` picked by integer `ids` of any shape; the result is `ids.shape + (D,)`.

    Any table dtype is accepted (rows are copied, not computed). An id outside [0, V) is an
    EvalError.
    """

    name = "embedding"
    inputs = ("table", "ids")


@infer.register(Embedding)
def _infer_embedding(op: Embedding, table: TensorType, ids: TensorType) -> TensorType:
    require_rank("embedding", "table", table, 2, "(V, D)")
    require_dtype("embedding", "ids", ids, INTEGERS)
    return TensorType((*ids.shape, table.shape[1]), table.dtype)


@evaluate.register(Embedding)
def _eval_embedding(op: Embedding, table: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    check_index_range("embedding", "ids", ids, table.shape[0])
    return table[ids.long()]
