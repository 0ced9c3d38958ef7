"""Placement ops: reshard (give a value a layout and/or storage) and local (one instance's part).

The reference evaluator holds every value whole (the global view), so `reshard` leaves values
unchanged, and `local` cuts out the block one execution instance owns (seed 000 §2.10). Which
instance: the one whose program ids `evaluating_instance` sets, every id 0 by default.

    reshard(x: [(8, 16), f32], layout=mesh[Split(0)])   -> [(8, 16), f32, ShardLayout(...)]
    local(x: [(8, 16), f32, ShardLayout(... cta=4 ...)]) -> [(2, 16), f32, ((2,1),16):((16,32),1)]
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import torch

from ..dims import dims_equal
from ..errors import DSLError, EvalError
from ..layout import Layout, flatten, product
from ..shard import Placement, ShardLayout
from ..types import Storage, TensorType, storage_of
from .base import Op, evaluate, infer
from .operands import format_shape


@dataclass(frozen=True)
class PlacementOp(Op):
    """Base of ops that change where a value lives, not what it is."""


# ---------------------------------------------------------------- reshard


@dataclass(frozen=True)
class Reshard(PlacementOp):
    """x with a new `layout` and/or `storage` (seed 000 §2); the values are unchanged.

    `layout` is a `Layout`, a canonical `ShardLayout`, or a placement `mesh[...]` (resolved
    against x's shape); its global extents must equal x's shape. `storage` is a Storage or
    its name (host gmem smem rmem). At least one of the two is given; the other stays x's.
    """

    name = "reshard"
    inputs = ("x",)
    layout: Any = None
    storage: Storage | None = None

    def __post_init__(self) -> None:
        if self.storage is not None:
            object.__setattr__(self, "storage", storage_of(self.storage))


def _mode_sizes(layout: Layout | ShardLayout) -> tuple:
    if isinstance(layout, ShardLayout):
        return layout.global_extents()
    return tuple(mode.size for mode in layout)


@infer.register(Reshard)
def _infer_reshard(op: Reshard, x: TensorType) -> TensorType:
    if op.layout is None and op.storage is None:
        raise DSLError(
            "reshard: give layout=, storage= or both, got neither", expected="layout or storage", got=None
        )
    layout = op.layout.resolve(x.shape) if isinstance(op.layout, Placement) else op.layout
    if layout is not None:
        if not isinstance(layout, (Layout, ShardLayout)):
            raise DSLError(
                f"reshard: layout must be a Layout, a ShardLayout or a placement mesh[...], "
                f"got {type(layout).__name__} {layout!r}",
                expected="Layout | ShardLayout | mesh[...]",
                got=type(layout).__name__,
            )
        sizes = _mode_sizes(layout)
        if len(sizes) != x.rank or not all(dims_equal(a, b) for a, b in zip(sizes, x.shape, strict=True)):
            raise DSLError(
                f"reshard: layout {layout} covers a tensor of shape {format_shape(sizes)}, x has "
                f"{format_shape(x.shape)}",
                expected=format_shape(x.shape),
                got=format_shape(sizes),
            )
    return TensorType(
        x.shape,
        x.dtype,
        layout=x.layout if layout is None else layout,
        storage=x.storage if op.storage is None else op.storage,
    )


@evaluate.register(Reshard)
def _eval_reshard(op: Reshard, x: torch.Tensor) -> torch.Tensor:
    return x


# ---------------------------------------------------------------- local

_PROGRAM_IDS: contextvars.ContextVar[Mapping[str, int] | None] = contextvars.ContextVar(
    "tilefoundry_program_ids", default=None
)


@contextlib.contextmanager
def evaluating_instance(program_ids: Mapping[str, int]) -> Iterator[None]:
    """Scope in which the evaluator's `local` plays the instance with these program ids.

    `program_ids` maps topology names to ids (`{"cta": 3}`); a topology left out has id 0.
    """
    token = _PROGRAM_IDS.set(dict(program_ids))
    try:
        yield
    finally:
        _PROGRAM_IDS.reset(token)


@dataclass(frozen=True)
class Local(PlacementOp):
    """The part of a sharded x that one execution instance owns (seed 000 §2.10 `local()`).

    `layout` is x's ShardLayout (tf.local copies it from x's type, so the evaluator, which sees
    only tensors, knows the cut); it has no Dynamic attribute. The result's shape is the
    layout's local extents (each split leaf counts 1), its layout `Layout(local_shape, S)`.
    """

    name = "local"
    inputs = ("x",)
    layout: ShardLayout | None = None


@infer.register(Local)
def _infer_local(op: Local, x: TensorType) -> TensorType:
    sl = op.layout
    if not isinstance(sl, ShardLayout):
        raise DSLError(
            f"local: x must carry a ShardLayout, got layout {sl}; place x first with "
            "tf.reshard(x, layout=mesh[...])",
            expected="a ShardLayout",
            got=sl,
        )
    if x.layout != sl:
        raise DSLError(f"local: x has layout {x.layout}, the op cuts {sl}", expected=sl, got=x.layout)
    return TensorType(sl.local_extents(), x.dtype, layout=sl.local_layout(), storage=x.storage)


def _leaf_sizes(leaves: tuple, extent: int) -> list[int]:
    """The int extent of each leaf of a mode; one symbolic leaf is solved from the mode's `extent`."""
    unknown = [i for i, s in enumerate(leaves) if not isinstance(s, int)]
    if len(unknown) > 1:
        raise EvalError(
            f"local: a mode with leaves {leaves} has {len(unknown)} symbolic leaves; only one can be "
            "solved from the tensor's extent",
            expected="at most one symbolic leaf",
            got=len(unknown),
        )
    sizes = [s if isinstance(s, int) else 1 for s in leaves]
    if unknown:
        sizes[unknown[0]] = extent // product(tuple(sizes))
    return sizes


@evaluate.register(Local)
def _eval_local(op: Local, x: torch.Tensor) -> torch.Tensor:
    sl = op.layout
    assert sl is not None
    ids = {t.name: 0 for t in sl.mesh.topologies} | dict(_PROGRAM_IDS.get() or {})
    coord = sl.mesh.local_index(ids)
    split = sl.split_positions()
    # View each mode's leaves as torch dims (CuTe modes are colexicographic: first leaf fastest,
    # so a row-major view lists them reversed), then keep one index of every split leaf.
    view: list[int] = []
    picks: dict[int, int] = {}
    local: list[int] = []
    first = 0
    for k, mode in enumerate(sl.layout):
        leaves = flatten(mode.shape)
        sizes = _leaf_sizes(leaves, x.shape[k])
        kept = 1
        for j in reversed(range(len(leaves))):
            if first + j in split:
                picks[len(view)] = coord[split[first + j]]
            else:
                kept *= sizes[j]
            view.append(sizes[j])
        local.append(kept)
        first += len(leaves)
    out = x.reshape(view)
    for dim, index in picks.items():
        out = out.narrow(dim, index, 1)
    return out.reshape(local)
