"""Hooks of the cuda target: per-arch catalogs, the nvcc/GPU probe, its options, CUDA C++ codegen and builds.

Its compile options are declared in options.py. Option "arch" selects the catalog and the code
built; unset, the GPU's arch when one of at least sm_80 is present, else sm_90a.
"""

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from tilefoundry.ir.target import Availability, LinkedLibrary, Option, Sources, TargetCatalog, hookimpl

from . import build, emit
from .catalog import ARCHS, DEFAULT_ARCH, NAME, arch_catalog
from .options import ARCH, OPTIONS
from .probe import cuda_facts, probe


def _arch(options: Mapping[str, Any]) -> str:
    gpu = cuda_facts().gpu
    default = gpu.arch if gpu is not None and gpu.arch in ARCHS else DEFAULT_ARCH
    return ARCH.read(options) or default


@hookimpl
def tilefoundry_target_name() -> str:
    return NAME


@hookimpl
def tilefoundry_target_options() -> Sequence[Option]:
    return OPTIONS


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
