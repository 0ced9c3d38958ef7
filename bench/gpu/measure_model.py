"""Measuring a ModelCase: the compiled twin against Hugging Face transformers, same weights.

    result = measure_model(case, session)

Weights are drawn on the device (checkpoint key names, `tilefoundry.models.checkpoint`'s
scaling) and shared: our twin and the evaluator read them through a DictResource with the
model's alias table; transformers copies them into its own model. The check runs a 4-token
prefill over random caches through the twin and the evaluator (and transformers' logits
against the same reference). A decode step is timed per call at `position` as `generate` runs
it: replayed from its captured CUDA graph (`DecodeGraph`, static caches donated), host work
included; on a device without graphs it runs eagerly and the row's timing mode says so. A
generation is one synchronized `generate` (after a short warm-up) against transformers'
`generate` of as many new tokens.
"""

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

import torch

from tilefoundry.models import CausalLMConfig, causal_lm_alias, linear_layout_of
from tilefoundry.models.checkpoint import hf_shapes
from tilefoundry.runtime import DictResource, generate
from tilefoundry.runtime.graphs import DecodeGraph, donate_caches

from .builds import BuildFailed
from .cases import PEERS, ModelCase, generator, randn
from .cases.model import config_of
from .checking import check_against
from .results import CaseResult, Measured, describe
from .session import Session
from .timing import Timing, time_each, time_once

CHECK_TOKENS = 4
WARMUP_TOKENS = 2


def device_weights(cfg: CausalLMConfig, device: torch.device, seed: int) -> dict[str, torch.Tensor]:
    """Random weights under Hugging Face key names, drawn on `device`.

    Matrices have std fan_in ** -0.5, embeddings std 1, norm weights 1 + 0.1 N(0, 1), biases
    0.1 N(0, 1): activations keep their scale through the layers.
    """
    g = generator(device, seed)
    dtype = _torch_dtype(cfg)
    out = {}
    for key, shape in sorted(hf_shapes(cfg).items()):
        x = randn(g, shape, torch.float32, device)
        if key.endswith(("norm.weight", "layernorm.weight")):
            x = 1 + 0.1 * x
        elif key.endswith(".bias"):
            x = 0.1 * x
        elif "embed_tokens" not in key:
            x = x * shape[-1] ** -0.5
        out[key] = x.to(dtype)
    return out


def _torch_dtype(cfg: CausalLMConfig) -> torch.dtype:
    return {"f32": torch.float32, "bf16": torch.bfloat16, "f16": torch.float16}[cfg.dtype]


def random_caches(cfg: CausalLMConfig, context: int, device: torch.device, seed: int) -> tuple:
    """One (k, v) pair per layer of shape (1, Hkv, context, D), random (a cache is never zeros here)."""
    g = generator(device, seed)
    shape = (1, cfg.num_kv_heads, context, cfg.head_dim)
    dtype = _torch_dtype(cfg)
    return tuple(
        (randn(g, shape, dtype, device), randn(g, shape, dtype, device)) for _ in range(cfg.num_layers)
    )


def hf_model(doc: Mapping[str, Any], weights: Mapping[str, torch.Tensor], device: torch.device) -> Any:
    """The transformers model of config document `doc`, holding `weights`, in eval mode.

    Raises:
        ValueError: the weights miss a key the model has (other than a tied LM head) or hold
            one it does not.
    """
    import transformers

    transformers.logging.set_verbosity_error()
    fields = {k: v for k, v in doc.items() if k != "model_type"}
    config = transformers.AutoConfig.for_model(doc["model_type"], **fields)
    with torch.device(device):
        model = transformers.AutoModelForCausalLM.from_config(
            config, dtype=weights["model.norm.weight"].dtype
        )
    missing, unexpected = model.load_state_dict(dict(weights), strict=False)
    missing = [k for k in missing if not (k == "lm_head.weight" and config.tie_word_embeddings)]
    if missing or unexpected:
        raise ValueError(f"transformers model: missing weights {missing}, unexpected {unexpected}")
    return model.eval()


def _wall(seconds: float) -> Timing:
    ms = seconds * 1e3
    return Timing(ms, ms, ms, 1, 1, "wall")


class _Reference:
    """The evaluator's forward on a 4-token prefill over random caches: what both sides check against."""

    def __init__(self, case: ModelCase, cfg: CausalLMConfig, resource: DictResource, s: Session) -> None:
        dev = s.device
        self.tolerance = case.tolerance
        self.ids = torch.randint(
            0, cfg.vocab_size, (CHECK_TOKENS,), generator=generator(dev, s.seed), device=dev
        )
        self.failure: str | None = None
        try:
            loaded = case.ours(s.target).load(resource)
            self.inputs = loaded.prepare_inputs(
                self.ids, 0, random_caches(cfg, case.context, dev, s.seed), device=dev
            )
            self.output = loaded(*self.inputs)
        except Exception as err:  # both sides then say why they were not checked
            self.failure = f"not checked: the evaluator failed: {describe(err)}"

    def verify(self, forward: Any) -> str:
        """Our twin's forward against the evaluator's, every output (logits and caches)."""
        return self.failure or check_against(forward, self.inputs, self.output, self.tolerance)

    def verify_logits(self, logits: torch.Tensor) -> str:
        """Another model's prefill logits (T, V) against the evaluator's."""
        if self.failure:
            return self.failure
        expected = self.output[0]
        return check_against(lambda *_: logits.to(expected.dtype), self.inputs, expected, self.tolerance)


def _ours(case: ModelCase, twin: Any, resource: DictResource, ref: _Reference, s: Session) -> Measured:
    m = Measured("ours")
    dev, cfg = s.device, config_of(case.config)
    try:
        ours = twin.load(resource)
        m.check = ref.verify(ours)
        token_gen = generator(dev, s.seed + 1)
        if case.kind == "decode_step":
            ids = torch.randint(0, cfg.vocab_size, (case.position + 1,), generator=token_gen, device=dev)
            step, decoder = _graphed_step(
                ours, ids, case.position, random_caches(cfg, case.context, dev, s.seed + 1), dev
            )
            m.first_call_s = time_once(step, dev)[1]
            timing = time_each(step, dev, s.timing)
            m.timing = dataclasses.replace(
                timing, mode="graph" if decoder.replays else f"{timing.mode}, eager"
            )
        else:
            prompt = torch.randint(0, cfg.vocab_size, (case.prompt_len,), generator=token_gen, device=dev)
            m.first_call_s = time_once(
                lambda: generate(ours, prompt, max_new_tokens=WARMUP_TOKENS, device=dev, progress=False), dev
            )[1]
            done = generate(ours, prompt, max_new_tokens=case.new_tokens, device=dev, progress=False)
            m.timing = _wall(done.seconds)
    except Exception as err:  # recorded in the row
        m.error = describe(err)
    return m


def _graphed_step(
    model: Any, ids: torch.Tensor, position: int, caches: Any, dev: torch.device
) -> tuple[Callable[[], None], DecodeGraph]:
    """The decode step at `position` as `generate` runs it, and its DecodeGraph (which counts the
    replays). Each call hands the caches the last one returned back in, donated, so after the
    capture every call is one replay over the graph's static caches; graphs are asked for
    explicitly on CUDA (a refusal fails the row), elsewhere the step runs eagerly."""
    decoder = DecodeGraph(model, dev, explicit=dev.type == "cuda")
    state = [caches]

    def step() -> None:
        with donate_caches(state[0]):
            _, state[0] = decoder.step(ids, position, state[0])

    return step, decoder


def _hf_step(model: Any, case: ModelCase, vocab: int, s: Session) -> tuple[float, Timing]:
    """One decode token after `position` cached ones; the cache is cropped back between calls."""
    dev = s.device
    g = generator(dev, s.seed + 1)
    past = model(
        input_ids=torch.randint(0, vocab, (1, case.position), generator=g, device=dev), use_cache=True
    ).past_key_values
    token = torch.randint(0, vocab, (1, 1), generator=g, device=dev)

    def step() -> Any:
        return model(input_ids=token, past_key_values=past, use_cache=True)

    def reset() -> None:
        # NOTE: a negative crop drops that many tokens in every transformers release; the
        # meaning of a positive one changed.
        extra = past.get_seq_length() - case.position
        if extra > 0:
            past.crop(-extra)

    first = time_once(step, dev)[1]
    reset()
    return first, time_each(step, dev, s.timing, reset=reset)


def _hf_generate(model: Any, case: ModelCase, vocab: int, s: Session) -> tuple[float, Timing]:
    """Greedy generation of exactly `new_tokens` (no end token stops it)."""
    dev = s.device
    prompt = torch.randint(0, vocab, (1, case.prompt_len), generator=generator(dev, s.seed + 1), device=dev)

    mask = torch.ones_like(prompt)

    def run(n: int) -> Any:
        return model.generate(
            prompt, attention_mask=mask, max_new_tokens=n, min_new_tokens=n, do_sample=False, pad_token_id=0
        )

    first = time_once(lambda: run(WARMUP_TOKENS), dev)[1]
    return first, _wall(time_once(lambda: run(case.new_tokens), dev)[1])


def _transformers(
    case: ModelCase, weights: Mapping[str, torch.Tensor], ref: _Reference, s: Session
) -> Measured:
    m = Measured(PEERS["transformers"])
    vocab = config_of(case.config).vocab_size
    try:
        model = hf_model(case.config, weights, s.device)
        with torch.inference_mode():
            m.check = ref.verify_logits(model(input_ids=ref.ids[None]).logits[0])
            if case.kind == "decode_step":
                m.first_call_s, m.timing = _hf_step(model, case, vocab, s)
            else:
                m.first_call_s, m.timing = _hf_generate(model, case, vocab, s)
    except Exception as err:  # recorded in the row
        m.error = describe(err)
    return m


def measure_model(case: ModelCase, s: Session) -> CaseResult:
    """Our compiled twin and (when wanted) transformers eager on one model case."""
    cfg = config_of(case.config)
    weights = device_weights(cfg, s.device, s.seed)
    resource = DictResource(weights, alias=causal_lm_alias(cfg, linear_layout_of(s.target)))
    ref = _Reference(case, cfg, resource, s)
    result = CaseResult(case, Measured("ours"))
    try:
        twin, result.compile = s.builds.get(case)
    except BuildFailed as err:
        result.ours.error = f"build failed: {err}"
    else:
        result.ours = _ours(case, twin, resource, ref, s)
    if s.wants("transformers"):
        result.peers.append(_transformers(case, weights, ref, s))
    return result
