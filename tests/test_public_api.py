"""DESIGN.md §3: the public names other projects import exist where the design says."""

import importlib

import pytest

PUBLIC = {
    "tilefoundry": "func module jit build compile twin evaluate",
    "tilefoundry.dsl": "Tensor ConstTensor DimVar Topology Mesh tf",
    "tilefoundry.runtime": (
        "RuntimeModule RuntimeFunction runtime_module runtime_func CompiledModule EntryABI ParamABI "
        "entry_abi_of param_abi_of DictResource SafetensorsResource Absolute Preprocessed generate"
    ),
    "tilefoundry.check": (
        "check Report OutputCheck PredicateResult Predicate PREDICATES allclose rel_l2 cosine equal ulp "
        "max_abs max_rel nan_inf"
    ),
}


@pytest.mark.parametrize("module", sorted(PUBLIC))
def test_design_3_public_names_import(module: str) -> None:
    """DESIGN §3: `from <module> import <name>` works for every listed name, and each is listed in __all__."""
    mod = importlib.import_module(module)
    for name in PUBLIC[module].split():
        assert getattr(mod, name) is not None, f"{module}.{name}"
        assert name in getattr(mod, "__all__", ()), f"{name} missing from {module}.__all__"


def test_design_3_predicate_table_names_every_class() -> None:
    """DESIGN §3: PREDICATES maps each predicate name to its class."""
    from tilefoundry import check as c

    for name in ["allclose", "rel_l2", "cosine", "equal", "ulp", "max_abs", "max_rel", "nan_inf"]:
        assert c.PREDICATES[name] is getattr(c, name)


def test_design_3_measure_check_is_check() -> None:
    """DESIGN §3: tilefoundry.runtime.measure.check is the same function as tilefoundry.check.check."""
    from tilefoundry.check import check
    from tilefoundry.runtime.measure import check as measured

    assert measured is check


def test_design_3_jit_cache_verbs() -> None:
    """seed 000 §1.3: jit.cache_clear() evicts and jit.cache_info() returns {"size": N}."""
    from tilefoundry import jit

    jit.cache_clear()
    assert jit.cache_info() == {"size": 0}
