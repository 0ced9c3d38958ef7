"""Runtime resources: where weights are read from, with checkpoint aliasing (seed 000 §1.5).

A resource resolves a declared weight name to a raw checkpoint key and reads that tensor. Every
resource takes an alias table `{canonical: raw}` and resolves a name in one order:

1. the path-qualified entry `f"{prefix}{name}"` (one instance: `"layers.0.w_kv"`),
2. the bare entry `name` (every instance at that level: `"gamma_kv"`),
3. identity: the raw key is `f"{prefix}{name}"` unchanged.

An alias value is a `str` (renames one segment or leaf within the scope: the raw key is
`f"{prefix}{value}"`), a `tuple[str, ...]` (a one-to-many group, read with `load_group`),
an `Absolute` (the whole raw key, no prefix) or a `Preprocessed` (one raw tensor and the read
that turns it into the declared form). A resource never stacks and never casts: a read keeps
the element type the checkpoint stores.
"""

from __future__ import annotations

import copy
import json
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Protocol, Self, runtime_checkable

import torch
from safetensors import safe_open


@dataclass(frozen=True)
class Absolute:
    """An alias value naming the whole raw key: no scope prefix is joined onto it.

    It lets a node read a tensor its parent owns, e.g. `{"gamma": Absolute("model.norm.weight")}`.
    It is a leaf form: `subtree` rejects it and `load_group` reads it as one-to-one.
    """

    name: str

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise TypeError(f"Absolute: name must be a non-empty str, got {self.name!r}")


@dataclass(frozen=True)
class Preprocessed:
    """An alias value: one raw tensor and the read that turns it into the declared form.

    For a checkpoint that stores the tensor differently from the declaration (a transpose, a
    slice of a fused tensor, a dropped axis). The read must keep the element type.

    Raises:
        TypeError: for a tuple name; a value built from several raw tensors is a weight
            converter's job, run by prepare.
    """

    name: str | Absolute
    read: Callable[[torch.Tensor], torch.Tensor]

    def __post_init__(self) -> None:
        if isinstance(self.name, tuple):
            raise TypeError(
                f"Preprocessed: name {self.name!r} is a tuple, but a read transforms exactly one raw "
                "tensor; express a value built from several raw tensors as a weight converter "
                "(@fn.converter, run by Module.prepare)"
            )
        if not isinstance(self.name, str | Absolute):
            raise TypeError(
                f"Preprocessed: name must be a str or an Absolute, got {type(self.name).__name__}"
            )
        if not callable(self.read):
            raise TypeError(f"Preprocessed: read must be callable, got {type(self.read).__name__}")


AliasValue = str | tuple[str, ...] | Absolute | Preprocessed


@runtime_checkable
class RuntimeResource(Protocol):
    """What a RuntimeModule and Module.load read weights from."""

    def load(self, name: str) -> torch.Tensor:
        """The tensor for `name`; KeyError if absent, TypeError if it is a one-to-many alias."""
        ...

    def load_group(self, name: str) -> tuple[torch.Tensor, ...] | None:
        """The raw tensors of a one-to-many alias, in declared order; None for any other name."""
        ...

    def subtree(self, seg: str) -> RuntimeResource:
        """A view scoped under one more (alias-resolved) path segment."""
        ...


def _validated_alias(alias: Mapping[str, AliasValue] | None) -> Mapping[str, AliasValue]:
    table = dict(alias or {})
    for key, value in table.items():
        if not isinstance(key, str):
            raise TypeError(f"alias key {key!r} must be a str, got {type(key).__name__}")
        if isinstance(value, tuple):
            if not value:
                raise ValueError(f"alias[{key!r}] is an empty tuple; a group names at least one raw tensor")
            if not all(isinstance(part, str) for part in value):
                raise TypeError(f"alias[{key!r}] = {value!r}: a group holds raw names (str) only")
        elif not isinstance(value, str | Absolute | Preprocessed):
            raise TypeError(
                f"alias[{key!r}] is {type(value).__name__}, expected a str, a tuple of str, "
                "an Absolute or a Preprocessed"
            )
    return MappingProxyType(table)


def _kind(value: AliasValue) -> str:
    return "a tuple group" if isinstance(value, tuple) else type(value).__name__


class _AliasedResource(ABC):
    """The alias model shared by every resource: lookup order, load, load_group, subtree.

    A subclass supplies `_read(key)` (the raw tensor or None when absent) and `_source()`.
    A subtree view is a shallow copy with a longer prefix, so it shares the alias table and
    whatever the subclass holds (open shard handles included).
    """

    prefix: str
    alias: Mapping[str, AliasValue]

    def __init__(self, prefix: str, alias: Mapping[str, AliasValue] | None) -> None:
        if not isinstance(prefix, str):
            raise TypeError(f"{type(self).__name__}: prefix must be a str, got {type(prefix).__name__}")
        # Names are joined as f"{prefix}{name}", so a non-empty prefix ends in a dot.
        self.prefix = prefix if not prefix or prefix.endswith(".") else prefix + "."
        self.alias = _validated_alias(alias)

    @abstractmethod
    def _read(self, key: str) -> torch.Tensor | None:
        """The raw tensor stored under `key`, or None when there is none."""

    @abstractmethod
    def _source(self) -> str:
        """What is read from, for messages: "checkpoint '/ckpt'"."""

    def _lookup(self, name: str) -> AliasValue | None:
        qualified = f"{self.prefix}{name}"
        if qualified in self.alias:
            return self.alias[qualified]
        return self.alias.get(name)

    def _key(self, target: str | Absolute) -> str:
        return target.name if isinstance(target, Absolute) else f"{self.prefix}{target}"

    def _fetch(self, key: str, name: str) -> torch.Tensor:
        tensor = self._read(key)
        if tensor is None:
            scope = f"scope {self.prefix!r}" if self.prefix else "the root scope"
            raise KeyError(f"{key!r} is not in {self._source()} (looked up {name!r} in {scope})")
        return tensor

    def load(self, name: str) -> torch.Tensor:
        """The tensor for `name`, resolved through the alias table, as the checkpoint stores it.

        Raises:
            KeyError: naming the missing raw key and the scope it was looked up in.
            TypeError: when `name` resolves to a one-to-many group (use `load_group`).
            ValueError: when a Preprocessed read changes the element type.
        """
        value = self._lookup(name)
        if isinstance(value, tuple):
            raise TypeError(
                f"load({name!r}): the alias resolves to a one-to-many group of {len(value)} raw tensors "
                f"{value!r}; read it with load_group({name!r})"
            )
        if not isinstance(value, Preprocessed):
            return self._fetch(self._key(name if value is None else value), name)
        key = self._key(value.name)
        raw = self._fetch(key, name)
        out = value.read(raw)
        if not isinstance(out, torch.Tensor):
            raise TypeError(f"load({name!r}): the Preprocessed read of {key!r} returned {type(out).__name__}")
        if out.dtype != raw.dtype:
            raise ValueError(
                f"load({name!r}): the Preprocessed read of {key!r} changed the element type from "
                f"{raw.dtype} to {out.dtype}; precision is not preprocessing, declare it with a weight "
                "converter"
            )
        return out

    def load_group(self, name: str) -> tuple[torch.Tensor, ...] | None:
        """The raw tensors of a one-to-many alias, in declared order; None for any other name.

        Raises:
            KeyError: naming a member's missing raw key and the scope.
        """
        value = self._lookup(name)
        if not isinstance(value, tuple):
            return None
        return tuple(self._fetch(self._key(part), name) for part in value)

    def subtree(self, seg: str) -> Self:
        """A view scoped under `seg` (itself alias-resolved); names below it are bare.

        Raises:
            TypeError: when `seg` resolves to a tuple group, an Absolute or a Preprocessed: a
                subtree segment must resolve to one relative path.
        """
        value = self._lookup(seg)
        if value is not None and not isinstance(value, str):
            raise TypeError(
                f"subtree({seg!r}): the alias resolves to {_kind(value)} {value!r}; a subtree segment "
                "must resolve to one relative path (a str alias)"
            )
        view = copy.copy(self)
        view.prefix = f"{self.prefix}{seg if value is None else value}."
        return view

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._source()}, prefix={self.prefix!r})"


class DictResource(_AliasedResource):
    """An in-memory resource over a flat, dot-keyed mapping `{"layer0.w": tensor, ...}`.

    Tensors come back as stored (same object, device and dtype). `subtree` only extends the
    prefix names are joined onto, carrying the alias table down.

    Example:
        >>> res = DictResource({"layers.0.w": w}, alias={"gamma": "norm.weight"})
        >>> res.subtree("layers").subtree("0").load("w") is w
    """

    def __init__(
        self,
        data: Mapping[str, torch.Tensor],
        prefix: str = "",
        alias: Mapping[str, AliasValue] | None = None,
    ) -> None:
        if not isinstance(data, Mapping):
            raise TypeError(
                f"DictResource: data must be a mapping of name to tensor, got {type(data).__name__}"
            )
        for key, value in data.items():
            if not isinstance(value, torch.Tensor):
                raise TypeError(
                    f"DictResource: data[{key!r}] is {type(value).__name__}, expected a torch.Tensor"
                )
        super().__init__(prefix, alias)
        self._data = data

    def _read(self, key: str) -> torch.Tensor | None:
        return self._data.get(key)

    def _source(self) -> str:
        return f"the DictResource of {len(self._data)} tensors"


_INDEX = "model.safetensors.index.json"
_SINGLE = "model.safetensors"


class _Checkpoint:
    """One checkpoint directory: its weight map and its open shard handles, shared by views."""

    def __init__(self, ckpt_dir: Path, device: str) -> None:
        self.dir = ckpt_dir
        self.device = device
        self._handles: dict[str, safe_open] = {}
        if not ckpt_dir.is_dir():
            raise FileNotFoundError(
                f"SafetensorsResource: checkpoint directory {str(ckpt_dir)!r} does not exist"
            )
        index = ckpt_dir / _INDEX
        if index.is_file():
            self.weight_map = self._read_index(index)
        elif (ckpt_dir / _SINGLE).is_file():
            # An unsharded checkpoint is its own index: its key list is the weight map.
            self.weight_map = dict.fromkeys(self._handle(_SINGLE).keys(), _SINGLE)
        else:
            held = sorted(p.name for p in ckpt_dir.iterdir())
            raise FileNotFoundError(
                f"SafetensorsResource: {str(ckpt_dir)!r} holds neither {_INDEX} (a sharded checkpoint) "
                f"nor {_SINGLE} (an unsharded one); it holds: {', '.join(held) or 'nothing'}"
            )

    def _read_index(self, index: Path) -> dict[str, str]:
        try:
            weight_map = json.loads(index.read_text()).get("weight_map")
        except (json.JSONDecodeError, AttributeError) as err:
            raise ValueError(f"SafetensorsResource: {str(index)!r} is not a JSON object: {err}") from None
        if not isinstance(weight_map, dict) or not all(isinstance(v, str) for v in weight_map.values()):
            raise ValueError(
                f"SafetensorsResource: {str(index)!r} has no 'weight_map' object of key -> shard file name"
            )
        for shard in sorted(set(weight_map.values())):
            if not (self.dir / shard).is_file():
                raise FileNotFoundError(
                    f"SafetensorsResource: {str(index)!r} names shard {shard!r}, which is not in "
                    f"{str(self.dir)!r}"
                )
        return weight_map

    def _handle(self, shard: str) -> safe_open:
        # NOTE: one mmap'd handle per shard file for the life of the resource and all its views.
        if shard not in self._handles:
            self._handles[shard] = safe_open(str(self.dir / shard), framework="pt", device=self.device)
        return self._handles[shard]

    def read(self, key: str) -> torch.Tensor | None:
        shard = self.weight_map.get(key)
        return None if shard is None else self._handle(shard).get_tensor(key)


class SafetensorsResource(_AliasedResource):
    """A resource over a safetensors checkpoint directory, read lazily onto `device`.

    The directory holds either shards and a `model.safetensors.index.json` whose weight_map
    names the shard of each key, or one unsharded `model.safetensors`. Each shard file is
    opened once (mmap'd) and shared by every subtree view; only requested tensors are read.

    Raises:
        FileNotFoundError: for a missing directory, one holding neither layout, or a shard the
            index names that is absent.
        ValueError: for an index that is not JSON or lacks a weight_map.
    """

    def __init__(
        self,
        ckpt_dir: str,
        prefix: str = "",
        device: str = "cuda",
        alias: Mapping[str, AliasValue] | None = None,
    ) -> None:
        super().__init__(prefix, alias)
        self._ckpt = _Checkpoint(Path(ckpt_dir), str(device))

    @property
    def device(self) -> str:
        """Where tensors are placed when read."""
        return self._ckpt.device

    def _read(self, key: str) -> torch.Tensor | None:
        return self._ckpt.read(key)

    def _source(self) -> str:
        return f"checkpoint {str(self._ckpt.dir)!r}"
