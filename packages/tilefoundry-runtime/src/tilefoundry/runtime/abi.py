"""The ABI records of a runtime function: `ParamABI`, `EntryABI` and their one derivation site.

An `EntryABI` lists every parameter of an entry, inputs first, then `output_count` trailing
output parameters. Each `ParamABI` carries the IR `TensorType` itself, so dtype, shape (with its
DimVars), layout and storage are never restated:

    entry_abi_of(mlp)         # EntryABI('mlp', (x: [(T, 2048), bf16], w_gate: ...), output_count=0)

A compiled entry may declare `updates`: output j equals input i except for a region the entry
writes, so output j may be passed the very tensor of input i (the compiler proves which, see
`tilefoundry.ir.plan.in_place`; `tilefoundry.runtime.donate` is how a caller asks for it):

    str(abi)   # attention(x: ..., k_cache: ... -> out0: ..., out1: ...; updates out1 <- k_cache)
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Protocol

from tilefoundry.ir.errors import TileFoundryError
from tilefoundry.ir.hir import Function
from tilefoundry.ir.types import TensorType

# Bumped whenever the meaning of an EntryABI's fields changes; a loader refuses a library built
# against another version, naming both.
ABI_VERSION = 1


class ABIError(TileFoundryError):
    """An ABI record that cannot stand: `where` names the entry and parameter."""


class _TypedVar(Protocol):
    name: str
    type: object


@dataclass(frozen=True)
class ParamABI:
    """One parameter of an entry: its name and its IR type (dtype/shape/layout/storage)."""

    name: str
    type: TensorType

    def __post_init__(self) -> None:
        if not isinstance(self.type, TensorType):
            raise ABIError(
                f"parameter {self.name!r}: an ABI parameter has a TensorType, got {type(self.type).__name__} "
                f"{self.type}",
                where=self.name,
                expected="TensorType",
                got=self.type,
            )

    def __str__(self) -> str:
        return f"{self.name}: {self.type}"


@dataclass(frozen=True)
class EntryABI:
    """The calling contract of one entry.

    Attributes:
        params: ALL parameters (inputs, then outputs) in declaration order.
        output_count: how many trailing `params` are output parameters; 0 for a
            value-returning implementation.
        abi_version: the ABI_VERSION the record was made under.
        updates: output position j -> input position i (both 0-based among the outputs and the
            inputs): output j equals input i except for a region the entry writes, and j may be
            passed the very tensor of input i. Output j and input i share one TensorType; no two
            outputs update one input. Empty for entries without such outputs.
    """

    name: str
    params: tuple[ParamABI, ...]
    output_count: int = 0
    abi_version: int = ABI_VERSION
    # NOTE: compared, not hashed: a mapping is unhashable, and equal records still hash equal.
    updates: Mapping[int, int] = field(default_factory=dict, hash=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "params", tuple(self.params))
        object.__setattr__(self, "updates", MappingProxyType(dict(sorted(dict(self.updates).items()))))
        for p in self.params:
            if not isinstance(p, ParamABI):
                raise ABIError(
                    f"entry {self.name!r}: params hold ParamABI records, got {type(p).__name__} {p!r}",
                    where=self.name,
                    expected="ParamABI",
                    got=p,
                )
        names = [p.name for p in self.params]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise ABIError(
                f"entry {self.name!r}: parameter names must be unique, {', '.join(map(repr, dup))} repeats",
                where=self.name,
                expected="unique parameter names",
                got=names,
            )
        if isinstance(self.output_count, bool) or not 0 <= self.output_count <= len(self.params):
            raise ABIError(
                f"entry {self.name!r}: output_count must lie in [0, {len(self.params)}], "
                f"got {self.output_count!r}",
                where=self.name,
                expected=f"0..{len(self.params)}",
                got=self.output_count,
            )
        self._check_updates()

    def _check_updates(self) -> None:
        for j, i in self.updates.items():
            ok = isinstance(j, int) and isinstance(i, int) and 0 <= j < self.output_count
            if not (ok and 0 <= i < self.input_count):
                raise ABIError(
                    f"entry {self.name!r}: updates maps output positions in [0, {self.output_count}) to "
                    f"input positions in [0, {self.input_count}), got {j!r} -> {i!r}",
                    where=self.name,
                    expected="output position -> input position",
                    got=dict(self.updates),
                )
            out, src = self.output_params[j], self.input_params[i]
            if out.type != src.type:
                raise ABIError(
                    f"entry {self.name!r}: output {out.name!r} updates input {src.name!r}, so it must have "
                    f"its type {src.type}, got {out.type}",
                    where=f"{self.name}.{out.name}",
                    expected=str(src.type),
                    got=str(out.type),
                )
        sources = list(self.updates.values())
        twice = sorted({self.input_params[i].name for i in sources if sources.count(i) > 1})
        if twice:
            raise ABIError(
                f"entry {self.name!r}: input {twice[0]!r} is updated by more than one output",
                where=self.name,
                expected="one output per updated input",
                got=dict(self.updates),
            )

    @property
    def input_count(self) -> int:
        """How many leading parameters are inputs: `len(params) - output_count`."""
        return len(self.params) - self.output_count

    @property
    def input_params(self) -> tuple[ParamABI, ...]:
        """The leading `input_count` parameters."""
        return self.params[: self.input_count]

    @property
    def output_params(self) -> tuple[ParamABI, ...]:
        """The trailing `output_count` parameters."""
        return self.params[self.input_count :]

    def __str__(self) -> str:
        ins = ", ".join(map(str, self.input_params))
        outs = ", ".join(map(str, self.output_params))
        updates = ", ".join(
            f"{self.output_params[j].name} <- {self.input_params[i].name}" for j, i in self.updates.items()
        )
        return f"{self.name}({ins}{' -> ' + outs if outs else ''}{'; updates ' + updates if updates else ''})"


def param_abi_of(var: _TypedVar) -> ParamABI:
    """The ParamABI of a typed variable (a HIR `Param`, or a lowered buffer with `name`/`type`).

    This is the single derivation site: codegen's host-entry ABI and `entry_abi_of` both call it.

    Raises:
        ABIError: the variable's type is not a single TensorType (e.g. a tuple type).
    """
    if not isinstance(var.type, TensorType):
        raise ABIError(
            f"parameter {var.name!r}: only a tensor crosses the ABI, got type {var.type}",
            where=var.name,
            expected="TensorType",
            got=var.type,
        )
    return ParamABI(var.name, var.type)


def entry_abi_of(fn: Function) -> EntryABI:
    """The EntryABI of a HIR Function: one ParamABI per declared parameter, output_count=0.

    Weights are parameters like any other here; a compiled entry with out-params gets its
    EntryABI from lowered IR instead.
    """
    if not isinstance(fn, Function):
        raise TypeError(f"entry_abi_of takes a HIR Function, got {type(fn).__name__} {fn!r}")
    return EntryABI(fn.name, tuple(param_abi_of(p) for p in fn.params))
