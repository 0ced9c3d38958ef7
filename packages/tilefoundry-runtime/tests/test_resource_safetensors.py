"""Tests of SafetensorsResource: directory layouts, shard handles, lazy reads (seed 000 §1.5)."""

import json

import pytest
import torch
from safetensors import safe_open
from safetensors.torch import save_file

from tilefoundry.runtime import resource as resource_module
from tilefoundry.runtime.resource import Absolute, Preprocessed, SafetensorsResource


def _t(*shape, seed=0, dtype=torch.float32):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed)).to(dtype)


@pytest.fixture
def tensors():
    return {
        "model.embed.weight": _t(16, 8, seed=1, dtype=torch.bfloat16),
        "model.norm.weight": _t(8, seed=2, dtype=torch.float16),
        "model.layers.0.w_up": _t(8, 12, seed=3),
        "model.layers.0.experts.0.w": _t(4, 8, seed=4),
        "model.layers.0.experts.1.w": _t(4, 8, seed=5),
        "model.layers.1.w_up": _t(8, 12, seed=6),
        "model.layers.1.ids": torch.arange(6, dtype=torch.int64),
    }


def _sharded(tmp_path, tensors):
    """Two shards plus model.safetensors.index.json; layer 1 sits in the second shard."""
    names = {"first": "model-00001-of-00002.safetensors", "second": "model-00002-of-00002.safetensors"}
    split = {k: names["second" if k.startswith("model.layers.1") else "first"] for k in tensors}
    for shard in names.values():
        save_file({k: v for k, v in tensors.items() if split[k] == shard}, str(tmp_path / shard))
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}, "weight_map": split}))
    return tmp_path


def _single(tmp_path, tensors):
    save_file(tensors, str(tmp_path / "model.safetensors"))
    return tmp_path


class _Counting:
    """Wraps safe_open to count the shard files opened and the tensors read from them.

    With `open_on` set, the real handle opens there instead, so a CUDA device can be recorded
    on a machine without one.
    """

    def __init__(self, open_on=None):
        self.opened: list[tuple[str, str]] = []
        self.read: list[str] = []
        self.open_on = open_on

    def __call__(self, path, framework, device):
        self.opened.append((path.rsplit("/", 1)[-1], device))
        handle = safe_open(path, framework=framework, device=self.open_on or device)
        outer = self

        class Handle:
            def keys(self):
                return handle.keys()

            def get_tensor(self, key):
                outer.read.append(key)
                return handle.get_tensor(key)

        return Handle()


@pytest.fixture
def counting(monkeypatch):
    spy = _Counting()
    monkeypatch.setattr(resource_module, "safe_open", spy)
    return spy


def test_1_5_accepts_indexed_sharded_directory(tmp_path, tensors):
    """seed 000 §1.5: N shard files with model.safetensors.index.json naming each key's shard are accepted."""
    res = SafetensorsResource(str(_sharded(tmp_path, tensors)), device="cpu")
    for key, value in tensors.items():
        assert torch.equal(res.load(key), value), key


def test_1_5_accepts_single_unsharded_file(tmp_path, tensors):
    """seed 000 §1.5: a single model.safetensors with no index is accepted; its key list is the map."""
    res = SafetensorsResource(str(_single(tmp_path, tensors)), prefix="model", device="cpu")
    assert torch.equal(res.subtree("layers").subtree("1").load("w_up"), tensors["model.layers.1.w_up"])
    assert torch.equal(res.load("norm.weight"), tensors["model.norm.weight"])


def test_1_5_directory_with_neither_layout_reported_as_such(tmp_path):
    """seed 000 §1.5: a directory with neither an index nor model.safetensors is reported as such."""
    (tmp_path / "pytorch_model.bin").write_bytes(b"\0")
    (tmp_path / "config.json").write_text("{}")
    with pytest.raises(FileNotFoundError) as err:
        SafetensorsResource(str(tmp_path), device="cpu")
    assert str(err.value) == (
        f"SafetensorsResource: {str(tmp_path)!r} holds neither model.safetensors.index.json (a sharded "
        "checkpoint) nor model.safetensors (an unsharded one); it holds: config.json, pytorch_model.bin"
    )
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(FileNotFoundError, match=r"; it holds: nothing$"):
        SafetensorsResource(str(empty), device="cpu")


def test_missing_directory_reported(tmp_path):
    with pytest.raises(FileNotFoundError) as err:
        SafetensorsResource(str(tmp_path / "nope"), device="cpu")
    assert (
        str(err.value)
        == f"SafetensorsResource: checkpoint directory {str(tmp_path / 'nope')!r} does not exist"
    )


def test_index_naming_an_absent_shard_reported(tmp_path, tensors):
    _sharded(tmp_path, tensors)
    (tmp_path / "model-00002-of-00002.safetensors").unlink()
    with pytest.raises(FileNotFoundError) as err:
        SafetensorsResource(str(tmp_path), device="cpu")
    index = str(tmp_path / "model.safetensors.index.json")
    assert str(err.value) == (
        f"SafetensorsResource: {index!r} names shard 'model-00002-of-00002.safetensors', which is not in "
        f"{str(tmp_path)!r}"
    )


def test_index_without_weight_map_reported(tmp_path):
    index = tmp_path / "model.safetensors.index.json"
    index.write_text(json.dumps({"metadata": {}}))
    with pytest.raises(ValueError) as err:
        SafetensorsResource(str(tmp_path), device="cpu")
    assert str(err.value) == (
        f"SafetensorsResource: {str(index)!r} has no 'weight_map' object of key -> shard file name"
    )
    index.write_text("[1, 2")
    with pytest.raises(ValueError, match="is not a JSON object"):
        SafetensorsResource(str(tmp_path), device="cpu")


def test_1_5_each_shard_opened_once_across_views(tmp_path, tensors, counting):
    """seed 000 §1.5: at most one shard handle per shard file, shared across subtree views."""
    res = SafetensorsResource(str(_sharded(tmp_path, tensors)), prefix="model.", device="cpu")
    assert counting.opened == []  # sharded: nothing is opened before a read
    layers = res.subtree("layers")
    for _ in range(2):
        for i in (0, 1):
            layers.subtree(str(i)).load("w_up")
        res.load("norm.weight")
        layers.subtree("0").subtree("experts").subtree("1").load("w")
    assert sorted(counting.opened) == [
        ("model-00001-of-00002.safetensors", "cpu"),
        ("model-00002-of-00002.safetensors", "cpu"),
    ]


def test_1_5_single_file_opened_once(tmp_path, tensors, counting):
    """seed 000 §1.5: the unsharded file is opened once, for its key list and every later read."""
    res = SafetensorsResource(str(_single(tmp_path, tensors)), device="cpu")
    res.subtree("model").load("norm.weight")
    res.subtree("model").subtree("layers").subtree("1").load("ids")
    assert counting.opened == [("model.safetensors", "cpu")]


def test_1_5_reads_only_requested_tensors_onto_device(tmp_path, tensors, counting):
    """seed 000 §1.5: load / load_group read only the requested tensors, placed on device."""
    alias = {"experts": ("experts.1.w", "experts.0.w")}
    res = SafetensorsResource(str(_sharded(tmp_path, tensors)), device="cpu", alias=alias)
    layer = res.subtree("model").subtree("layers").subtree("0")
    group = layer.load_group("experts")
    w = layer.load("w_up")
    assert counting.read == [
        "model.layers.0.experts.1.w",
        "model.layers.0.experts.0.w",
        "model.layers.0.w_up",
    ]
    assert counting.opened == [("model-00001-of-00002.safetensors", "cpu")]
    assert all(t.device == torch.device("cpu") for t in (*group, w))
    assert res.device == "cpu"
    assert torch.equal(group[0], tensors["model.layers.0.experts.1.w"])


def test_1_5_device_defaults_to_cuda_and_is_passed_to_the_handle(tmp_path, tensors, monkeypatch):
    """seed 000 §1.5: SafetensorsResource places reads on device, "cuda" unless told otherwise."""
    counting = _Counting(open_on="cpu")
    monkeypatch.setattr(resource_module, "safe_open", counting)
    res = SafetensorsResource(str(_sharded(tmp_path, tensors)))
    assert res.device == "cuda"
    SafetensorsResource(str(tmp_path), device="cuda:2").load("model.norm.weight")
    assert counting.opened == [("model-00001-of-00002.safetensors", "cuda:2")]


def test_1_5_safetensors_reads_keep_the_stored_dtype(tmp_path, tensors):
    """seed 000 §1.5: every read tensor keeps the element type the checkpoint stores."""
    alias = {"emb_t": Preprocessed("embed.weight", lambda t: t.T)}
    res = SafetensorsResource(str(_single(tmp_path, tensors)), prefix="model.", device="cpu", alias=alias)
    assert res.load("embed.weight").dtype is torch.bfloat16
    assert res.load("norm.weight").dtype is torch.float16
    assert res.load("layers.1.ids").dtype is torch.int64
    emb_t = res.load("emb_t")
    assert emb_t.dtype is torch.bfloat16 and torch.equal(emb_t, tensors["model.embed.weight"].T)


def test_1_5_safetensors_missing_key_names_key_and_scope(tmp_path, tensors):
    """seed 000 §1.5: load raises KeyError naming the missing raw key and the scope."""
    res = SafetensorsResource(str(_sharded(tmp_path, tensors)), device="cpu")
    layer = res.subtree("model").subtree("layers").subtree("1")
    with pytest.raises(KeyError) as err:
        layer.load("w_down")
    assert err.value.args[0] == (
        f"'model.layers.1.w_down' is not in checkpoint {str(tmp_path)!r} "
        "(looked up 'w_down' in scope 'model.layers.1.')"
    )


def test_1_5_safetensors_absolute_ignores_the_prefix(tmp_path, tensors):
    """seed 000 §1.5: Absolute resolves to the whole raw key in a SafetensorsResource too."""
    alias = {"final_norm": Absolute("model.norm.weight")}
    res = SafetensorsResource(
        str(_sharded(tmp_path, tensors)), prefix="model.layers.1", device="cpu", alias=alias
    )
    assert torch.equal(res.load("final_norm"), tensors["model.norm.weight"])
    assert res.load_group("final_norm") is None


@pytest.mark.gpu
def test_1_5_reads_placed_on_cuda(tmp_path, tensors):
    """seed 000 §1.5: with device="cuda", a read tensor lands on the GPU, in its stored dtype."""
    res = SafetensorsResource(str(_sharded(tmp_path, tensors)), prefix="model.")
    emb = res.load("embed.weight")
    assert emb.is_cuda and emb.dtype is torch.bfloat16
    assert torch.equal(emb.cpu(), tensors["model.embed.weight"])
