"""Tensor types: shape (ints and DimVars), dtype, layout, storage."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any

from .dims import Dim, DimExpr, DimVar, dims_equal, format_dim
from .dtypes import DType, dtype_of


class Storage(enum.Enum):
    """Where a tensor lives; UNDECIDED is resolved by planning before codegen."""

    UNDECIDED = "undecided"
    HOST = "host"
    GMEM = "gmem"
    SMEM = "smem"
    RMEM = "rmem"


def storage_of(x: str | Storage) -> Storage:
    """The Storage named by `x`; ValueError names the accepted names."""
    if isinstance(x, Storage):
        return x
    for s in Storage:
        if s.value == x:
            return s
    raise ValueError(f"unknown storage {x!r}; accepted: {', '.join(s.value for s in Storage)}")


def _check_dim(d: object) -> Dim:
    if isinstance(d, bool) or not isinstance(d, (int, DimVar, DimExpr)):
        raise TypeError(f"a shape holds ints and DimVars, got {type(d).__name__} {d!r}")
    if isinstance(d, int) and d < 0:
        raise ValueError(f"a shape extent must be >= 0, got {d}")
    return d


@dataclass(frozen=True)
class TensorType:
    """The type of a tensor value.

    Args:
        shape: extents, each an int, a DimVar, or arithmetic over DimVars.
        dtype: a DType or its name.
        layout: None (planner decides), a `Layout`, or a `ShardLayout`.
        storage: a Storage or its name; UNDECIDED until planning.
    """

    shape: tuple[Dim, ...]
    dtype: DType
    layout: Any = None
    storage: Storage = field(default=Storage.UNDECIDED)

    def __post_init__(self) -> None:
        object.__setattr__(self, "shape", tuple(_check_dim(d) for d in self.shape))
        object.__setattr__(self, "dtype", dtype_of(self.dtype))
        object.__setattr__(self, "storage", storage_of(self.storage))

    @property
    def rank(self) -> int:
        return len(self.shape)

    def with_(self, **changes: Any) -> TensorType:
        """A copy with some fields replaced."""
        return TensorType(**{**self.__dict__, **changes})

    def same_shape(self, other: TensorType) -> bool:
        """Shapes equal after canonicalizing each extent."""
        if self.rank != other.rank:
            return False
        return all(dims_equal(a, b) for a, b in zip(self.shape, other.shape, strict=True))

    def __str__(self) -> str:
        dims = ", ".join(format_dim(d) for d in self.shape)
        text = f"({dims}{',' if self.rank == 1 else ''}), {self.dtype}"
        if self.layout is not None:
            text += f", {self.layout}"
        if self.storage is not Storage.UNDECIDED:
            text += f", {self.storage.value}"
        return f"[{text}]"
