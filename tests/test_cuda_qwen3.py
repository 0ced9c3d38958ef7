"""The Qwen3-style decoder layer compiled for "cuda" through `twin`: built in CI, checked on a GPU."""

from __future__ import annotations

import os
import sys

import pytest
import torch

import tilefoundry
from tilefoundry.check import allclose, check, rel_l2
from tilefoundry.codegen.cuda.resources import kernel_resources
from tilefoundry.ir.target import get_target
from tilefoundry.runtime import DictResource

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), os.pardir, "examples"))
import qwen3_layer as q3
from test_qwen3_layer import rotary, weights

pytestmark = pytest.mark.usefixtures("fresh_build_cache")


@pytest.fixture(scope="module")
def layer_twin():
    """The layer's twin: every function of both children compiled for cuda (one library per child)."""
    availability = get_target("cuda").availability
    if not availability.can_compile:
        pytest.skip("cuda cannot compile here: " + "; ".join(availability.reasons))
    return tilefoundry.twin(q3.Qwen3DecoderLayer, target="cuda")


def test_qwen3_layer_twin_builds_for_cuda(layer_twin) -> None:
    """Issue 5: the example decoder layer emits CUDA and builds with nvcc, one library per module node."""
    assert [type(c).__name__ for c in (layer_twin.self_attn, layer_twin.mlp)] == [
        "Compiled_self_attn",
        "Compiled_mlp",
    ]


def test_qwen3_layer_kernels_keep_their_values_in_registers(layer_twin) -> None:
    """Every kernel ptxas built for the layer's two libraries, generated or from the runtime's
    atoms, holds its values in registers: a spill to local memory would cost each step of a decode
    loop that the bench only shows on a GPU (resources.py reads ptxas's report)."""
    kernels = kernel_resources(layer_twin)
    assert any(k.identifier.startswith("attention__") for k in kernels)
    assert any(k.identifier.startswith("mlp__") for k in kernels)
    assert [k.name for k in kernels if k.spills] == []


@pytest.mark.gpu
@pytest.mark.parametrize("seq", [1, 7, 64])
def test_qwen3_layer_twin_matches_loaded_module_on_gpu(layer_twin, seq: int) -> None:
    """twin(layer, target="cuda") loads the same weights as the LoadedModule and matches it across seq."""
    w = {k: v.cuda() for k, v in weights(0).items()}
    compiled = layer_twin.load(DictResource(w))
    loaded = q3.Qwen3DecoderLayer.load(DictResource(w))
    cos, sin = (t.cuda() for t in rotary(q3.MAX_POS, q3.HEAD_DIM))
    g = torch.Generator().manual_seed(seq)
    x = torch.randn(q3.BATCH, seq, q3.HIDDEN, generator=g).cuda()
    positions = torch.arange(seq, dtype=torch.int64).cuda()
    report = check(
        compiled.forward,
        loaded.forward,
        (x, cos, sin, positions),
        expect={"output": [rel_l2(max=1e-5), allclose(atol=1e-4, rtol=1e-4)]},
    )
    assert report.passed, str(report)
