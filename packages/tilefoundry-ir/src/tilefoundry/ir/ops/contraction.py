"""Contractions: matmul (the `@` operator), exactly as torch.matmul.

matmul(a: [(T, 2048), bf16], b: [(2048, 6144), bf16])       -> [(T, 6144), bf16]
matmul(a: [(2, 1, 8, 16), f32], b: [(4, 16, 3), f32])       -> [(2, 4, 8, 3), f32]
matmul(a: [(16,), f32], b: [(16,), f32])                     -> [(), f32]
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..dims import Dim, dims_equal, format_dim
from ..errors import DSLError
from ..types import TensorType
from .base import Op, evaluate, infer
from .operands import (
    FLOATS,
    accumulation_dtype,
    broadcast_shapes,
    format_shape,
    require_dtype,
    require_same_dtype,
)


@dataclass(frozen=True)
class Contraction(Op):
    """Base of ops that sum products over a contracted dimension."""


@dataclass(frozen=True)
class Matmul(Contraction):
    """Matrix product with torch.matmul's rules.

    A 1-D `a` gets a leading 1 and a 1-D `b` a trailing 1, removed again from the result; the
    last dim of `a` contracts with the second-to-last of `b` (the only dim of a 1-D `b`); the
    batch dims (all but the last two) broadcast numpy-style. Floats only; both operands share a
    dtype. 16-bit operands accumulate in f32 and the result is rounded once; f32 stays f32
    (the evaluator relies on torch's default of TF32 off).
    """

    name = "matmul"
    inputs = ("a", "b")


@infer.register(Matmul)
def _infer_matmul(op: Matmul, a: TensorType, b: TensorType) -> TensorType:
    for what, t in (("a", a), ("b", b)):
        require_dtype("matmul", what, t, FLOATS)
        if t.rank == 0:
            raise DSLError(f"matmul: {what} must have rank >= 1, got shape ()", expected=">= 1", got=0)
    dtype = require_same_dtype("matmul", (("a", a), ("b", b)))
    ka = a.shape[-1]
    kb = b.shape[0] if b.rank == 1 else b.shape[-2]
    if not dims_equal(ka, kb):
        raise DSLError(
            f"matmul: contracted dims must match: a {format_shape(a.shape)} has K={format_dim(ka)}, "
            f"b {format_shape(b.shape)} has K={format_dim(kb)}",
            expected=format_dim(ka),
            got=format_dim(kb),
        )
    batch = broadcast_shapes("matmul", a.shape[:-2], b.shape[:-2])
    rows: tuple[Dim, ...] = a.shape[-2:-1]  # empty for a 1-D a
    cols: tuple[Dim, ...] = b.shape[-1:] if b.rank > 1 else ()
    return TensorType(batch + rows + cols, dtype)


@evaluate.register(Matmul)
def _eval_matmul(op: Matmul, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    acc = accumulation_dtype(a.dtype)
    return torch.matmul(a.to(acc), b.to(acc)).to(a.dtype)
