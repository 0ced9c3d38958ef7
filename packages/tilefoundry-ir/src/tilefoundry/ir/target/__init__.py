"""The target plugin contract: hook specs, the catalog schema, compile options, and the registry.

    from tilefoundry.ir.target import get_target, installed_targets
    installed_targets()                  # ('cpu', 'cuda', ...)
    get_target("cpu").availability       # can_compile / can_run / reasons
    get_target("cpu").accepted_options   # {'vectorize': Option(...), ..., 'isa': Option(...)}
"""

from .artifacts import LinkedLibrary, Sources
from .availability import Availability
from .catalog import (
    SCHEMA_VERSION,
    Atom,
    CopyAtom,
    ExecAxis,
    MmaAtom,
    PeakRates,
    ReductionAtom,
    Resource,
    SyncAtom,
    TargetCatalog,
    VectorAtom,
)
from .hookspecs import hookimpl, hookspec
from .options import PLANNER_OPTIONS, Option
from .registry import GROUP, Target, get_target, installed_targets

__all__ = [
    "GROUP",
    "PLANNER_OPTIONS",
    "SCHEMA_VERSION",
    "Atom",
    "Availability",
    "CopyAtom",
    "ExecAxis",
    "LinkedLibrary",
    "MmaAtom",
    "Option",
    "PeakRates",
    "ReductionAtom",
    "Resource",
    "Sources",
    "SyncAtom",
    "Target",
    "TargetCatalog",
    "VectorAtom",
    "get_target",
    "hookimpl",
    "hookspec",
    "installed_targets",
]
