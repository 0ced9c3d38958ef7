"""`tilefoundry generate` (cli/generate.py): KV-cache sizing, the --json record, --cuda-graph."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from tilefoundry.cli.generate import CONTEXT_MULTIPLE, cache_length
from tilefoundry.models import open_model, write_random_checkpoint
from tilefoundry.runtime import generate


def tilefoundry(*args: object) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "tilefoundry", *map(str, args)], capture_output=True, text=True, timeout=600
    )


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_random_checkpoint(tmp_path_factory.mktemp("cli-generate") / "ckpt", seed=4)


def test_cache_holds_prompt_and_new_tokens_rounded_up_within_the_context():
    assert CONTEXT_MULTIPLE == 256
    assert cache_length(16, 256, 40960) == 512  # not the model's 40960 positions
    assert cache_length(3, 253, 40960) == 256 and cache_length(3, 254, 40960) == 512
    assert cache_length(100, 300, 512) == 512
    assert cache_length(500, 12, 512) == 512  # rounding stops at the model's context
    assert cache_length(5, 10, 100) == 100


def test_cache_sizing_refuses_what_the_context_cannot_hold():
    with pytest.raises(ValueError, match="the prompt has 600 tokens, longer than the model's context of 512"):
        cache_length(600, 1, 512)
    with pytest.raises(
        ValueError,
        match=r"the prompt's 2 tokens \+ --max-new-tokens 511 = 513 positions exceed the model's context of "
        r"512; ask for at most 510 new tokens",
    ):
        cache_length(2, 511, 512)


def test_json_reports_the_whole_run_and_the_decode_phase_apart(ckpt: Path):
    done = tilefoundry(
        "generate", ckpt, "--prompt-ids", "5,6,7", "--max-new-tokens", 8, "--target", "torch", "--json"
    )
    assert done.returncode == 0, done.stderr
    record = json.loads(done.stdout)
    assert record["context"] == 256 and record["target"] == "torch"
    assert record["seconds"] == pytest.approx(record["prefill_s"] + record["decode_s"])
    assert record["tokens_per_s"] == pytest.approx(8 / record["seconds"])
    assert record["decode_tokens_per_s"] == pytest.approx(7 / record["decode_s"])
    # The torch target runs on CUDA where there is one, and its steps qualify for a graph there.
    assert record["cuda_graph"] is (record["cuda_graph_refusal"] is None)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    opened = open_model(ckpt, target="torch", device=device, context=256)
    assert (
        record["tokens"]
        == generate(opened.model, [5, 6, 7], max_new_tokens=8, device=device).new_tokens.tolist()
    )


@pytest.mark.skipif(torch.cuda.is_available(), reason="refuses a CPU run; a GPU machine runs the graph")
def test_cuda_graph_on_a_cpu_run_fails_saying_why(ckpt: Path):
    done = tilefoundry(
        "generate", ckpt, "--prompt-ids", "5,6", "--max-new-tokens", 4, "--target", "torch", "--cuda-graph"
    )
    assert done.returncode == 1
    assert done.stderr.strip() == (
        "tilefoundry generate: error: generate: cuda_graph=True cannot be honored: the model runs on cpu; "
        "a CUDA graph needs a CUDA device (the start)"
    )
    quiet = tilefoundry(
        "generate",
        ckpt,
        "--prompt-ids",
        "5,6",
        "--max-new-tokens",
        4,
        "--target",
        "torch",
        "--no-cuda-graph",
        "--json",
    )
    assert quiet.returncode == 0, quiet.stderr
    assert json.loads(quiet.stdout)["cuda_graph_refusal"] is None
