"""The op catalogue: importing this package fills the `infer` and `evaluate` registries."""

from . import pointwise  # noqa: F401
