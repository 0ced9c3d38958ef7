"""`donate`: tensors a caller gives up to the compiled calls inside a block (like XLA's donate_argnums).

A compiled entry whose `EntryABI.updates` says output j is input i with a region rewritten (a
KV-cache update) writes output j into input i itself when the caller donated that tensor, and
returns it (runtime/loader.py). The generation loop and the CUDA-graph runner donate the caches
they own (generate.py, graphs.py).
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator

import torch

# The tensors given up by the enclosing `donate` blocks, innermost last: id -> tensor (held, so
# an id is never reused while it is listed).
_DONATED: contextvars.ContextVar[tuple[dict[int, torch.Tensor], ...]] = contextvars.ContextVar(
    "tilefoundry_donated", default=()
)


@contextlib.contextmanager
def donate(*tensors: torch.Tensor) -> Iterator[None]:
    """Give `tensors` up to the compiled calls made inside the block, like XLA's donate_argnums.

    A compiled entry called (auto-alloc) with a donated tensor as input i, where its
    `EntryABI.updates` maps output j to i, writes output j into that very tensor and returns it
    (`result is tensor`): a KV-cache update then writes the new rows alone, not a copy of the whole
    cache. Each tensor serves one such call; it then holds the result, which the caller owns
    again. A tensor that no call can update in place (another entry, a twin that is not
    compiled, a non-contiguous tensor, one overlapping another argument) is left as it was.

    The caller promises not to read a donated tensor's old value again: after the call it holds
    the new one.

        with donate(k_cache, v_cache):
            y, k_cache, v_cache = step(x, pos, k_cache, v_cache)

    Raises:
        TypeError: an argument is not a torch.Tensor.
    """
    for i, t in enumerate(tensors):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"donate: argument {i} must be a torch.Tensor, got {type(t).__name__}")
    token = _DONATED.set((*_DONATED.get(), {id(t): t for t in tensors}))
    try:
        yield
    finally:
        _DONATED.reset(token)


def donated(t: torch.Tensor) -> bool:
    """`t` is given up by an enclosing `donate` block."""
    return any(scope.get(id(t)) is t for scope in _DONATED.get())


def take(t: torch.Tensor) -> None:
    """`t` has served its call: no longer donated in any enclosing block."""
    for scope in _DONATED.get():
        if scope.get(id(t)) is t:
            del scope[id(t)]
