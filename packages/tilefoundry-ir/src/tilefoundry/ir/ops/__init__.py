"""The op catalogue. Importing this package fills the `infer` and `evaluate` registries.

Op families live in one module each (pointwise, reduction, contraction, movement, indexing,
nn, creation, placement). Traits are sets of op classes, like tinygrad's GroupOp, so passes
ask `type(op) in POINTWISE` instead of testing names:

    POINTWISE      every elementwise op (unary, binary, comparison, where, clamp, cast)
    UNARY          pointwise ops of one operand
    BINARY         pointwise ops of two operands (comparisons included)
    COMPARISON     binary ops that yield bool
    REDUCTION      ops that reduce along axes: reduce, argmax, softmax, log_softmax, rms_norm,
                   layer_norm
    CONTRACTION    ops that sum products over a contracted dim: matmul
    DATA_MOVEMENT  ops that copy or select elements: reshape ... cache_update, embedding
    CREATION       ops with no operands: full, arange
    PLACEMENT      reshard, local
    ANCHORS        ops kernels form around: reductions, contractions, data movement, attention
                   and rope; pure pointwise and creation producers fuse into them
"""

from __future__ import annotations

from . import contraction, creation, indexing, movement, nn, placement, pointwise, reduction
from .base import OPS, Op


def _family(base: type[Op]) -> frozenset[type[Op]]:
    """The registered (named) op classes derived from `base`."""
    return frozenset(cls for cls in OPS.values() if issubclass(cls, base))


POINTWISE = _family(pointwise.Pointwise)
UNARY = frozenset(cls for cls in POINTWISE if len(cls.inputs) == 1)
BINARY = _family(pointwise.Binary)
COMPARISON = _family(pointwise.Comparison)
REDUCTION = _family(reduction.Reduction) | {nn.RmsNorm, nn.LayerNorm}
CONTRACTION = _family(contraction.Contraction)
DATA_MOVEMENT = _family(movement.DataMovement) | {nn.Embedding}
CREATION = _family(creation.Creation)
PLACEMENT = _family(placement.PlacementOp)
ANCHORS = REDUCTION | CONTRACTION | DATA_MOVEMENT | {nn.Attention, nn.Rope}

__all__ = [
    "ANCHORS",
    "BINARY",
    "COMPARISON",
    "CONTRACTION",
    "CREATION",
    "DATA_MOVEMENT",
    "PLACEMENT",
    "POINTWISE",
    "REDUCTION",
    "UNARY",
    "contraction",
    "creation",
    "indexing",
    "movement",
    "nn",
    "placement",
    "pointwise",
    "reduction",
]
