"""Test doubles of generation: a CUDA-graph recorder that runs eagerly, spies on a model's caches,
and a scope in which nothing is donated."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

import pytest
import torch

from tilefoundry.runtime import graphs


class EagerRecorder:
    """CUDA-graph semantics without CUDA: capture records `fn` (its one run is the first replay),
    each later replay reruns it and rewrites the captured outputs in place."""

    def __init__(self, device: torch.device) -> None:
        self.device = device

    def refusal(self, device: torch.device) -> str | None:
        return None

    def warm_up(self, fn: Callable):
        return fn(), []

    def capture(self, fn: Callable):
        out, runs = fn(), [0]

        def replay() -> None:
            runs[0] += 1
            if runs[0] > 1:
                out.copy_(fn())

        return replay, out


def spy_on_caches(model, monkeypatch: pytest.MonkeyPatch) -> tuple[list, list]:
    """(the tensors init_caches made, the cache tensors each step returned), filled as `model`
    generates (the caches are (k, v) pairs)."""
    made: list[torch.Tensor] = []
    returned: list[list[torch.Tensor]] = []
    init, append = model.init_caches, model.append_cache

    def init_spy(*args, **kwargs):
        caches = init(*args, **kwargs)
        made[:] = [t for pair in caches for t in pair]
        return caches

    def append_spy(caches, fresh):
        new = append(caches, fresh)
        returned.append([t for pair in new for t in pair])
        return new

    monkeypatch.setattr(model, "init_caches", init_spy, raising=False)
    monkeypatch.setattr(model, "append_cache", append_spy, raising=False)
    return made, returned


@contextlib.contextmanager
def no_donation(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """generate and the decode-graph runner donate nothing inside (as before donation existed):
    both donate through runtime.graphs (`donate_caches` and the runner's static caches)."""
    with monkeypatch.context() as m:
        m.setattr(graphs, "donate", lambda *t: contextlib.nullcontext())
        yield
