"""Tests of runtime/generate.py: the causal-LM loop (seed 000 §1.1.2's generation methods).

The loop is exercised on a small torch model with the three methods, then on a causal LM written
in the DSL, both as a LoadedModule and as its runtime twin.
"""

import pytest
import torch

from tilefoundry.dsl import ConstTensor, Tensor, f32, func, i64, module, tf
from tilefoundry.runtime import DictResource, runtime_func, runtime_module
from tilefoundry.runtime.generate import GenerationResult, generate
from tilefoundry.runtime.step import StepContractError

V, D, MAX = 13, 8, 32


class ToyLM:
    """Logits at position t depend on every earlier token through a running-sum cache."""

    def __init__(self, seed: int = 0):
        g = torch.Generator().manual_seed(seed)
        self.emb = torch.randn(V, D, generator=g)
        self.mix = torch.randn(D, D, generator=g) / D**0.5
        self.out = torch.randn(D, V, generator=g)
        self.seen = []

    def init_caches(self, *, device):
        return (torch.zeros(1, D, device=device),)

    def prepare_inputs_for_generation(self, input_ids, step, caches, *, device):
        self.seen.append((input_ids, step))
        token = input_ids[step].reshape(1).to(device)
        pos = torch.tensor([step], device=device)
        return (token, pos, caches[0])

    def forward(self, token, pos, acc):
        new_acc = acc + self.emb[token]
        h = torch.tanh(new_acc @ self.mix) * (1.0 + 0.1 * pos.float())
        return h @ self.out, new_acc

    __call__ = forward

    def append_cache(self, caches, fresh):
        (acc,) = fresh
        return (acc,)


def _reference_greedy(model: ToyLM, prompt: list[int], n: int) -> list[int]:
    """Greedy continuation recomputed from scratch at every position (no cache reuse)."""
    ids = list(prompt)
    for _ in range(n):
        acc = model.emb[torch.tensor(ids)].sum(0, keepdim=True)
        h = torch.tanh(acc @ model.mix) * (1.0 + 0.1 * (len(ids) - 1))
        ids.append(int((h @ model.out)[-1].argmax()))
    return ids


def test_greedy_matches_a_recomputed_reference():
    model = ToyLM()
    prompt = [3, 7, 1]
    out = generate(model, torch.tensor(prompt), max_new_tokens=9)
    assert isinstance(out, GenerationResult)
    assert out.tokens.tolist() == _reference_greedy(model, prompt, 9)
    assert out.prompt_len == 3 and out.new_tokens.tolist() == out.tokens.tolist()[3:]
    assert out.finish_reason == "length"
    assert out.tokens_per_s > 0 and out.seconds > 0


def test_seeded_sampling_repeats_and_differs_by_seed():
    model = ToyLM(1)
    a = generate(model, [2, 5], max_new_tokens=24, greedy=False, temperature=2.0, seed=7)
    b = generate(model, [2, 5], max_new_tokens=24, greedy=False, temperature=2.0, seed=7)
    c = generate(model, [2, 5], max_new_tokens=24, greedy=False, temperature=2.0, seed=8)
    assert a.tokens.tolist() == b.tokens.tolist()
    assert a.tokens.tolist() != c.tokens.tolist()


def test_top_k_one_and_tiny_top_p_reduce_to_greedy():
    model = ToyLM(2)
    greedy = generate(model, [4], max_new_tokens=10).tokens.tolist()
    k1 = generate(model, [4], max_new_tokens=10, greedy=False, top_k=1, seed=3).tokens.tolist()
    p0 = generate(model, [4], max_new_tokens=10, greedy=False, top_p=1e-6, seed=3).tokens.tolist()
    assert k1 == greedy and p0 == greedy


def test_top_k_restricts_draws_to_the_k_largest_logits():
    logits_seen = []

    class Spy(ToyLM):
        def __call__(self, *acts):
            logits, acc = self.forward(*acts)
            logits_seen.append(logits[-1])
            return logits, acc

    out = generate(Spy(3), [1, 2], max_new_tokens=12, greedy=False, temperature=5.0, top_k=3, seed=11)
    # The token drawn after step i comes from the logits of step i (the first from the last prompt step).
    for logits, token in zip(logits_seen[1:], out.new_tokens.tolist(), strict=True):
        assert token in torch.topk(logits, 3).indices.tolist()


def test_eos_stops_and_is_kept():
    model = ToyLM()
    full = _reference_greedy(model, [3, 7, 1], 9)
    eos = full[5]
    out = generate(model, [3, 7, 1], max_new_tokens=9, eos_token_id={eos, 999})
    assert out.tokens.tolist() == full[: full.index(eos, 3) + 1]
    assert out.finish_reason == "eos"


def test_1_1_2_caller_passes_the_token_prefix_as_a_view_and_expands_only_ids():
    """seed 000 §1.1.2: prepare_inputs_for_generation receives a one-dimensional tensor of token
    IDs; the caller passes the active token-ID prefix as a view and expands only that tensor."""
    model = ToyLM()
    out = generate(model, [3, 7, 1], max_new_tokens=4)
    steps = [s for _, s in model.seen]
    assert steps == list(range(3 + 4 - 1))
    for ids, step in model.seen:
        assert ids.dim() == 1 and ids.numel() == step + 1 and ids._base is not None
    base = model.seen[0][0]._base
    assert all(ids._base is base for ids, _ in model.seen)
    assert out.tokens.tolist()[:3] == [3, 7, 1]


def test_1_1_2_caller_does_not_reconstruct_model_inputs():
    """seed 000 §1.1.2: the caller MUST NOT reconstruct a model's positional, rotary, scaling or
    state inputs: forward receives exactly the tuple prepare_inputs_for_generation built."""
    model = ToyLM()
    built, received = [], []
    prep, fwd = model.prepare_inputs_for_generation, model.forward

    class Spy(ToyLM):
        def prepare_inputs_for_generation(self, *a, **k):
            built.append(prep(*a, **k))
            return built[-1]

        def __call__(self, *acts):
            received.append(acts)
            return fwd(*acts)

    model.__class__ = Spy
    generate(model, [5, 6], max_new_tokens=3)
    assert len(built) == len(received) == 4
    assert all(all(x is y for x, y in zip(b, r, strict=True)) for b, r in zip(built, received, strict=True))


def test_1_1_2_method_mutating_the_id_view_is_refused():
    """seed 000 §1.1.2: a method MUST NOT mutate that view; generate refuses one that does."""

    class Mutating(ToyLM):
        def prepare_inputs_for_generation(self, input_ids, step, caches, *, device):
            input_ids[0] = 0
            return super().prepare_inputs_for_generation(input_ids, step, caches, device=device)

    with pytest.raises(
        RuntimeError, match=r"prepare_inputs_for_generation mutated the token-ID view .* at step 0"
    ):
        generate(Mutating(), [3, 4], max_new_tokens=2)


def test_1_1_2_step_mutating_its_state_is_refused():
    """seed 000 §1.1.2: a step MUST NOT mutate a state tensor it was given; generate refuses one."""

    class InPlace(ToyLM):
        def __call__(self, token, pos, acc):
            acc.add_(self.emb[token])
            return torch.tanh(acc @ self.mix) @ self.out, acc.clone()

    with pytest.raises(RuntimeError, match=r"forward mutated cache tensor\(s\) \[0\] .* at step 0"):
        generate(InPlace(), [3, 4], max_new_tokens=2)


def test_without_append_cache_the_produced_state_is_the_new_cache():
    class NoAppend(ToyLM):
        append_cache = None

    assert (
        generate(NoAppend(), [3, 7, 1], max_new_tokens=5).tokens.tolist()
        == generate(ToyLM(), [3, 7, 1], max_new_tokens=5).tokens.tolist()
    )


def test_progress_bar_on_request_and_silent_off_a_terminal(capsys):
    generate(ToyLM(), [3], max_new_tokens=4, progress=True)
    err = capsys.readouterr().err
    assert "generate     4/4 [" in err and "tok/s" in err and err.endswith("\n")
    generate(ToyLM(), [3], max_new_tokens=4)  # pytest's stderr is no terminal
    assert capsys.readouterr().err == ""


def test_refusals_name_what_is_wrong():
    with pytest.raises(ValueError, match="generate: temperature only apply when sampling; pass greedy=False"):
        generate(ToyLM(), [1], max_new_tokens=1, temperature=0.5)
    with pytest.raises(ValueError, match=r"generate: top_p must lie in \(0, 1\], got 1.5"):
        generate(ToyLM(), [1], max_new_tokens=1, greedy=False, top_p=1.5)
    with pytest.raises(ValueError, match="generate: top_k must be an int >= 1, got 0"):
        generate(ToyLM(), [1], max_new_tokens=1, greedy=False, top_k=0)
    with pytest.raises(ValueError, match="generate: temperature must be > 0, got 0"):
        generate(ToyLM(), [1], max_new_tokens=1, greedy=False, temperature=0)
    with pytest.raises(ValueError, match="generate: input_ids must be a non-empty 1-D sequence"):
        generate(ToyLM(), [], max_new_tokens=1)
    with pytest.raises(ValueError, match="generate: max_new_tokens must be an int >= 0, got -1"):
        generate(ToyLM(), [1], max_new_tokens=-1)
    with pytest.raises(AttributeError, match="generate: object has no init_caches method"):
        generate(object(), [1], max_new_tokens=1)


def test_zero_new_tokens_returns_the_prompt():
    out = generate(ToyLM(), [4, 2], max_new_tokens=0)
    assert out.tokens.tolist() == [4, 2] and out.new_tokens.numel() == 0


class ChunkLM(ToyLM):
    """ToyLM that also offers `prepare_inputs` for a chunk of tokens (the prompt in one step)."""

    def prepare_inputs(self, ids, start, caches, *, device):
        self.seen.append((ids, start))
        n = ids.numel()
        return (ids.reshape(n).to(device), torch.arange(start, start + n, device=device), caches[0])

    def forward(self, tokens, positions, acc):
        rows = acc + torch.cumsum(self.emb[tokens], 0)  # the running sum after each token
        h = torch.tanh(rows @ self.mix) * (1.0 + 0.1 * positions.float()[:, None])
        return h @ self.out, rows[-1:]

    __call__ = forward


def test_prompt_goes_in_one_prefill_step_when_the_model_offers_it():
    model = ChunkLM()
    out = generate(model, [3, 7, 1, 4], max_new_tokens=6)
    assert out.tokens.tolist() == _reference_greedy(model, [3, 7, 1, 4], 6)
    (prompt_view, start), *decode = model.seen
    assert start == 0 and prompt_view.tolist() == [3, 7, 1, 4] and prompt_view._base is not None
    assert [s for _, s in decode] == list(range(4, 4 + 5))  # then one token per step


def test_prefill_false_feeds_the_prompt_one_token_per_step_with_the_same_tokens():
    model = ChunkLM()
    one_by_one = generate(model, [3, 7, 1, 4], max_new_tokens=6, prefill=False)
    assert [s for _, s in model.seen] == list(range(4 + 5))
    assert one_by_one.tokens.tolist() == generate(ChunkLM(), [3, 7, 1, 4], max_new_tokens=6).tokens.tolist()


def test_prefill_true_needs_prepare_inputs():
    with pytest.raises(
        AttributeError,
        match=r"generate: prefill=True needs ToyLM.prepare_inputs\(ids, start, caches, device=\), the inputs "
        r"of a chunk of tokens; it has none",
    ):
        generate(ToyLM(), [3, 7], max_new_tokens=2, prefill=True)


def test_1_1_2_prefill_mutating_the_id_view_is_refused():
    """seed 000 §1.1.2: a method MUST NOT mutate the token-ID view; the prefill builder included."""

    class Mutating(ChunkLM):
        def prepare_inputs(self, ids, start, caches, *, device):
            ids[0] = 0
            return super().prepare_inputs(ids, start, caches, device=device)

    with pytest.raises(
        StepContractError, match=r"prepare_inputs mutated the token-ID view .* at the prefill of steps 0-2"
    ):
        generate(Mutating(), [3, 4, 5], max_new_tokens=2)


def test_phases_split_the_run_and_rate_the_decode_steps():
    out = generate(ChunkLM(), [3, 7, 1], max_new_tokens=9)
    assert out.prefill_seconds > 0 and out.decode_seconds > 0
    assert out.prefill_seconds + out.decode_seconds == pytest.approx(out.seconds)
    assert out.decode_tokens_per_s == pytest.approx(8 / out.decode_seconds)
    assert out.replay_tokens_per_s is None and not out.cuda_graph  # on CPU: no graph
    single = generate(ChunkLM(), [3, 7, 1], max_new_tokens=1)
    assert single.decode_tokens_per_s is None and single.decode_seconds < single.prefill_seconds


# ------------------------------------------------------------ a causal LM written in the DSL

VOCAB, DM, SMAX = 19, 8, 16


@module(entry="step")
class TinyLM:
    @func
    def step(
        token: Tensor[(1,), "i64"], pos: Tensor[(), "i64"], kv_len: Tensor[(), "i64"],
        k_cache: Tensor[(1, 1, SMAX, DM), "f32"], v_cache: Tensor[(1, 1, SMAX, DM), "f32"],
        emb: ConstTensor[(VOCAB, DM), "f32"], wq: ConstTensor[(DM, DM), "f32"],
        wk: ConstTensor[(DM, DM), "f32"], wv: ConstTensor[(DM, DM), "f32"],
        w_out: ConstTensor[(DM, VOCAB), "f32"],
    ):  # fmt: skip
        x = tf.embedding(emb, token)
        q = tf.reshape(x @ wq, (1, 1, 1, DM))
        k_all = tf.cache_update(k_cache, pos, tf.reshape(x @ wk, (1, 1, 1, DM)))
        v_all = tf.cache_update(v_cache, pos, tf.reshape(x @ wv, (1, 1, 1, DM)))
        o = tf.attention(q, k_all, v_all, causal=True, kv_len=kv_len)
        return (tf.reshape(o, (1, DM)) + x) @ w_out, k_all, v_all

    def init_caches(self, *, device):
        return tuple(torch.zeros(1, 1, SMAX, DM, device=device) for _ in range(2))

    def prepare_inputs_for_generation(self, input_ids, step, caches, *, device):
        token = input_ids[step].reshape(1).to(device)
        return (token, torch.tensor(step, device=device), torch.tensor(step + 1, device=device), *caches)

    def append_cache(self, caches, fresh):
        return tuple(fresh)


@runtime_module(TinyLM)
class TinyLMTwin:
    @runtime_func
    def step(self, token, pos, kv_len, k_cache, v_cache, emb, wq, wk, wv, w_out):
        x = emb[token]
        k_all, v_all = k_cache.clone(), v_cache.clone()
        k_all[0, 0, int(pos)] = (x @ wk)[0]
        v_all[0, 0, int(pos)] = (x @ wv)[0]
        n = int(kv_len)
        att = torch.softmax((x @ wq) @ k_all[0, 0, :n].T / DM**0.5, dim=-1)
        return (att @ v_all[0, 0, :n] + x) @ w_out, k_all, v_all


def _tiny_weights(seed: int) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    w = {"emb": torch.randn(VOCAB, DM, generator=g), "w_out": torch.randn(DM, VOCAB, generator=g)}
    w.update({n: torch.randn(DM, DM, generator=g) / DM**0.5 for n in ("wq", "wk", "wv")})
    return w


def _tiny_greedy_reference(w: dict[str, torch.Tensor], prompt: list[int], n: int) -> list[int]:
    """Greedy continuation recomputed over the whole prefix each time, without a cache."""
    ids = list(prompt)
    for _ in range(n):
        x = w["emb"][torch.tensor(ids)]
        att = torch.softmax((x[-1:] @ w["wq"]) @ (x @ w["wk"]).T / DM**0.5, dim=-1)
        ids.append(int(((att @ (x @ w["wv"]) + x[-1:]) @ w["w_out"]).argmax()))
    return ids


def test_1_1_2_generation_methods_bind_on_a_reading_and_its_twin():
    """seed 000 §1.1.2: init_caches, prepare_inputs_for_generation and append_cache bind on a
    LoadedModule and its runtime twin in the same way as forward."""
    w = _tiny_weights(0)
    loaded = TinyLM.load(DictResource(w))
    twin = TinyLMTwin().load(DictResource(w))
    for model in (loaded, twin):
        for name in ("init_caches", "prepare_inputs_for_generation", "append_cache"):
            bound = getattr(model, name)
            assert bound.__self__ is model and bound.__func__ is TinyLM.methods[name]


def test_greedy_generation_on_a_dsl_causal_lm_reading_and_twin():
    w = _tiny_weights(0)
    prompt = [3, 11, 5]
    want = _tiny_greedy_reference(w, prompt, 8)
    loaded = TinyLM.load(DictResource(w))
    twin = TinyLMTwin().load(DictResource(w))
    assert generate(loaded, torch.tensor(prompt), max_new_tokens=8).tokens.tolist() == want
    assert generate(twin, torch.tensor(prompt), max_new_tokens=8).tokens.tolist() == want


def test_seeded_sampling_on_a_dsl_causal_lm_repeats_across_reading_and_twin():
    w = _tiny_weights(1)
    loaded = TinyLM.load(DictResource(w))
    twin = TinyLMTwin().load(DictResource(w))
    kw = {"max_new_tokens": 10, "greedy": False, "temperature": 1.5, "top_k": 8, "top_p": 0.95}
    a = generate(loaded, [2, 7], seed=21, **kw)
    b = generate(loaded, [2, 7], seed=21, **kw)
    c = generate(twin, [2, 7], seed=21, **kw)
    assert a.tokens.tolist() == b.tokens.tolist() == c.tokens.tolist()
    assert len(a.new_tokens) == 10 and a.tokens_per_s > 0
