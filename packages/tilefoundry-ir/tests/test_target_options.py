"""Tests of tilefoundry.ir.target.options: declarations, defaults, refusals, and targets declaring theirs."""

import pluggy
import pytest

from tilefoundry.ir.errors import PlanError, TargetUnavailable
from tilefoundry.ir.target import (
    PLANNER_OPTIONS,
    Availability,
    ExecAxis,
    Option,
    Target,
    TargetCatalog,
    hookimpl,
    hookspecs,
)
from tilefoundry.ir.target.options import GEMM, REASSOCIATE, VECTORIZE, check_options

TILE = Option("tile", ("64", "128", "256"), "128", "the toy's tile", "toy")
FAST = Option("fast", (False, True), False, "the toy's fast path", "toy")


def test_values_match_by_type_and_equality():
    """1 == True and 0 == False in Python; an option still refuses them for a bool."""
    assert VECTORIZE.accepts(True) and VECTORIZE.accepts(False)
    assert not VECTORIZE.accepts(1) and not VECTORIZE.accepts(0) and not VECTORIZE.accepts("True")
    assert TILE.accepts("128") and not TILE.accepts(128)
    assert not TILE.accepts(["128"])


def test_read_gives_the_declared_default_when_absent():
    assert (VECTORIZE.read({}), REASSOCIATE.read({}), GEMM.read({})) == (True, False, "auto")
    assert VECTORIZE.read({"vectorize": False}) is False
    assert GEMM.read({"gemm": "loop", "other": 3}) == "loop"


def test_read_refuses_a_value_not_declared_naming_the_option():
    with pytest.raises(PlanError) as err:
        VECTORIZE.read({"vectorize": 1})
    assert str(err.value) == "option vectorize must be True or False, got 1 (options['vectorize'])"
    assert (err.value.where, err.value.expected, err.value.got) == ("options['vectorize']", (True, False), 1)
    with pytest.raises(PlanError, match=r"^option tile must be one of 64, 128, 256, got 128 "):
        TILE.read({"tile": 128})


def test_a_default_outside_the_values_is_a_declaration_error():
    with pytest.raises(ValueError) as err:
        Option("mode", ("a", "b", "c"), "fast", "a mode")
    assert str(err.value) == "option mode: default 'fast' is not among its values (one of a, b, c)"
    with pytest.raises(ValueError) as err:
        Option("flag", (True, False), 1, "a flag")
    assert str(err.value) == "option flag: default 1 is not among its values (True or False)"


def test_planner_options_are_owned_by_the_planner():
    assert [o.name for o in PLANNER_OPTIONS] == ["vectorize", "reassociate", "gemm", "gemm_fusion"]
    assert {o.owner for o in PLANNER_OPTIONS} == {"planner"}
    assert all(o.meaning and o.accepts(o.default) for o in PLANNER_OPTIONS)


def test_check_options_refuses_an_unknown_name_with_the_closest_and_every_accepted_one():
    declared = (*PLANNER_OPTIONS, TILE, FAST)
    with pytest.raises(PlanError) as err:
        check_options({"vectorize": False, "tiles": "64"}, declared, "toy")
    assert str(err.value) == (
        "toy: unknown compile option 'tiles' (did you mean 'tile'?); toy accepts fast, gemm, gemm_fusion, "
        "reassociate, tile, vectorize (options['tiles'])"
    )
    assert err.value.expected == ("fast", "gemm", "gemm_fusion", "reassociate", "tile", "vectorize")
    assert err.value.got == "tiles"
    with pytest.raises(PlanError, match=r"^toy: unknown compile option 'zzz'; toy accepts fast, gemm, "):
        check_options({"zzz": 1}, declared, "toy")
    with pytest.raises(PlanError, match=r"^bare: unknown compile option 'gemm'; bare accepts no options "):
        check_options({"gemm": "auto"}, (), "bare")


def test_check_options_refuses_a_value_naming_the_option_the_values_and_what_came():
    with pytest.raises(PlanError) as err:
        check_options({"tile": "128", "fast": "yes"}, (*PLANNER_OPTIONS, TILE, FAST), "toy")
    assert str(err.value) == "toy: option fast must be False or True, got 'yes' (options['fast'])"
    assert (err.value.expected, err.value.got) == ((False, True), "yes")
    check_options({"tile": "256", "fast": True, "gemm": "atom"}, (*PLANNER_OPTIONS, TILE, FAST), "toy")


def _target(*options: object) -> Target:
    """A toy target loaded from a plugin manager, as the registry loads an entry point."""

    class Toy:
        @hookimpl
        def tilefoundry_target_name(self) -> str:
            return "toy"

        @hookimpl
        def tilefoundry_target_catalog(self) -> TargetCatalog:
            axes = (ExecAxis(name="w", binds=("worker",)),)
            return TargetCatalog(target="toy", arch="toy1", exec_axes=axes)

        @hookimpl
        def tilefoundry_probe(self) -> Availability:
            return Availability(can_compile=True, can_run=False)

    plugin = Toy()
    if options:

        @hookimpl
        def tilefoundry_target_options():
            return options

        plugin.tilefoundry_target_options = tilefoundry_target_options  # type: ignore[attr-defined]
    pm = pluggy.PluginManager(hookspecs.PROJECT)
    pm.add_hookspecs(hookspecs)
    pm.register(plugin)
    return Target("toy", pm)


def test_a_target_declares_its_own_options_after_the_planners():
    toy = _target(TILE, FAST)
    assert toy.options == (TILE, FAST)
    assert list(toy.accepted_options) == ["vectorize", "reassociate", "gemm", "gemm_fusion", "tile", "fast"]
    toy.check_options({"tile": "64", "reassociate": True})
    with pytest.raises(PlanError, match=r"^toy: option tile must be one of 64, 128, 256, got '32' "):
        toy.check_options({"tile": "32"})


def test_a_target_without_the_hook_accepts_the_planners_options_alone():
    bare = _target()
    assert bare.options == ()
    bare.check_options({"vectorize": False, "gemm": "loop"})
    with pytest.raises(PlanError) as err:
        bare.check_options({"tile": "64"})
    accepted = "toy accepts gemm, gemm_fusion, reassociate, vectorize"
    assert str(err.value) == f"toy: unknown compile option 'tile'; {accepted} (options['tile'])"


@pytest.mark.parametrize(
    ("declared", "message"),
    [
        ((Option("tile", ("64",), "64", "a tile", "other"),), "its option 'tile' names owner 'other' (toy)"),
        ((Option("tile", ("64",), "64", "a tile"),), "its option 'tile' names owner 'planner' (toy)"),
        ((Option("gemm", ("auto",), "auto", "mine", "toy"),),
         "its option 'gemm' is one of the planner's; a target declares only its own (toy)"),
        ((TILE, FAST, TILE), "it declares option 'tile' twice (toy)"),
        ((TILE, "fast"),
         "tilefoundry_target_options returned a str among its options, expected Option (toy)"),
    ],
)
def test_loading_refuses_options_that_are_not_the_targets_own(declared, message):
    with pytest.raises(TargetUnavailable) as err:
        _target(*declared)
    assert str(err.value) == message
    assert err.value.where == "toy"
