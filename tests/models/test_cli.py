"""The model commands by subprocess: `tilefoundry generate`, `embed` and `demo`, and their errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from tilefoundry.models import open_model, write_random_checkpoint
from tilefoundry.runtime import generate

SENTENCES = ["A man is eating food.", "TileFoundry compiles whole models, fast.", "Ein Hund läuft im Park."]


def tilefoundry(*args: object, timeout: float = 600) -> subprocess.CompletedProcess:
    """Run `python -m tilefoundry ARGS` and return the finished process (text output)."""
    return subprocess.run(
        [sys.executable, "-m", "tilefoundry", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.fixture(scope="module")
def demo_ckpt(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_random_checkpoint(tmp_path_factory.mktemp("demo") / "ckpt", seed=1)


def test_generate_json_tokens_equal_transformers(hf_cases):
    """--prompt-ids with --json: the greedy tokens are transformers' own, with the rates reported."""
    case = hf_cases["qwen3-tied"]
    ids = ",".join(map(str, case.prompt.tolist()))
    done = tilefoundry(
        "generate", case.ckpt, "--prompt-ids", ids, "--max-new-tokens", 8, "--target", "torch", "--json"
    )
    assert done.returncode == 0, done.stderr
    record = json.loads(done.stdout)
    assert record["tokens"] == case.tokens[:8].tolist()
    assert record["tokens_per_s"] > 0 and record["compile_s"] >= 0 and record["target"] == "torch"


def _torch_tokens(ckpt: Path, prompt: list[int], n: int, **sampling) -> list[int]:
    """What generate gives in this process on the torch twin (the CLI's --target torch)."""
    opened = open_model(ckpt, target="torch", device="cpu", context=len(prompt) + n)
    return generate(opened.model, prompt, max_new_tokens=n, progress=False, **sampling).new_tokens.tolist()


def test_generate_prompt_text_prints_the_decoded_continuation(demo_ckpt):
    """--prompt on a checkpoint with a tokenizer prints the decoded continuation, the rate on stderr."""
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(demo_ckpt / "tokenizer.json"))
    done = tilefoundry("generate", demo_ckpt, "--prompt", "Hi", "--max-new-tokens", 6, "--target", "torch")
    assert done.returncode == 0, done.stderr
    assert done.stdout == tok.decode(_torch_tokens(demo_ckpt, tok.encode("Hi").ids, 6)) + "\n"
    assert "6 tokens in" in done.stderr and "tokens/s) on torch" in done.stderr


def test_generate_seeded_sampling_repeats(demo_ckpt):
    """--temperature/--top-k/--top-p with --seed: the tokens a seeded sampling run gives in-process."""
    done = tilefoundry(
        "generate", demo_ckpt, "--prompt-ids", "5,6,7", "--max-new-tokens", 8, "--target", "torch", "--json",
        "--temperature", "0.8", "--top-k", "20", "--top-p", "0.9", "--seed", "7",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    sampling = {"greedy": False, "temperature": 0.8, "top_k": 20, "top_p": 0.9, "seed": 7}
    assert json.loads(done.stdout)["tokens"] == _torch_tokens(demo_ckpt, [5, 6, 7], 8, **sampling)


def test_generate_missing_directory_is_an_error(tmp_path):
    done = tilefoundry("generate", tmp_path / "nowhere", "--prompt-ids", "1", "--max-new-tokens", 1)
    assert done.returncode == 1
    assert "tilefoundry generate: error: checkpoint directory" in done.stderr
    assert "nowhere' does not exist" in done.stderr


def test_generate_unsupported_architecture_names_the_supported(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"architectures": ["GPT2LMHeadModel"], "n_embd": 64}))
    done = tilefoundry("generate", tmp_path, "--prompt-ids", "1", "--max-new-tokens", 1)
    assert done.returncode == 1
    assert "architectures ['GPT2LMHeadModel'] holds no supported architecture" in done.stderr
    assert "supported: LlamaForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM, BertModel" in done.stderr


def test_generate_truncated_safetensors_is_an_error(tmp_path):
    ckpt = write_random_checkpoint(tmp_path / "ckpt", seed=2)
    weights = ckpt / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
    done = tilefoundry("generate", ckpt, "--prompt-ids", "1,2", "--max-new-tokens", 2, "--target", "torch")
    assert done.returncode == 1
    assert "a weights file (model.safetensors) is corrupt or truncated" in done.stderr


def test_generate_prompt_longer_than_the_context_is_an_error(demo_ckpt):
    ids = ",".join(["7"] * 600)
    done = tilefoundry("generate", demo_ckpt, "--prompt-ids", ids, "--max-new-tokens", 1, "--target", "torch")
    assert done.returncode == 1
    assert "the prompt has 600 tokens, longer than the model's context of 512 positions" in done.stderr
    done = tilefoundry(
        "generate", demo_ckpt, "--prompt-ids", "1,2", "--max-new-tokens", 511, "--target", "torch"
    )
    assert (
        "the prompt's 2 tokens + --max-new-tokens 511 = 513 positions exceed the model's context of 512"
        in (done.stderr)
    )


def test_embed_matches_sentence_transformers(minilm):
    """`tilefoundry embed` on the packaged all-MiniLM-L6-v2 (default target): cosine >= 0.9999 each."""
    done = tilefoundry("embed", minilm.path, *(a for s in SENTENCES for a in ("--text", s)), "--json")
    assert done.returncode == 0, done.stderr
    ours = torch.tensor(json.loads(done.stdout)["embeddings"])
    cosines = torch.nn.functional.cosine_similarity(ours, minilm.encode(SENTENCES), dim=1)
    assert ours.shape == (3, 384)
    assert bool((cosines >= 0.9999).all()), cosines


def test_embed_refuses_a_causal_lm(demo_ckpt):
    done = tilefoundry("embed", demo_ckpt, "--text", "hello")
    assert done.returncode == 1
    assert "holds a Qwen3ForCausalLM; embed needs an encoder (BertModel)" in done.stderr


def test_demo_runs_and_passes_its_check(tmp_path):
    """`tilefoundry demo` (default target): writes a checkpoint, generates, checks, reports tokens/s."""
    done = tilefoundry("demo", "--max-new-tokens", 8, "--dir", tmp_path / "ckpt")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "tokens/s" in done.stdout
    assert done.stdout.rstrip().endswith("demo: passed")
    assert (tmp_path / "ckpt" / "config.json").is_file() and (
        tmp_path / "ckpt" / "model.safetensors"
    ).is_file()


def test_console_script_runs_the_same_main():
    """The `tilefoundry` console script and `python -m tilefoundry` list the same commands."""
    script = Path(sys.executable).with_name("tilefoundry")
    via_script = subprocess.run([script, "--help"], capture_output=True, text=True, timeout=120)
    via_module = tilefoundry("--help")
    assert via_script.returncode == 0 and via_script.stdout == via_module.stdout
    assert all(name in via_module.stdout for name in ("generate", "embed", "demo"))
