"""Tests of runtime/decorator.py: @runtime_module / @runtime_func (seed 000 §1.1)."""

import os
import sys

import pytest
import torch
import torch.nn.functional as F

from tilefoundry.dsl import Tensor, f32, func
from tilefoundry.ir import evaluator, loading
from tilefoundry.ir.errors import EvalError
from tilefoundry.ir.loading import LoadError
from tilefoundry.ir.module import Module
from tilefoundry.runtime import (
    DictResource,
    RuntimeFunction,
    RuntimeModule,
    entry_abi_of,
    runtime_func,
    runtime_module,
)

sys.path.insert(0, os.path.dirname(__file__))
from two_level_program import Layer, T, Top
from two_level_program import weights as _weights


@runtime_module(Layer)
class LayerTwin:
    @runtime_func
    def norm(self, x, g):
        return F.rms_norm(x, (8,), g, eps=1e-6)

    @runtime_func
    def ffn(self, x, w_up, w_down):
        return F.silu(x @ w_up) @ w_down


@runtime_module(Top)
class TopTwin:
    a = LayerTwin
    layers = LayerTwin

    @runtime_func
    def head(self, x, w_out):
        return x @ w_out


def _x(seed: int = 5) -> torch.Tensor:
    return torch.randn(3, 8, generator=torch.Generator().manual_seed(seed))


def test_1_1_twin_has_the_same_name_child_tree_and_entry():
    """seed 000 §1.1: @runtime_module(sem) returns a RuntimeModule subclass whose instances are
    sem's runtime twin — same function names, same child tree, same entry."""
    twin = TopTwin()
    assert isinstance(twin, RuntimeModule) and twin.name == "Top" and twin.entry is None
    assert [m.name for m in twin.modules] == ["a", "layers.0", "layers.1"]
    assert all(isinstance(m, LayerTwin) and m.entry == "ffn" for m in twin.modules)
    assert twin.a is twin.modules[0] and twin.layers == twin.modules[1:]


def test_1_1_module_names_the_authored_module():
    """seed 000 §1.1: module names the authored Module a twin was generated from; each child is
    built with child_cls(ir=<that child's ir Module>)."""
    twin = TopTwin()
    assert twin.module is Top
    assert [m.module for m in twin.modules] == list(Top.children)
    assert LayerTwin().module is Layer


def _named_module(sig_fn):
    sig_fn.__name__ = sig_fn.__qualname__ = "module"
    return func(sig_fn)


def test_1_1_module_accessor_reserved_rejected():
    """seed 000 §1.1: @runtime_module MUST reject a Module naming a function, child or method
    `module` when it is decorated, rather than generate a twin whose accessor answers something else."""

    def body(x: Tensor[(T, 8), "f32"]) -> Tensor[(T, 8), "f32"]:
        return x * 2.0

    fn = _named_module(body)
    cases = {
        "function": Module("M", functions={"module": fn}),
        "child": Module("M", children=(Layer.renamed("module"),)),
        "method": Module("M", methods={"module": lambda self: None}),
    }
    for kind, sem in cases.items():
        with pytest.raises(
            TypeError,
            match=rf"@runtime_module: Module 'M' names a {kind} 'module', which a twin "
            rf"would bind over its own 'module' accessor",
        ):
            runtime_module(sem)


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (
            {"norm": runtime_func(lambda self, x, g: x)},
            r"the kernel names must equal the Module's functions "
            r"\('norm', 'ffn'\); missing 'ffn'",
        ),
        (
            {
                "norm": runtime_func(lambda self, x, g: x),
                "ffn": runtime_func(lambda self, x, w_up, w_down: x),
                "proj": runtime_func(lambda self, x: x),
            },
            r"the kernel names must equal the Module's functions \('norm', 'ffn'\); extra 'proj'",
        ),
    ],
)
def test_1_1_function_name_set_missing_or_extra_rejected(body, message):
    """seed 000 §1.1: the @runtime_func name set MUST equal sem's function name set; missing or
    extra MUST be rejected."""
    with pytest.raises(TypeError, match=message):
        runtime_module(Layer)(type("L", (), body))


def test_1_1_child_name_set_missing_or_extra_rejected():
    """seed 000 §1.1: the child-attribute name set MUST equal sem's child module name set; missing
    or extra MUST be rejected."""
    head = runtime_func(lambda self, x, w_out: x)
    with pytest.raises(
        TypeError,
        match=r"the child attribute names must equal the Module's children \('a', "
        r"'layers'\); missing 'layers'",
    ):
        runtime_module(Top)(type("T1", (), {"head": head, "a": LayerTwin}))
    with pytest.raises(TypeError, match=r"children \('a', 'layers'\); missing 'a'; extra 'b'"):
        runtime_module(Top)(type("T2", (), {"head": head, "b": LayerTwin, "layers": LayerTwin}))


def test_1_1_child_attribute_is_a_class_not_an_instance():
    """seed 000 §1.1: a child attribute is a RuntimeModule subclass, not an instance."""
    head = runtime_func(lambda self, x, w_out: x)
    with pytest.raises(TypeError, match=r"child attribute 'a' is a RuntimeModule instance; give its class"):
        runtime_module(Top)(type("T3", (), {"head": head, "a": LayerTwin(), "layers": LayerTwin}))


def test_1_1_child_class_must_accept_ir():
    """seed 000 §1.1: a child class MUST accept the ir= constructor keyword."""

    class Plain(RuntimeModule):
        def __init__(self):
            super().__init__("a")

    head = runtime_func(lambda self, x, w_out: x)
    with pytest.raises(
        TypeError, match=r"child class .*Plain for 'a' must accept the ir= constructor keyword"
    ):
        runtime_module(Top)(type("T4", (), {"head": head, "a": Plain, "layers": LayerTwin}))


def test_tuple_child_attribute_holds_one_class_per_child():
    head = runtime_func(lambda self, x, w_out: x)
    twin_cls = runtime_module(Top)(
        type("T5", (), {"head": head, "a": LayerTwin, "layers": (LayerTwin, LayerTwin)})
    )
    assert [type(m) for m in twin_cls().layers] == [LayerTwin, LayerTwin]
    with pytest.raises(TypeError, match=r"child attribute 'layers' holds 1 classes for 2 children"):
        runtime_module(Top)(type("T6", (), {"head": head, "a": LayerTwin, "layers": (LayerTwin,)}))


def test_kernel_signature_must_be_the_funcs_own():
    with pytest.raises(
        TypeError,
        match=r"@runtime_func 'norm' takes \(x\), the semantic @func takes \(x, g\); a "
        r"kernel has the @func's own signature, weights included",
    ):
        runtime_module(Layer)(type("L", (), {"norm": runtime_func(lambda self, x: x), "ffn": LayerTwin.ffn}))


def test_a_twin_class_may_not_define_init():
    def __init__(self):
        pass

    with pytest.raises(
        TypeError, match=r"the class defines __init__, but the generated __init__ builds the twin"
    ):
        runtime_module(Layer)(
            type("L", (), {"__init__": __init__, "norm": LayerTwin.norm, "ffn": LayerTwin.ffn})
        )


def test_1_1_weights_are_filled_by_name_from_what_load_bound():
    """seed 000 §1.1: weights are filled by name at call time from what load bound, so a kernel
    method's caller passes only activations."""
    w = _weights(1)
    twin = TopTwin().load(DictResource(w))
    x = _x()
    torch.testing.assert_close(twin.layers[1].norm(x), F.rms_norm(x, (8,), w["layers.1.g"], eps=1e-6))
    torch.testing.assert_close(twin.head(x), x @ w["w_out"])
    with pytest.raises(
        EvalError,
        match=r"a.norm \(twin LayerTwin\): takes activations alone \(x\), got 2 "
        r"arguments; the full parameter list is the semantic Module's runner",
    ):
        twin.a.norm(x, w["a.g"])
    with pytest.raises(LoadError, match=r"a.norm: weight 'g' is not bound; call load\(resource\) first"):
        TopTwin().a.norm(x)


def test_1_1_runtime_function_instance_stands_in_for_a_runtime_func():
    """seed 000 §1.1: a RuntimeFunction instance class attribute stands in for a @runtime_func,
    counted in the one-to-one function name set."""

    class Ffn(RuntimeFunction):
        def __call__(self, x, w_up, w_down):
            return F.silu(x @ w_up) @ w_down

    @runtime_module(Layer)
    class WithBody:
        norm = LayerTwin.norm
        ffn = Ffn(entry_abi_of(Layer.ffn))

    w = {k.removeprefix("a."): v for k, v in _weights(2).items() if k.startswith("a.")}
    twin = WithBody().load(DictResource(w))
    x = _x()
    torch.testing.assert_close(twin(x), F.silu(x @ w["w_up"]) @ w["w_down"])
    with pytest.raises(
        TypeError,
        match=r"RuntimeFunction stand-in 'ffn' has ABI inputs \(x, g\), the semantic "
        r"@func takes \(x, w_up, w_down\)",
    ):
        runtime_module(Layer)(type("L", (), {"norm": LayerTwin.norm, "ffn": Ffn(entry_abi_of(Layer.norm))}))


def test_1_1_orchestration_methods_are_reused_verbatim():
    """seed 000 §1.1: orchestration methods are reused from Module.methods verbatim; inside them
    self.<fn> / self.<child> resolve to the twin's own kernels and children."""
    assert TopTwin.forward is Top.methods["forward"]
    assert LayerTwin.twice is Layer.methods["twice"]
    w = _weights(3)
    twin = TopTwin().load(DictResource(w))
    reference = Top.load(DictResource(w))
    x = _x()
    torch.testing.assert_close(twin(x), reference(x), rtol=1e-5, atol=1e-5)


def test_1_1_twin_never_runs_the_hir_evaluator(monkeypatch):
    """seed 000 §1.1: a RuntimeModule never runs the HIR evaluator."""

    def refuse(*args):
        raise AssertionError("the evaluator ran")

    monkeypatch.setattr(evaluator, "evaluate", refuse)
    monkeypatch.setattr(loading, "evaluate", refuse)
    twin = TopTwin().load(DictResource(_weights(3)))
    assert twin(_x()).shape == (3, 4)


def test_1_1_forward_mirrors_the_three_branches():
    """seed 000 §1.1: absent an own forward, the generated class runs sem.methods["forward"] if
    present, else calls the entry function by name; with neither it is refused naming what to call."""
    w = {k.removeprefix("a."): v for k, v in _weights(4).items() if k.startswith("a.")}
    x = _x()
    layer = LayerTwin().load(DictResource(w))
    torch.testing.assert_close(layer(x), layer.ffn(x))

    @runtime_module(Layer)
    class Own:
        norm = LayerTwin.norm
        ffn = LayerTwin.ffn

        def forward(self, x):
            return self.norm(x) * 2.0

    torch.testing.assert_close(Own().load(DictResource(w))(x), layer.norm(x) * 2.0)

    loose = Module("Loose", functions={"norm": Layer.norm}, methods={"helper": lambda self, x: self.norm(x)})

    @runtime_module(loose)
    class LooseTwin:
        norm = LayerTwin.norm

    with pytest.raises(
        EvalError,
        match=r"twin Loose \(LooseTwin\) has no forward method and no entry function; "
        r"call one of its functions \(norm\) or methods \(helper\) by name",
    ):
        LooseTwin()(x)


def test_1_1_load_validates_before_binding_and_binds_nothing_on_failure():
    """seed 000 §1.1 / §1.1.2: the twin's load validates against the same declarations before
    binding in place; a refused load binds nothing."""
    w = _weights(5)
    w["layers.1.w_down"] = w["layers.1.w_down"].to(torch.float16)
    twin = TopTwin()
    with pytest.raises(
        LoadError,
        match=r"weight 'layers.1.w_down': declared \[\(16, 8\), f32\], found shape "
        r"\(16, 8\) f16",
    ):
        twin.load(DictResource(w))
    with pytest.raises(LoadError, match="weight 'w_out' is not bound"):
        twin.head(_x())


def test_twin_ir_must_have_the_class_structure():
    with pytest.raises(
        TypeError,
        match=r"LayerTwin\(ir='Top'\): ir has functions \(head\) and children \(a, "
        r"layers.0, layers.1\); this twin class was built for functions \(norm, ffn\)",
    ):
        LayerTwin(ir=Top)
