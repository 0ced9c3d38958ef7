"""Tests of runtime/module.py: the RuntimeModule base class (seed 000 §1.1)."""

import pytest
import torch

from tilefoundry.runtime.module import RuntimeModule, authored_module


class _Recorder:
    """A resource that records the subtree path each view was made for and every read."""

    def __init__(self, path: str = "", log: list | None = None):
        self.path, self.log = path, [] if log is None else log

    def subtree(self, seg):
        self.log.append(("subtree", self.path + seg))
        return _Recorder(self.path + seg + ".", self.log)

    def load(self, name):
        self.log.append(("load", self.path + name))
        return torch.randn(2)

    def load_group(self, name):
        self.log.append(("load_group", self.path + name))


class Scale(RuntimeModule):
    def __init__(self, name, k):
        super().__init__(name, entry="scale")
        self.k = k

    def forward(self, x):
        return x * self.k


class Stack(RuntimeModule):
    def __init__(self):
        super().__init__("stack", entry=None, modules=(Scale("a", 2.0), Scale("b", 3.0)))

    def forward(self, x):
        for m in self.modules:
            x = m(x)
        return x


def test_1_1_call_delegates_to_forward_over_children():
    """seed 000 §1.1: subclass it, build the child tree in __init__ (modules=), write forward;
    __call__ delegates to forward."""
    x = torch.randn(5, generator=torch.Generator().manual_seed(1))
    s = Stack()
    assert [m.name for m in s.modules] == ["a", "b"]
    torch.testing.assert_close(s(x), x * 6.0)


def test_1_1_load_recurses_with_subtree_and_base_resolves_nothing():
    """seed 000 §1.1: load(resource) recurses into each child with resource.subtree(child.name);
    the base class itself resolves nothing."""
    res = _Recorder()
    out = Stack().load(res)
    assert isinstance(out, Stack)
    assert res.log == [("subtree", "a"), ("subtree", "b")]


def test_1_1_base_class_holds_no_weights_or_resource():
    """seed 000 §1.1: the base class itself holds no weights or resource."""
    s = Stack()
    s.load(_Recorder())
    assert set(vars(s)) == {"name", "entry", "modules"}
    assert all(not isinstance(v, (torch.Tensor, _Recorder)) for v in vars(s.modules[0]).values())


def test_1_1_module_of_a_handwritten_subclass_reports_none():
    """seed 000 §1.1: a RuntimeModule that stands for no single authored Module — a hand-written
    subclass — MUST report None rather than something chosen for it."""
    s = Stack()
    assert s.module is None
    with pytest.raises(AttributeError):
        s.module = object()


def test_1_1_caller_needing_a_module_refuses_instead_of_substituting():
    """seed 000 §1.1: a caller that needs one MUST refuse instead of substituting."""
    with pytest.raises(
        TypeError,
        match=r"check needs the authored Module behind RuntimeModule 'stack' \(Stack\), "
        r"and it stands for none \(module is None\)",
    ):
        authored_module(Stack(), needed_for="check")


def test_base_forward_raises_naming_the_node():
    with pytest.raises(NotImplementedError, match="RuntimeModule 'bare' \\(RuntimeModule\\) has no forward"):
        RuntimeModule("bare")(torch.randn(2))


def test_children_must_be_runtime_module_instances_with_unique_names():
    with pytest.raises(TypeError, match="RuntimeModule 'p': modules holds RuntimeModule instances, got type"):
        RuntimeModule("p", modules=(Scale,))
    with pytest.raises(ValueError, match=r"RuntimeModule 'p': child names must be unique .* 'a' repeats"):
        RuntimeModule("p", modules=(Scale("a", 1.0), Scale("a", 2.0)))


def test_runtime_package_reexports_the_design_names():
    """DESIGN §3: tilefoundry.runtime re-exports the runtime names with __all__."""
    import sys

    import tilefoundry.runtime as rt

    names = {
        "RuntimeModule", "RuntimeFunction", "runtime_module", "runtime_func", "CompiledModule", "EntryABI",
        "ParamABI", "entry_abi_of", "param_abi_of", "DictResource", "SafetensorsResource", "Absolute",
        "Preprocessed", "generate", "autotune", "Autotuned", "donate",
    }  # fmt: skip
    assert set(rt.__all__) == names
    assert rt.generate is sys.modules["tilefoundry.runtime.generate"].generate
    assert rt.RuntimeModule is RuntimeModule
