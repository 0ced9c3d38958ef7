"""Tests of tilefoundry.ir.target.registry: discovery by entry point, loading checks, Target calls."""

import sys
import types
from importlib.metadata import EntryPoint
from pathlib import Path

import pytest

from tilefoundry.ir.errors import TargetUnavailable
from tilefoundry.ir.target import (
    GROUP,
    Availability,
    ExecAxis,
    LinkedLibrary,
    Sources,
    TargetCatalog,
    get_target,
    hookimpl,
    installed_targets,
    registry,
)


def _name(fake):
    @hookimpl
    def tilefoundry_target_name():
        return fake

    return tilefoundry_target_name


def _catalog(target):
    @hookimpl
    def tilefoundry_target_catalog(options):
        return TargetCatalog(target=target, arch=options.get("arch", "fake1"),
                             exec_axes=(ExecAxis(name="worker", binds=("worker",)),))

    return tilefoundry_target_catalog


@hookimpl
def _probe_ok():
    return Availability(can_compile=True, can_run=True, facts={"tool": "fake 1.0"})


@hookimpl
def _codegen(scheduled, options):
    return Sources(target="fake", files={"k.cc": f"// {scheduled} {dict(options)}"}, entries=("k",))


@hookimpl
def _builder(sources, cache_dir):
    path = cache_dir / "libk.so"
    path.write_text(sources.files["k.cc"])
    return LinkedLibrary(target="fake", path=path, entries=sources.entries)


@hookimpl
def _cost(kernel, catalog):
    return 1e-3 if catalog.arch == "fake1" else None


COMPILES = {"tilefoundry_codegen": _codegen, "tilefoundry_builder": _builder}


def _hooks(name="fake", **overrides):
    hooks = {"tilefoundry_target_name": _name(name), "tilefoundry_target_catalog": _catalog(name),
             "tilefoundry_probe": _probe_ok}
    hooks.update(overrides)
    return {k: v for k, v in hooks.items() if v is not None}


@pytest.fixture
def plugins(monkeypatch):
    """Install fake plugins: `plugins(name, hooks)` adds a module and an entry point to it.

    `attr` points the entry point at one attribute of the module; `value` at any import path.
    Returns the entry point's value.
    """
    eps: list[EntryPoint] = []
    monkeypatch.setattr(registry, "_entry_points", lambda: list(eps))
    get_target.cache_clear()

    def install(name: str, hooks: dict | None = None, *, value: str | None = None, attr: str = "") -> str:
        module_name = f"fake_tilefoundry_plugin_{name}_{len(eps)}"
        if hooks is not None:
            module = types.ModuleType(module_name)
            for hook, fn in hooks.items():
                setattr(module, hook, fn)
            monkeypatch.setitem(sys.modules, module_name, module)
        value = value or (f"{module_name}:{attr}" if attr else module_name)
        eps.append(EntryPoint(name=name, value=value, group=GROUP))
        return value

    yield install
    get_target.cache_clear()


def test_installed_targets_lists_entry_points_sorted():
    assert {"cpu", "cuda", "null"} <= set(installed_targets())
    assert list(installed_targets()) == sorted(installed_targets())


def test_unknown_target_names_the_installed_ones():
    with pytest.raises(TargetUnavailable) as err:
        get_target("tpu")
    installed = ", ".join(installed_targets())
    assert str(err.value) == f"unknown target; installed targets: {installed} (tpu)"
    assert (err.value.where, err.value.got, err.value.expected) == ("tpu", "tpu", installed_targets())


def test_a_complete_plugin_compiles_builds_and_costs(plugins, tmp_path):
    plugins("fake", _hooks(**COMPILES, tilefoundry_cost=_cost))
    t = get_target("fake")
    assert get_target("fake") is t
    assert (t.name, t.catalog.arch, t.can_compile, t.can_run) == ("fake", "fake1", True, True)
    assert t.availability.facts == {"tool": "fake 1.0"} and t.availability.reasons == ()
    t.require(run=True)
    sources = t.codegen("kernel0", {"opt": 1})
    assert sources == Sources(target="fake", files={"k.cc": "// kernel0 {'opt': 1}"}, entries=("k",))
    lib = t.build(sources, {}, tmp_path)
    assert lib == LinkedLibrary(target="fake", path=tmp_path / "libk.so", entries=("k",))
    assert Path(lib.path).read_text() == "// kernel0 {'opt': 1}"
    assert t.cost("kernel0") == 1e-3
    assert t.cost("kernel0", t.catalog_for({"arch": "fake2"})) is None


def test_a_target_without_a_code_generator_cannot_compile_yet(plugins):
    plugins("fake", _hooks())
    t = get_target("fake")
    assert t.probe.can_compile and not t.can_compile and t.can_run
    reason = "cannot compile yet: the plugin implements no tilefoundry_codegen, tilefoundry_builder"
    assert t.availability.reasons == (reason,)
    assert repr(t) == "Target('fake', can_compile=False, can_run=True)"
    with pytest.raises(TargetUnavailable) as err:
        t.codegen("kernel0", {})
    assert str(err.value) == f"cannot compile here: {reason} (fake)"


def test_unavailable_reasons_are_reported(plugins):
    @hookimpl
    def probe():
        return Availability(can_compile=True, can_run=False, reasons=("no device: fake0 is absent",))

    plugins("fake", _hooks(tilefoundry_probe=probe, **COMPILES))
    t = get_target("fake")
    t.require()
    with pytest.raises(TargetUnavailable) as err:
        t.require(run=True)
    assert str(err.value) == "cannot compile and run here: no device: fake0 is absent (fake)"


def test_an_instance_can_be_the_plugin(plugins):
    class Plugin:
        @hookimpl
        def tilefoundry_target_name(self):
            return "inst"

        @hookimpl
        def tilefoundry_target_catalog(self):
            return TargetCatalog(target="inst", arch="i", exec_axes=(ExecAxis(name="w", binds=("worker",)),))

        @hookimpl
        def tilefoundry_probe(self):
            return Availability(can_compile=False, can_run=False, reasons=("nothing here",))

    plugins("inst", {"PLUGIN": Plugin()}, attr="PLUGIN")
    t = get_target("inst")
    assert (t.name, t.catalog.arch, t.probe.reasons) == ("inst", "i", ("nothing here",))


@hookimpl
def _catalog_with_extra_arg(options, flavor):
    raise AssertionError("never called")


@hookimpl
def _probe_raises():
    raise RuntimeError("driver exploded")


@hookimpl
def _probe_wrong_type():
    return {"can_compile": True}


@pytest.mark.parametrize(
    ("hooks", "message"),
    [
        (_hooks(tilefoundry_probe=None), "plugin {ep} implements no tilefoundry_probe (fake)"),
        (_hooks(name="other"), "the plugin calls itself 'other' (fake)"),
        (_hooks(tilefoundry_target_catalog=_catalog("other")), "its catalog names target 'other' (fake)"),
        (_hooks(tilefoundry_probe=_probe_raises),
         "tilefoundry_probe raised RuntimeError: driver exploded (fake)"),
        (_hooks(tilefoundry_probe=_probe_wrong_type),
         "tilefoundry_probe returned dict, expected Availability (fake)"),
    ],
)
def test_loading_refuses_a_plugin_that_breaks_the_contract(plugins, hooks, message):
    ep = plugins("fake", hooks)
    with pytest.raises(TargetUnavailable) as err:
        get_target("fake")
    assert str(err.value) == message.format(ep=ep)
    assert err.value.where == "fake"


def test_loading_refuses_an_implementation_the_specs_do_not_allow(plugins):
    ep = plugins("fake", _hooks(tilefoundry_target_catalog=_catalog_with_extra_arg))
    with pytest.raises(TargetUnavailable) as err:
        get_target("fake")
    assert str(err.value).startswith(f"plugin {ep} does not match the hook specs: ")
    assert "flavor" in str(err.value)


def test_loading_refuses_a_misspelled_hook(plugins):
    ep = plugins("fake", _hooks(tilefoundry_codegenn=_codegen))
    with pytest.raises(TargetUnavailable) as err:
        get_target("fake")
    assert str(err.value).startswith(f"plugin {ep} does not match the hook specs: ")
    assert "tilefoundry_codegenn" in str(err.value)


def test_loading_reports_an_import_failure(plugins):
    plugins("fake", value="no_such_module_for_tilefoundry")
    with pytest.raises(TargetUnavailable) as err:
        get_target("fake")
    assert str(err.value) == ("plugin no_such_module_for_tilefoundry failed to load: ModuleNotFoundError: "
                              "No module named 'no_such_module_for_tilefoundry' (fake)")


def test_a_name_claimed_twice_is_refused(plugins):
    first = plugins("fake", _hooks())
    second = plugins("fake", _hooks())
    with pytest.raises(TargetUnavailable) as err:
        get_target("fake")
    assert str(err.value) == f"claimed by several entry points: {first}, {second} (fake)"
