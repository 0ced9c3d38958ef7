"""The op catalogue: importing this package fills the `infer` and `evaluate` registries."""

from . import contraction, pointwise, reduction  # noqa: F401
