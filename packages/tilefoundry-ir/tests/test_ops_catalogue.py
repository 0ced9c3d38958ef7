"""The catalogue as a whole: every DESIGN §3 op is registered with both rules; traits are sets."""

from __future__ import annotations

import pytest

from tilefoundry.ir import ops
from tilefoundry.ir.ops import nn, pointwise, reduction
from tilefoundry.ir.ops.base import OPS, evaluate, infer
from tilefoundry.ir.ops.contraction import Matmul
from tilefoundry.ir.ops.creation import Arange, Full
from tilefoundry.ir.ops.movement import Reshape

# DESIGN.md §3 "Minimum op catalogue", by family; shortcuts (sum, zeros, split, ...) are tf
# functions over these ops, not ops of their own.
FAMILIES = {
    "pointwise": "add sub mul div neg abs exp exp2 log log2 sqrt rsqrt tanh sigmoid silu gelu relu softplus "
    "pow maximum minimum clamp where cast eq ne lt le gt ge logical_and logical_or logical_xor logical_not",
    "reductions": "reduce argmax softmax log_softmax",
    "contractions": "matmul",
    "model": "rms_norm layer_norm rope attention embedding",
    "movement": "reshape transpose slice concat stack repeat_interleave index_select gather cache_update "
    "full arange broadcast_to",
    "placement": "reshard local",
}
CATALOGUE = [name for names in FAMILIES.values() for name in names.split()]


@pytest.mark.parametrize("name", CATALOGUE)
def test_catalogue_op_has_type_inference_and_an_evaluator_rule(name):
    assert name in OPS, f"{name} is not a registered op"
    cls = OPS[name]
    assert cls in infer and cls in evaluate
    assert cls.__doc__ and cls.__doc__.strip(), f"{cls.__qualname__} documents its semantics"


def test_traits_group_the_families():
    assert {pointwise.Add, pointwise.Lt, pointwise.Exp, pointwise.Cast, pointwise.Where} <= ops.POINTWISE
    assert {pointwise.Exp, pointwise.Cast, pointwise.Clamp, pointwise.LogicalNot} <= ops.UNARY
    assert pointwise.Where not in ops.UNARY | ops.BINARY
    assert {
        pointwise.Eq,
        pointwise.Ne,
        pointwise.Lt,
        pointwise.Le,
        pointwise.Gt,
        pointwise.Ge,
    } == ops.COMPARISON
    assert ops.COMPARISON < ops.BINARY < ops.POINTWISE
    assert {reduction.Reduce, reduction.Argmax, reduction.Softmax, nn.RmsNorm, nn.LayerNorm} <= ops.REDUCTION
    assert {Matmul} == ops.CONTRACTION
    assert {Reshape, nn.Embedding} <= ops.DATA_MOVEMENT
    assert {Full, Arange} == ops.CREATION


def test_anchors_exclude_fusible_producers():
    assert {Matmul, reduction.Softmax, nn.Attention, nn.Rope, Reshape} <= ops.ANCHORS
    assert not ops.ANCHORS & (ops.POINTWISE | ops.CREATION | ops.PLACEMENT)
