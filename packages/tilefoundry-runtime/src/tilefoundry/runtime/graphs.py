"""Decode steps replayed from one captured CUDA graph (`generate(..., cuda_graph=)`).

A decode step launches hundreds of kernels, each paying a host-side launch and Python
orchestration; replaying them from a CUDA graph pays one launch per step. `DecodeGraph` takes
over a generation's decode steps:

    first step    eager, on a side stream (torch's warm-up recipe), watched for host syncs
    second step   its inputs must look like the first's; the step is captured once, over static
                  input buffers, then replayed
    later steps   prepare_inputs_for_generation as always; its new inputs are copied into the
                  static buffers, the graph is replayed, the logits read from its output

An input that is the very same tensor at the warm-up and the captured step (a table the model
caches, such as its rotary cos/sin) is resident: the graph reads it in place, as an eager step
would, and replays copy nothing for it. A step given another tensor there is captured again with
that input copied like the rest.

State stays functional (seed 000 §1.1.2: a step MUST NOT mutate the caches it was given): the
captured step reads the static caches and returns its new caches, and, still inside the graph,
the runner copies each one that is not the static cache itself back into that cache. The runner
owns the static caches, so it donates them to the step (`donate`): a compiled function that
updates a cache in place (a KV-cache update, `EntryABI.updates`) writes the step's new rows into
the static cache and returns it, and that copy is skipped. Other steps (a twin that is not
compiled, a cache no compiled function updates) pay the copy, once per token. A cache tensor
sharing memory with another is never donated.

A step qualifies when the model runs on a CUDA device, its inputs keep their structure, shapes,
dtypes and Python values from step to step, and it does not synchronize with the host. What
does not qualify is refused with the reason: an explicit request (`explicit=True`) raises
`GraphRefused`; otherwise the steps run eagerly and `refusal` says why.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any, Protocol, TypeVar

import torch

from tilefoundry.ir.errors import TileFoundryError

from .donation import donate
from .step import StepContractError, TreeSpec, flatten, prepare, run_step, unflatten

T = TypeVar("T")

_SYNC_WARNING = "called a synchronizing CUDA operation"


class GraphRefused(TileFoundryError):
    """An explicit request for CUDA graphs that cannot be honored: `got` holds the reason."""


class GraphRecorder(Protocol):
    """How steps are warmed up, captured and replayed on one kind of device."""

    def refusal(self, device: torch.device) -> str | None:
        """Why steps on `device` cannot be captured at all; None when they may be."""

    def warm_up(self, fn: Callable[[], T]) -> tuple[T, list[str]]:
        """Run `fn` eagerly as capture's warm-up: its result and where it synchronized with the host."""

    def capture(self, fn: Callable[[], T]) -> tuple[Callable[[], None], T]:
        """Record `fn`'s device work without running it: (replay, the outputs replay rewrites)."""


class CudaGraphRecorder:
    """torch.cuda.CUDAGraph capture on the model's CUDA device."""

    def __init__(self, device: torch.device) -> None:
        self.device = device

    def refusal(self, device: torch.device) -> str | None:
        """Refuses a non-CUDA device and a machine without CUDA."""
        if device.type != "cuda":
            return f"the model runs on {device}; a CUDA graph needs a CUDA device"
        if not torch.cuda.is_available():
            return f"the model runs on {device}, but no CUDA device is available"
        return None

    def warm_up(self, fn: Callable[[], T]) -> tuple[T, list[str]]:
        """Run `fn` on a side stream with torch's sync debug mode warning; name each sync's place."""
        with torch.cuda.device(self.device):
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            previous = torch.cuda.get_sync_debug_mode()
            with warnings.catch_warnings(record=True) as caught, torch.cuda.stream(side):
                warnings.simplefilter("always")
                torch.cuda.set_sync_debug_mode("warn")
                try:
                    result = fn()
                finally:
                    torch.cuda.set_sync_debug_mode(previous)
            torch.cuda.current_stream().wait_stream(side)
        syncs = []
        for w in caught:
            if _SYNC_WARNING in str(w.message):
                syncs.append(f"{Path(w.filename).name}:{w.lineno}")
            else:  # not ours to swallow
                warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
        return result, syncs

    def capture(self, fn: Callable[[], T]) -> tuple[Callable[[], None], T]:
        """Capture `fn` with torch.cuda.graph (its own side stream and memory pool)."""
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.device(self.device), torch.cuda.graph(graph):
            out = fn()
        return graph.replay, out


class _Refusal(Exception):
    """Raised inside DecodeGraph when a step cannot be (or stay) graphed; the text is the reason."""


# One flattened input leaf: ("caches",) for the caches the step was given, passed whole; ("cache",
# k) for the k-th of their tensors, passed alone; ("tensor", shape, dtype, device) for any other
# tensor; ("value", v) for a Python value the graph would bake in.
Leaf = tuple


def _state_index(caches: Any) -> dict[int, int]:
    """id of each cache tensor -> its position among the caches' flattened leaves."""
    return {id(t): k for k, t in enumerate(flatten(caches)[0]) if isinstance(t, torch.Tensor)}


def _signature(
    leaves: list[Any], spec: TreeSpec, caches: Any, state: dict[int, int]
) -> tuple[TreeSpec, list[Leaf]]:
    """The step's inputs as a graph sees them; `leaves` and `spec` flatten them with whole=caches."""
    described: list[Leaf] = []
    for x in leaves:
        if x is caches:
            described.append(("caches",))
        elif isinstance(x, torch.Tensor):
            k = state.get(id(x))
            described.append(("cache", k) if k is not None else ("tensor", tuple(x.shape), x.dtype, x.device))
        else:
            described.append(("value", x))
    return spec, described


def _show_tensor(shape: tuple[int, ...], dtype: torch.dtype, device: torch.device) -> str:
    return f"a {shape} {str(dtype).removeprefix('torch.')} tensor on {device}"


def _show(leaf: Leaf) -> str:
    if leaf[0] == "caches":
        return "the caches"
    if leaf[0] == "cache":
        return f"cache tensor {leaf[1]}"
    if leaf[0] == "tensor":
        return _show_tensor(*leaf[1:])
    return f"the value {leaf[1]!r}"


def _difference(before: tuple[int, Any], after: tuple[int, Any]) -> str | None:
    """What changed between two steps' signatures, or None when a graph of one replays the other."""
    (s0, (spec0, leaves0)), (s1, (spec1, leaves1)) = before, after
    if spec0 != spec1:
        return f"the step's inputs changed structure between step {s0} and step {s1}"
    for i, (a, b) in enumerate(zip(leaves0, leaves1, strict=True)):
        same = a == b if a[0] != "value" else type(a[1]) is type(b[1]) and a[1] == b[1]
        if not same:
            return (
                f"input {i} (flattened order) was {_show(a)} at step {s0} and is {_show(b)} at step {s1}; "
                f"a graph replays fixed shapes, dtypes and Python values"
            )
    return None


class _Graph:
    """A captured step over static inputs, with the static caches it advances in place.

    `resident`: the input leaves read in place (the same tensor every step) instead of copied.
    """

    def __init__(
        self,
        model: Any,
        inputs: tuple,
        caches: Any,
        recorder: GraphRecorder,
        at: str,
        resident: frozenset[int] = frozenset(),
    ) -> None:
        leaves, self.spec = flatten(inputs, whole=caches)
        self.caches = caches
        state, state_spec = flatten(caches)
        self.state_index = _state_index(caches)
        self.resident = {i: leaves[i].data_ptr() for i in resident}
        # Every other tensor input but the caches gets a static buffer the per-step inputs are copied
        # into: the buffers of one dtype and device are views of one flat tensor, so that a step's
        # inputs are copied by one kernel a dtype (`torch.cat` into it), not one copy an input.
        state_index = self.state_index
        slots = [
            i
            for i, x in enumerate(leaves)
            if isinstance(x, torch.Tensor) and id(x) not in state_index and i not in resident
        ]
        self.static = list(leaves)
        kinds: dict[tuple[torch.dtype, torch.device], list[int]] = {}
        for i in slots:
            kinds.setdefault((leaves[i].dtype, leaves[i].device), []).append(i)
        self.groups: list[tuple[torch.Tensor, list[int]]] = []
        for (dtype, device), members in kinds.items():
            flat = torch.empty(sum(leaves[i].numel() for i in members), dtype=dtype, device=device)
            start = 0
            for i in members:
                n = leaves[i].numel()
                self.static[i] = flat[start : start + n].view(leaves[i].shape)
                start += n
            self.groups.append((flat, members))
        self._copy_in(leaves)
        static_inputs = unflatten(self.spec, self.static)

        def step() -> torch.Tensor:
            with donate(*distinct_tensors(state)):
                logits, nxt = run_step(model, static_inputs, caches, at=at)
            produced, produced_spec = flatten(nxt)
            _check_state(state, state_spec, produced, produced_spec)
            for dst, src in zip(state, produced, strict=True):
                if isinstance(dst, torch.Tensor) and src is not dst:
                    dst.copy_(src)
            return logits

        self.replay, self.logits = recorder.capture(step)

    def _copy_in(self, leaves: list[Any]) -> None:
        """The per-step tensors among the inputs' `leaves` into the static buffers."""
        for flat, members in self.groups:
            torch.cat([leaves[i].reshape(-1) for i in members], out=flat)

    def moved(self, leaves: list[Any]) -> list[int]:
        """The resident inputs `leaves` no longer holds in place: another tensor, or other memory."""
        return [
            i
            for i, ptr in self.resident.items()
            if leaves[i] is not self.static[i] or leaves[i].data_ptr() != ptr
        ]

    def run(self, leaves: list[Any]) -> torch.Tensor:
        """Copy the per-step tensors among the inputs' `leaves` into the static buffers and replay."""
        self._copy_in(leaves)
        self.replay()
        return self.logits


def distinct_tensors(leaves: list[Any]) -> list[torch.Tensor]:
    """The tensors among `leaves` that share memory with no other leaf (those a runner may donate)."""
    tensors = [x for x in leaves if isinstance(x, torch.Tensor)]
    storages = [t.untyped_storage().data_ptr() for t in tensors]
    return [t for t, s in zip(tensors, storages, strict=True) if storages.count(s) == 1]


def donate_caches(caches: Any) -> AbstractContextManager[None]:
    """Donate the caches' `distinct_tensors` for the step run inside: the caller drops `caches`
    for the ones the step returns."""
    return donate(*distinct_tensors(flatten(caches)[0]))


def _check_state(state: list[Any], spec: TreeSpec, produced: list[Any], produced_spec: TreeSpec) -> None:
    """The next caches must fit the given ones exactly and must not alias a different given one."""
    if produced_spec != spec:
        raise _Refusal("append_cache returned caches structured unlike the ones it was given")
    storages = {t.untyped_storage().data_ptr(): k for k, t in enumerate(state) if isinstance(t, torch.Tensor)}
    for k, (old, new) in enumerate(zip(state, produced, strict=True)):
        if isinstance(old, torch.Tensor) != isinstance(new, torch.Tensor):
            raise _Refusal(f"cache leaf {k} (flattened order) changes between tensor and Python value")
        if not isinstance(old, torch.Tensor):
            if old != new:
                raise _Refusal(f"cache leaf {k} (flattened order) changes from {old!r} to {new!r}")
            continue
        before, after = ((tuple(t.shape), t.dtype, t.device) for t in (old, new))
        if before != after:
            raise _Refusal(
                f"cache tensor {k} (flattened order) is {_show_tensor(*before)} before the step and "
                f"{_show_tensor(*after)} after it; a graph advances caches of fixed shape"
            )
        owner = storages.get(new.untyped_storage().data_ptr())
        if new is not old and owner is not None:
            raise _Refusal(
                f"the step's new cache tensor {k} shares memory with given cache tensor {owner}; copying "
                f"it back would overwrite state the copy still reads"
            )


class DecodeGraph:
    """Runs a generation's decode steps, from a captured CUDA graph once the steps qualify.

    Attributes:
        refusal: why the steps are not (or no longer) replayed from a graph; None while they may be.
        replays: how many steps ran as graph replays.
        capture_s: seconds spent capturing graphs.
    """

    def __init__(
        self,
        model: Any,
        device: torch.device | str,
        *,
        explicit: bool,
        recorder: GraphRecorder | None = None,
    ) -> None:
        """Decide whether the device allows graphs at all.

        Args:
            model: the causal-LM model generate drives (prepare_inputs_for_generation, forward,
                optionally append_cache).
            explicit: the caller asked for graphs; a refusal raises instead of running eagerly.
            recorder: how to capture and replay; defaults to CUDA graphs on `device`.

        Raises:
            GraphRefused: explicit, and the device cannot run a CUDA graph.
        """
        self.model = model
        self.device = torch.device(device)
        self.explicit = explicit
        self.recorder = recorder if recorder is not None else CudaGraphRecorder(self.device)
        self.refusal: str | None = None
        self.replays = 0
        self.capture_s = 0.0
        self._warm: tuple[int, Any] | None = None
        self._warm_leaves: list[Any] = []  # the warm-up step's tensor inputs, until the capture
        self._graph: _Graph | None = None
        reason = self.recorder.refusal(self.device)
        if reason is not None:
            self._refuse(reason, "the start")

    def step(self, ids: torch.Tensor, step: int, caches: Any) -> tuple[torch.Tensor, Any]:
        """The decode step at position `step` of the token IDs `ids`: (logits, the next caches).

        Raises:
            GraphRefused: explicit, and this step cannot be graphed (the reason is named).
            StepContractError: a model method broke the generation contract.
        """
        at = f"step {step}"
        inputs = prepare(
            self.model.prepare_inputs_for_generation, ids[: step + 1], step, caches, self.device, at=at
        )
        if self.refusal is None:
            try:
                if self._graph is not None:
                    return self._replay(inputs, caches, step)
                if self._warm is None:
                    return self._warm_up(inputs, caches, step)
                return self._capture(inputs, caches, step)
            except _Refusal as reason:
                self._refuse(str(reason), at)
        return run_step(self.model, inputs, caches, at=at)

    def _refuse(self, reason: str, at: str) -> None:
        if self.explicit:
            raise GraphRefused(
                f"generate: cuda_graph=True cannot be honored: {reason}",
                where=at,
                expected="decode steps a CUDA graph can replay",
                got=reason,
            )
        self.refusal = reason
        self._graph = None  # its memory pool goes with it

    def _warm_up(self, inputs: tuple, caches: Any, step: int) -> tuple[torch.Tensor, Any]:
        leaves, spec = flatten(inputs, whole=caches)
        elsewhere = [
            (i, x.device)
            for i, x in enumerate(leaves)
            if isinstance(x, torch.Tensor) and x.device.type != self.device.type
        ]
        if elsewhere:
            i, where = elsewhere[0]
            raise _Refusal(
                f"input {i} (flattened order) is on {where}, not {self.device.type}; a graph replays "
                f"device work only"
            )
        (logits, nxt), syncs = self.recorder.warm_up(
            lambda: run_step(self.model, inputs, caches, at=f"step {step}")
        )
        state = _state_index(caches)
        self._warm = (step, _signature(leaves, spec, caches, state))
        # kept until the capture to tell which inputs recur; not the caches, which a model that
        # does not update them in place would otherwise keep alive a step longer
        self._warm_leaves = [
            x if isinstance(x, torch.Tensor) and id(x) not in state else None for x in leaves
        ]
        if syncs:
            self._refuse(
                f"the step synchronizes with the host (at {', '.join(dict.fromkeys(syncs))}); a graph "
                f"cannot replay host work",
                f"step {step}",
            )
        return logits, nxt

    def _capture(self, inputs: tuple, caches: Any, step: int) -> tuple[torch.Tensor, Any]:
        assert self._warm is not None
        leaves, spec = flatten(inputs, whole=caches)
        state = _state_index(caches)
        current = (step, _signature(leaves, spec, caches, state))
        changed = _difference(self._warm, current)
        if changed:
            raise _Refusal(changed)
        warm, self._warm_leaves = self._warm_leaves, []
        resident = frozenset(
            i
            for i, (x, before) in enumerate(zip(leaves, warm, strict=True))
            if isinstance(x, torch.Tensor) and x is before and id(x) not in state
        )
        self._warm = current
        return self._record(inputs, caches, step, resident)

    def _record(
        self, inputs: tuple, caches: Any, step: int, resident: frozenset[int]
    ) -> tuple[torch.Tensor, Any]:
        """Capture the step (replacing any graph before it) and run it by the graph's first replay."""
        self._graph = None  # a graph replaced gives its memory pool back before the next is captured
        start = time.perf_counter()
        try:
            graph = _Graph(self.model, inputs, caches, self.recorder, f"step {step}", resident)
        except (_Refusal, StepContractError):
            raise
        except Exception as err:
            # The step already ran (the warm-up), so what fails here is the capture.
            raise _Refusal(f"capturing the step failed: {type(err).__name__}: {err}") from err
        self.capture_s += time.perf_counter() - start
        self._graph = graph
        graph.replay()  # capture records without running: this replay is the step itself
        self.replays += 1
        return graph.logits, graph.caches

    def _replay(self, inputs: tuple, caches: Any, step: int) -> tuple[torch.Tensor, Any]:
        assert self._graph is not None and self._warm is not None
        if caches is not self._graph.caches:
            raise _Refusal(f"step {step} was given caches other than the ones the graph advances")
        leaves, spec = flatten(inputs, whole=caches)
        changed = _difference(self._warm, (step, _signature(leaves, spec, caches, self._graph.state_index)))
        if changed:
            raise _Refusal(changed)
        moved = self._graph.moved(leaves)
        if moved:  # a resident input is another tensor now: copied from here on
            return self._record(inputs, caches, step, frozenset(self._graph.resident).difference(moved))
        logits = self._graph.run(leaves)
        self.replays += 1
        return logits, self._graph.caches
