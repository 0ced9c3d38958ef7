"""Hooks of the cuda target: per-arch catalogs and the nvcc/GPU probe.

Compile options read here: "arch" ("sm_80", "sm_90", "sm_90a") selects the catalog; without
it, the GPU's arch when one of at least sm_80 is present, else sm_90a.
"""

from collections.abc import Mapping
from typing import Any

from tilefoundry.ir.target import Availability, TargetCatalog, hookimpl

from .catalog import ARCHS, DEFAULT_ARCH, NAME, arch_catalog
from .probe import cuda_facts, probe


@hookimpl
def tilefoundry_target_name() -> str:
    return NAME


@hookimpl
def tilefoundry_target_catalog(options: Mapping[str, Any]) -> TargetCatalog:
    gpu = cuda_facts().gpu
    default = gpu.arch if gpu is not None and gpu.arch in ARCHS else DEFAULT_ARCH
    return arch_catalog(options.get("arch", default), gpu)


@hookimpl
def tilefoundry_probe() -> Availability:
    return probe(cuda_facts())
