"""Tests of the alias model and DictResource (seed 000 §1.5)."""

import dataclasses

import pytest
import torch

from tilefoundry.runtime.resource import Absolute, DictResource, Preprocessed, RuntimeResource


def _t(*shape, seed=0, dtype=torch.float32):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed)).to(dtype)


@pytest.fixture
def data():
    return {
        "model.norm.weight": _t(8, seed=1),
        "model.layers.0.kv_norm.weight": _t(8, seed=2),
        "model.layers.1.kv_norm.weight": _t(8, seed=3),
        "model.layers.0.special.weight": _t(8, seed=4),
        "model.layers.0.qkv": _t(12, 8, seed=5, dtype=torch.bfloat16),
        "model.layers.0.experts.0.w": _t(4, 8, seed=6),
        "model.layers.0.experts.1.w": _t(4, 8, seed=7),
        "model.layers.0.experts.2.w": _t(4, 8, seed=8),
        "model.layers.0.w_up": _t(8, 16, seed=9),
        "model.layers.0.ids": torch.arange(5, dtype=torch.int32),
    }


def _message(err: pytest.ExceptionInfo) -> str:
    return err.value.args[0]


def test_resources_satisfy_the_protocol(data):
    assert isinstance(DictResource(data), RuntimeResource)
    assert isinstance(DictResource(data).subtree("model"), RuntimeResource)


def test_1_5_preprocessed_is_frozen_with_one_name_and_read():
    """seed 000 §1.5: Preprocessed is a frozen dataclass carrying one raw name and its one-tensor read."""
    pre = Preprocessed("w", torch.t)
    assert [f.name for f in dataclasses.fields(pre)] == ["name", "read"]
    with pytest.raises(dataclasses.FrozenInstanceError):
        pre.name = "v"  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        Absolute("x").name = "y"  # type: ignore[misc]
    assert Preprocessed(Absolute("a.b"), torch.t).name == Absolute("a.b")


def test_1_5_preprocessed_tuple_name_rejected_naming_converter():
    """seed 000 §1.5: a tuple-named Preprocessed is rejected at construction, naming the weight converter."""
    with pytest.raises(TypeError) as err:
        Preprocessed(("gate", "up"), torch.t)  # type: ignore[arg-type]
    assert str(err.value) == (
        "Preprocessed: name ('gate', 'up') is a tuple, but a read transforms exactly one raw tensor; express "
        "a value built from several raw tensors as a weight converter (@fn.converter, run by Module.prepare)"
    )


def test_alias_values_of_the_wrong_kind_rejected_naming_the_key(data):
    with pytest.raises(TypeError) as err:
        DictResource(data, alias={"w": 3})  # type: ignore[dict-item]
    assert (
        str(err.value) == "alias['w'] is int, expected a str, a tuple of str, an Absolute or a Preprocessed"
    )
    with pytest.raises(ValueError, match=r"alias\['g'\] is an empty tuple"):
        DictResource(data, alias={"g": ()})
    with pytest.raises(TypeError, match=r"a group holds raw names \(str\) only"):
        DictResource(data, alias={"g": ("a", Absolute("b"))})  # type: ignore[dict-item]
    with pytest.raises(TypeError, match="Preprocessed: read must be callable, got str"):
        Preprocessed("w", "transpose")  # type: ignore[arg-type]


def test_dict_resource_data_must_hold_tensors():
    with pytest.raises(TypeError) as err:
        DictResource({"w": [1.0, 2.0]})  # type: ignore[dict-item]
    assert str(err.value) == "DictResource: data['w'] is list, expected a torch.Tensor"


def test_1_5_load_returns_the_tensor_for_name(data):
    """seed 000 §1.5: load(name) returns the tensor for name, joined onto the prefix."""
    res = DictResource(data, prefix="model.layers.0.")
    assert res.load("w_up") is data["model.layers.0.w_up"]
    assert DictResource(data, prefix="model.layers.0").load("w_up") is data["model.layers.0.w_up"]


def test_1_5_load_missing_raises_key_error_naming_key_and_scope(data):
    """seed 000 §1.5: load raises KeyError if the name is absent, naming the raw key and the scope."""
    res = DictResource(data).subtree("model").subtree("layers").subtree("1")
    with pytest.raises(KeyError) as err:
        res.load("w_up")
    assert _message(err) == (
        "'model.layers.1.w_up' is not in the DictResource of 10 tensors "
        "(looked up 'w_up' in scope 'model.layers.1.')"
    )
    with pytest.raises(KeyError) as err:
        DictResource(data).load("lm_head")
    assert (
        _message(err)
        == "'lm_head' is not in the DictResource of 10 tensors (looked up 'lm_head' in the root scope)"
    )


def test_1_5_load_of_a_group_alias_names_load_group(data):
    """seed 000 §1.5: load of a name with a tuple-valued alias raises TypeError naming load_group."""
    res = DictResource(data, prefix="model.layers.0.", alias={"w_experts": ("experts.0.w", "experts.1.w")})
    with pytest.raises(TypeError) as err:
        res.load("w_experts")
    assert str(err.value) == (
        "load('w_experts'): the alias resolves to a one-to-many group of 2 raw tensors "
        "('experts.0.w', 'experts.1.w'); read it with load_group('w_experts')"
    )


def test_1_5_load_group_reads_group_in_declared_order(data):
    """seed 000 §1.5: load_group returns the raw tensors of a one-to-many alias, in declared order."""
    order = ("experts.2.w", "experts.0.w", "experts.1.w")
    res = DictResource(data, alias={"w_experts": order}).subtree("model").subtree("layers").subtree("0")
    group = res.load_group("w_experts")
    assert isinstance(group, tuple) and len(group) == 3
    assert all(g is data[f"model.layers.0.{name}"] for g, name in zip(group, order, strict=True))


def test_1_5_resource_never_stacks(data):
    """seed 000 §1.5: the resource MUST NOT stack a group: assembling it stays prepare's job."""
    res = DictResource(data, prefix="model.layers.0.", alias={"w_experts": ("experts.0.w", "experts.1.w")})
    group = res.load_group("w_experts")
    assert [tuple(g.shape) for g in group] == [(4, 8), (4, 8)]


def test_1_5_load_group_missing_member_names_it(data):
    """seed 000 §1.5: a group member that is absent is a KeyError naming its raw key."""
    res = DictResource(data, prefix="model.layers.0.", alias={"w_experts": ("experts.0.w", "experts.7.w")})
    with pytest.raises(KeyError) as err:
        res.load_group("w_experts")
    assert _message(err) == (
        "'model.layers.0.experts.7.w' is not in the DictResource of 10 tensors "
        "(looked up 'w_experts' in scope 'model.layers.0.')"
    )


def test_1_5_load_group_is_none_for_one_to_one_names(data):
    """seed 000 §1.5: load_group returns None when name has no tuple-valued alias."""
    res = DictResource(
        data,
        prefix="model.layers.0.",
        alias={
            "gamma": "kv_norm.weight",
            "norm": Absolute("model.norm.weight"),
            "wt": Preprocessed("w_up", torch.t),
        },
    )
    for name in ("w_up", "gamma", "norm", "wt", "not_there"):
        assert res.load_group(name) is None, name


def test_1_5_lookup_order_qualified_then_bare_then_identity(data):
    """seed 000 §1.5: lookup is the path-qualified key first, then the bare name entry, then identity."""
    alias = {"model.layers.0.gamma": "special.weight", "gamma": "kv_norm.weight"}
    layers = DictResource(data, alias=alias).subtree("model").subtree("layers")
    assert layers.subtree("0").load("gamma") is data["model.layers.0.special.weight"]
    assert layers.subtree("1").load("gamma") is data["model.layers.1.kv_norm.weight"]
    assert layers.subtree("0").load("w_up") is data["model.layers.0.w_up"]


def test_1_5_bare_entry_fires_under_every_instance(data):
    """seed 000 §1.5: a bare entry serves every instance at that level uniformly."""
    layers = DictResource(data, prefix="model.layers.", alias={"gamma_kv": "kv_norm.weight"})
    for i in (0, 1):
        assert layers.subtree(str(i)).load("gamma_kv") is data[f"model.layers.{i}.kv_norm.weight"]


def test_1_5_subtree_resolves_its_segment_and_names_below_are_bare(data):
    """seed 000 §1.5: subtree(seg) alias-resolves seg; a child then addresses its weights by bare name."""
    res = DictResource(data, alias={"decoder": "model.layers", "model.layers.0.moe": "experts"})
    layer = res.subtree("decoder").subtree("0")
    assert layer.prefix == "model.layers.0."
    assert layer.load("w_up") is data["model.layers.0.w_up"]
    assert layer.subtree("moe").subtree("2").load("w") is data["model.layers.0.experts.2.w"]


def test_1_5_dict_resource_subtree_extends_prefix_and_carries_alias(data):
    """seed 000 §1.5: DictResource.subtree only extends the prefix, carrying alias down to every view."""
    root = DictResource(data, alias={"gamma": "kv_norm.weight"})
    child = root.subtree("model")
    assert (root.prefix, child.prefix) == ("", "model.")
    assert child.alias is root.alias and type(child) is DictResource
    assert child.subtree("layers").subtree("1").load("gamma") is data["model.layers.1.kv_norm.weight"]


def test_1_5_scoped_name_cannot_reach_parent_tensor(data):
    """seed 000 §1.5: aliasing only reaches downward: a str alias stays inside its scope."""
    layer = DictResource(data, prefix="model.layers.0.", alias={"final_norm": "norm.weight"})
    with pytest.raises(KeyError, match=r"'model\.layers\.0\.norm\.weight' is not in"):
        layer.load("final_norm")


def test_1_5_absolute_ignores_the_prefix(data):
    """seed 000 §1.5: an Absolute value resolves to its name as the whole raw key, with no prefix."""
    layer = DictResource(data, alias={"final_norm": Absolute("model.norm.weight")}).subtree("model.layers.0")
    assert layer.load("final_norm") is data["model.norm.weight"]


def test_1_5_subtree_rejects_group_absolute_and_preprocessed_hits(data):
    """seed 000 §1.5: a subtree segment is one relative path: tuple, Absolute, Preprocessed refused."""
    alias = {
        "experts": ("experts.0", "experts.1"),
        "model": Absolute("model"),
        "blocks": Preprocessed("layers", torch.t),
    }
    res = DictResource(data, alias=alias)
    cases = {
        "experts": "a tuple group ('experts.0', 'experts.1')",
        "model": "Absolute Absolute(name='model')",
        "blocks": "Preprocessed Preprocessed(name='layers', read=",
    }
    for seg, hit in cases.items():
        with pytest.raises(TypeError) as err:
            res.subtree(seg)
        assert str(err.value).startswith(f"subtree({seg!r}): the alias resolves to {hit}"), seg
        assert str(err.value).endswith("; a subtree segment must resolve to one relative path (a str alias)")


def test_1_5_preprocessed_applies_its_read(data):
    """seed 000 §1.5: load applies a Preprocessed entry's read to the one raw tensor."""
    alias = {
        "w_down": Preprocessed("w_up", lambda t: t.transpose(0, 1)),
        "q": Preprocessed("qkv", lambda t: t[:4]),
        "norm": Preprocessed(Absolute("model.norm.weight"), lambda t: t.unsqueeze(0)[0]),
    }
    res = DictResource(data, prefix="model.layers.0.", alias=alias)
    assert torch.equal(res.load("w_down"), data["model.layers.0.w_up"].T)
    assert torch.equal(res.load("q"), data["model.layers.0.qkv"][:4])
    assert torch.equal(res.load("norm"), data["model.norm.weight"])


def test_1_5_reads_keep_the_stored_dtype(data):
    """seed 000 §1.5: a read returns the checkpoint's own stored element type, never cast."""
    res = DictResource(data, prefix="model.layers.0.", alias={"q": Preprocessed("qkv", lambda t: t[:4])})
    assert res.load("qkv").dtype is torch.bfloat16
    assert res.load("q").dtype is torch.bfloat16
    assert res.load("ids").dtype is torch.int32


def test_1_5_preprocessed_read_may_not_change_precision(data):
    """seed 000 §1.5: precision is not preprocessing: a read that changes the element type is refused."""
    res = DictResource(
        data, prefix="model.layers.0.", alias={"q": Preprocessed("qkv", lambda t: t[:4].float())}
    )
    with pytest.raises(ValueError) as err:
        res.load("q")
    assert str(err.value) == (
        "load('q'): the Preprocessed read of 'model.layers.0.qkv' changed the element type from "
        "torch.bfloat16 to torch.float32; precision is not preprocessing, declare it with a weight converter"
    )
    bad = DictResource(data, prefix="model.layers.0.", alias={"q": Preprocessed("qkv", lambda t: t.tolist())})
    with pytest.raises(
        TypeError, match=r"load\('q'\): the Preprocessed read of 'model.layers.0.qkv' returned list"
    ):
        bad.load("q")
