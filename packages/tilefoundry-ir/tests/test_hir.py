"""HIR: values and nodes, call binding of DimVars, call / tuple_get inference, Function surface."""

from __future__ import annotations

import pytest

from tilefoundry.dsl import ConstTensor, DimVar, Tensor, f32, func
from tilefoundry.dsl._trace import emit
from tilefoundry.ir.dtypes import bf16
from tilefoundry.ir.errors import DSLError
from tilefoundry.ir.hir import Call, Node, Param, TupleGet, bind_call, substitute_dim
from tilefoundry.ir.ops import pointwise
from tilefoundry.ir.ops.base import infer
from tilefoundry.ir.types import TensorType

T = DimVar("T", 1, 17)
S = DimVar("S", 1, 9)


@func
def gated(x: Tensor[(T, 4), f32], g: ConstTensor[(4,), f32]) -> Tensor[(T, 4), f32]:
    return emit(pointwise.Mul(), x, g)


@func
def both(x: Tensor[(T, 4), f32], y: Tensor[(2 * T, 4), f32]):
    return x, y


def test_substitute_dim_rewrites_dimvars():
    assert substitute_dim(2 * T + 1, {T: 3}) == 7
    assert substitute_dim(2 * T + 1, {T: S}) == 2 * S + 1
    assert substitute_dim((T + 1) // 2, {T: 5}) == 3
    assert substitute_dim(T, {}) is T


def test_call_binds_callee_dimvars_to_caller_extents():
    t = infer(Call(function=gated), TensorType((S, 4), f32), TensorType((4,), f32))
    assert t == TensorType((S, 4), f32)
    assert bind_call(gated, (TensorType((5, 4), f32), TensorType((4,), f32))) == {T: 5}


def test_call_with_tuple_result_infers_a_tuple_and_tuple_get_projects():
    t = infer(Call(function=both), TensorType((3, 4), f32), TensorType((6, 4), f32))
    assert t == (TensorType((3, 4), f32), TensorType((6, 4), f32))
    assert infer(TupleGet(index=1), t) == TensorType((6, 4), f32)


def test_call_refuses_wrong_arity():
    with pytest.raises(DSLError, match=r"call of 'gated': takes 2 arguments \(x, g\), got 1"):
        infer(Call(function=gated), TensorType((3, 4), f32))


def test_call_refuses_wrong_dtype():
    message = r"call of 'gated': argument 'x' must be \[\(T, 4\), f32\], got \[\(3, 4\), bf16\]"
    with pytest.raises(DSLError, match=message):
        infer(Call(function=gated), TensorType((3, 4), bf16), TensorType((4,), f32))


def test_call_refuses_a_static_mismatch():
    message = r"argument 'g' has shape \[\(5,\), f32\] where \[\(4,\), f32\] is declared"
    with pytest.raises(DSLError, match=message):
        infer(Call(function=gated), TensorType((3, 4), f32), TensorType((5,), f32))


def test_call_refuses_an_extent_outside_the_dimvar_range():
    with pytest.raises(DSLError, match=r"argument 'x' has extent 17 for T, outside its range \[1, 17\)"):
        infer(Call(function=gated), TensorType((17, 4), f32), TensorType((4,), f32))


def test_call_refuses_disagreeing_bindings():
    message = r"argument 'y' has shape \[\(5, 4\), f32\] where \[\(2\*T, 4\), f32\]"
    with pytest.raises(DSLError, match=message):
        infer(Call(function=both), TensorType((3, 4), f32), TensorType((5, 4), f32))


def test_tuple_get_refuses_a_bad_index():
    with pytest.raises(DSLError, match=r"tuple_get: index 2 out of a value of type"):
        infer(TupleGet(index=2), (TensorType((3,), f32), TensorType((3,), f32)))


def test_function_surface():
    assert [p.name for p in gated.params] == ["x", "g"]
    assert [p.name for p in gated.weights] == ["g"] and [p.name for p in gated.activations] == ["x"]
    assert gated.result_types == (TensorType((T, 4), f32),)
    assert not gated.returns_tuple and both.returns_tuple
    assert repr(gated) == "<Function gated>"


def test_reprs_are_short_and_do_not_recurse():
    p = Param(TensorType((4,), f32), name="x", const=True)
    n = Node(TensorType((4,), f32), op=pointwise.Neg(), args=(p,))
    assert repr(p) == "<Param const x: [(4,), f32]>"
    assert repr(n) == "<Node neg: [(4,), f32] at None>"
