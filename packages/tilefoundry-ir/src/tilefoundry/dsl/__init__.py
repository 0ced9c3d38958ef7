"""tilefoundry.dsl: the authoring surface.

    from tilefoundry.dsl import func, module, Tensor, ConstTensor, DimVar, Topology, Mesh, tf
"""

from ..ir.dims import DimVar
from ..ir.shard import Broadcast, Dynamic, Mesh, Partial, Split, Topology
from ._annotations import ConstTensor, Tensor
from ._func import func
from ._module import module

__all__ = [
    "Broadcast",
    "ConstTensor",
    "DimVar",
    "Dynamic",
    "Mesh",
    "Partial",
    "Split",
    "Tensor",
    "Topology",
    "func",
    "module",
]
