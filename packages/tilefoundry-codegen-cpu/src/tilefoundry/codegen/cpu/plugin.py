"""Hooks of the cpu target: catalog and probe from the host's facts; codegen and builder.

Compile options read here: "isa" ("avx512", "avx2", "sse2", "neon") describes a narrower
vector ISA than the host's widest; "vector_math" (default True: glibc's libmvec, <= 4 ulp;
False: scalar glibc math, <= 1 ulp, not vectorized) is checked with the catalog, before planning.
"""

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tilefoundry.ir.target import Availability, LinkedLibrary, Sources, TargetCatalog, hookimpl

from . import build, emit
from .catalog import NAME, host_catalog, supported_levels
from .probe import host_facts, probe


@hookimpl
def tilefoundry_target_name() -> str:
    return NAME


@hookimpl
def tilefoundry_target_catalog(options: Mapping[str, Any]) -> TargetCatalog:
    build.option_flags(options)
    return host_catalog(host_facts(), options.get("isa"))


@hookimpl
def tilefoundry_probe() -> Availability:
    facts = host_facts()
    levels = supported_levels(facts)
    return probe(facts, levels[0].name if levels else "scalar")


@hookimpl
def tilefoundry_codegen(scheduled: Any, options: Mapping[str, Any]) -> Sources:
    return emit.codegen(scheduled, options)


@hookimpl
def tilefoundry_builder(sources: Sources, options: Mapping[str, Any], cache_dir: Path) -> LinkedLibrary:
    return build.build(sources, options, cache_dir)
