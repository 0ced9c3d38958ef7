"""`generate`: the causal-LM decoding loop over a model's own orchestration methods.

The loop drives any model with the causal-LM methods of seed 000 §1.1.2 — a `LoadedModule`, a
`@runtime_module` twin, a compiled twin — and never builds a model input itself:

    caches = model.init_caches(device=device)
    for each step:                                       # prompt tokens first, one per step
        inputs = model.prepare_inputs_for_generation(ids[: step + 1], step, caches, device=device)
        logits, *fresh = model(*inputs)                  # forward returns (logits, *state)
        caches = model.append_cache(caches, tuple(fresh))
        next token <- logits[-1] (greedy or sampled)

`forward` returns a tuple whose first element is the logits (the last row over the vocabulary
is the next-token distribution) and whose remaining elements are the state the step produced;
those, as one tuple, are what `append_cache` receives beside the old caches. A model without
`append_cache` takes the produced state as the new caches unchanged.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import torch


@dataclass(frozen=True)
class GenerationResult:
    """What `generate` produced.

    Attributes:
        tokens: 1-D int64 on the run's device, the prompt followed by the generated tokens.
        prompt_len: how many leading `tokens` are the prompt.
        seconds: wall time of the whole loop (prompt steps and generation), device synchronized.
        tokens_per_s: generated tokens per second of `seconds`.
        finish_reason: "eos" (an end token was produced) or "length" (max_new_tokens reached).
    """

    tokens: torch.Tensor
    prompt_len: int
    seconds: float
    tokens_per_s: float
    finish_reason: str

    @property
    def new_tokens(self) -> torch.Tensor:
        """The generated tokens alone."""
        return self.tokens[self.prompt_len :]


def generate(
    model: Any,
    input_ids: torch.Tensor | Sequence[int],
    *,
    max_new_tokens: int,
    greedy: bool = True,
    temperature: float | None = None,
    top_k: int | None = None,
    top_p: float | None = None,
    seed: int | None = None,
    eos_token_id: int | Iterable[int] | None = None,
    device: torch.device | str | None = None,
    progress: bool | None = None,
) -> GenerationResult:
    """Decode up to `max_new_tokens` tokens after the prompt `input_ids`.

    Args:
        model: anything with `init_caches(device=)`, `prepare_inputs_for_generation(ids, step,
            caches, device=)`, a forward (`model(*inputs)`), and optionally `append_cache`.
        input_ids: the prompt, a 1-D tensor or a sequence of ints (at least one token).
        greedy: take the largest logit (first on ties); False samples.
        temperature, top_k, top_p: sampling controls (only with greedy=False), applied in that order.
        seed: seeds the sampling generator, so a seeded run repeats exactly.
        eos_token_id: one id or several; generation stops after producing one (it is kept).
        device: where the ids live and the model is asked to place its inputs; defaults to
            `input_ids`' device (CPU for a sequence).
        progress: draw a progress bar on stderr; None draws one when stderr is a terminal.

    Raises:
        ValueError: an empty prompt or an out-of-range control, naming it.
        AttributeError: the model lacks `init_caches` or `prepare_inputs_for_generation`.
        RuntimeError: a model method mutated the token IDs or the caches it was given.
    """
    sampler = Sampler.make(greedy=greedy, temperature=temperature, top_k=top_k, top_p=top_p, seed=seed)
    if isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, int) or max_new_tokens < 0:
        raise ValueError(f"generate: max_new_tokens must be an int >= 0, got {max_new_tokens!r}")
    prompt = _prompt_tensor(input_ids)
    dev = torch.device(device) if device is not None else prompt.device
    for method in ("init_caches", "prepare_inputs_for_generation"):
        if not callable(getattr(model, method, None)):
            raise AttributeError(
                f"generate: {type(model).__name__} has no {method} method; a causal-LM model defines "
                f"init_caches, prepare_inputs_for_generation and (optionally) append_cache"
            )
    eos = _eos_set(eos_token_id)
    n_prompt = prompt.numel()
    # The caller owns the token IDs: one buffer, filled as tokens arrive; the model sees views.
    ids = torch.empty(n_prompt + max_new_tokens, dtype=torch.int64, device=dev)
    ids[:n_prompt] = prompt.to(dev)
    bar = _Progress(max_new_tokens) if (sys.stderr.isatty() if progress is None else progress) else None

    _sync(dev)
    start = time.perf_counter()
    caches = model.init_caches(device=dev)
    logits = None
    for step in range(n_prompt):
        logits, caches = _step(model, ids, step, caches, dev)
    produced, finish = 0, "length"
    while produced < max_new_tokens:
        token = sampler.pick(logits)
        ids[n_prompt + produced] = token
        produced += 1
        if bar is not None:
            bar.update(produced, time.perf_counter() - start)
        if token in eos:
            finish = "eos"
            break
        if produced < max_new_tokens:
            logits, caches = _step(model, ids, n_prompt + produced - 1, caches, dev)
    _sync(dev)
    seconds = time.perf_counter() - start
    if bar is not None:
        bar.close(produced, seconds)
    return GenerationResult(
        tokens=ids[: n_prompt + produced].clone(),
        prompt_len=n_prompt,
        seconds=seconds,
        tokens_per_s=produced / seconds if seconds > 0 else float("inf"),
        finish_reason=finish,
    )


def _step(
    model: Any, ids: torch.Tensor, step: int, caches: Any, dev: torch.device
) -> tuple[torch.Tensor, Any]:
    """One forward at position `step`: returns the logits and the caches for the next step."""
    before = ids._version
    inputs = model.prepare_inputs_for_generation(ids[: step + 1], step, caches, device=dev)
    if ids._version != before:
        raise RuntimeError(
            f"generate: prepare_inputs_for_generation mutated the token-ID view it was given at step "
            f"{step}; it must read the view and build new tensors"
        )
    if not isinstance(inputs, tuple):
        raise TypeError(
            f"generate: prepare_inputs_for_generation must return the positional tuple of forward's "
            f"inputs, got {type(inputs).__name__}"
        )
    state_versions = [(t, t._version) for t in _tensor_leaves(caches)]
    result = model(*inputs)
    touched = [i for i, (t, v) in enumerate(state_versions) if t._version != v]
    if touched:
        raise RuntimeError(
            f"generate: forward mutated cache tensor(s) {touched} (flattened order) at step {step}; a step "
            f"returns new state instead of writing into what it was given"
        )
    if not isinstance(result, tuple) or not result or not isinstance(result[0], torch.Tensor):
        raise TypeError(
            f"generate: forward must return (logits, *state) with logits a tensor, got "
            f"{type(result).__name__}"
        )
    logits, fresh = result[0], tuple(result[1:])
    append = getattr(model, "append_cache", None)
    return logits, (append(caches, fresh) if callable(append) else fresh)


@dataclass(frozen=True)
class Sampler:
    """How the next token is chosen from a row of logits."""

    greedy: bool
    temperature: float
    top_k: int | None
    top_p: float | None
    generator: torch.Generator | None

    @classmethod
    def make(
        cls,
        *,
        greedy: bool,
        temperature: float | None,
        top_k: int | None,
        top_p: float | None,
        seed: int | None,
    ) -> Sampler:
        """Validate the controls; sampling draws from a CPU generator so a seed repeats on any device."""
        if greedy:
            given = [
                n
                for n, v in (("temperature", temperature), ("top_k", top_k), ("top_p", top_p))
                if v is not None
            ]
            if given:
                raise ValueError(f"generate: {', '.join(given)} only apply when sampling; pass greedy=False")
            return cls(True, 1.0, None, None, None)
        t = 1.0 if temperature is None else float(temperature)
        if not t > 0:
            raise ValueError(f"generate: temperature must be > 0, got {temperature!r}")
        if top_k is not None and (isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 1):
            raise ValueError(f"generate: top_k must be an int >= 1, got {top_k!r}")
        if top_p is not None and not 0 < top_p <= 1:
            raise ValueError(f"generate: top_p must lie in (0, 1], got {top_p!r}")
        gen = torch.Generator()
        if seed is None:
            gen.seed()
        else:
            gen.manual_seed(seed)
        return cls(False, t, top_k, top_p, gen)

    def pick(self, logits: torch.Tensor) -> int:
        """The next token from the last row of `logits` (..., vocab)."""
        row = logits.reshape(-1, logits.shape[-1])[-1].float()
        if self.greedy:
            return int(row.argmax())
        row = row.cpu() / self.temperature
        if self.top_k is not None and self.top_k < row.numel():
            kth = torch.topk(row, self.top_k).values[-1]
            row = row.masked_fill(row < kth, float("-inf"))
        probs = torch.softmax(row, dim=-1)
        if self.top_p is not None and self.top_p < 1:
            sorted_p, order = torch.sort(probs, descending=True)
            # Keep the smallest prefix whose mass reaches top_p: a token stays while the mass
            # before it is still short of top_p (the most likely token always stays).
            drop = (torch.cumsum(sorted_p, dim=0) - sorted_p) >= self.top_p
            probs = probs.scatter(0, order[drop], 0.0)
            probs = probs / probs.sum()
        return int(torch.multinomial(probs, 1, generator=self.generator))


def _prompt_tensor(input_ids: torch.Tensor | Sequence[int]) -> torch.Tensor:
    prompt = (
        input_ids if isinstance(input_ids, torch.Tensor) else torch.tensor(list(input_ids), dtype=torch.int64)
    )
    if prompt.dim() != 1 or prompt.numel() == 0:
        raise ValueError(
            f"generate: input_ids must be a non-empty 1-D sequence of token IDs, "
            f"got shape {tuple(prompt.shape)}"
        )
    if prompt.dtype.is_floating_point or prompt.dtype == torch.bool:
        raise ValueError(f"generate: input_ids must hold integer token IDs, got {prompt.dtype}")
    return prompt.to(torch.int64)


def _eos_set(eos_token_id: int | Iterable[int] | None) -> frozenset[int]:
    if eos_token_id is None:
        return frozenset()
    if isinstance(eos_token_id, int):
        return frozenset((eos_token_id,))
    return frozenset(int(t) for t in eos_token_id)


def _tensor_leaves(x: Any) -> list[torch.Tensor]:
    if isinstance(x, torch.Tensor):
        return [x]
    if isinstance(x, (tuple, list)):
        return [t for item in x for t in _tensor_leaves(item)]
    if isinstance(x, dict):
        return [t for item in x.values() for t in _tensor_leaves(item)]
    return []


def _sync(dev: torch.device) -> None:
    # Kernels run asynchronously on a GPU; a wall-clock figure must wait for them.
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)


class _Progress:
    """A one-line progress bar on stderr: tokens done, a bar, and the running tokens/s."""

    width = 30

    def __init__(self, total: int) -> None:
        self.total = total

    def _line(self, done: int, seconds: float) -> str:
        filled = self.width * done // self.total if self.total else self.width
        rate = done / seconds if seconds > 0 else 0.0
        bar = "#" * filled + "." * (self.width - filled)
        return f"\rgenerate {done:>5}/{self.total} [{bar}] {rate:8.1f} tok/s"

    def update(self, done: int, seconds: float) -> None:
        sys.stderr.write(self._line(done, seconds))
        sys.stderr.flush()

    def close(self, done: int, seconds: float) -> None:
        sys.stderr.write(self._line(done, seconds) + "\n")
        sys.stderr.flush()
