"""The DSL front end: annotations, tracing, source locations, calls, converters, mesh scopes."""

from __future__ import annotations

import pytest
import torch

from tilefoundry.dsl import (
    Broadcast,
    ConstTensor,
    DimVar,
    Mesh,
    Split,
    Tensor,
    Topology,
    bf16,
    f32,
    func,
    i64,
    tf,
)
from tilefoundry.dsl._annotations import TensorSpec
from tilefoundry.dsl._trace import TracedTensor, emit, is_traced
from tilefoundry.ir.errors import DSLError
from tilefoundry.ir.hir import Call, TupleGet
from tilefoundry.ir.layout import Layout
from tilefoundry.ir.ops import pointwise
from tilefoundry.ir.shard import ShardLayout
from tilefoundry.ir.types import Storage, TensorType

T = DimVar("T", 1, 33)
HERE = __file__


def line_of(marker: str) -> int:
    """The line of this file that carries `# <marker>`."""
    with open(HERE) as f:
        for i, line in enumerate(f, 1):
            if line.rstrip().endswith(f"# {marker}"):
                return i
    raise AssertionError(marker)


def rand(*shape: int, seed: int = 0) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def at(marker: str) -> str:
    return f"\\({HERE}:{line_of(marker)}\\)"


# ---------------------------------------------------------------- annotations


def test_annotation_builds_a_tensor_spec():
    spec = Tensor[(T, 4), f32, "smem"]
    assert spec == TensorSpec(TensorType((T, 4), f32, storage=Storage.SMEM), const=False)
    assert ConstTensor[(4,), "bf16"] == TensorSpec(TensorType((4,), bf16), const=True)


def test_annotation_takes_a_layout_item():
    lay = Layout((8, 4), (1, 8))
    assert Tensor[(8, 4), f32, lay].type.layout == lay


def test_annotation_resolves_a_placement_to_a_shard_layout():
    mesh = Mesh((Topology("cta", 4),), (4,))
    t = Tensor[(8, 16), f32, mesh[Split(0)]].type
    assert isinstance(t.layout, ShardLayout)
    assert t.layout == mesh[Split(0)].resolve((8, 16))
    assert Tensor[(8, 16), f32, mesh[Broadcast]].type.layout.attrs == (Broadcast(),)


def test_annotation_refuses_bad_items():
    message = r"Tensor: item 'shared' is not a storage name; accepted: 'host', 'gmem'"
    with pytest.raises(DSLError, match=message):
        Tensor[(4,), f32, "shared"]
    with pytest.raises(DSLError, match=r"Tensor: two storage items \('smem' and 'rmem'\)"):
        Tensor[(4,), f32, "smem", "rmem"]
    with pytest.raises(DSLError, match=r"Tensor: item 3 is not a storage name, Layout, ShardLayout or mesh"):
        Tensor[(4,), f32, 3]


# ---------------------------------------------------------------- tracing


@func
def affine(x: Tensor[(T, 4), f32], g: ConstTensor[(4,), f32], b: ConstTensor[(4,), f32]):
    unused = emit(pointwise.Exp(), x)  # noqa: F841 - dropped by dead-node removal
    y = emit(pointwise.Mul(), x, g)  # affine-mul
    return emit(pointwise.Add(), y, b)  # affine-add


def test_params_come_from_annotations():
    assert [(p.name, p.const, str(p.type)) for p in affine.params] == [
        ("x", False, "[(T, 4), f32]"),
        ("g", True, "[(4,), f32]"),
        ("b", True, "[(4,), f32]"),
    ]


def test_body_records_nodes_with_the_authors_lines():
    assert [n.op.name for n in affine.body] == ["mul", "add"]
    assert [n.loc.line for n in affine.body] == [line_of("affine-mul"), line_of("affine-add")]
    assert all(n.loc.file == HERE for n in affine.body)


def shift(x):
    return emit(pointwise.Neg(), x)  # helper-line


def test_a_helper_function_reports_its_own_line():
    @func
    def via_helper(x: Tensor[(4,), f32]):
        return shift(x)

    assert via_helper.body[0].loc.line == line_of("helper-line")


def test_traced_tensor_exposes_its_type():
    seen = {}

    @func
    def probe(x: Tensor[(T, 4), f32]):
        seen.update(type=x.type, shape=x.shape, dtype=x.dtype, ndim=x.ndim, traced=is_traced(x))
        return x

    assert seen == dict(type=TensorType((T, 4), f32), shape=(T, 4), dtype=f32, ndim=2, traced=True)
    assert not is_traced(rand(2))


def test_traced_tensors_hash_by_identity():
    @func
    def keyed(x: Tensor[(4,), f32]):
        table = {x: 1}
        assert table[x] == 1 and len({x, x}) == 1
        return x

    assert keyed.results == keyed.params


def test_calls_are_recorded_not_inlined():
    @func
    def outer(x: Tensor[(5, 4), f32], g: ConstTensor[(4,), f32], b: ConstTensor[(4,), f32]):
        return affine(x, g, b)

    (node,) = outer.body
    assert isinstance(node.op, Call) and node.op.function is affine
    assert str(node.type) == "[(5, 4), f32]"
    x, g, b = rand(5, 4, seed=1), rand(4, seed=2), rand(4, seed=3)
    torch.testing.assert_close(outer(x, g, b), x * g + b)


def test_tuple_results_of_a_call_unpack():
    @func
    def split2(x: Tensor[(4,), f32]):
        return emit(pointwise.Neg(), x), emit(pointwise.Abs(), x)

    @func
    def user(x: Tensor[(4,), f32]):
        a, b = split2(x)
        return emit(pointwise.Add(), a, b)

    assert [type(n.op) for n in user.body] == [Call, TupleGet, TupleGet, pointwise.Add]
    x = rand(4, seed=4)
    torch.testing.assert_close(user(x), -x + x.abs())


def test_return_annotation_is_optional_and_checked():
    @func
    def untyped(x: Tensor[(T, 4), f32]):
        return emit(pointwise.Neg(), x)

    assert untyped.result_types == (TensorType((T, 4), f32),)


def test_mesh_scopes_are_recorded_on_nodes():
    mesh = Mesh((Topology("cta", 2),), (2,))

    @func
    def placed(x: Tensor[(4,), f32]):
        y = emit(pointwise.Neg(), x)
        with mesh:
            z = emit(pointwise.Abs(), y)
        return emit(pointwise.Exp(), z)

    assert [n.mesh for n in placed.body] == [None, mesh, None]


def test_data_dependent_values_are_refused():
    def branchy(x):
        if emit(pointwise.Gt(), x, x):  # branch-line
            return x
        return x

    message = rf"data-dependent control flow: the truth value .*tf.where.*{at('branch-line')}"
    with pytest.raises(DSLError, match=message):
        func(lambda_free(branchy))


def lambda_free(body):
    """A @func-able wrapper with an annotation around `body`."""

    def wrapped(x: Tensor[(4,), f32]):
        return body(x)

    return wrapped


@pytest.mark.parametrize(
    ("use", "what"),
    [
        (lambda x: list(x), "iteration"),
        (lambda x: len(x), r"len\(\)"),
        (lambda x: range(x), "the integer value"),
        (lambda x: float(x), "the float value"),
    ],
)
def test_data_dependent_python_uses_are_refused(use, what):
    with pytest.raises(DSLError, match=rf"data-dependent control flow: {what} of a traced tensor"):
        func(lambda_free(use))


def test_emit_outside_a_body_is_refused():
    x = TensorType((4,), f32)
    with pytest.raises(DSLError, match=r"tf.neg outside a @func body"):
        emit(pointwise.Neg(), x)


def test_a_value_of_another_body_is_refused():
    leaked: list[TracedTensor] = []

    @func
    def first(x: Tensor[(4,), f32]):
        leaked.append(x)
        return x

    with pytest.raises(DSLError, match=r"neg: operand 0 belongs to the body of 'first', not to 'second'"):

        @func
        def second(x: Tensor[(4,), f32]):
            return emit(pointwise.Neg(), leaked[0])


def test_two_dimvars_with_one_name_are_refused():
    other = DimVar("T", 1, 9)
    with pytest.raises(DSLError, match=r"two DimVars are named 'T', with ranges \[1, 33\) and \[1, 9\)"):

        @func
        def clash(x: Tensor[(T,), f32], y: Tensor[(other,), f32]):
            return x


def test_wrong_arguments_to_a_helper_point_at_the_call():
    def helper(a, b):
        return a

    def body(x):
        return helper(x)  # bad-call

    message = rf"helper\(\) missing 1 required positional argument: 'b'.*{at('bad-call')}"
    with pytest.raises(DSLError, match=message):
        func(lambda_free(body))


# ---------------------------------------------------------------- converters


def test_converter_registers_on_its_base_function():
    @func
    def proj(x: Tensor[(T, 4), f32], w: ConstTensor[(4, 8), f32]):
        return x

    @proj.converter("w")
    def _(raw: ConstTensor[(8, 4), f32]) -> Tensor[(4, 8), f32]:
        return emit(tf_transpose(), raw)

    conv = proj.converters["w"]
    assert conv.converts == "w" and [p.name for p in conv.params] == ["raw"]
    raw = rand(8, 4, seed=5)
    torch.testing.assert_close(conv(raw), raw.T)


def tf_transpose():
    from tilefoundry.ir.ops.movement import Transpose

    return Transpose(perm=(1, 0))


def test_converter_for_an_unknown_weight_is_refused():
    @func
    def proj(x: Tensor[(4,), f32], w: ConstTensor[(4,), f32]):
        return x

    with pytest.raises(DSLError, match=r"converter for 'v': 'proj' has no weight of that name; accepted: w"):

        @proj.converter("v")
        def _(raw: ConstTensor[(4,), f32]):
            return raw


def test_1_1_2_second_converter_for_a_weight_is_an_error():
    """seed 000 §1.1.2: two converters registered for the same weight name is an error."""

    @func
    def proj(x: Tensor[(4,), f32], w: ConstTensor[(4,), f32]):
        return x

    @proj.converter("w")
    def _(raw: ConstTensor[(4,), f32]):
        return raw

    with pytest.raises(DSLError, match=r"a second converter for weight 'w' of 'proj' \(the first is at .*\)"):

        @proj.converter("w")
        def _(raw: ConstTensor[(4,), f32]):
            return raw


def test_1_1_2_converter_returns_exactly_the_declared_type():
    """seed 000 §1.1.2: a converter returns exactly the one declared ConstTensor's shape / dtype."""

    @func
    def proj(x: Tensor[(4,), f32], w: ConstTensor[(4,), f32]):
        return x

    message = r"converter for proj.w returns \[\(4,\), i64\]; it must return exactly"
    with pytest.raises(DSLError, match=message):

        @proj.converter("w")
        def _(raw: ConstTensor[(4,), i64]):
            return raw


# ---------------------------------------------------------------- operators


def test_python_operators_call_tf():
    @func
    def ops(a: Tensor[(T, 4), f32], b: Tensor[(4,), f32]):
        c = -(a + b) * 2.0 - 1.0 / b
        return abs(c) ** 2.0, a @ a.T, (a < b) & ~(a >= b), a.to("bf16")

    names = [n.op.name for n in ops.body if not isinstance(n.op, TupleGet)]
    for expected in ("add", "neg", "mul", "sub", "div", "abs", "pow", "matmul", "transpose", "lt", "ge"):
        assert expected in names
    a, b = rand(3, 4, seed=6), rand(4, seed=7)
    p, m, mask, h = ops(a, b)
    c = -(a + b) * 2.0 - 1.0 / b
    torch.testing.assert_close(p, c.abs() ** 2.0)
    torch.testing.assert_close(m, a @ a.T)
    assert torch.equal(mask, (a < b) & ~(a >= b))
    assert h.dtype == torch.bfloat16


def test_equality_builds_an_op():
    @func
    def eq(a: Tensor[(4,), f32], b: Tensor[(4,), f32]):
        return a == b, a != b

    a = rand(4, seed=8)
    b = a.clone()
    b[1] = 0.5
    x, y = eq(a, b)
    assert torch.equal(x, a == b) and torch.equal(y, a != b)


def test_tensor_methods_mirror_torch():
    @func
    def methods(x: Tensor[(2, 3, 4), f32]):
        return x.reshape(6, 4), x.transpose(0, 2), x.permute(2, 0, 1), x[1], x.T

    x = rand(2, 3, 4, seed=9)
    r, t, p, s, tt = methods(x)
    torch.testing.assert_close(r, x.reshape(6, 4))
    torch.testing.assert_close(t, x.transpose(0, 2))
    torch.testing.assert_close(p, x.permute(2, 0, 1))
    torch.testing.assert_close(s, x[1])
    torch.testing.assert_close(tt, x.permute(2, 1, 0))


def test_unknown_tf_op_names_close_matches():
    def body(x):
        return tf.rmsnorm(x)  # unknown-op

    message = rf"unknown op tf.rmsnorm; did you mean tf.rms_norm.*{at('unknown-op')}"
    with pytest.raises(DSLError, match=message):
        func(lambda_free(body))
