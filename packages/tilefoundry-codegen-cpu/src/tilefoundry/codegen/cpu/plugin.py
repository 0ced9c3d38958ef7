"""Hooks of the cpu target: catalog and probe from the host's facts; codegen and builder.

Compile options of the cpu target, checked with the catalog, before planning:

- "isa" ("avx512", "avx2", "sse2", "neon"): describe a narrower vector ISA than the host's widest;
- "vector_math" (default True: glibc's libmvec, <= 4 ulp; False: scalar glibc math, <= 1 ulp, not
  vectorized);
- "huge_pages" (default True): advise 2 MiB pages on outputs and temporaries before first touch.
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


BOOL_OPTIONS = ("vector_math", "huge_pages")


def check_options(options: Mapping[str, Any]) -> None:
    """Refuse a non-bool value of a bool option.

    Raises:
        ValueError: naming the option and the value given.
    """
    for name in BOOL_OPTIONS:
        value = options.get(name, True)
        if not isinstance(value, bool):
            raise ValueError(f"cpu: option {name} must be True or False, got {value!r}")


@hookimpl
def tilefoundry_target_catalog(options: Mapping[str, Any]) -> TargetCatalog:
    check_options(options)
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
