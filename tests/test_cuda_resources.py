"""What ptxas built for generated kernels, read back without a GPU through the resource report
(tilefoundry.codegen.cuda.resources), the SASS figures (tilefoundry.codegen.cuda.sass) and the
bench's tool over them (bench.gpu.resources): option grid_ctas_per_sm's register cap holds in the
machine code, not only in the source's `__launch_bounds__`, and the packed rope's shuffles carry
no convergence test."""

from __future__ import annotations

import contextlib
import io
import json
import re
import sys
from pathlib import Path

import pytest

from tilefoundry.codegen.cuda.resources import KernelResources

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from catalogue_programs import require_cuobjdump, require_nvcc

from bench.gpu import resources

# The per-head norm recomputed inside rope: the packed grid that holds the most registers.
CASE = "head_norm_rope"
PACKED, SCALAR = "head_norm_rope__k0_rope_v8", "head_norm_rope__k0_rope"


@pytest.fixture(scope="module")
def reports(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[list[dict], str]]:
    """The tool's JSON and printed table for the bench's head_norm_rope case (H200 shapes), built
    plain (with the SASS columns) and with grid_ctas_per_sm=8, each into a fresh cache."""
    require_nvcc()
    require_cuobjdump()
    found = {}
    for name, options in (("plain", ["--sass"]), ("capped", ["--option", "grid_ctas_per_sm=8"])):
        out = tmp_path_factory.mktemp(name)
        argv = ["--cases", CASE, "--jobs", "0", "--cache-dir", str(out / "cache")]
        argv += ["--json", str(out / "k.json"), *options]
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            assert resources.main(argv) == 0
        found[name] = (json.loads((out / "k.json").read_text()), printed.getvalue())
    return found


def _rope_kernels(doc: list[dict]) -> dict[str, KernelResources]:
    """The rope kernels of the tool's JSON, by identifier."""
    kernels = (KernelResources(**{f: k[f] for f in KernelResources.__dataclass_fields__}) for k in doc)
    return {k.identifier: k for k in kernels if "__k0_" in k.identifier}


def test_the_tool_prints_each_kernel_with_ptxas_figures(reports) -> None:
    doc, printed = reports["plain"]
    packed = _rope_kernels(doc)[PACKED]
    assert {k["library"] for k in doc} == {CASE} and packed.threads == 256 and packed.registers > 0
    # ptxas's columns, then the SASS ones: instructions, pre-wait loads, wait to load, CALL, LDL/STL,
    # MATCH
    figures = rf"{packed.registers} +256 +{packed.ctas_per_sm()} +0/0 +0 +0"
    row = rf"^{CASE} +{PACKED} +{figures} +\d+ +0 +\d+ +0 +0 +0$"
    assert re.search(row, printed, re.M), printed
    assert f"kernels: {len(doc)}, libraries: 1, spilling: 0" in printed


def test_the_packed_rope_waits_once_then_loads_and_shuffles_without_a_convergence_test(reports) -> None:
    """--sass: the packed rope reads nothing before its PDL wait and loads within a few dozen
    instructions after it; its 4 x 128 heads of 16 packs fill whole warps, so its norm's and its
    rotated halves' shuffles take the full mask: no MATCH (a9d9523), and nothing on the stack."""
    doc, printed = reports["plain"]
    symbol = _rope_kernels(doc)[PACKED].symbol
    packed = next(k["sass"] for k in doc if k["symbol"] == symbol)
    assert packed["waits"] == 1 and packed["loads_before_wait"] == 0
    assert 0 < packed["wait_to_load"] < 64 < packed["instructions"]
    assert packed["convergence_tests"] == 0 and packed["local_accesses"] == 0 and packed["calls_to_load"] == 0
    assert "pre-wait ld" in printed.splitlines()[0]
    assert "sass" not in reports["capped"][0][0]  # asked only of the plain build


def test_grid_ctas_per_sm_caps_the_packed_grids_registers_in_the_machine_code(reports) -> None:
    """By default ptxas gives the packed rope more registers than 8 CTAs of 256 threads leave (32
    a thread); grid_ctas_per_sm=8 makes it fit 8 CTAs an SM, and the scalar twin keeps its count."""
    plain, capped = _rope_kernels(reports["plain"][0]), _rope_kernels(reports["capped"][0])
    assert plain.keys() == capped.keys() == {PACKED, SCALAR}
    assert plain[PACKED].min_ctas == 0 and plain[PACKED].registers > 32 and plain[PACKED].ctas_per_sm() < 8
    assert capped[PACKED].min_ctas == 8 and capped[PACKED].registers <= 32
    assert capped[PACKED].ctas_per_sm() == 8
    assert capped[SCALAR].registers == plain[SCALAR].registers and capped[SCALAR].min_ctas == 0


def test_short_kernel_names_drop_parameters_and_anonymous_namespaces() -> None:
    assert resources.short_name("(anonymous namespace)::f__k0_exp(float const*, long)") == "f__k0_exp"
    name = "void ns::gemm<bf16, Epi<(anonymous namespace)::k8>>(bf16 const*, int)"
    assert resources.short_name(name) == "void ns::gemm<bf16, Epi<k8>>"
    assert resources.short_name("k" * 100, width=10) == "kkkkkkk..."
