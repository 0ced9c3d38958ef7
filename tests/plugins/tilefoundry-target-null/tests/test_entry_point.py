"""The null target is found through its entry point alone, like any third-party target."""

from importlib.metadata import entry_points

import tilefoundry_target_null.plugin as null_plugin

from tilefoundry.ir.target import GROUP, LinkedLibrary, Sources, TargetCatalog, get_target, installed_targets


def test_entry_point_loads_the_plugin_module():
    (ep,) = [ep for ep in entry_points(group=GROUP) if ep.name == "null"]
    assert ep.value == "tilefoundry_target_null.plugin"
    assert ep.load() is null_plugin


def test_null_is_listed_and_loads_through_the_registry(tmp_path):
    assert "null" in installed_targets()
    t = get_target("null")
    assert TargetCatalog.model_validate_json(t.catalog.model_dump_json()) == t.catalog
    assert (t.can_compile, t.can_run) == (True, False)
    assert t.availability.reasons == ("the null target builds nothing that can run",)
    sources = t.codegen(scheduled=None, options={})
    assert sources == Sources(target="null")
    lib = t.build(Sources(target="null", entries=("f", "g")), {}, tmp_path)
    assert lib == LinkedLibrary(target="null", path=tmp_path / "null.entries", entries=("f", "g"))
    assert lib.path.read_text() == "f\ng\n"
