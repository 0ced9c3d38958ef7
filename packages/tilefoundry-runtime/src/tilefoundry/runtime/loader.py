"""The loader: a LinkedModule (a built library + the EntryABI of each entry) -> CompiledModule.

`LinkedModule` and `load_linked_module` are internal; `CompiledModule` is public (seed 000
§1.1.3). Its forward implements the out-param calling convention (§1.2):

    f = load_linked_module(linked)          # binds the entry named by linked.entry
    y = f(x, w)                             # auto-alloc: outputs made from EntryABI.output_params
    f(x, w, out)                            # pre-alloc: fills `out`, returns it

An entry whose `EntryABI.updates` says output j is input i with a region rewritten (a KV-cache
update) may be passed that very input as output j. `donate` (donation.py) is how a caller asks:

    with donate(k_cache, v_cache):
        y, k_cache2, v_cache2 = f(x, pos, k_cache, v_cache)   # k_cache2 is k_cache, updated in place

Outside `donate` nothing changes: the old caches stay as they were (seed 000 §1.1.2).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from tilefoundry.ir.dims import DimVar, dim_vars, evaluate_dim

from .abi import ABI_VERSION, ABIError, EntryABI
from .donation import donated, take
from .function import RuntimeFunction
from .module import RuntimeModule


@dataclass(frozen=True)
class LinkedModule:
    """A library built from one module and the ABI of every function it exports.

    Attributes:
        library: the shared library file.
        entries: entry name -> EntryABI (inputs, then `output_count` out-params), in declaration order.
        entry: the entry a CompiledModule binds when none is named.
        target: the target that built it.
        returns_tuple: entry names whose function returns a tuple (even of one tensor).
    """

    library: Path
    entries: Mapping[str, EntryABI]
    entry: EntryABI
    target: str
    returns_tuple: frozenset[str] = frozenset()


@functools.cache
def _open(path: str) -> Any:
    import tvm_ffi

    return tvm_ffi.load_module(path)


def load_linked_module(linked: LinkedModule, name: str | None = None) -> CompiledModule:
    """Open `linked.library` with tvm-ffi and bind one entry (default: `linked.entry`).

    Raises:
        ABIError: the entry's ABI version is not this runtime's (both versions and the library
            path are named), or the library does not export the entry.
    """
    abi = linked.entries[name] if name is not None else linked.entry
    if abi.abi_version != ABI_VERSION:
        raise ABIError(
            f"entry {abi.name!r} of {linked.library} was built for ABI version {abi.abi_version}, "
            f"this runtime speaks version {ABI_VERSION}; rebuild it (clear the build cache)",
            where=str(linked.library),
            expected=ABI_VERSION,
            got=abi.abi_version,
        )
    lib = _open(str(linked.library))
    try:
        fn = lib[abi.name]
    except (AttributeError, KeyError) as e:
        raise ABIError(
            f"{linked.library} exports no entry {abi.name!r}",
            where=str(linked.library),
            expected=abi.name,
            got=None,
        ) from e
    return CompiledModule(type=abi, fn=fn, library=linked.library)


def _span(t: torch.Tensor) -> tuple[torch.device, int, int]:
    """The device and the byte range [first, last + 1) of `t`'s elements (empty: first == end)."""
    first = t.data_ptr()
    if t.numel() == 0:
        return t.device, first, first
    last = sum((n - 1) * abs(st) for n, st in zip(t.shape, t.stride(), strict=True))
    return t.device, first, first + (last + 1) * t.element_size()


def _overlap(a: torch.Tensor, b: torch.Tensor) -> bool:
    (da, a0, a1), (db, b0, b1) = _span(a), _span(b)
    return da == db and a0 < a1 and b0 < b1 and a0 < b1 and b0 < a1


def _same(a: torch.Tensor, b: torch.Tensor) -> bool:
    """`a` and `b` are one tensor's memory: same device, first byte, shape, strides and dtype."""
    return (
        _span(a) == _span(b) and a.shape == b.shape and a.stride() == b.stride() and a.dtype == b.dtype
    )


def _bind_dims(abi: EntryABI, inputs: tuple[torch.Tensor, ...]) -> dict[DimVar, int]:
    bindings: dict[DimVar, int] = {}
    for p, t in zip(abi.input_params, inputs, strict=True):
        for d, n in zip(p.type.shape, t.shape, strict=False):
            if isinstance(d, DimVar):
                bindings.setdefault(d, int(n))
    return bindings


class CompiledModule(RuntimeModule):
    """A compiled entry as a RuntimeModule (seed 000 §1.1.3); it stands for no authored Module.

    Attributes:
        type: the entry's EntryABI; its output_params give the dtype and shape of each output.
    """

    def __init__(self, type: EntryABI, fn: Callable[..., Any], library: Path | None = None) -> None:
        super().__init__(type.name, entry=type.name)
        self.type = type
        self.fn = fn
        self.library = library

    def forward(self, *args: Any) -> Any:
        """Call the entry: auto-alloc (inputs only) or pre-alloc (inputs and every output).

        Auto-alloc writes an output the entry updates in place into its input when that input is
        donated (`donate`), and returns it. Pre-alloc takes an output that is exactly the input it
        updates (`EntryABI.updates`) as asking for that.

        Raises:
            TypeError: a count that is neither, some but not all outputs, a non-tensor argument,
                or an output overlapping another parameter in memory (other than exactly the input
                it updates), naming both.
        """
        abi = self.type
        n_in, n_all = abi.input_count, len(abi.params)
        if len(args) not in (n_in, n_all):
            if n_in < len(args) < n_all:
                raise TypeError(
                    f"{abi.name}: got {len(args) - n_in} of {abi.output_count} outputs; pass every output "
                    f"({', '.join(p.name for p in abi.output_params)}) or none (auto-alloc)"
                )
            raise TypeError(
                f"{abi.name}: takes {n_in} inputs ({', '.join(p.name for p in abi.input_params)}), "
                f"optionally followed by its {abi.output_count} outputs, got {len(args)} arguments"
            )
        for p, a in zip(abi.params, args, strict=False):
            if not isinstance(a, torch.Tensor):
                raise TypeError(
                    f"{abi.name}: argument {p.name!r} must be a torch.Tensor, got {type(a).__name__}"
                )
        inputs = tuple(a if a.is_contiguous() else a.contiguous() for a in args[:n_in])
        if len(args) == n_all:
            outputs = tuple(args[n_in:])
            self._check_aliasing(inputs, outputs)
        else:
            outputs = self._allocate(inputs, self._donations(args[:n_in], inputs))
        self.fn(*inputs, *outputs)
        return outputs[0] if len(outputs) == 1 else outputs

    def _donations(self, given: tuple[Any, ...], inputs: tuple[torch.Tensor, ...]) -> dict[int, torch.Tensor]:
        """Output position -> the donated input it is written into (each taken from its `donate`)."""
        found: dict[int, torch.Tensor] = {}
        for j, i in self.type.updates.items():
            t = inputs[i]
            if t is not given[i] or not donated(t):
                continue  # a contiguous copy of a donated view is not the caller's tensor
            if any(_overlap(t, other) for k, other in enumerate(inputs) if k != i):
                continue
            take(t)
            found[j] = t
        return found

    def _check_aliasing(self, inputs: tuple[torch.Tensor, ...], outputs: tuple[torch.Tensor, ...]) -> None:
        """Refuse an output overlapping another parameter, unless it is exactly the input it updates."""
        abi = self.type
        params = (*inputs, *outputs)
        for j, out in enumerate(outputs):
            source = abi.updates.get(j)
            for k, other in enumerate(params[: abi.input_count + j]):
                if not _overlap(out, other) or (k == source and _same(out, other)):
                    continue
                name, other_name = abi.output_params[j].name, abi.params[k].name
                hint = (
                    f", or exactly {abi.params[source].name!r}, which it updates in place"
                    if source is not None
                    else ""
                )
                raise TypeError(
                    f"{abi.name}: output {name!r} overlaps parameter {other_name!r} in memory; pass a "
                    f"separate tensor{hint}"
                )

    def _allocate(
        self, inputs: tuple[torch.Tensor, ...], donated: Mapping[int, torch.Tensor]
    ) -> tuple[torch.Tensor, ...]:
        abi = self.type
        device = inputs[0].device if inputs else torch.device("cpu")
        bindings = _bind_dims(abi, inputs)
        outs = []
        for j, p in enumerate(abi.output_params):
            if j in donated:
                outs.append(donated[j])
                continue
            missing = [v.name for d in p.type.shape for v in dim_vars(d) if v not in bindings]
            if missing:
                raise TypeError(
                    f"{abi.name}: output {p.name!r} has extent {missing[0]} that no input determines; "
                    f"pass the outputs (pre-alloc)"
                )
            shape = tuple(evaluate_dim(d, bindings) for d in p.type.shape)
            outs.append(torch.empty(shape, dtype=p.type.dtype.torch, device=device))
        return tuple(outs)

    def __repr__(self) -> str:
        return f"CompiledModule({self.type}, library={self.library})"


class CompiledFunction(RuntimeFunction):
    """A compiled entry standing in for one @func in a twin: called with every declared parameter.

    Returns what the @func returns: a tuple when the function returns one, else a tensor.
    """

    def __init__(self, compiled: CompiledModule, returns_tuple: bool) -> None:
        super().__init__(compiled.type)
        self.compiled = compiled
        self.returns_tuple = returns_tuple

    def __call__(self, *args: Any) -> Any:
        out = self.compiled(*args)
        return (out,) if self.returns_tuple and not isinstance(out, tuple) else out
