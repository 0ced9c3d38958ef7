"""Tests of runtime/step.py: flattening a model's inputs, and one checked eager step."""

import pytest
import torch

from tilefoundry.runtime.step import StepContractError, flatten, prepare, run_step, tensor_leaves, unflatten


def _tree() -> tuple:
    g = torch.Generator().manual_seed(0)
    caches = tuple((torch.randn(2, 3, generator=g), torch.randn(2, 3, generator=g)) for _ in range(2))
    return (
        torch.randn(4, generator=g),
        7,
        None,
        [caches, {"scale": 0.5, "mask": torch.randn(2, generator=g)}],
    )


def test_flatten_lists_leaves_in_order_and_unflatten_rebuilds_the_tree():
    tree = _tree()
    leaves, spec = flatten(tree)
    assert len(leaves) == 9 and leaves[1:3] == [7, None] and leaves[3] is tree[3][0][0][0]
    rebuilt = unflatten(spec, leaves)
    assert type(rebuilt) is tuple and type(rebuilt[3]) is list and list(rebuilt[3][1]) == ["scale", "mask"]
    assert flatten(rebuilt) == (leaves, spec)


def test_flatten_keeps_a_whole_subtree_as_one_leaf():
    tree = _tree()
    caches = tree[3][0]
    leaves, spec = flatten(tree, whole=caches)
    assert len(leaves) == 6 and leaves[3] is caches
    assert unflatten(spec, leaves)[3][0] is caches


def test_tensor_leaves_skip_python_values():
    tree = _tree()
    assert [t.shape for t in tensor_leaves(tree)] == [(4,), *[(2, 3)] * 4, (2,)]


class Adder:
    """One step: the logits are the state plus the token's row; the new state is that sum."""

    def __init__(self) -> None:
        self.rows = torch.randn(5, 3, generator=torch.Generator().manual_seed(1))

    def prepare_inputs_for_generation(self, ids, step, caches, *, device):
        return (ids[step : step + 1].clone(), caches)

    def __call__(self, token, state):
        new = state + self.rows[token]
        return new, new


def test_run_step_returns_the_logits_and_the_produced_state():
    model, state = Adder(), torch.randn(1, 3, generator=torch.Generator().manual_seed(2))
    ids = torch.tensor([4, 2])
    inputs = prepare(model.prepare_inputs_for_generation, ids[:2], 1, state, torch.device("cpu"), at="step 1")
    logits, nxt = run_step(model, inputs, state, at="step 1")
    assert torch.equal(logits, state + model.rows[2]) and nxt == (logits,)


def test_1_1_2_a_forward_writing_its_caches_is_refused():
    """seed 000 §1.1.2: a step MUST NOT mutate a cache it was given."""

    class InPlace(Adder):
        def __call__(self, token, state):
            return state.add_(self.rows[token]), state

    state = torch.randn(1, 3, generator=torch.Generator().manual_seed(3))
    with pytest.raises(
        StepContractError, match=r"forward mutated cache tensor\(s\) \[0\] \(flattened order\) at step 0"
    ):
        run_step(InPlace(), (torch.tensor([1]), state), state, at="step 0")


def test_prepare_must_return_a_tuple():
    with pytest.raises(
        TypeError, match=r"generate: build must return the positional tuple of forward's inputs, got list"
    ):

        def build(ids, start, caches, *, device):
            return [ids]

        prepare(build, torch.tensor([1, 2]), 0, (), torch.device("cpu"), at="step 0")
