"""The target plugin contract: the hooks a target implements, documented where they are declared.

A target is a module (or an instance) registered under the entry-point group
`tilefoundry.targets`; the entry point's name is the target's name. The core gives each
target its own pluggy `PluginManager` with these specs, so every call reaches exactly that
target's implementation. Implementations are marked with `hookimpl` and may accept fewer
arguments than the spec names. A target needs nothing else from the core.

    # pyproject.toml
    [project.entry-points."tilefoundry.targets"]
    mytarget = "mytarget.plugin"

    # mytarget/plugin.py
    from tilefoundry.ir.target import hookimpl

    @hookimpl
    def tilefoundry_target_name() -> str:
        return "mytarget"
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pluggy

from .artifacts import LinkedLibrary, Sources
from .availability import Availability
from .catalog import TargetCatalog
from .options import Option

PROJECT = "tilefoundry"
hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)


# ---------------------------------------------------------------- identity and discovery (required)


@hookspec(firstresult=True)
def tilefoundry_target_name() -> str:
    """The target's name; must equal the name of its entry point.

    Returns:
        The name users pass as `target=` ("cpu", "cuda", "mytarget").

    Calling mode: firstresult. Runs once, when the registry first loads the plugin.
    """


@hookspec(firstresult=True)
def tilefoundry_target_catalog(options: Mapping[str, Any]) -> TargetCatalog:
    """What the target offers the planner.

    Args:
        options: compile options; a target may read its own keys (e.g. cuda's "arch") to
            describe a machine other than this one. Empty for the default catalog.

    Returns:
        A TargetCatalog whose `target` field is the target's name.

    Calling mode: firstresult. Runs when the registry loads the plugin (empty options) and
    whenever planning asks for the catalog of particular options.
    """


@hookspec(firstresult=True)
def tilefoundry_probe() -> Availability:
    """Whether this machine can compile for the target and run what it compiles.

    Returns:
        An Availability with a reason for each thing that is missing (compiler not found,
        no device) and the facts found (versions, device name, cores). Must not raise for
        a missing tool: absence is an answer, not an error.

    Calling mode: firstresult. Runs once per process, when the registry loads the plugin.
    """


# ---------------------------------------------------------------- compilation (optional)


@hookspec(firstresult=True)
def tilefoundry_target_options() -> Sequence[Option]:
    """The compile options the target reads beyond the planner's common ones.

    Returns:
        One `Option` per name, each with `owner` set to the target's name and none named like
        one of `tilefoundry.ir.target.options.PLANNER_OPTIONS`. `compile` refuses every option
        that neither declares, so a target without this hook accepts the planner's alone.

    Calling mode: firstresult. Runs once, when the registry loads the plugin.
    """



@hookspec(firstresult=True)
def tilefoundry_codegen(scheduled: Any, options: Mapping[str, Any]) -> Sources:
    """Generate source text for a scheduled module.

    Args:
        scheduled: the Scheduled TileIR of one module, planned against this target's catalog.
        options: compile options as given to jit/build/compile, already checked against the
            planner's and this target's declared options.

    Returns:
        Sources naming the exported entries. A target without this hook is listed as
        "cannot compile yet".

    Calling mode: firstresult. Runs once per build, after planning, before the builder.
    """


@hookspec(firstresult=True)
def tilefoundry_builder(sources: Sources, options: Mapping[str, Any], cache_dir: Path) -> LinkedLibrary:
    """Compile and link generated sources into a library.

    Args:
        sources: what `tilefoundry_codegen` returned.
        options: compile options as given to jit/build/compile, already checked against the
            planner's and this target's declared options.
        cache_dir: a directory owned by this build; the library and any intermediate files
            go there.

    Returns:
        The LinkedLibrary the runtime loader opens.

    Calling mode: firstresult. Runs once per build, after codegen; may run concurrently for
    different builds in different processes.
    """


# ---------------------------------------------------------------- cost model (optional)


@hookspec(firstresult=True)
def tilefoundry_cost(kernel: Any, catalog: TargetCatalog) -> float | None:
    """Estimate a kernel's run time, to rank legal candidates.

    Args:
        kernel: one candidate kernel of a Scheduled TileIR module.
        catalog: the catalog the kernel was planned against.

    Returns:
        Estimated seconds, or None when the target has no estimate of its own.

    Calling mode: firstresult (the first non-None estimate wins). Runs during planning,
    once per candidate.
    """
