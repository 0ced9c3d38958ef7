"""prepare -> SafetensorsResource -> load round-trip of a checkpoint whose raw names differ (seed 000
§1.1.2, §1.5).

The raw checkpoint is laid out like a Hugging Face one (`model.layers.0.mlp.up_proj.weight`,
out-by-in projections). The alias table maps the declared names onto it with every alias form:
plain renames, one converter (a transpose computed by the evaluator), one stacked group (per-expert
scales), one Absolute (the root's final norm read by a child) and one Preprocessed transpose. After
prepare, the directory holds canonical names only; both the LoadedModule and a runtime twin load
it without any alias and agree with torch computed straight from the raw tensors.
"""

import json

import pytest
import torch
import torch.nn.functional as F

from tilefoundry.dsl import ConstTensor, DimVar, Tensor, bf16, f32, func, module, tf
from tilefoundry.ir.loading import INDEX_NAME, SHARD_NAME, LoadError
from tilefoundry.runtime import (
    Absolute,
    DictResource,
    Preprocessed,
    SafetensorsResource,
    runtime_func,
    runtime_module,
)

T = DimVar("T", 1, 33)
D, H, E, V = 16, 32, 3, 24


@module(entry="block")
class Block:
    @func
    def block(
        x: Tensor[(T, D), "f32"],
        g: ConstTensor[(D,), "f32"],
        w_up: ConstTensor[(D, H), "f32"],
        w_down: ConstTensor[(H, D), "f32"],
        experts: ConstTensor[(E, D), "bf16"],
    ) -> Tensor[(T, D), "f32"]:
        h = tf.rms_norm(x, g) * tf.mean(tf.cast(experts, "f32"), axis=0)
        return x + tf.silu(h @ w_up) @ w_down

    @block.converter("w_up")
    def _(up_proj: ConstTensor[(H, D), "f32"]) -> Tensor[(D, H), "f32"]:
        return tf.transpose(up_proj, (1, 0))


@module(entry="norm")
class Norm:
    @func
    def norm(x: Tensor[(T, D), "f32"], g: ConstTensor[(D,), "f32"]) -> Tensor[(T, D), "f32"]:
        return tf.rms_norm(x, g)


@module
class Model:
    layers = (Block, Block)
    final = Norm

    @func
    def head(x: Tensor[(T, D), "f32"], w_out: ConstTensor[(D, V), "f32"]) -> Tensor[(T, V), "f32"]:
        return x @ w_out

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return self.head(self.final(x))


ALIAS = {
    "layers.0": "model.layers.0",  # a per-instance segment rename
    "layers.1": "model.layers.1",
    "g": "input_layernorm.weight",  # a bare entry: every layer
    "up_proj": "mlp.up_proj.weight",  # the converter's raw parameter
    "w_down": Preprocessed("mlp.down_proj.weight", lambda t: t.T),  # stored out-by-in
    "experts": tuple(f"mlp.experts.{i}.scale" for i in range(E)),  # stacked by prepare
    "final.g": Absolute("model.norm.weight"),  # a child reading its parent's tensor
    "w_out": "lm_head.weight",
}


def _raw(seed: int) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    raw = {
        "model.norm.weight": torch.rand(D, generator=g) + 0.5,
        "lm_head.weight": torch.randn(D, V, generator=g),
    }
    for i in range(2):
        p = f"model.layers.{i}."
        raw[p + "input_layernorm.weight"] = torch.rand(D, generator=g) + 0.5
        raw[p + "mlp.up_proj.weight"] = torch.randn(H, D, generator=g) / D**0.5
        raw[p + "mlp.down_proj.weight"] = torch.randn(D, H, generator=g) / H**0.5
        for e in range(E):
            raw[p + f"mlp.experts.{e}.scale"] = (torch.rand(D, generator=g) + 0.5).to(torch.bfloat16)
    return raw


def _torch_model(raw: dict[str, torch.Tensor], x: torch.Tensor) -> torch.Tensor:
    for i in range(2):
        p = f"model.layers.{i}."
        scale = torch.stack([raw[p + f"mlp.experts.{e}.scale"] for e in range(E)]).float().mean(0)
        h = F.rms_norm(x, (D,), raw[p + "input_layernorm.weight"], eps=1e-6) * scale
        x = x + F.silu(h @ raw[p + "mlp.up_proj.weight"].T) @ raw[p + "mlp.down_proj.weight"].T
    return F.rms_norm(x, (D,), raw["model.norm.weight"], eps=1e-6) @ raw["lm_head.weight"]


@runtime_module(Block)
class BlockTwin:
    @runtime_func
    def block(self, x, g, w_up, w_down, experts):
        h = F.rms_norm(x, (D,), g, eps=1e-6) * experts.float().mean(0)
        return x + F.silu(h @ w_up) @ w_down


@runtime_module(Norm)
class NormTwin:
    @runtime_func
    def norm(self, x, g):
        return F.rms_norm(x, (D,), g, eps=1e-6)


@runtime_module(Model)
class ModelTwin:
    layers = BlockTwin
    final = NormTwin

    @runtime_func
    def head(self, x, w_out):
        return x @ w_out


def _x() -> torch.Tensor:
    return torch.randn(5, D, generator=torch.Generator().manual_seed(3))


def test_1_1_2_prepare_then_load_round_trips_renamed_raw_names(tmp_path):
    """seed 000 §1.1.2: prepare walks the tree, fetches raw names through the aliases, runs the
    converter, stacks the group, validates, and writes canonical dotted keys that both twins load
    straight from."""
    raw = _raw(0)
    Model.prepare(DictResource(raw, alias=ALIAS), str(tmp_path))

    index = json.loads((tmp_path / INDEX_NAME).read_text())
    assert sorted(index["weight_map"]) == sorted(
        ["w_out", "final.g"]
        + [f"layers.{i}.{w}" for i in range(2) for w in ("g", "w_up", "w_down", "experts")]
    )
    assert set(index["weight_map"].values()) == {SHARD_NAME}

    resource = SafetensorsResource(str(tmp_path), device="cpu")
    loaded = Model.load(resource)
    c = loaded.layers[1].constants
    assert torch.equal(c["w_up"], raw["model.layers.1.mlp.up_proj.weight"].T)  # the converter
    assert torch.equal(c["w_down"], raw["model.layers.1.mlp.down_proj.weight"].T)  # Preprocessed
    assert c["experts"].dtype == torch.bfloat16 and c["experts"].shape == (E, D)  # stacked, dtype kept
    assert torch.equal(loaded.final.constants["g"], raw["model.norm.weight"])  # Absolute
    x = _x()
    want = _torch_model(raw, x)
    torch.testing.assert_close(loaded(x), want, rtol=1e-5, atol=1e-5)

    twin = ModelTwin().load(resource)
    torch.testing.assert_close(twin(x), want, rtol=1e-5, atol=1e-5)


def test_1_1_2_load_does_not_stack_a_group(tmp_path):
    """seed 000 §1.1.2 / §1.5: a one-to-many alias is assembled via torch.stack in prepare only;
    load refuses it, naming the weight."""
    raw = _raw(0)
    direct = {**ALIAS, "w_up": Preprocessed("mlp.up_proj.weight", lambda t: t.T)}
    with pytest.raises(
        LoadError,
        match=r"weight 'layers.0.experts': declared \[\(3, 16\), bf16\], but .*read it "
        r"with load_group\('experts'\); loading reads one tensor per weight",
    ):
        Model.load(DictResource(raw, alias=direct))


def test_1_1_2_wrong_raw_shape_fails_prepare_naming_weight_and_writes_nothing(tmp_path):
    """seed 000 §1.1.2: prepare strictly validates each result against the declared type; a
    failure names the weight, its declared type and what was found."""
    raw = _raw(0)
    raw["lm_head.weight"] = raw["lm_head.weight"][:, :-1]
    out = tmp_path / "ckpt"
    with pytest.raises(
        LoadError, match=r"weight 'w_out': declared \[\(16, 24\), f32\], found shape \(16, 23\) f32"
    ):
        Model.prepare(DictResource(raw, alias=ALIAS), str(out))
    assert not out.exists()
