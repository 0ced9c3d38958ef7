"""Hooks of the cpu target: catalog and probe from the host's facts.

Compile options read here: "isa" ("avx512", "avx2", "sse2", "neon") describes a narrower
vector ISA than the host's widest.
"""

from collections.abc import Mapping
from typing import Any

from tilefoundry.ir.target import Availability, TargetCatalog, hookimpl

from .catalog import NAME, host_catalog, supported_levels
from .probe import host_facts, probe


@hookimpl
def tilefoundry_target_name() -> str:
    return NAME


@hookimpl
def tilefoundry_target_catalog(options: Mapping[str, Any]) -> TargetCatalog:
    return host_catalog(host_facts(), options.get("isa"))


@hookimpl
def tilefoundry_probe() -> Availability:
    facts = host_facts()
    levels = supported_levels(facts)
    return probe(facts, levels[0].name if levels else "scalar")
