"""The random checkpoint writer: Hugging Face format that transformers itself reads, seeded, tokenized."""

from __future__ import annotations

import json

import pytest
import torch

from tilefoundry.check import check, rel_l2
from tilefoundry.models import DEMO_CONFIG, open_model, read_config, write_random_checkpoint
from tilefoundry.models.checkpoint import hf_shapes


def test_transformers_reads_the_written_checkpoint_and_agrees(tmp_path):
    """transformers loads config.json + model.safetensors as written; its logits equal ours."""
    transformers = pytest.importorskip("transformers")
    config = {**DEMO_CONFIG, "architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2"}
    ckpt = write_random_checkpoint(tmp_path / "qwen2", seed=3, config=config, tokenizer=False)
    hf = transformers.AutoModelForCausalLM.from_pretrained(ckpt).eval()
    hf.set_attn_implementation("eager")
    ours = open_model(ckpt, target="torch", device="cpu", context=16).model
    ids = torch.randint(0, 256, (12,), generator=torch.Generator().manual_seed(3))

    def logits(x: torch.Tensor) -> torch.Tensor:
        out, _ = ours(*ours.prepare_inputs(x, 0, ours.init_caches(device="cpu"), device="cpu"))
        return out

    with torch.no_grad():
        theirs = hf(ids[None]).logits[0]
    report = check(logits, lambda x: theirs, (ids,), expect={"output": [rel_l2(max=1e-5)]})
    assert report.passed, str(report)


def test_one_seed_writes_one_checkpoint(tmp_path):
    a = write_random_checkpoint(tmp_path / "a", seed=5, tokenizer=False)
    b = write_random_checkpoint(tmp_path / "b", seed=5, tokenizer=False)
    c = write_random_checkpoint(tmp_path / "c", seed=6, tokenizer=False)
    raw = [(p / "model.safetensors").read_bytes() for p in (a, b, c)]
    assert raw[0] == raw[1] != raw[2]
    assert json.loads((a / "config.json").read_text()) == DEMO_CONFIG


def test_keys_are_the_hugging_face_names(tmp_path):
    """Tied embeddings store no lm_head; Qwen3 stores q/k norms; every key has its Linear layout."""
    from safetensors import safe_open

    ckpt = write_random_checkpoint(
        tmp_path / "tied", seed=0, config={**DEMO_CONFIG, "tie_word_embeddings": True}
    )
    with safe_open(str(ckpt / "model.safetensors"), framework="pt") as f:
        shapes = {k: tuple(f.get_slice(k).get_shape()) for k in f.keys()}  # noqa: SIM118
    assert shapes == hf_shapes(read_config(ckpt))
    assert "lm_head.weight" not in shapes
    assert shapes["model.layers.1.self_attn.q_proj.weight"] == (128, 128)
    assert shapes["model.layers.1.self_attn.k_norm.weight"] == (32,)


def test_byte_tokenizer_round_trips_any_text(tmp_path):
    from tokenizers import Tokenizer

    ckpt = write_random_checkpoint(tmp_path / "tok", seed=0)
    tok = Tokenizer.from_file(str(ckpt / "tokenizer.json"))
    text = "TileFoundry: schnell, 速い!\n\ttabs"
    assert tok.encode(text).ids == list(text.encode())
    assert tok.decode(tok.encode(text).ids) == text


def test_a_tokenizer_needs_256_ids(tmp_path):
    with pytest.raises(ValueError, match="a byte-level tokenizer needs vocab_size >= 256, got 128"):
        write_random_checkpoint(tmp_path / "small", config={**DEMO_CONFIG, "vocab_size": 128})


def test_open_model_refuses_compile_options_on_a_target_that_compiles_nothing(tmp_path):
    ckpt = write_random_checkpoint(tmp_path / "demo", seed=2, tokenizer=False)
    with pytest.raises(ValueError, match=r"options \['vectorize'\]: target 'torch' compiles nothing"):
        open_model(ckpt, target="torch", device="cpu", context=16, options={"vectorize": False})


def test_open_model_hands_compile_options_to_the_compiled_twin(tmp_path, monkeypatch):
    """The options reach `tilefoundry.twin` unchanged (the build itself is the compiler's test)."""
    import tilefoundry

    seen = {}

    class Stop(Exception):
        pass

    def fake_twin(sem, *, target, options):
        seen.update(target=target, options=options)
        raise Stop

    monkeypatch.setattr(tilefoundry, "twin", fake_twin)
    ckpt = write_random_checkpoint(tmp_path / "demo", seed=2, tokenizer=False)
    with pytest.raises(Stop):
        open_model(ckpt, target="cpu", device="cpu", context=16, options={"batch_launches": False})
    assert seen == {"target": "cpu", "options": {"batch_launches": False}}
