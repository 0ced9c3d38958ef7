"""The BERT encoder on the real all-MiniLM-L6-v2 weights, three ways, against sentence-transformers."""

from __future__ import annotations

import pytest
import torch

from tilefoundry.check import check, cosine, rel_l2
from tilefoundry.models import open_model

SENTENCES = ["A man is eating food.", "The new movie is awesome!", "Rechenkerne für Tensoren, schnell."]


@pytest.fixture(scope="module")
def st_embeddings(minilm) -> torch.Tensor:
    return minilm.encode(SENTENCES)


@pytest.fixture(scope="module")
def opened(minilm):
    cache = {}

    def get(target: str):
        if target not in cache:
            cache[target] = open_model(minilm.path, target=target, device="cpu")
        return cache[target]

    return get


def _inputs(om, text: str) -> tuple:
    ids = torch.tensor(om.tokenizer.encode(text).ids, dtype=torch.int64)
    return om.model.prepare_inputs(ids, device="cpu")


@pytest.mark.parametrize("target", ["reference", "torch", "cpu"])
def test_embeddings_match_sentence_transformers(target, opened, st_embeddings):
    """Mean-pooled, normalized embeddings: cosine >= 0.9999 with sentence-transformers per sentence."""
    om = opened(target)
    for text, theirs in zip(SENTENCES, st_embeddings, strict=True):
        report = check(
            om.model, lambda *xs, t=theirs: t, _inputs(om, text), expect={"output": [cosine(min=0.9999)]}
        )
        assert report.passed, f"{text!r}\n{report}"


@pytest.mark.parametrize("target", ["torch", "cpu"])
def test_twin_passes_check_against_its_loaded_module(target, opened):
    """seed 000 §1.1: each encoder function of the twin agrees with the LoadedModule's."""
    loaded, twin = opened("reference").model, opened(target).model
    inputs = _inputs(opened("reference"), SENTENCES[1])
    report = check(twin.embed, loaded.embed, inputs, expect={"output": [rel_l2(max=1e-5)]})
    assert report.passed, str(report)
    x = loaded.embed(*inputs)
    for name in ("attention", "ffn"):
        report = check(
            getattr(twin.layers[3], name),
            getattr(loaded.layers[3], name),
            (x,),
            expect={"output": [rel_l2(max=1e-5)]},
        )
        assert report.passed, f"layers.3.{name}\n{report}"
    report = check(twin, loaded, inputs, expect={"output": [rel_l2(max=1e-5)]})
    assert report.passed, str(report)


def test_prepare_inputs_refuses_more_tokens_than_positions(opened):
    om = opened("reference")
    with pytest.raises(ValueError, match="BertModel: 513 tokens do not fit its 512 positions"):
        om.model.prepare_inputs(torch.ones(513, dtype=torch.int64), device="cpu")
