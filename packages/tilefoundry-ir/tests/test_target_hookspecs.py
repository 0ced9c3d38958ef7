"""Tests of tilefoundry.ir.target.hookspecs: the contract is prefixed, typed and documented."""

import inspect

import pluggy

from tilefoundry.ir.target import hookimpl, hookspecs

HOOKS = ("tilefoundry_target_name", "tilefoundry_target_catalog", "tilefoundry_probe",
         "tilefoundry_target_options", "tilefoundry_codegen", "tilefoundry_builder", "tilefoundry_cost")


def _specs() -> dict:
    return {name: fn for name, fn in vars(hookspecs).items() if hasattr(fn, "tilefoundry_spec")}


def test_the_contract_has_exactly_these_hooks():
    assert sorted(_specs()) == sorted(HOOKS)


def test_every_hook_is_prefixed_typed_documented_and_firstresult():
    for name, fn in _specs().items():
        assert name.startswith("tilefoundry_")
        assert fn.tilefoundry_spec["firstresult"] is True, name
        sig = inspect.signature(fn)
        assert sig.return_annotation is not inspect.Signature.empty, name
        assert all(p.annotation is not inspect.Parameter.empty for p in sig.parameters.values()), name
        doc = inspect.getdoc(fn)
        assert "Calling mode: firstresult" in doc and "Returns:" in doc, name
        assert all(p in doc for p in sig.parameters), name


def test_an_implementation_may_take_fewer_arguments():
    class Plugin:
        @hookimpl
        def tilefoundry_cost(self, kernel):
            return 2.5 if kernel == "k" else None

    pm = pluggy.PluginManager(hookspecs.PROJECT)
    pm.add_hookspecs(hookspecs)
    pm.register(Plugin())
    assert pm.hook.tilefoundry_cost(kernel="k", catalog=None) == 2.5
    assert pm.hook.tilefoundry_cost(kernel="other", catalog=None) is None
