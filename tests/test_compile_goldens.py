"""The IR issue's feature programs (packages/tilefoundry-ir/tests/goldens) compile and match the evaluator.

Each program runs compiled on its own inputs; then every function of its module tree whose
extents are ints or bare DimVars is checked again at each DimVar's lower bound, middle and last
admitted extent. The CPU target runs here; CUDA compiles with nvcc here and runs in the gpu suite.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest
import torch

import tilefoundry
from tilefoundry.check import allclose, check, equal
from tilefoundry.codegen.cuda.catalog import arch_catalog
from tilefoundry.codegen.cuda.emit import emit_module
from tilefoundry.ir.dims import DimVar
from tilefoundry.ir.errors import PlanError
from tilefoundry.ir.hir import Function
from tilefoundry.ir.module import Module
from tilefoundry.ir.pipeline import schedule_function

GOLDENS = Path(__file__).resolve().parents[1] / "packages" / "tilefoundry-ir" / "tests" / "goldens"
# mesh_scopes places work explicitly on `cta` / `thread` Mesh axes. The cpu target's axes are
# worker and vector, and seed 003 has explicit bindings a target lacks fail closed; cuda runs it.
PLACED_ON_GPU_AXES = {"mesh_scopes"}
NAMES = sorted(p.stem for p in GOLDENS.glob("*.py"))
TOLERANCE = {torch.bfloat16: 3e-2, torch.float16: 4e-3, torch.float32: 1e-4}


def _load(name: str) -> ModuleType:
    path = GOLDENS / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"tilefoundry_compiled_golden_{name}", path)
    assert spec is not None and spec.loader is not None
    program = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(program)
    return program


def _expect(ref: torch.Tensor | tuple[torch.Tensor, ...]) -> dict:
    outs = ref if isinstance(ref, tuple) else (ref,)
    paths = ["output"] if not isinstance(ref, tuple) else [f"output[{i}]" for i in range(len(outs))]
    rules = {}
    for path, o in zip(paths, outs, strict=True):
        if not o.dtype.is_floating_point:
            rules[path] = [equal()]
            continue
        # A reduction's rounding error grows with the magnitude of what it sums, not with its
        # result: an output near 0 that sums terms of hundreds carries their absolute error, in
        # any summation order. The output's largest magnitude stands in for the terms' (atol),
        # and each element keeps its relative bound (rtol).
        tol = TOLERANCE[o.dtype]
        scale = max(1.0, float(o.abs().max())) if o.numel() else 1.0
        rules[path] = [allclose(atol=tol * scale, rtol=tol)]
    return rules


def _functions(program: Function | Module) -> list[Function]:
    """Every function of the program's module tree, once each."""
    found: dict[int, Function] = {}
    stack = [Module.of(program)]
    while stack:
        node = stack.pop()
        found.update((id(f), f) for f in node.functions.values())
        stack.extend(node.children)
    return list(found.values())


def _dimvar(fn: Function) -> DimVar | bool | None:
    """The one bare DimVar of fn's parameters, None without one, False if an extent is an expression."""
    seen: set[DimVar] = set()
    for p in fn.params:
        for d in p.type.shape:
            if isinstance(d, DimVar):
                seen.add(d)
            elif not isinstance(d, int):
                return False
    return False if len(seen) > 1 else next(iter(seen), None)


def _args(fn: Function, n: int, gen: torch.Generator) -> tuple[torch.Tensor, ...]:
    out = []
    for p in fn.params:
        shape = tuple(d if isinstance(d, int) else n for d in p.type.shape)
        if p.type.dtype.is_float:
            out.append(torch.randn(shape, generator=gen).to(p.type.dtype.torch))
        else:
            out.append(torch.randint(0, 4, shape, generator=gen).to(p.type.dtype.torch))
    return tuple(out)


def test_explicit_gpu_placement_fails_closed_on_cpu() -> None:
    """seed 003, Execution bridge: an explicit binding the target lacks fails closed, naming why."""
    program = _load("mesh_scopes")
    with pytest.raises(PlanError, match=r"explicit placement on 'cta' refused: the target's execution axes"):
        tilefoundry.build(program.PROGRAM, target="cpu")


@pytest.mark.parametrize("name", sorted(set(NAMES) - PLACED_ON_GPU_AXES))
def test_golden_program_compiles_for_cpu_and_matches_the_evaluator(name: str) -> None:
    """Issue 4: every example program compiles for "cpu" and passes check against the evaluator."""
    program = _load(name)
    gen = torch.Generator().manual_seed(NAMES.index(name))
    if isinstance(program.PROGRAM, Function) or Module.of(program.PROGRAM).entry:
        compiled = tilefoundry.build(program.PROGRAM, target="cpu")
        args = program.inputs(gen)
        report = check(compiled, program.run, args, expect=_expect(program.run(*args)))
        assert report.passed, f"{name}:\n{report}"
    checked = 0
    for fn in _functions(program.PROGRAM):
        var = _dimvar(fn)
        if var is False:
            continue
        compiled = tilefoundry.build(fn, target="cpu")
        for n in (var.lo, (var.lo + var.hi) // 2, var.hi - 1) if var else (0,):
            args = _args(fn, n, gen)
            report = check(compiled, fn, args, expect=_expect(fn(*args)))
            assert report.passed, f"{name}.{fn.name} at {var}={n}:\n{report}"
        checked += 1
    assert checked or name == "dimvars", f"{name}: no function was checked across its DimVar"


def _mesh_scopes_cuda() -> str:
    """The CUDA translation unit of mesh_scopes (emitted only: no nvcc, no GPU)."""
    fn = _load("mesh_scopes").PROGRAM
    catalog = arch_catalog("sm_90a")
    return emit_module(fn.name, (schedule_function(fn, catalog, {}),), catalog, {})


def _cuda_kernel(source: str, name: str) -> str:
    """The __global__ function `name` of a CUDA translation unit, through its closing brace."""
    start = source.index(f"__global__ void __launch_bounds__(32) {name}(")
    return source[start : source.index("\n}\n", start)]


def _program_id(level: str) -> str:
    return f"static_cast<int64_t>(tilefoundry::program_id<tilefoundry::TopologyScope::{level}>());"


def test_2_10_local_each_cta_and_thread_runs_its_block_of_the_placed_kernels() -> None:
    """seed 000 §2.10 local: under grid = Mesh((cta:4, thread:32)), instance (c, t) owns rows
    32c..32c+31 (Split(0) over cta) and columns 2t, 2t+1 (Split(1) over thread) of the (128, 64)
    result; its kernel runs exactly that block, its ids read through program_id (§2.2)."""
    source = _mesh_scopes_cuda()
    for kernel in ("sharded__k3_matmul", "sharded__k4_relu"):
        body = _cuda_kernel(source, kernel)
        assert f"cta_c_ = {_program_id('cta')}" in body and f"thread_c_ = {_program_id('thread')}" in body
        assert "i0_lo0_ = (cta_c_ * int64_t(32LL));" in body
        assert "i0_hi0_ = (i0_lo0_ + int64_t(32LL));" in body
        assert "i1_lo0_ = (thread_c_ * int64_t(2LL));" in body
        assert "i1_hi0_ = (i1_lo0_ + int64_t(2LL));" in body
        assert "for (int64_t i0 = i0_lo0_; i0 < i0_hi0_; ++i0) {" in body
        assert "for (int64_t i1 = i1_lo0_; i1 < i1_hi0_; ++i1) {" in body
    # k4 is cut by its reshard's layout; k3 (no sharded value) by mesh axis m on loop m, the same here.
    assert "placement: the layout of reshard@" in source


def test_execution_bridge_cuda_launches_the_mesh_as_placed() -> None:
    """seed 003, Execution bridge: the explicit Mesh over cta x thread is the launch itself,
    gridDim 4 and blockDim 32, not a grid the realization picks."""
    source = _mesh_scopes_cuda()
    assert "launch_kernel(sharded__k3_matmul, 4, 32, 0, stream_, b_w, b_x, b_t2);" in source
    assert "launch_kernel(sharded__k4_relu, 4, 32, 0, stream_, b_t2, b_out1);" in source
    assert "cuda: placed on the Mesh: <<<4, 32>>>" in source
    # The SIMT GEMM atom the planner proved for k3 gives way to the loop the placement cuts.
    assert "keeps the loop the atom cuda_gemm_simt_64x64x16_f32_rrr replaced" in source


@pytest.mark.parametrize("name", NAMES)
def test_golden_program_emits_cuda_that_nvcc_compiles(name: str) -> None:
    """Issue 5: every example program emits CUDA that nvcc compiles (here, without a GPU)."""
    for fn in _functions(_load(name).PROGRAM):
        linked = tilefoundry.compile(fn, target="cuda")
        assert linked.library.is_file() and fn.name in linked.entries


@pytest.mark.gpu
@pytest.mark.parametrize("name", NAMES)
def test_golden_program_runs_on_cuda_like_the_evaluator(name: str) -> None:
    """Issue 5: every example program, compiled for cuda, passes check against the evaluator."""
    gen = torch.Generator().manual_seed(NAMES.index(name))
    for fn in _functions(_load(name).PROGRAM):
        var = _dimvar(fn)
        if var is False:
            continue
        compiled = tilefoundry.build(fn, target="cuda")
        for n in (var.lo, (var.lo + var.hi) // 2, var.hi - 1) if var else (0,):
            args = tuple(a.cuda() for a in _args(fn, n, gen))
            report = check(compiled, fn, args, expect=_expect(fn(*args)))
            assert report.passed, f"{name}.{fn.name} at {var}={n}:\n{report}"
