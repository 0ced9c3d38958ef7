"""Parameter annotations: `Tensor[shape, dtype, *items]` and `ConstTensor[...]`.

    x: Tensor[(T, 2048), "bf16"]                  # an activation or state
    w: ConstTensor[(2048, 6144), "bf16"]          # a weight, loaded by name
    s: Tensor[(128, 64), "f32", "smem"]           # a storage item
    y: Tensor[(T, 2048), "bf16", mesh[S(0), B]]   # a layout or placement item

Subscripting builds a `TensorSpec` at once, so a bad annotation is refused on the `def` line.
"""

from __future__ import annotations

import typing
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..ir.dims import DimExpr, DimVar
from ..ir.dtypes import DTYPES, dtype_of
from ..ir.errors import DSLError
from ..ir.layout import Layout
from ..ir.shard import Placement, ShardLayout
from ..ir.types import Storage, TensorType, storage_of
from ._trace import user_loc

_STORAGE_NAMES = ", ".join(repr(s.value) for s in Storage if s is not Storage.UNDECIDED)
_FORM = 'Tensor[(dims...), "dtype", *items]'
_ITEM_KINDS = {Layout: "Layout", ShardLayout: "ShardLayout", Placement: "placement"}
_ITEMS = f"a storage name ({_STORAGE_NAMES}), a Layout, a ShardLayout, or a placement mesh[...]"


@dataclass(frozen=True)
class TensorSpec:
    """What an annotation declares: a tensor type, and whether it is a weight."""

    type: TensorType
    const: bool

    def __repr__(self) -> str:
        return f"{'ConstTensor' if self.const else 'Tensor'}{self.type}"


def _refuse(message: str, expected: object, got: object) -> DSLError:
    return DSLError(message, where=user_loc(), expected=expected, got=got)


def _shape(head: str, shape: object) -> tuple:
    if not isinstance(shape, (tuple, list)):
        raise _refuse(
            f"{head}: the shape must be a tuple of ints and DimVars, got {type(shape).__name__} {shape!r}",
            expected="a tuple such as (T, 2048) or (4,)",
            got=shape,
        )
    for d in shape:
        ok = isinstance(d, (DimVar, DimExpr)) or (isinstance(d, int) and not isinstance(d, bool) and d >= 0)
        if not ok:
            raise _refuse(
                f"{head}: shape {tuple(shape)!r} holds {d!r}; accepted: ints >= 0, DimVars, "
                f"and arithmetic over them",
                expected="int >= 0 or DimVar",
                got=d,
            )
    return tuple(shape)


def _items(head: str, shape: tuple, items: tuple) -> dict[str, Any]:
    """Storage and layout from the items; a Placement resolves against the shape (and a Layout)."""
    found: dict[type, Any] = {}
    for item in items:
        kind = str if isinstance(item, str) else next((k for k in _ITEM_KINDS if isinstance(item, k)), None)
        if kind is None:
            raise _refuse(
                f"{head}: item {item!r} is not a storage name, Layout, ShardLayout or mesh placement",
                expected=_ITEMS,
                got=item,
            )
        if kind in found:
            raise _refuse(
                f"{head}: two {_ITEM_KINDS.get(kind, 'storage')} items ({found[kind]!r} and {item!r}); "
                f"a tensor has at most one",
                expected=_ITEMS,
                got=(found[kind], item),
            )
        found[kind] = item
    out: dict[str, Any] = {}
    if str in found:
        try:
            out["storage"] = storage_of(found[str])
        except ValueError:
            raise _refuse(
                f"{head}: item {found[str]!r} is not a storage name; accepted: {_STORAGE_NAMES}, "
                f"or a Layout / ShardLayout / mesh placement",
                expected=_STORAGE_NAMES,
                got=found[str],
            ) from None
    if ShardLayout in found and (Layout in found or Placement in found):
        raise _refuse(
            f"{head}: a ShardLayout is complete; it takes no Layout or placement beside it",
            expected="a ShardLayout alone",
            got=items,
        )
    if Placement in found:
        out["layout"] = found[Placement].resolve(shape, found.get(Layout))
    elif Layout in found or ShardLayout in found:
        out["layout"] = found.get(Layout, found.get(ShardLayout))
    return out


def _spec(head: str, const: bool, key: object) -> TensorSpec:
    parts = key if isinstance(key, tuple) else (key,)
    if len(parts) < 2:
        raise _refuse(
            f"{head}[...] takes a shape and a dtype, got {key!r}; the form is {_FORM}",
            expected=_FORM,
            got=key,
        )
    shape = _shape(head, parts[0])
    try:
        dtype = dtype_of(parts[1])  # type: ignore[arg-type]
    except ValueError:
        raise _refuse(
            f"{head}: unknown dtype {parts[1]!r}; accepted: {' '.join(DTYPES)}",
            expected=" ".join(DTYPES),
            got=parts[1],
        ) from None
    return TensorSpec(TensorType(shape, dtype, **_items(head, shape, parts[2:])), const)


def _located(build: Callable[[], TensorSpec]) -> TensorSpec:
    # Layout and shard checks raise without a location; the annotation's line is the place.
    try:
        return build()
    except DSLError as err:
        raise err.at(user_loc()) from None


class Tensor:
    """Annotation of an activation or state parameter (and of results): `Tensor[shape, dtype, *items]`."""

    def __class_getitem__(cls, key: object) -> TensorSpec:
        return _located(lambda: _spec("Tensor", False, key))


class ConstTensor:
    """Annotation of a weight parameter: `ConstTensor[shape, dtype, *items]`, loaded by its name."""

    def __class_getitem__(cls, key: object) -> TensorSpec:
        return _located(lambda: _spec("ConstTensor", True, key))


def result_specs(annotation: object) -> tuple[TensorSpec, ...] | None:
    """The declared results of a return annotation: one spec, `tuple[spec, ...]`, or None if absent.

    Raises:
        DSLError: for anything else (without a location; the caller knows the `def` line).
    """
    if annotation is None:
        return None
    if isinstance(annotation, TensorSpec):
        return (annotation,)
    if typing.get_origin(annotation) is tuple:
        args = typing.get_args(annotation)
        if args and all(isinstance(a, TensorSpec) for a in args):
            return tuple(args)
    raise DSLError(
        f"return annotation {annotation!r} is not a tensor annotation",
        expected="Tensor[...] or tuple[Tensor[...], ...]",
        got=annotation,
    )
