"""tilefoundry.dsl: the authoring surface.

    from tilefoundry.dsl import func, module, Tensor, ConstTensor, DimVar, Topology, Mesh, tf

Dtypes are accepted by name (`Tensor[(T, 4), "f32"]`) or as values (`Tensor[(T, 4), f32]`);
code checked by a linter uses the values, because pyflakes reads a string inside an annotation
as a forward reference to a name.
"""

from ..ir.dims import DimVar
from ..ir.dtypes import bf16, boolean, f16, f32, f64, fp8e4m3, fp8e5m2, i8, i16, i32, i64, u8
from ..ir.shard import Broadcast, Dynamic, Mesh, Partial, Split, Topology
from . import tf
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
    "bf16",
    "boolean",
    "f16",
    "f32",
    "f64",
    "fp8e4m3",
    "fp8e5m2",
    "func",
    "i8",
    "i16",
    "i32",
    "i64",
    "module",
    "tf",
    "u8",
]
