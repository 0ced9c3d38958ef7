"""Finding and loading target plugins: `installed_targets()`, `get_target(name)`.

Targets are entry points of the group `tilefoundry.targets`, found through the installed
distributions' metadata; the core never imports a target package by name. Each target gets
its own pluggy PluginManager holding the specs of `hookspecs` and that one plugin, so a hook
call reaches only that target. Loading checks the plugin once: its implementations must
match the specs (pluggy names any mismatch), the required hooks must be there, and the name
it reports must be its entry-point name, and the options it declares must be its own.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from importlib.metadata import EntryPoint, entry_points
from pathlib import Path
from typing import Any

import pluggy

from ..errors import TargetUnavailable
from . import hookspecs
from .artifacts import LinkedLibrary, Sources
from .availability import Availability
from .catalog import TargetCatalog
from .options import PLANNER_OPTIONS, Option, check_options

GROUP = "tilefoundry.targets"
REQUIRED_HOOKS = ("tilefoundry_target_name", "tilefoundry_target_catalog", "tilefoundry_probe")
COMPILE_HOOKS = ("tilefoundry_codegen", "tilefoundry_builder")


def _entry_points() -> list[EntryPoint]:
    return list(entry_points(group=GROUP))


def installed_targets() -> tuple[str, ...]:
    """The names of the installed targets, sorted. Loads no plugin."""
    return tuple(sorted({ep.name for ep in _entry_points()}))


class Target:
    """A loaded target plugin: its name, default catalog, options, availability here, and hooks.

    Attributes:
        name: the target's name (its entry-point name).
        hooks: the plugin manager's hook relay (`target.hooks.tilefoundry_cost(...)`).
        catalog: the catalog for empty options.
        options: the compile options the target declares itself (beyond the planner's).
        probe: the plugin's own answer about this machine.
    """

    def __init__(self, name: str, pm: pluggy.PluginManager):
        self.name = name
        self._pm = pm
        self.hooks = pm.hook
        reported = self._call("tilefoundry_target_name", str)
        if reported != name:
            raise TargetUnavailable(f"the plugin calls itself '{reported}'", where=name, expected=name,
                                    got=reported)
        self.catalog = self.catalog_for({})
        self.options = self._declared_options()
        self.probe = self._call("tilefoundry_probe", Availability)

    def _call(self, hook: str, expected: type, **kwargs: Any) -> Any:
        """Call one hook of this plugin; a raise or a wrong return becomes TargetUnavailable."""
        try:
            result = getattr(self.hooks, hook)(**kwargs)
        except Exception as e:
            raise TargetUnavailable(f"{hook} raised {type(e).__name__}: {e}", where=self.name) from e
        if not isinstance(result, expected):
            raise TargetUnavailable(
                f"{hook} returned {type(result).__name__}, expected {expected.__name__}",
                where=self.name, expected=expected.__name__, got=type(result).__name__,
            )
        return result

    def _declared_options(self) -> tuple[Option, ...]:
        """The plugin's `tilefoundry_target_options`, checked: Options of its own, named once each."""
        if not self.implements("tilefoundry_target_options"):
            return ()
        declared = tuple(self._call("tilefoundry_target_options", Sequence))
        planner = {o.name for o in PLANNER_OPTIONS}
        names: set[str] = set()
        for o in declared:
            if not isinstance(o, Option):
                raise TargetUnavailable(
                    f"tilefoundry_target_options returned a {type(o).__name__} among its options, "
                    "expected Option", where=self.name, expected="Option", got=type(o).__name__,
                )
            if o.owner != self.name:
                raise TargetUnavailable(f"its option {o.name!r} names owner {o.owner!r}",
                                        where=self.name, expected=self.name, got=o.owner)
            if o.name in planner:
                raise TargetUnavailable(f"its option {o.name!r} is one of the planner's; a target "
                                        "declares only its own", where=self.name, got=o.name)
            if o.name in names:
                raise TargetUnavailable(f"it declares option {o.name!r} twice", where=self.name, got=o.name)
            names.add(o.name)
        return declared

    def implements(self, hook: str) -> bool:
        """True when the plugin implements `hook`."""
        return bool(getattr(self.hooks, hook).get_hookimpls())

    @property
    def availability(self) -> Availability:
        """The probe's answer, plus "cannot compile yet" when compile hooks are missing."""
        missing = [h for h in COMPILE_HOOKS if not self.implements(h)]
        if not missing:
            return self.probe
        reason = f"cannot compile yet: the plugin implements no {', '.join(missing)}"
        return self.probe.model_copy(update={"can_compile": False, "reasons": (*self.probe.reasons, reason)})

    @property
    def can_compile(self) -> bool:
        return self.availability.can_compile

    @property
    def can_run(self) -> bool:
        return self.availability.can_run

    def require(self, *, run: bool = False) -> None:
        """Raise TargetUnavailable, with the reasons, unless this target can compile (and run)."""
        a = self.availability
        if a.can_compile and (a.can_run or not run):
            return
        verb = "compile and run" if run else "compile"
        raise TargetUnavailable(f"cannot {verb} here: {'; '.join(a.reasons)}",
                                where=self.name, expected=verb, got=a.reasons)

    @property
    def accepted_options(self) -> dict[str, Option]:
        """Every option a compile for this target accepts, by name: the planner's, then its own."""
        return {o.name: o for o in (*PLANNER_OPTIONS, *self.options)}

    def check_options(self, options: Mapping[str, Any]) -> None:
        """Refuse an option neither the planner nor this target declares, or a value it does not accept.

        Raises:
            PlanError: naming the option and the target, with the accepted names or values.
        """
        check_options(options, self.accepted_options.values(), self.name)

    def catalog_for(self, options: Mapping[str, Any]) -> TargetCatalog:
        """The catalog the target gives for these compile options."""
        catalog = self._call("tilefoundry_target_catalog", TargetCatalog, options=dict(options))
        if catalog.target != self.name:
            raise TargetUnavailable(f"its catalog names target '{catalog.target}'",
                                    where=self.name, expected=self.name, got=catalog.target)
        return catalog

    def codegen(self, scheduled: Any, options: Mapping[str, Any]) -> Sources:
        """Generate sources through the plugin's `tilefoundry_codegen`."""
        self.require()
        return self._call("tilefoundry_codegen", Sources, scheduled=scheduled, options=dict(options))

    def build(self, sources: Sources, options: Mapping[str, Any], cache_dir: Path) -> LinkedLibrary:
        """Build a library through the plugin's `tilefoundry_builder`."""
        self.require()
        return self._call("tilefoundry_builder", LinkedLibrary, sources=sources, options=dict(options),
                          cache_dir=Path(cache_dir))

    def cost(self, kernel: Any, catalog: TargetCatalog | None = None) -> float | None:
        """The plugin's run-time estimate in seconds, or None when it has none."""
        return self.hooks.tilefoundry_cost(kernel=kernel, catalog=catalog or self.catalog)

    def __repr__(self) -> str:
        a = self.availability
        return f"Target({self.name!r}, can_compile={a.can_compile}, can_run={a.can_run})"


@functools.cache
def get_target(name: str) -> Target:
    """The installed target called `name`, loaded once per process.

    Raises:
        TargetUnavailable: no installed target has that name (the message lists the installed
            ones), two distributions claim it, or its plugin fails to load or to answer its
            required hooks. A target that loads but cannot compile or run here is returned;
            its `availability` says why.
    """
    eps = [ep for ep in _entry_points() if ep.name == name]
    if not eps:
        installed = installed_targets()
        raise TargetUnavailable(
            f"unknown target; installed targets: {', '.join(installed) or 'none'}",
            where=name, expected=installed, got=name,
        )
    if len(eps) > 1:
        raise TargetUnavailable(f"claimed by several entry points: {', '.join(ep.value for ep in eps)}",
                                where=name)
    ep = eps[0]
    try:
        plugin = ep.load()
    except Exception as e:
        raise TargetUnavailable(f"plugin {ep.value} failed to load: {type(e).__name__}: {e}",
                                where=name) from e
    pm = pluggy.PluginManager(hookspecs.PROJECT)
    pm.add_hookspecs(hookspecs)
    try:
        pm.register(plugin, name=name)
        pm.check_pending()
    except pluggy.PluginValidationError as e:
        raise TargetUnavailable(f"plugin {ep.value} does not match the hook specs: {e}", where=name) from e
    missing = [h for h in REQUIRED_HOOKS if not getattr(pm.hook, h).get_hookimpls()]
    if missing:
        raise TargetUnavailable(f"plugin {ep.value} implements no {', '.join(missing)}",
                                where=name, expected=REQUIRED_HOOKS, got=tuple(missing))
    return Target(name, pm)
