"""Module: class collection, children and tuples, attribute access, weights, lookup, copies, forward."""

from __future__ import annotations

import pytest
import torch

from tilefoundry.dsl import ConstTensor, DimVar, Tensor, Topology, f32, func, module
from tilefoundry.dsl._trace import emit
from tilefoundry.ir.errors import DSLError, EvalError
from tilefoundry.ir.hir import Function
from tilefoundry.ir.module import Module
from tilefoundry.ir.ops import contraction, pointwise

T = DimVar("T", 1, 33)


def rand(*shape: int, seed: int = 0) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


@module(entry="mix")
class Mixer:
    scale = 2.0

    @func
    def mix(x: Tensor[(T, 4), f32], w: ConstTensor[(4, 4), f32]) -> Tensor[(T, 4), f32]:
        return emit(contraction.Matmul(), x, w)

    @func
    def gate(x: Tensor[(T, 4), f32], g: ConstTensor[(4,), f32]) -> Tensor[(T, 4), f32]:
        return emit(pointwise.Mul(), x, g)

    def twice(self, x, w):
        return self.mix(self.mix(x, w), w)


@module(topologies=(Topology("cta", 4),))
class Stack:
    first = Mixer
    layers = (Mixer, Mixer, Mixer)

    def forward(self, x, w):
        for layer in self.layers:
            x = layer.forward(x, w)
        return x


def test_class_body_is_collected_in_declaration_order():
    assert isinstance(Mixer, Module)
    assert Mixer.name == "Mixer" and Mixer.entry == "mix"
    assert list(Mixer.functions) == ["mix", "gate"]
    assert list(Mixer.methods) == ["twice"]
    assert dict(Mixer.attributes) == {"scale": 2.0}


def test_tuple_attribute_yields_dotted_children():
    assert [c.name for c in Stack.children] == ["first", "layers.0", "layers.1", "layers.2"]
    assert [c.name for c in Stack.layers] == ["layers.0", "layers.1", "layers.2"]


def test_children_are_independent_copies():
    a, b = Stack.layers[0], Stack.layers[1]
    assert a is not b and a is not Mixer and Mixer.name == "Mixer"
    # Functions are immutable IR and shared.
    assert a.functions["mix"] is Mixer.functions["mix"]


def test_attribute_access_reaches_functions_children_methods_constants():
    assert isinstance(Mixer.mix, Function)
    assert Stack.first.name == "first"
    assert Mixer.scale == 2.0
    x, w = rand(3, 4, seed=1), rand(4, 4, seed=2)
    torch.testing.assert_close(Mixer.twice(x, w), x @ w @ w)


def test_function_runner_takes_one_argument_per_declared_param():
    x, w = rand(5, 4, seed=3), rand(4, 4, seed=4)
    torch.testing.assert_close(Mixer.mix(x, w), x @ w)


def test_unknown_attribute_lists_what_the_module_holds():
    message = r"module Mixer has no 'mlp'; it holds: mix, gate, twice, scale"
    with pytest.raises(AttributeError, match=message):
        _ = Mixer.mlp


def test_weights_are_the_union_by_name():
    assert list(Mixer.weights) == ["w", "g"]
    assert str(Mixer.weights["w"]) == "[(4, 4), f32]"


def test_lookup_follows_dotted_paths():
    assert Stack.lookup("layers.2") is Stack.layers[2]
    assert Stack.lookup("layers.1.gate") is Mixer.functions["gate"]
    assert Stack.lookup("first") is Stack.first
    message = r"'layers.1.attn': module layers.1 has no 'attn'; it holds: mix, gate"
    with pytest.raises(KeyError, match=message):
        Stack.lookup("layers.1.attn")


def test_walk_gives_checkpoint_paths():
    assert [p for p, _ in Stack.walk()] == ["", "first", "layers.0", "layers.1", "layers.2"]


def test_effective_topologies_are_inherited_from_the_owner():
    assert Mixer.effective_topologies is None
    assert Stack.layers[0].topologies is None
    assert Stack.layers[0].effective_topologies == (Topology("cta", 4),)


def test_cloned_and_renamed_are_independent():
    c = Mixer.cloned()
    r = Mixer.renamed("mixer2")
    assert c is not Mixer and c.name == "Mixer" and r.name == "mixer2"
    assert list(r.functions) == list(Mixer.functions)


def test_modules_are_immutable():
    with pytest.raises(AttributeError, match=r"Module Mixer is immutable IR"):
        Mixer.entry = "gate"  # type: ignore[misc]
    with pytest.raises(TypeError):
        Mixer.functions["x"] = Mixer.mix  # type: ignore[index]


def test_of_wraps_a_function_as_its_entry():
    m = Module.of(Mixer.mix)
    assert m.name == "mix" and m.entry == "mix" and list(m.functions) == ["mix"]
    assert Module.of(Mixer) is Mixer


def test_1_3_raw_python_function_is_refused():
    """seed 000 §1.3: raw Python functions raise TypeError — use @func first."""
    with pytest.raises(TypeError, match=r"got function; decorate a Python function with @func first"):
        Module.of(lambda x: x)  # type: ignore[arg-type]


def test_func_topologies_declare_the_implicit_module():
    @func(topologies=(Topology("cta", 2),))
    def one(x: Tensor[(4,), f32]) -> Tensor[(4,), f32]:
        return emit(pointwise.Neg(), x)

    assert Module.of(one).topologies == (Topology("cta", 2),)


def test_1_1_2_forward_runs_the_forward_method():
    """seed 000 §1.1.2: forward runs the class body's forward method when one is defined."""
    x, w = rand(2, 4, seed=5), rand(4, 4, seed=6)
    torch.testing.assert_close(Stack(x, w), x @ w @ w @ w)


def test_1_1_2_forward_runs_the_entry_function():
    """seed 000 §1.1.2: without a forward method, forward runs the entry function (all params)."""
    x, w = rand(2, 4, seed=7), rand(4, 4, seed=8)
    torch.testing.assert_close(Mixer.forward(x, w), x @ w)


def test_1_1_2_forward_without_method_or_entry_is_refused():
    """seed 000 §1.1.2: neither forward nor entry is refused, naming functions and methods."""

    @module
    class Loose:
        gate = Mixer.gate

        def helper(self):
            return None

    with pytest.raises(EvalError, match=r"module Loose has no forward method and no entry function; "
                       r"call one of its functions \(gate\) or methods \(helper\) by name"):
        Loose.forward(rand(2, 4))


def test_unknown_entry_lists_the_functions():
    message = r"module Bad: entry 'nope' is not one of its functions; accepted: gate"
    with pytest.raises(DSLError, match=message):

        @module(entry="nope")
        class Bad:
            gate = Mixer.gate


def test_same_weight_name_with_two_types_names_both_functions():
    with pytest.raises(DSLError, match=r"module Clash: weight 'w' is \[\(4, 4\), f32\] in 'mix' .* "
                       r"but \[\(4,\), f32\] in 'narrow'; one weight name has one type"):

        @module
        class Clash:
            mix = Mixer.mix

            @func
            def narrow(x: Tensor[(4,), f32], w: ConstTensor[(4,), f32]) -> Tensor[(4,), f32]:
                return emit(pointwise.Mul(), x, w)


def test_reserved_names_are_refused():
    with pytest.raises(DSLError, match=r"function 'load' takes a name the Module itself answers"):
        Module("M", functions={"load": Mixer.mix})


def test_a_name_used_twice_is_refused():
    with pytest.raises(DSLError, match=r"module M: 'gate' is both a function and a method"):
        Module("M", functions={"gate": Mixer.gate}, methods={"gate": lambda self: None})


def test_other_class_attributes_are_refused():
    with pytest.raises(DSLError, match=r"@module Odd: attribute 'table' is a dict; a module class holds"):

        @module
        class Odd:
            table = {"a": 1}  # noqa: RUF012


def test_load_and_prepare_delegate_to_loading(monkeypatch):
    from tilefoundry.ir import loading

    calls = []
    monkeypatch.setattr(loading, "load_module", lambda mod, res: calls.append(("load", mod, res)) or "loaded")
    monkeypatch.setattr(
        loading, "prepare_module", lambda mod, raw, out, device: calls.append(("prep", out, device))
    )
    assert Mixer.load("res") == "loaded"
    Mixer.prepare("raw", "/tmp/out", device="cpu")
    assert calls == [("load", Mixer, "res"), ("prep", "/tmp/out", "cpu")]


def test_module_on_a_function_is_refused_naming_what_it_decorates():
    """`@module` stacked on a `@func` (a Function, not a class) says it decorates classes."""

    @func
    def f(x: Tensor[(4,), f32]):
        return x

    with pytest.raises(DSLError, match="@module decorates a class holding @func functions, not a Function"):
        module(f)
