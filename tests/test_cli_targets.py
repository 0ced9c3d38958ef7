"""`tilefoundry targets`: the installed targets, available or not and why, with catalog summaries."""

import json
import subprocess
import sys
from importlib.metadata import EntryPoint
from pathlib import Path

import pytest

from tilefoundry.cli import main
from tilefoundry.ir.target import GROUP, PLANNER_OPTIONS, get_target, installed_targets, registry


def _run(*args: str) -> str:
    done = subprocess.run(args, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_console_script_lists_every_installed_target():
    out = _run(str(Path(sys.executable).parent / "tilefoundry"), "targets")
    for name in installed_targets():
        t = get_target(name)
        assert f"\n  catalog: {t.catalog.arch}" in out
        for reason in t.availability.reasons:
            assert f"  why:     {reason}\n" in out
    assert "null: compiles here, cannot run (compile: yes, run: no)\n" in out
    assert "  why:     the null target builds nothing that can run\n" in out
    assert f"  catalog: {get_target('null').catalog.summary()}" in out
    assert "  options: none of its own; the planner's gemm, gemm_fusion, reassociate, vectorize\n" in out
    own = ", ".join(sorted(o.name for o in get_target("cpu").options))
    assert f"  options: {own}; the planner's gemm, gemm_fusion, reassociate, vectorize\n" in out


def test_json_lists_availability_and_catalogs():
    reports = json.loads(_run(sys.executable, "-m", "tilefoundry", "targets", "--json"))
    assert [r["name"] for r in reports] == list(installed_targets())
    null = next(r for r in reports if r["name"] == "null")
    planner = [{"name": "vectorize", "values": [True, False], "default": True, "owner": "planner",
                "meaning": PLANNER_OPTIONS[0].meaning}, *null["options"][1:]]
    assert null == {"name": "null", "loaded": True, "can_compile": True, "can_run": False,
                    "reasons": ["the null target builds nothing that can run"], "facts": {},
                    "catalog": get_target("null").catalog.model_dump(mode="json"), "options": planner}
    assert [o["name"] for o in null["options"]] == ["vectorize", "reassociate", "gemm", "gemm_fusion"]
    cpu = next(r for r in reports if r["name"] == "cpu")
    assert cpu["catalog"]["schema_version"] == 1 and cpu["catalog"]["target"] == "cpu"
    isa = next(o for o in cpu["options"] if o["name"] == "isa")
    assert isa["owner"] == "cpu" and isa["default"] is None and isa["values"][-1] is None


def test_a_broken_plugin_is_listed_with_its_error(monkeypatch, capsys):
    eps = [EntryPoint(name="broken", value="no_such_module_for_tilefoundry_cli", group=GROUP)]
    monkeypatch.setattr(registry, "_entry_points", lambda: eps)
    get_target.cache_clear()
    try:
        assert main(["targets"]) == 0
    finally:
        get_target.cache_clear()
    assert capsys.readouterr().out == (
        "broken: failed to load (compile: no, run: no)\n"
        "  why:     plugin no_such_module_for_tilefoundry_cli failed to load: ModuleNotFoundError: "
        "No module named 'no_such_module_for_tilefoundry_cli'\n"
    )


def test_no_targets_installed(monkeypatch, capsys):
    monkeypatch.setattr(registry, "_entry_points", lambda: [])
    assert main(["targets"]) == 0
    out = capsys.readouterr().out
    assert out == "no targets installed (no entry points in the group tilefoundry.targets)\n"


def test_a_command_is_required(capsys):
    with pytest.raises(SystemExit) as err:
        main([])
    assert err.value.code == 2
    assert "the following arguments are required: command" in capsys.readouterr().err
