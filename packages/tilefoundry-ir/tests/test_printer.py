"""Canonical text: exact function and module text, labels, mesh blocks, the attr_text registry."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from tilefoundry.dsl import ConstTensor, DimVar, Mesh, Tensor, Topology, f32, func, module
from tilefoundry.dsl._trace import emit
from tilefoundry.ir.ops import contraction, movement, pointwise, reduction
from tilefoundry.ir.printer import attr_text, function_text, module_text, type_text
from tilefoundry.ir.types import TensorType

T = DimVar("T", 1, 9)


@func
def norm(x: Tensor[(T, 4), f32], g: ConstTensor[(4,), f32]) -> Tensor[(T, 4), f32]:
    s = emit(reduction.Reduce(axes=(1,), keepdim=True, kind="mean"), emit(pointwise.Mul(), x, x))
    return emit(pointwise.Mul(), emit(pointwise.Mul(), x, emit(pointwise.Rsqrt(), s)), g)


@func
def pair(x: Tensor[(T, 4), f32], g: ConstTensor[(4,), f32]):
    y = norm(x, g)
    return y, emit(pointwise.Neg(), y)


NORM_TEXT = """\
func norm(%x: [(T, 4), f32], %g: const [(4,), f32]) -> [(T, 4), f32] {
  dims T in [1, 9)
  %0: [(T, 4), f32] = mul(%x, %x)
  %1: [(T, 1), f32] = reduce(%0, axes=(1,), keepdim=True, kind='mean')
  %2: [(T, 1), f32] = rsqrt(%1)
  %3: [(T, 4), f32] = mul(%x, %2)
  %4: [(T, 4), f32] = mul(%3, %g)
  return %4
}
"""


def test_function_text_is_ssa_with_types_and_attributes():
    assert function_text(norm) == NORM_TEXT


def test_function_text_appends_called_functions():
    text = function_text(pair)
    assert text.startswith(
        "func pair(%x: [(T, 4), f32], %g: const [(4,), f32]) -> ([(T, 4), f32], [(T, 4), f32]) {\n"
        "  dims T in [1, 9)\n"
        "  %0: [(T, 4), f32] = call @norm(%x, %g)\n"
        "  %1: [(T, 4), f32] = neg(%0)\n"
        "  return (%0, %1)\n"
        "}\n"
    )
    assert text.endswith(NORM_TEXT)


def test_two_functions_with_one_name_get_distinct_labels():
    @func
    def norm(x: Tensor[(4,), f32]):  # a different function also named "norm"
        return emit(pointwise.Abs(), x)

    @func
    def both(x: Tensor[(2, 4), f32], g: ConstTensor[(4,), f32], y: Tensor[(4,), f32]):
        return globals()["norm"](x, g), norm(y)

    text = function_text(both)
    assert "call @norm(%x, %g)" in text and "call @norm#2(%y)" in text
    assert "func norm#2(%x: [(4,), f32]) -> [(4,), f32] {" in text


def test_mesh_scopes_print_as_with_blocks():
    mesh = Mesh((Topology("cta", 2),), (2,))

    @func
    def placed(x: Tensor[(4,), f32]):
        with mesh:
            y = emit(pointwise.Neg(), x)
            z = emit(pointwise.Abs(), y)
        return emit(pointwise.Exp(), z)

    assert function_text(placed).splitlines()[1:5] == [
        f"  with {mesh}:",
        "    %0: [(4,), f32] = neg(%x)",
        "    %1: [(4,), f32] = abs(%0)",
        "  %2: [(4,), f32] = exp(%1)",
    ]


@module(entry="mix", topologies=(Topology("cta", 8),))
class Outer:
    eps = 1e-6

    class_inner = None

    @func
    def mix(x: Tensor[(T, 4), f32], w: ConstTensor[(4, 4), f32]) -> Tensor[(T, 4), f32]:
        return emit(contraction.Matmul(), x, w)

    @mix.converter("w")
    def _(w_raw: ConstTensor[(4, 4), f32]) -> Tensor[(4, 4), f32]:
        return emit(movement.Transpose(perm=(1, 0)), w_raw)

    def forward(self, x, w):
        return self.mix(x, w)


def test_module_text_holds_tree_topology_methods_constants_converters():
    @module
    class Root:
        inner = Outer
        blocks = (Outer, Outer)

        @func
        def head(x: Tensor[(T, 4), f32], g: ConstTensor[(4,), f32]):
            return pair(x, g)

    text = module_text(Root)
    lines = text.splitlines()
    assert lines[:3] == ["module Root:", "  entry: none", "  topologies: none"]
    assert "module Root.inner:" in lines and "module Root.blocks.1:" in lines
    i = lines.index("module Root.blocks.0:")
    assert lines[i + 1 : i + 5] == [
        "  entry: mix",
        "  topologies: cta:8",
        "  methods: forward",
        "  attributes: eps=1e-06, class_inner=None",
    ]
    assert "  converter mix.w(%w_raw: const [(4, 4), f32]) -> [(4, 4), f32] {" in lines
    # Called functions that no module holds follow the tree, once each.
    assert lines[lines.index("callees:") + 1].startswith("  func pair(")
    assert text.count("func norm(") == 1


@module(entry="f")
class Inner:
    @func
    def f(x: Tensor[(4,), f32]):
        return emit(pointwise.Neg(), x)


def test_1_3_module_text_uses_the_effective_topology():
    """seed 000 §1.3: the text holds the effective hierarchy, so one Module under two owners differs."""

    @module(topologies=(Topology("cta", 2), Topology("thread", 32)))
    class Owner:
        child = Inner

    @module
    class Bare:
        child = Inner

    assert "module Owner.child:\n  entry: f\n  topologies: cta:2, thread:32\n" in module_text(Owner)
    assert "module Bare.child:\n  entry: f\n  topologies: none\n" in module_text(Bare)


def test_type_text():
    assert type_text(TensorType((T, 4), f32, storage="smem")) == "[(T, 4), f32, smem]"
    assert type_text((TensorType((4,), f32),)) == "([(4,), f32],)"


def test_attr_text_registry():
    assert attr_text(0.1) == "0.1" and attr_text(1e-6) == "1e-06"
    assert attr_text((1, -1)) == "(1, -1)" and attr_text((2,)) == "(2,)"
    assert attr_text(slice(1, None, 2)) == "1::2" and attr_text(slice(None, 3)) == ":3"
    assert attr_text(2 * T + 1) == "2*T + 1" and attr_text(f32) == "f32"

    @dataclass(frozen=True)
    class Knob:
        depth: int
        name: str

    assert attr_text(Knob(2, "a")) == "Knob(depth=2, name='a')"
    with pytest.raises(TypeError, match=r"no canonical text for an attribute of type object; register one"):
        attr_text(object())
