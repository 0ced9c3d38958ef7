"""`generate`: the causal-LM decoding loop over a model's own orchestration methods.

The loop drives any model with the causal-LM methods of seed 000 §1.1.2 — a `LoadedModule`, a
`@runtime_module` twin, a compiled twin — and never builds a model input itself:

    caches = model.init_caches(device=device)
    prefill:  inputs = model.prepare_inputs(ids[:n], 0, caches, device=device)   # when offered
      or, one prompt token per step:
              inputs = model.prepare_inputs_for_generation(ids[: step + 1], step, caches, device=device)
    each step:
        logits, *fresh = model(*inputs)                  # forward returns (logits, *state)
        caches = model.append_cache(caches, tuple(fresh))
        next token <- logits[-1] (greedy or sampled)
        inputs = model.prepare_inputs_for_generation(ids[: step + 1], step, caches, device=device)

`forward` returns a tuple whose first element is the logits (the last row over the vocabulary
is the next-token distribution) and whose remaining elements are the state the step produced;
those, as one tuple, are what `append_cache` receives beside the old caches. A model without
`append_cache` takes the produced state as the new caches unchanged. A model that offers
`prepare_inputs(ids, start, caches, device=)` for a chunk of tokens gets the whole prompt in one
step; the decode steps go one token at a time, replayed from a CUDA graph when the model runs on
a CUDA device and its steps qualify (graphs.py).

The caches are the loop's own (init_caches made them, and each step's old caches are dropped for
the new ones), so each step donates them (`donate`): a compiled step that updates a cache in
place writes the new rows into it instead of copying the whole cache. Caches sharing memory with
one another are not donated.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from .graphs import DecodeGraph, donate_caches
from .step import prepare, run_step


@dataclass(frozen=True)
class GenerationResult:
    """What `generate` produced.

    Attributes:
        tokens: 1-D int64 on the run's device, the prompt followed by the generated tokens.
        prompt_len: how many leading `tokens` are the prompt.
        seconds: wall time of the whole loop (prompt steps and generation), device synchronized.
        tokens_per_s: generated tokens per second of `seconds`.
        finish_reason: "eos" (an end token was produced) or "length" (max_new_tokens reached).
        prefill_seconds: from the start until the first new token was known (the prompt's steps).
        decode_seconds: the rest of `seconds`: the decode steps, graph warm-up and capture included.
        decode_tokens_per_s: tokens the decode steps produced (all but the first) per second of
            `decode_seconds`; None when there was no decode step.
        replay_tokens_per_s: the steady rate of graph replays: tokens produced after the first one
            a replay produced, per second since it was known; None without two replayed tokens.
        cuda_graph: whether decode steps were replayed from a captured CUDA graph.
        graph_refusal: why decode steps were not (or stopped being) replayed; None when they were,
            when there were too few steps to capture, or when cuda_graph=False.
        capture_seconds: time spent capturing the graph (part of `decode_seconds`).
    """

    tokens: torch.Tensor
    prompt_len: int
    seconds: float
    tokens_per_s: float
    finish_reason: str
    prefill_seconds: float
    decode_seconds: float
    decode_tokens_per_s: float | None
    replay_tokens_per_s: float | None
    cuda_graph: bool
    graph_refusal: str | None
    capture_seconds: float

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
    prefill: bool | None = None,
    cuda_graph: bool | None = None,
) -> GenerationResult:
    """Decode up to `max_new_tokens` tokens after the prompt `input_ids`.

    Args:
        model: anything with `init_caches(device=)`, `prepare_inputs_for_generation(ids, step,
            caches, device=)`, a forward (`model(*inputs)`), and optionally `append_cache` and
            `prepare_inputs(ids, start, caches, device=)` (inputs for a chunk of tokens).
        input_ids: the prompt, a 1-D tensor or a sequence of ints (at least one token).
        greedy: take the largest logit (first on ties); False samples.
        temperature, top_k, top_p: sampling controls (only with greedy=False), applied in that order.
        seed: seeds the sampling generator, so a seeded run repeats exactly.
        eos_token_id: one id or several; generation stops after producing one (it is kept).
        device: where the ids live and the model is asked to place its inputs; defaults to
            `input_ids`' device (CPU for a sequence).
        progress: draw a progress bar on stderr; None draws one when stderr is a terminal.
        prefill: run the whole prompt as one step through `prepare_inputs`; None does when the
            model has it, False feeds the prompt one token per step.
        cuda_graph: replay the decode steps from a captured CUDA graph (the first decode step is
            the warm-up, the second is captured). None uses one when the device is CUDA and the
            steps qualify, saying why not in `graph_refusal`; True raises when they do not.

    Raises:
        ValueError: an empty prompt or an out-of-range control, naming it.
        AttributeError: the model lacks `init_caches` or `prepare_inputs_for_generation`, or
            `prepare_inputs` when prefill=True.
        StepContractError: a model method mutated the token IDs or the caches it was given.
        GraphRefused: cuda_graph=True and the decode steps cannot be replayed from a graph.
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
    chunk = _chunk_builder(model, prefill)
    decoder = None if cuda_graph is False else DecodeGraph(model, dev, explicit=bool(cuda_graph))
    eos = _eos_set(eos_token_id)
    n_prompt = prompt.numel()
    # The caller owns the token IDs: one buffer, filled as tokens arrive; the model sees views.
    ids = torch.empty(n_prompt + max_new_tokens, dtype=torch.int64, device=dev)
    ids[:n_prompt] = prompt.to(dev)
    bar = _Progress(max_new_tokens) if (sys.stderr.isatty() if progress is None else progress) else None

    _sync(dev)
    start = time.perf_counter()
    caches = model.init_caches(device=dev)
    if chunk is not None:
        at = f"the prefill of steps 0-{n_prompt - 1}"
        inputs = prepare(chunk, ids[:n_prompt], 0, caches, dev, at=at)
        with donate_caches(caches):
            logits, caches = run_step(model, inputs, caches, at=at)
    else:
        for step in range(n_prompt):
            logits, caches = _eager_step(model, ids, step, caches, dev)
    produced, finish = 0, "length"
    clock = _PhaseClock(start)
    ahead = _DeviceArgmax(max_new_tokens) if sampler.greedy and dev.type == "cuda" else None

    def next_step(step: int) -> tuple[torch.Tensor, Any]:
        if decoder is None:
            return _eager_step(model, ids, step, caches, dev)
        with donate_caches(caches):
            return decoder.step(ids, step, caches)

    while produced < max_new_tokens:
        step = n_prompt + produced
        produced += 1
        if ahead is None:
            token = sampler.pick(logits)  # waits for the step: the clock reads finished work
            ids[step] = token
            if token not in eos and produced < max_new_tokens:
                logits, caches = next_step(step)
        else:
            # Greedy on a GPU: the token goes into `ids` on the device and the next step is queued
            # behind it before the host reads it, so the GPU never waits for the host between
            # steps. A step queued after the last token (an end token) is thrown away.
            ahead.pick(logits, ids, step, produced - 1)
            if produced < max_new_tokens:
                logits, caches = next_step(step)
            token = ahead.read(produced - 1)
        clock.token(produced, replayed=decoder is not None and decoder.replays > 0)
        if bar is not None:
            bar.update(produced, time.perf_counter() - start)
        if token in eos:
            finish = "eos"
            break
    _sync(dev)
    end = time.perf_counter()
    if bar is not None:
        bar.close(produced, end - start)
    return GenerationResult(
        tokens=ids[: n_prompt + produced].clone(),
        prompt_len=n_prompt,
        seconds=end - start,
        tokens_per_s=produced / (end - start) if end > start else float("inf"),
        finish_reason=finish,
        prefill_seconds=clock.prefill_seconds(end),
        decode_seconds=end - clock.first_at if clock.first_at is not None else 0.0,
        decode_tokens_per_s=clock.rate_since(clock.first_at, 1, produced, end),
        replay_tokens_per_s=clock.rate_since(clock.replay_at, clock.replay_from, produced, end),
        cuda_graph=decoder is not None and decoder.replays > 0,
        graph_refusal=decoder.refusal if decoder is not None else None,
        capture_seconds=decoder.capture_s if decoder is not None else 0.0,
    )


class _PhaseClock:
    """When the first new token, and the first token a graph replay produced, were known."""

    def __init__(self, start: float) -> None:
        self.start = start
        self.first_at: float | None = None
        self.replay_at: float | None = None
        self.replay_from = 0

    def token(self, produced: int, *, replayed: bool) -> None:
        """Note that `produced` tokens are known; `replayed`: the last came from a graph replay."""
        now = time.perf_counter()
        if self.first_at is None:
            self.first_at = now
        if replayed and self.replay_at is None:
            self.replay_at, self.replay_from = now, produced

    def prefill_seconds(self, end: float) -> float:
        return (self.first_at if self.first_at is not None else end) - self.start

    @staticmethod
    def rate_since(at: float | None, known: int, produced: int, end: float) -> float | None:
        """Tokens produced after the `known` ones counted at time `at`, per second until `end`."""
        if at is None or produced <= known or end <= at:
            return None
        return (produced - known) / (end - at)


def _chunk_builder(model: Any, prefill: bool | None) -> Any:
    """The model's `prepare_inputs` when the prompt goes in one step, else None."""
    chunk = getattr(model, "prepare_inputs", None) if prefill is not False else None
    if prefill and not callable(chunk):
        raise AttributeError(
            f"generate: prefill=True needs {type(model).__name__}.prepare_inputs(ids, start, caches, "
            f"device=), the inputs of a chunk of tokens; it has none"
        )
    return chunk if callable(chunk) else None


def _eager_step(
    model: Any, ids: torch.Tensor, step: int, caches: Any, dev: torch.device
) -> tuple[torch.Tensor, Any]:
    """One token at position `step`, run eagerly: the logits and the caches for the next step.

    The caches are donated: the caller drops them for the ones returned.
    """
    at = f"step {step}"
    inputs = prepare(model.prepare_inputs_for_generation, ids[: step + 1], step, caches, dev, at=at)
    with donate_caches(caches):
        return run_step(model, inputs, caches, at=at)


class _DeviceArgmax:
    """Greedy picks that stay on the GPU: each token goes into the ids buffer and a pinned host
    slot without a wait; `read` waits for that one token, not for work queued after it.

    The copy to the host runs on a stream of its own, so the next step's kernels, queued behind
    the pick, do not wait for it."""

    def __init__(self, n: int) -> None:
        self.host = torch.empty(n, dtype=torch.int64, pin_memory=True)
        self.done = torch.cuda.Event()
        self.copier = torch.cuda.Stream()

    def pick(self, logits: torch.Tensor, ids: torch.Tensor, at: int, k: int) -> None:
        """Token k (Sampler.pick's greedy choice: the first largest logit) into ids[at]."""
        row = logits.reshape(-1, logits.shape[-1])[-1]  # argmax in its own dtype: widening is exact
        torch.argmax(row, dim=0, keepdim=True, out=ids[at : at + 1])
        self.copier.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(self.copier):
            self.host[k : k + 1].copy_(ids[at : at + 1], non_blocking=True)
            self.done.record()

    def read(self, k: int) -> int:
        """Token k, once its pick has run (the last one picked)."""
        self.done.synchronize()
        return int(self.host[k])


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
