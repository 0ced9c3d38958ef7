"""Hooks of the cuda target: per-arch catalogs, the nvcc/GPU probe, CUDA C++ codegen and the nvcc builder.

Compile options read here: "arch" ("sm_80", "sm_90", "sm_90a") selects the catalog and the
code built; without it, the GPU's arch when one of at least sm_80 is present, else sm_90a.
"portable": True also builds sm_80 code into the library (build.py).
"""

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tilefoundry.ir.target import Availability, LinkedLibrary, Sources, TargetCatalog, hookimpl

from . import build, emit
from .catalog import ARCHS, DEFAULT_ARCH, NAME, arch_catalog
from .probe import cuda_facts, probe


def _arch(options: Mapping[str, Any]) -> str:
    gpu = cuda_facts().gpu
    default = gpu.arch if gpu is not None and gpu.arch in ARCHS else DEFAULT_ARCH
    return options.get("arch", default)


@hookimpl
def tilefoundry_target_name() -> str:
    return NAME


@hookimpl
def tilefoundry_target_catalog(options: Mapping[str, Any]) -> TargetCatalog:
    return arch_catalog(_arch(options), cuda_facts().gpu)


@hookimpl
def tilefoundry_probe() -> Availability:
    return probe(cuda_facts())


@hookimpl
def tilefoundry_codegen(scheduled: Any, options: Mapping[str, Any]) -> Sources:
    return emit.codegen(scheduled, options)


@hookimpl
def tilefoundry_builder(sources: Sources, options: Mapping[str, Any], cache_dir: Path) -> LinkedLibrary:
    return build.build(sources, options, cache_dir, _arch(options))
