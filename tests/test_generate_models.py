"""generate on the causal-LM family (tilefoundry.models) on CPU: prefill and graphed decode steps.

The prompt in one prefill step (the model's `prepare_inputs`) gives the greedy tokens of the
seed's one-token path; the decode-graph runner, over an eager stand-in for CUDA graph capture,
gives the eager tokens on the real model's inputs (rotary tables, positions, nested KV caches),
including a dynamic-NTK rotary whose tables change value every step. CUDA itself is in
test_generate_graphs_gpu.py.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
import torch

from tilefoundry.models import DEMO_CONFIG, open_model, write_random_checkpoint
from tilefoundry.runtime import generate, graphs

sys.path.insert(0, os.path.dirname(__file__))
from generation_doubles import EagerRecorder

PROMPT = [5, 9, 200, 31, 7, 88]
DYNAMIC = {
    **DEMO_CONFIG,
    "max_position_embeddings": 8,  # the 16 positions used outgrow it: the tables rescale each step
    "rope_parameters": {"rope_type": "dynamic", "factor": 4.0, "rope_theta": 10000.0},
}


@pytest.fixture(autouse=True, scope="module")
def _one_torch_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny models run fastest on one thread of a shared machine
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module", params=["default", "dynamic"])
def ckpt(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    config = DEMO_CONFIG if request.param == "default" else DYNAMIC
    return write_random_checkpoint(tmp_path_factory.mktemp(request.param), seed=3, config=config)


@pytest.mark.parametrize("target", ["reference", "torch"])
def test_prefill_gives_the_one_token_path_greedy_tokens(ckpt: Path, target: str) -> None:
    model = open_model(ckpt, target=target, device="cpu", context=32).model
    chunked = generate(model, PROMPT, max_new_tokens=10)
    one_by_one = generate(model, PROMPT, max_new_tokens=10, prefill=False)
    assert chunked.new_tokens.tolist() == one_by_one.new_tokens.tolist()


def test_graphed_decode_gives_the_eager_tokens(ckpt: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Static inputs refreshed per step and caches copied back give what eager steps give."""
    model = open_model(ckpt, target="torch", device="cpu", context=32).model
    eager = generate(model, PROMPT, max_new_tokens=10, cuda_graph=False)
    monkeypatch.setattr(graphs, "CudaGraphRecorder", EagerRecorder)
    graphed = generate(model, PROMPT, max_new_tokens=10, cuda_graph=True)
    assert graphed.cuda_graph and graphed.graph_refusal is None
    assert graphed.new_tokens.tolist() == eager.new_tokens.tolist()
