"""The null target: a catalog, a probe, and a code generator and builder that do nothing.

It proves that a third-party target needs only the hooks of `tilefoundry.ir.target` and an
entry point in the `tilefoundry.targets` group.
"""

from pathlib import Path

from tilefoundry.ir.target import (
    Availability,
    ExecAxis,
    LinkedLibrary,
    Resource,
    Sources,
    TargetCatalog,
    hookimpl,
)

NAME = "null"


@hookimpl
def tilefoundry_target_name() -> str:
    return NAME


@hookimpl
def tilefoundry_target_catalog() -> TargetCatalog:
    return TargetCatalog(
        target=NAME,
        arch="null",
        exec_axes=(ExecAxis(name="worker", binds=("worker",), max_extent=1),),
        resources=(Resource(name="memory", kind="global", storage="gmem", instance="device",
                            visibility="device", capacity_bytes=0),),
    )


@hookimpl
def tilefoundry_probe() -> Availability:
    return Availability(can_compile=True, can_run=False,
                        reasons=("the null target builds nothing that can run",))


@hookimpl
def tilefoundry_codegen() -> Sources:
    return Sources(target=NAME)


@hookimpl
def tilefoundry_builder(sources: Sources, cache_dir: Path) -> LinkedLibrary:
    manifest = cache_dir / "null.entries"
    manifest.write_text("".join(f"{e}\n" for e in sources.entries))
    return LinkedLibrary(target=NAME, path=manifest, entries=sources.entries)
