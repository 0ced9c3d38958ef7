"""CUDA-graph decode on a GPU (the `gpu` suite): replayed steps agree with the ungraphed loop.

A tiny Qwen3-shaped checkpoint (tilefoundry.models' DEMO_CONFIG, f32, random weights) runs on
the torch twin and on the compiled cuda twin. With cuda_graph=True the first decode step warms up
on a side stream, the second is captured, and the rest replay; the greedy tokens must equal those
of cuda_graph=False, with the prompt prefilled in one step or fed one token per step, and the
replayed logits must match eager steps fed the same tokens. The HIR evaluator on CUDA reads
scalars on the host, so its steps are refused for that reason.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from tilefoundry.check import allclose, check, rel_l2
from tilefoundry.models import open_model, write_random_checkpoint
from tilefoundry.runtime import generate
from tilefoundry.runtime.graphs import DecodeGraph, GraphRefused

pytestmark = pytest.mark.gpu

CONTEXT = 64
NEW = 24
PROMPT = [int(t) for t in torch.randint(0, 256, (8,), generator=torch.Generator().manual_seed(6))]
DEV = torch.device("cuda")


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_random_checkpoint(tmp_path_factory.mktemp("graphs") / "ckpt", seed=5)


@pytest.fixture(scope="module")
def models(ckpt: Path):
    """target -> the model opened on CUDA, once per module (the cuda twin compiles once)."""
    opened: dict[str, object] = {}

    def get(target: str):
        if target not in opened:
            opened[target] = open_model(ckpt, target=target, device=DEV, context=CONTEXT).model
        return opened[target]

    return get


@pytest.mark.parametrize("prefill", [True, False], ids=["prefill", "one-token-prompt"])
@pytest.mark.parametrize("target", ["torch", "cuda"])
def test_graph_replayed_tokens_equal_the_ungraphed_loop(models, target: str, prefill: bool) -> None:
    model = models(target)
    prompt = torch.tensor(PROMPT, device=DEV)
    eager = generate(model, prompt, max_new_tokens=NEW, cuda_graph=False, prefill=prefill)
    graphed = generate(model, prompt, max_new_tokens=NEW, cuda_graph=True, prefill=prefill)
    assert graphed.cuda_graph and graphed.graph_refusal is None
    assert graphed.new_tokens.tolist() == eager.new_tokens.tolist()
    assert graphed.replay_tokens_per_s is not None and graphed.capture_seconds > 0
    by_default = generate(model, prompt, max_new_tokens=NEW, prefill=prefill)
    assert by_default.cuda_graph, by_default.graph_refusal
    assert by_default.new_tokens.tolist() == eager.new_tokens.tolist()


@pytest.mark.parametrize("target", ["torch", "cuda"])
def test_replayed_logits_match_eager_steps_fed_the_same_tokens(models, target: str) -> None:
    """Each replay's logits against an eager step at the same position, on the same tokens."""
    model = models(target)
    tokens = generate(model, torch.tensor(PROMPT, device=DEV), max_new_tokens=NEW, cuda_graph=False).tokens
    n = len(PROMPT)

    def decode_rows(step_fn) -> torch.Tensor:
        caches = model.init_caches(device=DEV)
        _, caches = model(*model.prepare_inputs(tokens[:n], 0, caches, device=DEV))
        rows = []
        for step in range(n, tokens.numel() - 1):
            logits, caches = step_fn(step, caches)
            rows.append(logits[-1].clone())  # a replay rewrites its logits in place
        return torch.stack(rows)

    def eager_step(step: int, caches):
        logits, fresh = model(
            *model.prepare_inputs_for_generation(tokens[: step + 1], step, caches, device=DEV)
        )
        return logits, model.append_cache(caches, (fresh,))

    graph = DecodeGraph(model, DEV, explicit=True)
    graphed = decode_rows(lambda step, caches: graph.step(tokens, step, caches))
    assert graph.replays == tokens.numel() - 1 - n - 1  # all but the warm-up step
    # the rotary tables the model caches are read in place: only the int64 inputs are copied in
    assert {flat.dtype for flat, _ in graph._graph.groups} == {torch.int64}
    assert len(graph._graph.resident) == 2
    report = check(
        lambda: graphed,
        lambda: decode_rows(eager_step),
        (),
        expect={"output": [rel_l2(max=1e-6), allclose(atol=1e-5, rtol=1e-5)]},
    )
    assert report.passed, str(report)


@pytest.mark.parametrize("target", ["torch", "cuda"])
def test_greedy_tokens_picked_on_the_device_are_a_host_argmax_loop_s(models, target: str) -> None:
    """Greedy decoding on a GPU picks each token on the device and queues the next step before
    the host reads it: the tokens are those of a loop taking the host's argmax step by step, and
    an end token still ends the generation with itself (the step queued after it is dropped)."""
    model = models(target)
    n = len(PROMPT)
    ids = torch.tensor(PROMPT, device=DEV)
    caches = model.init_caches(device=DEV)
    logits, fresh = model(*model.prepare_inputs(ids, 0, caches, device=DEV))
    caches = model.append_cache(caches, (fresh,))
    want = []
    for step in range(n, n + NEW):
        want.append(int(logits[-1].float().argmax()))
        ids = torch.cat([ids, torch.tensor(want[-1:], device=DEV)])
        logits, fresh = model(*model.prepare_inputs_for_generation(ids, step, caches, device=DEV))
        caches = model.append_cache(caches, (fresh,))
    for cuda_graph in (False, True):
        out = generate(model, torch.tensor(PROMPT, device=DEV), max_new_tokens=NEW, cuda_graph=cuda_graph)
        assert out.new_tokens.tolist() == want
    k = max(i for i in range(NEW) if want[i] not in want[:i])  # the last token's first appearance
    out = generate(model, torch.tensor(PROMPT, device=DEV), max_new_tokens=NEW, eos_token_id=want[k])
    assert out.finish_reason == "eos" and out.new_tokens.tolist() == want[: k + 1]


def test_seeded_sampling_repeats_under_the_graph(models) -> None:
    model = models("torch")
    prompt = torch.tensor(PROMPT, device=DEV)
    kw = {"max_new_tokens": NEW, "greedy": False, "temperature": 1.3, "top_k": 40, "seed": 9}
    graphed = generate(model, prompt, cuda_graph=True, **kw)
    assert graphed.cuda_graph
    assert graphed.new_tokens.tolist() == generate(model, prompt, cuda_graph=False, **kw).new_tokens.tolist()


def test_evaluator_steps_are_refused_for_their_host_syncs(models) -> None:
    """The HIR evaluator reads pos and kv_len on the host: the warm-up step names where."""
    model = models("reference")
    prompt = torch.tensor(PROMPT, device=DEV)
    out = generate(model, prompt, max_new_tokens=4)
    assert not out.cuda_graph
    assert out.graph_refusal.startswith("the step synchronizes with the host (at ")
    assert (
        out.new_tokens.tolist()
        == generate(model, prompt, max_new_tokens=4, cuda_graph=False).new_tokens.tolist()
    )
    with pytest.raises(
        GraphRefused, match=r"cannot be honored: the step synchronizes with the host .*\(step 8\)$"
    ):
        generate(model, prompt, max_new_tokens=4, cuda_graph=True)


class HostKvLen:
    """The torch twin with its kv_len input left on the host (torch accepts a 0-d CPU tensor)."""

    def __init__(self, model) -> None:
        self.model = model

    def init_caches(self, *, device):
        return self.model.init_caches(device=device)

    def prepare_inputs_for_generation(self, ids, step, caches, *, device):
        *inputs, kv_len, caches = self.model.prepare_inputs_for_generation(ids, step, caches, device=device)
        return (*inputs, kv_len.cpu(), caches)

    def __call__(self, *inputs):
        return self.model(*inputs)

    def append_cache(self, caches, fresh):
        return self.model.append_cache(caches, fresh)


def test_a_host_tensor_among_the_inputs_is_refused(models) -> None:
    model = HostKvLen(models("torch"))
    prompt = torch.tensor(PROMPT, device=DEV)
    out = generate(model, prompt, max_new_tokens=6)
    assert (
        out.graph_refusal == "input 5 (flattened order) is on cpu, not cuda; a graph replays device work only"
    )
    assert (
        out.new_tokens.tolist()
        == generate(model, prompt, max_new_tokens=6, cuda_graph=False).new_tokens.tolist()
    )
