"""Tests of tilefoundry/ir/loading.py: prepare, load and LoadedModule (seed 000 §1.1.2).

They live with the runtime package because they read through its resources (DictResource,
SafetensorsResource); tilefoundry-ir itself cannot depend on the runtime.
"""

import json
import os
import sys

import pytest
import torch
from safetensors import safe_open

from tilefoundry.dsl import ConstTensor, Tensor, bf16, f32, func, i64, module, tf
from tilefoundry.ir import loading
from tilefoundry.ir.errors import DSLError, EvalError
from tilefoundry.ir.evaluator import evaluate
from tilefoundry.ir.loading import INDEX_NAME, SHARD_NAME, LoadedModule, LoadError
from tilefoundry.ir.module import Module
from tilefoundry.runtime import DictResource, SafetensorsResource

sys.path.insert(0, os.path.dirname(__file__))
from two_level_program import Layer, T, Top
from two_level_program import weights as _weights


def _torch_top(w: dict[str, torch.Tensor], x: torch.Tensor) -> torch.Tensor:
    for p in ("a", "layers.0", "layers.1"):
        x = torch.nn.functional.rms_norm(x, (8,), w[f"{p}.g"], eps=1e-6)
        x = torch.nn.functional.silu(x @ w[f"{p}.w_up"]) @ w[f"{p}.w_down"]
    return x @ w["w_out"]


def _x(seed: int = 5, n: int = 3) -> torch.Tensor:
    return torch.randn(n, 8, generator=torch.Generator().manual_seed(seed))


def test_1_1_2_load_returns_a_reading_tree():
    """seed 000 §1.1.2: load reads this node's weights by name and recurses into each child
    under resource.subtree(child.name), returning a LoadedModule tree."""
    w = _weights(0)
    loaded = Top.load(DictResource(w))
    assert isinstance(loaded, LoadedModule) and loaded.module is Top
    assert set(loaded.constants) == {"w_out"}
    assert [m.module.name for m in loaded.modules] == ["a", "layers.0", "layers.1"]
    assert loaded.layers[1].constants["w_up"] is w["layers.1.w_up"]
    torch.testing.assert_close(loaded(_x()), _torch_top(w, _x()), rtol=1e-5, atol=1e-5)


def test_1_1_2_load_never_writes_onto_the_module():
    """seed 000 §1.1.2: load MUST NOT write bindings onto the Module, which stays pure IR; one
    Module may be read any number of times and each reading is independent of the others."""
    before = {k: getattr(Top, k) for k in Top.__slots__}
    child_ids = [id(c) for c in Top.children]
    w0, w1 = _weights(0), _weights(1)
    r0, r1 = Top.load(DictResource(w0)), Top.load(DictResource(w1))
    assert {k: getattr(Top, k) for k in Top.__slots__} == before
    assert [id(c) for c in Top.children] == child_ids
    assert r0.a is not r1.a and r0.a.constants["g"] is w0["a.g"] and r1.a.constants["g"] is w1["a.g"]
    torch.testing.assert_close(r0(_x()), _torch_top(w0, _x()), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(r1(_x()), _torch_top(w1, _x()), rtol=1e-5, atol=1e-5)


def test_1_1_2_child_from_two_owners_gives_one_reading_per_owner():
    """seed 000 §1.1.2: a child reached from two owners yields one LoadedModule per owner rather
    than one binding the last owner wins."""

    @module
    class Pair:
        left = Layer
        right = Layer

    w = {f"{side}.{k}": v for side, s in (("left", 1), ("right", 2)) for k, v in _layer_weights(s).items()}
    loaded = Pair.load(DictResource(w))
    assert loaded.left is not loaded.right
    assert loaded.left.constants["g"] is w["left.g"] and loaded.right.constants["g"] is w["right.g"]


def _layer_weights(seed: int) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return {
        "g": torch.rand(8, generator=g) + 0.5,
        "w_up": torch.randn(8, 16, generator=g),
        "w_down": torch.randn(16, 8, generator=g),
    }


@pytest.mark.parametrize(
    ("bad", "found"),
    [
        (torch.randn(8, 15, generator=torch.Generator().manual_seed(3)), r"shape \(8, 15\) f32"),
        (
            torch.randn(8, 16, generator=torch.Generator().manual_seed(3)).to(torch.bfloat16),
            r"shape \(8, 16\) bf16",
        ),
        (torch.randn(8, 16, 1, generator=torch.Generator().manual_seed(3)), r"shape \(8, 16, 1\) f32"),
    ],
)
def test_1_1_2_load_validates_every_tensor_naming_weight_declared_and_found(bad, found):
    """seed 000 §1.1.2: load strictly validates every read tensor's shape and dtype against its
    declared ConstTensor type; the refusal names the weight, its declared type and what was found,
    and no reading is returned half-loaded."""
    w = _weights(0)
    w["layers.1.w_up"] = bad
    with pytest.raises(
        LoadError, match=rf"weight 'layers.1.w_up': declared \[\(8, 16\), f32\], found {found}"
    ) as e:
        Top.load(DictResource(w))
    assert e.value.where == "layers.1.w_up" and str(e.value.expected) == "[(8, 16), f32]"


def test_1_1_2_load_of_a_missing_weight_names_it():
    """seed 000 §1.1.2: every declared weight is read; one the resource lacks is named."""
    w = _weights(0)
    del w["a.w_down"]
    with pytest.raises(LoadError, match=r"weight 'a.w_down': declared \[\(16, 8\), f32\], not found"):
        Top.load(DictResource(w))


def test_1_1_2_function_attribute_takes_activations_alone():
    """seed 000 §1.1.2: a function resolves to a callable taking activations alone, its
    ConstTensor params filled by name from the reading's constants."""
    w = _weights(2)
    loaded = Top.load(DictResource(w))
    x = _x()
    want = torch.nn.functional.rms_norm(x, (8,), w["layers.0.g"], eps=1e-6)
    torch.testing.assert_close(loaded.layers[0].norm(x), want)


def test_1_1_2_calling_with_the_other_argument_list_names_the_runner():
    """seed 000 §1.1.2: calling one with the other's argument list MUST be rejected naming the
    runner it wanted, not left to fail as a shape error inside the evaluator."""
    w = _weights(2)
    loaded = Top.load(DictResource(w))
    x = _x()
    with pytest.raises(
        EvalError,
        match=r"Top.a.norm: a loaded function takes activations alone \(x\), got 2 "
        r"arguments — the full parameter list \(x, g\) is for the Module's own runner "
        r"\(loaded.module.norm\)",
    ):
        loaded.a.norm(x, w["a.g"])
    with pytest.raises(
        EvalError, match=r"a LoadedModule's \(mod.load\(resource\).norm\) takes activations alone"
    ):
        Top.a.norm(x)


def test_1_1_2_child_and_method_attributes():
    """seed 000 §1.1.2: a child name resolves to the child LoadedModule; a method is bound to the
    LoadedModule, so its own self.<function>(...) reaches the bound callable."""
    w = _weights(4)
    loaded = Top.load(DictResource(w))
    assert isinstance(loaded.a, LoadedModule) and loaded.a.module.name == "a"
    assert isinstance(loaded.layers, tuple) and [m.path for m in loaded.layers] == [
        "Top.layers.0",
        "Top.layers.1",
    ]
    x = _x()
    h = torch.nn.functional.rms_norm(x, (8,), w["a.g"], eps=1e-6)
    torch.testing.assert_close(loaded.a.twice(x), torch.nn.functional.silu(h @ w["a.w_up"]) @ w["a.w_down"])
    with pytest.raises(
        AttributeError, match=r"LoadedModule Top.a has no 'nope'; functions: norm, ffn; children: none"
    ):
        loaded.a.nope  # noqa: B018


def test_1_1_2_forward_runs_method_else_entry_else_refuses():
    """seed 000 §1.1.2: forward runs a registered forward method if the class body defined one,
    else the entry @func, and MUST be refused when there is neither — naming the functions and
    methods to call instead."""
    w = _weights(6)
    x = _x()
    torch.testing.assert_close(Top.load(DictResource(w)).forward(x), _torch_top(w, x), rtol=1e-5, atol=1e-5)
    layer = Layer.load(DictResource(_layer_weights(1)))
    torch.testing.assert_close(layer(x), layer.ffn(x))

    @module
    class Loose:
        norm = Layer.norm

        def helper(self, x):
            return self.norm(x)

    loose = Loose.load(DictResource({"g": torch.rand(8) + 0.5}))
    with pytest.raises(
        EvalError,
        match=r"LoadedModule Loose has no forward method and no entry function; call one "
        r"of its functions \(norm\) or methods \(helper\) by name",
    ):
        loose(x)


def test_1_1_2_placement_disagreement_names_what_sits_where():
    """seed 000 §1.1.2: the bound constants and the tensor activations MUST all be on exactly one
    device; a disagreement MUST be refused, naming what sits where."""
    loaded = Layer.load(DictResource({k: v.to("meta") for k, v in _layer_weights(1).items()}))
    with pytest.raises(
        EvalError,
        match=r"Layer.norm: constants and activations must sit on one device, found "
        r"meta: constant 'g', constant 'w_up', constant 'w_down'; cpu: activation 'x'",
    ):
        loaded.norm(_x())


def test_1_1_2_two_constants_of_one_reading_on_two_devices_are_refused():
    """seed 000 §1.1.2: a disagreement — including two constants of one reading on different
    devices — MUST be refused, even for a function that uses neither."""
    w = _layer_weights(1)
    w["w_down"] = w["w_down"].to("meta")
    loaded = Layer.load(DictResource(w))
    with pytest.raises(
        EvalError,
        match=r"found cpu: constant 'g', constant 'w_up', activation 'x'; meta: constant "
        r"'w_down'",
    ):
        loaded.norm(_x())


def test_1_1_2_run_happens_where_everything_sits():
    """seed 000 §1.1.2: the one device they sit on is where the run happens; a function with no
    tensor activation runs where its constants are."""

    @module
    class Gen:
        @func
        def grown(g: ConstTensor[(8,), "f32"]) -> Tensor[(8,), "f32"]:
            return g + tf.full((8,), 1.0, "f32")

    loaded = Gen.load(DictResource({"g": torch.rand(8).to("meta")}))
    assert loaded.grown().device.type == "meta"
    layer = Layer.load(DictResource({k: v.to("meta") for k, v in _layer_weights(1).items()}))
    assert layer.norm(_x().to("meta")).device.type == "meta"


def test_1_1_2_reading_without_constants_keeps_the_evaluator_default():
    """seed 000 §1.1.2: a reading holding no constants leaves the evaluator's own default in place."""

    @module
    class Fresh:
        @func
        def ones() -> Tensor[(4,), "f32"]:
            return tf.full((4,), 1.0, "f32")

        @func
        def shifted(x: Tensor[(4,), "f32"]) -> Tensor[(4,), "f32"]:
            return x + tf.full((4,), 1.0, "f32")

    loaded = Fresh.load(DictResource({}))
    assert loaded.constants == {}
    assert loaded.ones().device == evaluate(Fresh.ones).device
    assert loaded.shifted(torch.randn(4).to("meta")).device.type == "meta"


def test_1_1_2_a_step_does_not_mutate_the_state_it_was_given():
    """seed 000 §1.1.2: state is the caller's — passed in and returned — and a step MUST NOT
    mutate one it was given."""

    @module(entry="step")
    class Cache:
        @func
        def step(
            cache: Tensor[(1, 1, 6, 4), "f32"],
            pos: Tensor[(), "i64"],
            new: Tensor[(1, 1, 1, 4), "f32"],
            w: ConstTensor[(4,), "f32"],
        ) -> Tensor[(1, 1, 6, 4), "f32"]:
            return tf.cache_update(cache, pos, new * w)

    g = torch.Generator().manual_seed(9)
    w = torch.randn(4, generator=g)
    cache, new = torch.randn(1, 1, 6, 4, generator=g), torch.randn(1, 1, 1, 4, generator=g)
    kept = cache.clone()
    out = Cache.load(DictResource({"w": w}))(cache, torch.tensor(2), new)
    torch.testing.assert_close(cache, kept)
    want = kept.clone()
    want[:, :, 2:3] = new * w
    torch.testing.assert_close(out, want)


# ------------------------------------------------------------------------------------ prepare


@module(entry="ffn")
class Converted:
    @func
    def ffn(
        x: Tensor[(T, 8), "f32"], w_up: ConstTensor[(8, 16), "f32"], experts: ConstTensor[(3, 8), "bf16"]
    ):
        return (x @ w_up) * tf.cast(tf.sum(experts, axis=0), "f32")[0]

    @ffn.converter("w_up")
    def _(up_proj: ConstTensor[(16, 8), "f32"]) -> Tensor[(8, 16), "f32"]:
        return tf.transpose(up_proj, (1, 0))


def _raw(seed: int) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    out = {"up_proj": torch.randn(16, 8, generator=g)}
    out.update({f"expert.{i}": torch.randn(8, generator=g).to(torch.bfloat16) for i in range(3)})
    return out


def test_1_1_2_prepare_runs_converters_through_the_evaluator_and_stacks_groups(tmp_path, monkeypatch):
    """seed 000 §1.1.2: prepare fetches a converter's parameters by their raw names, runs the
    converter through the evaluator, and assembles a one-to-many alias via torch.stack."""
    ran = []
    real = loading.evaluate

    def spy(fn, *args):
        ran.append(fn.name)
        return real(fn, *args)

    monkeypatch.setattr(loading, "evaluate", spy)
    raw = _raw(1)
    Converted.prepare(
        DictResource(raw, alias={"experts": ("expert.0", "expert.1", "expert.2")}), str(tmp_path)
    )
    assert ran == ["_"]
    with safe_open(str(tmp_path / SHARD_NAME), "pt") as f:
        assert sorted(f.keys()) == ["experts", "w_up"]
        torch.testing.assert_close(f.get_tensor("w_up"), raw["up_proj"].T)
        stacked = f.get_tensor("experts")
    assert stacked.dtype == torch.bfloat16
    assert torch.equal(stacked, torch.stack([raw[f"expert.{i}"] for i in range(3)]))


def test_1_1_2_prepare_writes_one_shard_and_an_index_keyed_by_module_paths(tmp_path):
    """seed 000 §1.1.2: output is one safetensors shard plus model.safetensors.index.json, keyed by
    clean, dot-joined module paths; a plain directory with no cache or manifest."""
    w = _weights(3)
    Top.prepare(DictResource(w), str(tmp_path))
    assert sorted(os.listdir(tmp_path)) == sorted([INDEX_NAME, SHARD_NAME])
    index = json.loads((tmp_path / INDEX_NAME).read_text())
    assert index["weight_map"] == dict.fromkeys(sorted(w), SHARD_NAME)
    assert index["metadata"]["total_size"] == sum(t.numel() * 4 for t in w.values())
    loaded = Top.load(SafetensorsResource(str(tmp_path), device="cpu"))
    torch.testing.assert_close(loaded(_x()), _torch_top(w, _x()), rtol=1e-5, atol=1e-5)


def test_1_1_2_prepare_validates_a_weight_without_converter_and_writes_nothing(tmp_path):
    """seed 000 §1.1.2: a weight with no converter is validated against its raw (or stacked)
    value, strictly; a failure leaves no checkpoint behind."""
    raw = _raw(1)
    raw["expert.1"] = raw["expert.1"].float()
    out = tmp_path / "ckpt"
    with pytest.raises(
        LoadError,
        match=r"weight 'experts': the one-to-many group 'experts' mixes \[0\] shape \(8,\) "
        r"bf16, \[1\] shape \(8,\) f32, \[2\] shape \(8,\) bf16; stacking needs one dtype",
    ):
        Converted.prepare(
            DictResource(raw, alias={"experts": ("expert.0", "expert.1", "expert.2")}), str(out)
        )
    raw = _raw(1)
    with pytest.raises(
        LoadError, match=r"weight 'experts': declared \[\(3, 8\), bf16\], found shape \(16, 8\) f32"
    ):
        Converted.prepare(DictResource(raw, alias={"experts": "up_proj"}), str(out))
    assert not out.exists()


def test_1_1_2_two_converters_for_one_weight_are_an_error(tmp_path):
    """seed 000 §1.1.2: two converters registered for the same weight name is an error."""

    @func
    def f1(x: Tensor[(T, 8), "f32"], w: ConstTensor[(8, 8), "f32"]) -> Tensor[(T, 8), "f32"]:
        return x @ w

    @f1.converter("w")
    def _(raw_w: ConstTensor[(8, 8), "f32"]) -> Tensor[(8, 8), "f32"]:
        return raw_w * 2.0

    @func
    def f2(x: Tensor[(T, 8), "f32"], w: ConstTensor[(8, 8), "f32"]) -> Tensor[(T, 8), "f32"]:
        return x @ w + x

    @f2.converter("w")
    def _(raw_w: ConstTensor[(8, 8), "f32"]) -> Tensor[(8, 8), "f32"]:
        return raw_w * 3.0

    twice = Module("Twice", functions={"f1": f1, "f2": f2})
    with pytest.raises(DSLError, match="module 'Twice': weight 'w' has two converters, on 'f1' and 'f2'"):
        twice.prepare(DictResource({"raw_w": torch.randn(8, 8)}), str(tmp_path))
    with pytest.raises(DSLError, match="a second converter for weight 'w'"):

        @f1.converter("w")
        def _(raw_w: ConstTensor[(8, 8), "f32"]) -> Tensor[(8, 8), "f32"]:
            return raw_w
