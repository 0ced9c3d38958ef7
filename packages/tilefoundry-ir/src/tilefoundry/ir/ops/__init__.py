"""The op catalogue: importing this package fills the `infer` and `evaluate` registries."""

from . import contraction, indexing, movement, pointwise, reduction  # noqa: F401
