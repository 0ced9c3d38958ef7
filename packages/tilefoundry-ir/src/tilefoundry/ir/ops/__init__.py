"""The op catalogue: importing this package fills the `infer` and `evaluate` registries."""

from . import contraction, creation, indexing, movement, nn, placement, pointwise, reduction  # noqa: F401
