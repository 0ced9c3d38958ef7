"""The loader: a LinkedModule (a built library + the EntryABI of each entry) -> CompiledModule.

`LinkedModule` and `load_linked_module` are internal; `CompiledModule` is public (seed 000
§1.1.3). Its forward implements the out-param calling convention (§1.2):

    f = load_linked_module(linked)          # binds the entry named by linked.entry
    y = f(x, w)                             # auto-alloc: outputs made from EntryABI.output_params
    f(x, w, out)                            # pre-alloc: fills `out`, returns it
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

        Raises:
            TypeError: a count that is neither, some but not all outputs, or a non-tensor argument.
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
        outputs = tuple(args[n_in:]) if len(args) == n_all else self._allocate(inputs)
        self.fn(*inputs, *outputs)
        return outputs[0] if len(outputs) == 1 else outputs

    def _allocate(self, inputs: tuple[torch.Tensor, ...]) -> tuple[torch.Tensor, ...]:
        abi = self.type
        device = inputs[0].device if inputs else torch.device("cpu")
        bindings = _bind_dims(abi, inputs)
        outs = []
        for p in abi.output_params:
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
