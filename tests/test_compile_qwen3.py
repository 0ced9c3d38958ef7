"""The Qwen3-style decoder layer runs compiled on CPU through `twin` and passes `check`."""

from __future__ import annotations

import os
import sys

import pytest
import torch

import tilefoundry
from tilefoundry.check import allclose, check, rel_l2
from tilefoundry.runtime import DictResource

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), os.pardir, "examples"))
import qwen3_layer as q3
from test_qwen3_layer import rotary, weights

pytestmark = pytest.mark.usefixtures("fresh_build_cache")


@pytest.mark.parametrize("seq", [1, 7, 64])
def test_compiled_qwen3_layer_twin_matches_loaded_module(seq: int) -> None:
    """twin(layer, target="cpu") loads the same weights and matches the LoadedModule across seq."""
    w = weights(0)
    compiled = tilefoundry.twin(q3.Qwen3DecoderLayer, target="cpu").load(DictResource(w))
    loaded = q3.Qwen3DecoderLayer.load(DictResource(w))
    cos, sin = rotary(q3.MAX_POS, q3.HEAD_DIM)
    g = torch.Generator().manual_seed(seq)
    x = torch.randn(q3.BATCH, seq, q3.HIDDEN, generator=g)
    positions = torch.arange(seq, dtype=torch.int64)
    report = check(
        compiled.forward,
        loaded.forward,
        (x, cos, sin, positions),
        expect={"output": [rel_l2(max=1e-5), allclose(atol=1e-4, rtol=1e-4)]},
    )
    assert report.passed, str(report)
