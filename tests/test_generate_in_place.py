"""generate donates the caches it owns (runtime/generate.py, runtime/graphs.py): a compiled cpu twin
of the demo causal LM then updates its KV caches in place, eagerly and under the decode-graph runner
(over an eager stand-in for CUDA graph capture), and gives the tokens it gave without donation.
CUDA itself is in test_generate_graphs_gpu.py and test_cuda_in_place.py.
"""

from __future__ import annotations

import os
import sys

import pytest

from tilefoundry.models import open_model, write_random_checkpoint
from tilefoundry.runtime import generate, graphs

sys.path.insert(0, os.path.dirname(__file__))
from generation_doubles import EagerRecorder, no_donation, spy_on_caches

pytestmark = pytest.mark.usefixtures("fresh_build_cache")

PROMPT = [5, 9, 200, 31, 7, 88]


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory):
    ckpt = write_random_checkpoint(tmp_path_factory.mktemp("in_place") / "ckpt", seed=3)
    return open_model(ckpt, target="cpu", device="cpu", context=32).model


@pytest.fixture
def caches_seen(model, monkeypatch: pytest.MonkeyPatch) -> tuple[list, list]:
    """(the tensors init_caches made, the cache tensors each step returned), recorded per generate."""
    return spy_on_caches(model, monkeypatch)


def _undonated(model, monkeypatch: pytest.MonkeyPatch, **kw) -> list[int]:
    """The tokens generate gives when it donates nothing (what it gave before donation)."""
    with no_donation(monkeypatch):
        return generate(model, PROMPT, max_new_tokens=10, **kw).new_tokens.tolist()


@pytest.mark.parametrize("prefill", [True, False], ids=["prefill", "one-token-prompt"])
def test_eager_steps_update_the_caches_they_made_in_place(
    model, caches_seen, monkeypatch, prefill: bool
) -> None:
    """Every step hands back the very tensors init_caches made, and the tokens are those of no donation."""
    made, returned = caches_seen
    out = generate(model, PROMPT, max_new_tokens=10, cuda_graph=False, prefill=prefill)
    assert returned and all(all(a is b for a, b in zip(step, made, strict=True)) for step in returned)
    assert out.new_tokens.tolist() == _undonated(model, monkeypatch, cuda_graph=False, prefill=prefill)


def test_without_donation_each_step_returns_new_caches(model, caches_seen, monkeypatch) -> None:
    """seed 000 §1.1.2 as before: undonated, a step returns fresh caches and leaves the given ones alone."""
    made, returned = caches_seen
    _undonated(model, monkeypatch, cuda_graph=False)
    assert returned and not any(a is b for step in returned for a, b in zip(step, made, strict=True))


def test_graphed_steps_advance_the_static_caches_in_place(model, caches_seen, monkeypatch) -> None:
    """Under the decode-graph runner the captured step writes the static caches itself (no copy-back),
    and the tokens are those of eager steps without donation."""
    eager = _undonated(model, monkeypatch, cuda_graph=False)
    monkeypatch.setattr(graphs, "CudaGraphRecorder", EagerRecorder)
    made, returned = caches_seen
    returned.clear()  # the undonated run's steps
    graphed = generate(model, PROMPT, max_new_tokens=10, cuda_graph=True)
    assert graphed.cuda_graph and graphed.graph_refusal is None
    assert graphed.new_tokens.tolist() == eager
    assert all(all(a is b for a, b in zip(step, made, strict=True)) for step in returned)
