"""Hooks of the cpu target: catalog and probe from the host's facts; its options; codegen and builder.

Its compile options ("isa", "vector_math", "huge_pages") are declared in options.py.
"""

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from tilefoundry.ir.target import Availability, LinkedLibrary, Option, Sources, TargetCatalog, hookimpl

from . import build, emit
from .catalog import NAME, host_catalog, supported_levels
from .options import ISA, OPTIONS
from .probe import host_facts, probe


@hookimpl
def tilefoundry_target_name() -> str:
    return NAME


@hookimpl
def tilefoundry_target_options() -> Sequence[Option]:
    return OPTIONS


@hookimpl
def tilefoundry_target_catalog(options: Mapping[str, Any]) -> TargetCatalog:
    return host_catalog(host_facts(), ISA.read(options))


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
