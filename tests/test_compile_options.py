"""Compile options: every declared default compiles, anything undeclared or ill-typed is refused first."""

from __future__ import annotations

import importlib
import os
import sys
from pathlib import Path

import pytest
import torch

import tilefoundry
from tilefoundry.check import allclose
from tilefoundry.dsl import ConstTensor, DimVar, Tensor, f32, func, tf
from tilefoundry.ir.errors import PlanError
from tilefoundry.ir.target import PLANNER_OPTIONS, Option, get_target
from tilefoundry.runtime import autotune

sys.path.insert(0, os.path.dirname(__file__))
import catalogue_programs as cat

T = DimVar("T", 1, 33)
DOCS = Path(__file__).resolve().parents[1] / "docs" / "compiling.md"
BUILT_IN = ("cpu", "cuda")


@func
def proj(x: Tensor[(T, 16), f32], w: ConstTensor[(16, 8), f32]):
    return tf.silu(x @ w) * 2.0


def _defaults(target: str) -> dict[str, object]:
    return {o.name: o.default for o in get_target(target).accepted_options.values()}


def _source(target: str, options: dict[str, object]) -> str:
    seen: dict[str, str] = {}
    tilefoundry.compile(proj, target=target, options=options, dump=seen.__setitem__)
    return next(text for stage, text in seen.items() if stage.startswith("generate source"))


def test_every_declared_default_compiles_on_cpu_and_means_what_absence_means() -> None:
    """Each option of the planner and of cpu, given as its declared default, builds the same code as none."""
    defaults = _defaults("cpu")
    planner = {"vectorize", "reassociate", "gemm", "gemm_fusion"}
    assert set(defaults) == planner | {"isa", "vector_math", "huge_pages"}
    assert _source("cpu", defaults) == _source("cpu", {})
    f = tilefoundry.build(proj, target="cpu", options=defaults)
    torch.manual_seed(0)
    x, w = torch.randn(5, 16), torch.randn(16, 8)
    result = allclose(atol=1e-5, rtol=1e-5).measure(f(x, w), proj(x, w))
    assert result.passed, result.values


def test_every_declared_cuda_default_emits_what_absence_emits() -> None:
    """Each option of the planner and of cuda, given as its declared default, generates the same .cu."""
    defaults = _defaults("cuda")
    planner = {"vectorize", "reassociate", "gemm", "gemm_fusion"}
    own = {"arch", "portable", "fast_math", "attention", "attention_warp_rows", "gemm_tile", "gemm_cluster",
           "gemm_swizzle", "batch_launches", "grid_ctas_per_sm", "grid_packs"}
    assert set(defaults) == planner | own

    assert cat.cuda_source(proj, defaults) == cat.cuda_source(proj, {})


def test_an_unknown_option_is_refused_naming_it_the_target_and_the_accepted_names() -> None:
    """A misspelled option fails closed before any work, with the closest declared name first."""
    stages: dict[str, str] = {}
    with pytest.raises(PlanError) as err:
        tilefoundry.compile(proj, target="cpu", options={"vectorise": False}, dump=stages.__setitem__)
    assert str(err.value) == (
        "cpu: unknown compile option 'vectorise' (did you mean 'vectorize'?); cpu accepts gemm, gemm_fusion, "
        "huge_pages, isa, reassociate, vector_math, vectorize (options['vectorise'])"
    )
    assert (err.value.where, err.value.got) == ("options['vectorise']", "vectorise")
    assert stages == {}


def test_another_targets_option_is_unknown_here() -> None:
    with pytest.raises(PlanError, match=r"^cpu: unknown compile option 'batch_launches'; cpu accepts gemm, "):
        tilefoundry.compile(proj, target="cpu", options={"batch_launches": False})
    with pytest.raises(PlanError, match=r"^cuda: unknown compile option 'huge_pages'; cuda accepts arch, "):
        tilefoundry.compile(proj, target="cuda", options={"huge_pages": True})


def test_a_cuda_typo_is_refused_before_the_target_is_required() -> None:
    """The check needs no nvcc: it comes before `require`, so a typo reads the same on any machine."""
    with pytest.raises(PlanError) as err:
        tilefoundry.compile(proj, target="cuda", options={"batch_launch": False})
    assert str(err.value) == (
        "cuda: unknown compile option 'batch_launch' (did you mean 'batch_launches'?); cuda accepts arch, "
        "attention, attention_warp_rows, batch_launches, fast_math, gemm, gemm_cluster, gemm_fusion, "
        "gemm_swizzle, gemm_tile, grid_ctas_per_sm, grid_packs, portable, reassociate, vectorize "
        "(options['batch_launch'])"
    )


@pytest.mark.parametrize(
    ("target", "name", "value", "expected"),
    [
        ("cuda", "gemm_tile", 128, "one of auto, 128x128, 128x256, 256x128"),
        ("cuda", "grid_ctas_per_sm", 1, "one of 2, 3, 4, 5, 6, 7, 8, None"),
        ("cuda", "arch", "sm_70", "one of sm_80, sm_90, sm_90a, None"),
        ("cuda", "portable", "yes", "False or True"),
        ("cpu", "vectorize", 1, "True or False"),
        ("cpu", "gemm", "blas", "one of auto, loop, atom"),
        ("cpu", "isa", "avx9", "one of avx512, avx2, sse2, neon, None"),
    ],
)
def test_a_refused_value_names_the_option_the_values_and_what_came(target, name, value, expected) -> None:
    with pytest.raises(PlanError) as err:
        tilefoundry.compile(proj, target=target, options={name: value})
    where = f"options[{name!r}]"
    assert str(err.value) == f"{target}: option {name} must be {expected}, got {value!r} ({where})"
    assert (err.value.where, err.value.got) == (where, value)
    assert err.value.expected == get_target(target).accepted_options[name].values


@pytest.mark.parametrize("verb", [tilefoundry.build, tilefoundry.jit, tilefoundry.twin])
def test_every_verb_that_compiles_checks_the_options(verb) -> None:
    tilefoundry.jit.cache_clear()
    with pytest.raises(PlanError, match=r"^cpu: unknown compile option 'reasociate' \(did you mean 're"):
        verb(proj, target="cpu", options={"reasociate": True})
    assert tilefoundry.jit.cache_info() == {"size": 0}


def test_autotune_checks_every_configuration_before_tuning() -> None:
    """A value in the tuning space the target refuses fails at once instead of being tried and rejected."""
    with pytest.raises(PlanError, match=r"^cpu: option gemm must be one of auto, loop, atom, got 'blas' "):
        autotune(proj, target="cpu", space={"gemm": ["auto", "blas"]})
    with pytest.raises(PlanError, match=r"^cpu: unknown compile option 'vectorise' \(did you mean "):
        autotune(proj, target="cpu", space={"gemm": ["auto"]}, options={"vectorise": True})


def test_the_null_target_declares_no_options_and_refuses_any_of_its_own() -> None:
    """A target without `tilefoundry_target_options` accepts the planner's options and no others."""
    null = get_target("null")
    assert null.options == () and list(null.accepted_options) == [o.name for o in PLANNER_OPTIONS]
    for name, value in (("arch", "sm_90a"), ("isa", "avx2"), ("workers", 4)):
        with pytest.raises(PlanError) as err:
            tilefoundry.compile(proj, target="null", options={name: value})
        accepted = "null accepts gemm, gemm_fusion, reassociate, vectorize"
        assert str(err.value) == f"null: unknown compile option {name!r}; {accepted} (options[{name!r}])"
    linked = tilefoundry.compile(proj, target="null", options={"vectorize": False, "gemm": "loop"})
    assert linked.target == "null"


@pytest.mark.parametrize(
    ("module", "target"),
    [("tilefoundry.ir.target.options", None), ("tilefoundry.codegen.cpu.options", "cpu"),
     ("tilefoundry.codegen.cuda.options", "cuda")],
)
def test_every_option_a_module_defines_is_declared(module: str, target: str | None) -> None:
    """An Option its readers use but its owner does not return would be refused by compile."""
    defined = [v for v in vars(importlib.import_module(module)).values() if isinstance(v, Option)]
    assert defined == list(get_target(target).options if target else PLANNER_OPTIONS)


def _values(o: Option) -> str:
    return ", ".join(f"`{v}`" + (" (default)" if type(v) is type(o.default) and v == o.default else "")
                     for v in o.values)


def test_the_options_table_in_docs_matches_the_declarations() -> None:
    """docs/compiling.md lists every option of the planner and the built-in targets, as declared."""
    text = DOCS.read_text().split("\n## Options\n", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in text.splitlines() if line.startswith("| `")]
    declared = [*PLANNER_OPTIONS, *(o for t in BUILT_IN for o in get_target(t).options)]
    assert rows == [f"| `{o.name}` | {o.owner} | {_values(o)} | {o.meaning} |" for o in declared]
