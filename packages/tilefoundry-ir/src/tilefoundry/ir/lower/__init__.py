"""Lowering: one rule per op class turns an HIR node into TileIR (see `core`).

Importing this package registers every family's rules in the `lower` registry.
"""

from . import contraction, creation, movement, nn, pointwise, reduction  # noqa: F401
from .core import Compute, IndexCheck, Nest, NestContext, Operand, lower
from .function import lower_to_tile
from .inline import inline_calls

__all__ = [
    "Compute",
    "IndexCheck",
    "Nest",
    "NestContext",
    "Operand",
    "inline_calls",
    "lower",
    "lower_to_tile",
]
