"""Tests of runtime/graphs.py: when decode steps are replayed from a captured graph, and why not.

CUDA graphs need a GPU (tests/test_generate_graphs_gpu.py runs them). Here `EagerRecorder`
stands in for torch.cuda.CUDAGraph with the same contract: capture records the step function
over the runner's static buffers (its one run is what the first replay shows), and each later
replay reruns it, rewriting the captured outputs in place. So everything the runner does around a
graph — static input buffers, per-step copies, the cache copy-back, the refusals — runs on CPU.
"""

import gc
import weakref
from collections.abc import Callable

import pytest
import torch

from tilefoundry.runtime import graphs
from tilefoundry.runtime.generate import generate
from tilefoundry.runtime.graphs import DecodeGraph, GraphRefused
from tilefoundry.runtime.step import StepContractError

V, D = 13, 8


class EagerRecorder:
    """CUDA-graph semantics on any device: capture records `fn`, replay reruns it into its outputs."""

    syncs: tuple[str, ...] = ()
    capture_error: Exception | None = None

    def __init__(self, device: torch.device) -> None:
        self.device = device

    def refusal(self, device: torch.device) -> str | None:
        return None

    def warm_up(self, fn: Callable):
        return fn(), list(self.syncs)

    def capture(self, fn: Callable):
        if self.capture_error is not None:
            raise self.capture_error
        out = fn()  # a CUDA capture records without running; the first replay is this run
        runs = [0]

        def replay() -> None:
            runs[0] += 1
            if runs[0] > 1:
                out.copy_(fn())

        return replay, out


@pytest.fixture
def recorder(monkeypatch: pytest.MonkeyPatch) -> type[EagerRecorder]:
    """generate's decode graphs use EagerRecorder (a fresh subclass a test may configure)."""
    cls = type("Recorder", (EagerRecorder,), {})
    monkeypatch.setattr(graphs, "CudaGraphRecorder", cls)
    return cls


class RunningSumLM:
    """Logits at position t depend on every earlier token through a running-sum state."""

    def __init__(self, seed: int = 0) -> None:
        g = torch.Generator().manual_seed(seed)
        self.emb = torch.randn(V, D, generator=g)
        self.mix = torch.randn(D, D, generator=g) / D**0.5
        self.out = torch.randn(D, V, generator=g)

    def init_caches(self, *, device):
        return ((torch.zeros(1, D, device=device),), torch.zeros((), device=device))

    def prepare_inputs_for_generation(self, input_ids, step, caches, *, device):
        return (input_ids[step].reshape(1).to(device), torch.tensor([step], device=device), caches)

    def __call__(self, token, pos, caches):
        ((acc,), count) = caches
        new_acc = acc + self.emb[token]
        h = torch.tanh(new_acc @ self.mix / (count + 1)) * (1.0 + 0.1 * pos.float())
        return h @ self.out, ((new_acc,), count + 1)

    def append_cache(self, caches, fresh):
        (new,) = fresh
        return new


def _eager(model, prompt, n, **kw):
    return generate(model, prompt, max_new_tokens=n, cuda_graph=False, **kw)


def test_replayed_decode_steps_give_the_eager_tokens(recorder):
    """The second decode step is captured and every later one replayed; the state advances each step."""
    prompt = [3, 7, 1]
    out = generate(RunningSumLM(), prompt, max_new_tokens=12, cuda_graph=True)
    assert out.cuda_graph and out.graph_refusal is None
    assert out.replay_tokens_per_s > 0 and 0 < out.capture_seconds < out.decode_seconds
    assert out.tokens.tolist() == _eager(RunningSumLM(), prompt, 12).tokens.tolist()
    sampled = {"greedy": False, "temperature": 1.5, "seed": 5}
    assert (
        generate(RunningSumLM(1), prompt, max_new_tokens=12, cuda_graph=True, **sampled).tokens.tolist()
        == _eager(RunningSumLM(1), prompt, 12, **sampled).tokens.tolist()
    )


class TabledLM(RunningSumLM):
    """Inputs of two dtypes, one a 0-dim tensor and one a non-contiguous view of a fixed table."""

    def __init__(self, seed: int = 0) -> None:
        super().__init__(seed)
        self.table = torch.randn(D, 16, generator=torch.Generator().manual_seed(seed + 1))

    def prepare_inputs_for_generation(self, input_ids, step, caches, *, device):
        token, pos, caches = super().prepare_inputs_for_generation(input_ids, step, caches, device=device)
        return token, pos, torch.tensor(step + 1, device=device), self.table.to(device).t()[step], caches

    def __call__(self, token, pos, kv_len, row, caches):
        logits, fresh = super().__call__(token, pos, caches)
        return logits + (row @ self.out) * kv_len.float(), fresh


def test_static_inputs_of_one_dtype_are_copied_in_together(recorder):
    """Each step's inputs reach the graph's static buffers, one copy a dtype: the int64 token,
    position and 0-dim length, and the f32 row read through a transposed view."""
    prompt = [3, 7, 1]
    model = TabledLM()
    dec = DecodeGraph(model, "cpu", explicit=True)
    caches = model.init_caches(device="cpu")
    ids = torch.tensor([4, 2, 9, 1, 5, 6, 0, 8])
    for step in range(3):
        _, caches = dec.step(ids, step, caches)
    groups = {flat.dtype: len(members) for flat, members in dec._graph.groups}
    assert groups == {torch.int64: 3, torch.float32: 1}
    out = generate(TabledLM(), prompt, max_new_tokens=10, cuda_graph=True)
    assert out.cuda_graph and out.tokens.tolist() == _eager(TabledLM(), prompt, 10).tokens.tolist()


class CachedTableLM(RunningSumLM):
    """Passes one table it keeps (as a model caches its rotary tables) until `switch_at`, then
    another; `refill` rewrites the kept table in place before each step."""

    def __init__(self, seed: int = 0, *, switch_at: int | None = None, refill: bool = False) -> None:
        super().__init__(seed)
        self.g = torch.Generator().manual_seed(seed + 2)
        self.tables = [torch.randn(16, D, generator=self.g) for _ in range(2)]
        self.switch_at, self.refill = switch_at, refill

    def prepare_inputs_for_generation(self, input_ids, step, caches, *, device):
        token, pos, caches = super().prepare_inputs_for_generation(input_ids, step, caches, device=device)
        table = self.tables[self.switch_at is not None and step >= self.switch_at]
        if self.refill:
            table.copy_(torch.randn(table.shape, generator=self.g))
        return token, pos, table, caches

    def __call__(self, token, pos, table, caches):
        logits, fresh = super().__call__(token, pos, caches)
        return logits + table[pos] @ self.out, fresh


def _run_decode_graph(model, n: int) -> DecodeGraph:
    dec = DecodeGraph(model, "cpu", explicit=True)
    caches = model.init_caches(device="cpu")
    ids = torch.randint(0, V, (n,), generator=torch.Generator().manual_seed(n))
    for step in range(n):
        _, caches = dec.step(ids, step, caches)
    return dec


def test_an_input_that_is_the_same_tensor_every_step_is_read_in_place(recorder):
    """A table the model keeps gets no static buffer and no per-step copy: the graph reads it where
    it lies, so its contents at each replay are what the step sees, as in an eager step."""
    model = CachedTableLM()
    dec = _run_decode_graph(model, 8)
    assert {flat.dtype for flat, _ in dec._graph.groups} == {torch.int64}
    assert list(dec._graph.resident) == [2] and dec._graph.static[2] is model.tables[0]
    for refill in (False, True):
        prompt = [3, 7, 1]
        graphed = generate(CachedTableLM(refill=refill), prompt, max_new_tokens=12, cuda_graph=True)
        assert graphed.cuda_graph
        assert graphed.tokens.tolist() == _eager(CachedTableLM(refill=refill), prompt, 12).tokens.tolist()


def test_the_warm_up_keeps_no_cache_alive_until_the_capture(recorder):
    """The runner remembers the warm-up step's inputs to find the resident ones, but not the caches:
    a model that returns new caches would otherwise hold its old ones a step longer."""
    model = CachedTableLM()
    dec = DecodeGraph(model, "cpu", explicit=True)
    caches = model.init_caches(device="cpu")
    old = weakref.ref(caches[0][0])
    _, caches = dec.step(torch.tensor([4, 2, 9]), 0, caches)
    gc.collect()
    assert old() is None and dec.replays == 0


def test_a_resident_input_replaced_by_another_tensor_is_captured_again_and_copied(recorder):
    model = CachedTableLM(switch_at=5)
    dec = _run_decode_graph(model, 9)
    assert dec.replays == 8 and dec.refusal is None
    assert dec._graph.resident == {} and {flat.dtype for flat, _ in dec._graph.groups} == {
        torch.int64,
        torch.float32,
    }
    prompt = [3, 7]
    out = generate(CachedTableLM(switch_at=6), prompt, max_new_tokens=10, cuda_graph=True)
    assert out.cuda_graph and out.graph_refusal is None
    assert out.tokens.tolist() == _eager(CachedTableLM(switch_at=6), prompt, 10).tokens.tolist()


def test_replays_count_every_step_after_the_warm_up(recorder):
    model = RunningSumLM()
    dec = DecodeGraph(model, "cpu", explicit=True)
    caches = model.init_caches(device="cpu")
    ids = torch.tensor([4, 2, 9, 1, 5, 6, 0, 8])
    for step in range(ids.numel()):
        _, caches = dec.step(ids, step, caches)
    # step 0 warms up, step 1 is captured and run by its first replay, steps 2.. replay
    assert dec.replays == ids.numel() - 1 and dec.refusal is None and dec.capture_s > 0


def test_fewer_than_two_decode_steps_capture_nothing(recorder):
    out = generate(RunningSumLM(), [3, 7], max_new_tokens=2, cuda_graph=True)
    assert not out.cuda_graph and out.graph_refusal is None


def test_a_cpu_model_is_refused_with_the_reason():
    """Without CUDA the steps run eagerly and say why; an explicit request fails closed."""
    out = generate(RunningSumLM(), [3, 7], max_new_tokens=5)
    assert not out.cuda_graph
    assert out.graph_refusal == "the model runs on cpu; a CUDA graph needs a CUDA device"
    assert generate(RunningSumLM(), [3, 7], max_new_tokens=5, cuda_graph=False).graph_refusal is None
    with pytest.raises(
        GraphRefused,
        match=r"^generate: cuda_graph=True cannot be honored: the model runs on cpu; a CUDA graph needs a "
        r"CUDA device \(the start\)$",
    ):
        generate(RunningSumLM(), [3, 7], max_new_tokens=5, cuda_graph=True)


class GrowingLM(RunningSumLM):
    """Passes every position seen so far: an input whose shape grows each step."""

    def prepare_inputs_for_generation(self, input_ids, step, caches, *, device):
        return (input_ids[step].reshape(1).to(device), torch.arange(step + 1, device=device), caches)

    def __call__(self, token, positions, caches):
        return super().__call__(token, positions[-1:], caches)


def test_an_input_changing_shape_is_refused_before_capture(recorder):
    want = "input 1 (flattened order) was a (3,) int64 tensor on cpu at step 2 and is a (4,) int64 tensor "
    out = generate(GrowingLM(), [3, 7], max_new_tokens=6, cuda_graph=None)
    assert not out.cuda_graph and out.graph_refusal.startswith(want)
    assert out.graph_refusal.endswith("a graph replays fixed shapes, dtypes and Python values")
    assert out.tokens.tolist() == _eager(GrowingLM(), [3, 7], 6).tokens.tolist()
    with pytest.raises(
        GraphRefused, match=r"cannot be honored: input 1 \(flattened order\) was .* \(step 3\)$"
    ) as err:
        generate(GrowingLM(), [3, 7], max_new_tokens=6, cuda_graph=True)
    assert err.value.where == "step 3" and err.value.got.startswith(want)


class LateChangeLM(RunningSumLM):
    """Steps look alike until position 6, where the position input becomes two-dimensional."""

    def prepare_inputs_for_generation(self, input_ids, step, caches, *, device):
        token, pos, caches = super().prepare_inputs_for_generation(input_ids, step, caches, device=device)
        return (token, pos.reshape(1, 1) if step >= 6 else pos, caches)

    def __call__(self, token, pos, caches):
        return super().__call__(token, pos.reshape(1), caches)


def test_a_change_after_capture_falls_back_to_eager_steps(recorder):
    """The graph serves until the inputs change; then the steps continue eagerly from its caches."""
    out = generate(LateChangeLM(), [3, 7], max_new_tokens=10)
    assert out.cuda_graph
    assert out.graph_refusal.startswith(
        "input 1 (flattened order) was a (1,) int64 tensor on cpu at step 3 and is a (1, 1) int64 tensor "
        "on cpu at step 6"
    )
    assert out.tokens.tolist() == _eager(LateChangeLM(), [3, 7], 10).tokens.tolist()
    with pytest.raises(GraphRefused, match=r"honored: input 1 \(flattened order\) .* \(step 6\)$"):
        generate(LateChangeLM(), [3, 7], max_new_tokens=10, cuda_graph=True)


class StepValueLM(RunningSumLM):
    """Passes the step as a Python int, which a graph would bake in."""

    def prepare_inputs_for_generation(self, input_ids, step, caches, *, device):
        return (input_ids[step].reshape(1).to(device), step, caches)

    def __call__(self, token, step, caches):
        return super().__call__(token, torch.tensor([step]), caches)


def test_a_python_value_changing_between_steps_is_refused(recorder):
    out = generate(StepValueLM(), [3], max_new_tokens=5)
    assert out.graph_refusal.startswith(
        "input 1 (flattened order) was the value 1 at step 1 and is the value 2 at step 2"
    )
    assert out.tokens.tolist() == _eager(StepValueLM(), [3], 5).tokens.tolist()


def test_a_step_that_syncs_with_the_host_is_refused_naming_where(recorder):
    """The warm-up step's host syncs (torch's sync debug mode on CUDA) refuse the graph."""
    recorder.syncs = ("indexing.py:153", "indexing.py:153", "twin.py:8")
    out = generate(RunningSumLM(), [3, 7], max_new_tokens=6)
    assert out.graph_refusal == (
        "the step synchronizes with the host (at indexing.py:153, twin.py:8); a graph cannot replay host work"
    )
    assert out.tokens.tolist() == _eager(RunningSumLM(), [3, 7], 6).tokens.tolist()
    with pytest.raises(GraphRefused, match=r"honored: the step synchronizes with the host .* \(step 2\)$"):
        generate(RunningSumLM(), [3, 7], max_new_tokens=6, cuda_graph=True)


def test_a_failed_capture_is_a_refusal(recorder):
    recorder.capture_error = RuntimeError("operation not permitted when stream is capturing")
    out = generate(RunningSumLM(), [3, 7], max_new_tokens=6)
    assert out.graph_refusal == (
        "capturing the step failed: RuntimeError: operation not permitted when stream is capturing"
    )
    assert out.tokens.tolist() == _eager(RunningSumLM(), [3, 7], 6).tokens.tolist()


class GrowingCacheLM(RunningSumLM):
    """Appends each step's row to its state: caches whose shape grows."""

    def __call__(self, token, pos, caches):
        ((acc,), count) = caches
        logits, ((new_acc,), n) = super().__call__(token, pos, ((acc[-1:],), count))
        return logits, ((torch.cat((acc, new_acc)),), n)


def test_caches_changing_shape_are_refused_at_capture(recorder):
    out = generate(GrowingCacheLM(), [3, 7], max_new_tokens=6)
    assert out.graph_refusal == (
        "cache tensor 0 (flattened order) is a (4, 8) float32 tensor on cpu before the step and a (5, 8) "
        "float32 tensor on cpu after it; a graph advances caches of fixed shape"
    )
    assert out.tokens.tolist() == _eager(GrowingCacheLM(), [3, 7], 6).tokens.tolist()


class SwappingLM(RunningSumLM):
    """Keeps two state rows and hands back the old first row as the new second one."""

    def init_caches(self, *, device):
        return (torch.zeros(1, D, device=device), torch.zeros(1, D, device=device))

    def prepare_inputs_for_generation(self, input_ids, step, caches, *, device):
        return (input_ids[step].reshape(1).to(device), caches[0], caches[1])

    def __call__(self, token, a, b):
        new = a + self.emb[token]
        return torch.tanh((new + b) @ self.mix) @ self.out, new, a

    def append_cache(self, caches, fresh):
        return tuple(fresh)


def test_new_state_aliasing_another_given_cache_is_refused(recorder):
    """Copying new caches back in place is refused when one of them is a different old one."""
    out = generate(SwappingLM(), [3, 7], max_new_tokens=6)
    assert out.graph_refusal == (
        "the step's new cache tensor 1 shares memory with given cache tensor 0; copying it back would "
        "overwrite state the copy still reads"
    )
    assert out.tokens.tolist() == _eager(SwappingLM(), [3, 7], 6).tokens.tolist()


def test_1_1_2_a_graphed_step_mutating_its_caches_is_still_refused(recorder):
    """seed 000 §1.1.2: a step MUST NOT mutate a cache it was given; asking for graphs changes nothing."""

    class InPlace(RunningSumLM):
        def __call__(self, token, pos, caches):
            logits, fresh = super().__call__(token, pos, caches)
            if int(pos) >= 3:  # the captured step
                caches[0][0].add_(1.0)
            return logits, fresh

    with pytest.raises(StepContractError, match=r"forward mutated cache tensor\(s\) \[0\] .* at step 3"):
        generate(InPlace(), [3, 7], max_new_tokens=4, cuda_graph=True, prefill=False)


def test_1_1_2_replayed_steps_read_only_the_static_caches(recorder):
    """seed 000 §1.1.2: the step is given caches it never writes; the runner alone advances them."""
    seen = []

    class Spy(RunningSumLM):
        def __call__(self, token, pos, caches):
            seen.append((caches[0][0], caches[0][0]._version))
            return super().__call__(token, pos, caches)

    generate(Spy(), [3, 7], max_new_tokens=8, cuda_graph=True)
    captured = [t for t, _ in seen[3:]]  # prompt (2), warm-up (1), then the captured step reruns
    assert all(t is captured[0] for t in captured)
    versions = [v for _, v in seen[3:]]
    assert versions == sorted(versions) and len(set(versions)) == len(versions)  # advanced between steps
