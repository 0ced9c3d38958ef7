"""Oracle tests: our Llama / Qwen2 / Qwen3 against transformers on its own saved checkpoints.

For every case (conftest.CASES) and every way of running the model — the evaluator
(LoadedModule), the torch twin, the compiled CPU twin — prefill logits and 16 decode steps
match transformers' within rel_l2 < 1e-3 (f32), and 32 greedy tokens are identical; in bf16 the
prefill logits stay within rel_l2 < 3e-2 of transformers' f32 run of the same bf16 weights.
"""

from __future__ import annotations

import pytest
import torch

from tilefoundry.check import check, equal, rel_l2
from tilefoundry.runtime import generate

TARGETS = ("reference", "torch", "cpu")
DECODE_STEPS = 16


def _open(opened_models, case, target):
    return opened_models[(case.ckpt, target)]


@pytest.mark.parametrize("target", TARGETS)
def test_prefill_logits_match_transformers(hf_case, target, opened_models):
    """Prefill of the whole prompt in one step: logits (8, V) within rel_l2 1e-3 of transformers'."""
    case = hf_case
    model = _open(opened_models, case, target).model
    inputs = model.prepare_inputs(case.prompt, 0, model.init_caches(device="cpu"), device="cpu")
    report = check(
        lambda *xs: model(*xs)[0],
        lambda *xs: case.prefill_logits,
        inputs,
        expect={"output": [rel_l2(max=1e-3)]},
    )
    assert report.passed, str(report)


@pytest.mark.parametrize("target", TARGETS)
def test_decode_logits_match_transformers(hf_case, target, opened_models):
    """16 one-token steps on the cache, fed transformers' own greedy tokens: logits within 1e-3."""
    case = hf_case
    model = _open(opened_models, case, target).model

    def decode(prompt: torch.Tensor, fed: torch.Tensor) -> torch.Tensor:
        caches = model.init_caches(device="cpu")
        _, caches = model(*model.prepare_inputs(prompt, 0, caches, device="cpu"))
        rows = []
        for i in range(fed.numel()):
            logits, caches = model(
                *model.prepare_inputs(fed[i : i + 1], case.prompt.numel() + i, caches, device="cpu")
            )
            rows.append(logits[-1])
        return torch.stack(rows)

    fed = case.tokens[:DECODE_STEPS]
    report = check(
        decode,
        lambda *xs: case.step_logits[:DECODE_STEPS],
        (case.prompt, fed),
        expect={"output": [rel_l2(max=1e-3)]},
    )
    assert report.passed, str(report)


@pytest.mark.parametrize("target", TARGETS)
def test_greedy_tokens_match_transformers(hf_case, target, opened_models):
    """generate(), one token per step through the model's own methods: 32 greedy tokens identical."""
    case = hf_case
    model = _open(opened_models, case, target).model
    report = check(
        lambda prompt: generate(model, prompt, max_new_tokens=case.tokens.numel(), progress=False).new_tokens,
        lambda prompt: case.tokens,
        (case.prompt,),
        expect={"output": [equal()]},
    )
    assert report.passed, str(report)


@pytest.mark.parametrize("target", TARGETS)
def test_bf16_prefill_logits_within_their_bound(bf16_case, target, opened_models):
    """bf16 weights and activations: prefill logits within rel_l2 3e-2 of transformers' f32 run of the
    same weights (one bf16 rounding per op over two layers leaves about 1e-2)."""
    ckpt, prompt, theirs = bf16_case
    model = opened_models[(ckpt, target)].model

    def prefill(p: torch.Tensor) -> torch.Tensor:
        out, _ = model(*model.prepare_inputs(p, 0, model.init_caches(device="cpu"), device="cpu"))
        assert out.dtype == torch.bfloat16
        return out.float()

    report = check(prefill, lambda p: theirs, (prompt,), expect={"output": [rel_l2(max=3e-2)]})
    assert report.passed, str(report)
