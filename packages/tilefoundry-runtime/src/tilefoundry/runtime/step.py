"""One generation step over a model's own methods, with the seed's contract checks.

    inputs = prepare(model.prepare_inputs_for_generation, ids[: step + 1], step, caches, dev,
                     at="step 7")
    logits, caches = run_step(model, inputs, caches, at="step 7")

`prepare` calls a model's input builder (`prepare_inputs_for_generation` for one token, or a
model's `prepare_inputs` for a chunk of the prompt) and refuses one that mutated the token-ID view
it was given (seed 000 §1.1.2). `run_step` calls the forward, refuses a forward that mutated the
caches it was given, and turns the produced state into the next step's caches through
`append_cache` (the produced state itself when the model has none). `flatten` / `unflatten` walk
the nested tuples, lists and dicts a model's inputs and caches are made of.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch


class StepContractError(RuntimeError):
    """A model method broke the generation contract of seed 000 §1.1.2 (named in the message)."""


# A tree's shape without its leaves: None for a leaf, else (container type, keys or length, children).
TreeSpec = tuple[type, tuple, tuple] | None


def flatten(tree: Any, *, whole: Any = None) -> tuple[list[Any], TreeSpec]:
    """The leaves of nested tuples, lists and dicts (in order), and the structure around them.

    Args:
        whole: a subtree kept as one leaf where it occurs (by identity), left unwalked.
    """
    if tree is whole and whole is not None:
        return [tree], None
    if isinstance(tree, (tuple, list, dict)):
        leaves: list[Any] = []
        children = []
        for item in tree.values() if isinstance(tree, dict) else tree:
            sub, spec = flatten(item, whole=whole)
            leaves += sub
            children.append(spec)
        keys = tuple(tree) if isinstance(tree, dict) else ()
        return leaves, (dict if isinstance(tree, dict) else type(tree), keys, tuple(children))
    return [tree], None


def unflatten(spec: TreeSpec, leaves: list[Any]) -> Any:
    """The tree `flatten` described by `spec`, rebuilt around `leaves` (consumed in order)."""
    it = iter(leaves)

    def build(s: TreeSpec) -> Any:
        if s is None:
            return next(it)
        kind, keys, children = s
        items = [build(c) for c in children]
        return dict(zip(keys, items, strict=True)) if kind is dict else kind(items)

    return build(spec)


def tensor_leaves(tree: Any) -> list[torch.Tensor]:
    """The tensors among `tree`'s leaves, in order."""
    return [x for x in flatten(tree)[0] if isinstance(x, torch.Tensor)]


def prepare(
    method: Callable[..., Any],
    ids: torch.Tensor,
    start: int,
    caches: Any,
    device: torch.device,
    *,
    at: str,
) -> tuple:
    """The positional inputs `method(ids, start, caches, device=device)` builds, checked.

    Args:
        method: the model's bound input builder.
        ids: a view of the caller's token IDs; the method must read it, not write it.
        at: names the step in error messages ("step 7", "the prefill of steps 0-15").

    Raises:
        StepContractError: the method mutated `ids`.
        TypeError: it returned something other than a tuple.
    """
    name = getattr(method, "__name__", "the input builder")
    before = ids._version
    inputs = method(ids, start, caches, device=device)
    if ids._version != before:
        raise StepContractError(
            f"generate: {name} mutated the token-ID view it was given at {at}; it must read the view "
            f"and build new tensors"
        )
    if not isinstance(inputs, tuple):
        raise TypeError(
            f"generate: {name} must return the positional tuple of forward's inputs, got "
            f"{type(inputs).__name__}"
        )
    return inputs


def forward(model: Any, inputs: tuple, caches: Any, *, at: str) -> tuple[torch.Tensor, tuple]:
    """`model(*inputs)` split into (logits, produced state), refusing a mutation of `caches`.

    Raises:
        StepContractError: the forward wrote into a cache tensor it was given.
        TypeError: the forward did not return (logits, *state) with logits a tensor.
    """
    versions = [(t, t._version) for t in tensor_leaves(caches)]
    result = model(*inputs)
    touched = [i for i, (t, v) in enumerate(versions) if t._version != v]
    if touched:
        raise StepContractError(
            f"generate: forward mutated cache tensor(s) {touched} (flattened order) at {at}; a step "
            f"returns new state instead of writing into what it was given"
        )
    if not isinstance(result, tuple) or not result or not isinstance(result[0], torch.Tensor):
        raise TypeError(
            f"generate: forward must return (logits, *state) with logits a tensor, got "
            f"{type(result).__name__}"
        )
    return result[0], tuple(result[1:])


def advance(model: Any, caches: Any, fresh: tuple) -> Any:
    """The next step's caches: `append_cache(caches, fresh)`, or `fresh` for a model without one."""
    append = getattr(model, "append_cache", None)
    return append(caches, fresh) if callable(append) else fresh


def run_step(model: Any, inputs: tuple, caches: Any, *, at: str) -> tuple[torch.Tensor, Any]:
    """One eager step: the logits and the caches for the next step."""
    logits, fresh = forward(model, inputs, caches, at=at)
    return logits, advance(model, caches, fresh)
