"""GEMM chains (ir.plan.gemm_chains, atoms/gemm_chain.cuh): a decoder MLP's gate/up and down calls
as one split launch and its reduce at M = 1, the two calls as before at any other M. Chains are
asked for (gemm_fusion="chains"; the default fuses epilogues only until a model measures them).

The plan and the generated source are checked on any machine, the module's nvcc build where the
cuda target compiles, and the results and the kernels launched on a GPU.
"""

from __future__ import annotations

import os
import sys
from dataclasses import replace

import pytest
import torch

import tilefoundry
from tilefoundry.codegen.cpu.catalog import host_catalog
from tilefoundry.codegen.cpu.probe import host_facts
from tilefoundry.codegen.cuda.catalog import arch_catalog
from tilefoundry.dsl import ConstTensor, DimVar, Tensor, bf16, func, module, tf
from tilefoundry.ir.pipeline import schedule_function
from tilefoundry.runtime.loader import CompiledFunction, load_linked_module

sys.path.insert(0, os.path.dirname(__file__))
import catalogue_programs as cat

M = DimVar("M", 1, 17)
TOLERANCE = {torch.bfloat16: 3e-2}
CHAINS = {"gemm_fusion": "chains"}


@func
def mlp(
    x: Tensor[(M, 512), bf16],
    g: ConstTensor[(512,), bf16],
    gate: ConstTensor[(1536, 512), bf16],
    up: ConstTensor[(1536, 512), bf16],
    down: ConstTensor[(512, 1536), bf16],
):
    h = tf.rms_norm(x, g, eps=1e-6)
    return x + (tf.silu(h @ gate.T) * (h @ up.T)) @ down.T


@func
def wide_mlp(
    xw: Tensor[(M, 2048), bf16],
    gw: ConstTensor[(2048,), bf16],
    gate_w: ConstTensor[(6144, 2048), bf16],
    up_w: ConstTensor[(6144, 2048), bf16],
    down_w: ConstTensor[(2048, 6144), bf16],
):
    # Qwen3-1.7B's MLP: 8 packs of A a lane, 48 units of I a CTA on 132 SMs.
    h = tf.rms_norm(xw, gw, eps=1e-6)
    return xw + (tf.silu(h @ gate_w.T) * (h @ up_w.T)) @ down_w.T


@func
def odd_mlp(
    xo: Tensor[(M, 320), bf16],
    gate_o: ConstTensor[(640, 320), bf16],
    up_o: ConstTensor[(640, 320), bf16],
    down_o: ConstTensor[(320, 640), bf16],
):
    # K = 320 is not 256 x P: chained in the plan, emitted as two calls.
    return xo + (tf.silu(xo @ gate_o.T) * (xo @ up_o.T)) @ down_o.T


@func
def bare_mlp(
    x: Tensor[(M, 512), bf16],
    gate: ConstTensor[(1536, 512), bf16],
    up: ConstTensor[(1536, 512), bf16],
    down: ConstTensor[(512, 1536), bf16],
):
    # No residual: down has no epilogue to hand its sums to.
    return (tf.silu(x @ gate.T) * (x @ up.T)) @ down.T


@module
class Chains:
    """What the GPU runs (odd_mlp's source alone is checked)."""

    mlp = mlp
    wide_mlp = wide_mlp


def _schedule(fn, options=CHAINS):
    return schedule_function(fn, arch_catalog("sm_90a"), options)


def _gemms(fn):
    """The two GEMM kernels of an MLP scheduled for sm_90a with chains."""
    first, second = (k for k in _schedule(fn).kernels if "matmul" in k.name)
    return first, second


def test_the_mlp_names_down_the_chain_of_gate_and_up() -> None:
    """gate/up (grouped, silu * mul as epilogue) is chained with down (the residual add as epilogue)."""
    first, second = _gemms(mlp)
    assert first.body.chain is second
    assert any(d.startswith(f"chained with {second.name}:") for d in first.decisions)
    assert any(d.startswith(f"chain of {first.name}:") for d in second.decisions)


@pytest.mark.parametrize("fusion", ["auto", "epilogues"])
def test_other_fusions_keep_the_calls_apart_and_say_so(fusion: str) -> None:
    program = _schedule(mlp, {"gemm_fusion": fusion})
    assert all(k.body.chain is None for k in program.kernels if "matmul" in k.name)
    assert f"no GEMM chains: option gemm_fusion={fusion!r} fuses epilogues" in program.notes


def test_the_cpu_target_never_chains() -> None:
    # The cpu GEMM atoms need AVX-512: this host is described with it, so that the atoms are there
    # to be left unchained on any machine (an AVX2 host's catalog has none).
    facts = host_facts()
    avx512 = replace(facts, flags=facts.flags | {"avx512f", "avx512bw", "avx512vl", "fma"})
    program = schedule_function(mlp, host_catalog(avx512), CHAINS)
    atoms = [k.body for k in program.kernels if hasattr(k.body, "chain")]
    assert atoms and all(a.chain is None for a in atoms)
    assert not any("chain" in d for k in program.kernels for d in k.decisions)


def test_a_second_gemm_without_an_epilogue_is_not_chained_and_the_first_says_why() -> None:
    first, second = _gemms(bare_mlp)
    assert first.body.chain is None
    assert f"no chain: {second.name} has no epilogue" in first.decisions


def _entry(fn) -> str:
    source = cat.cuda_source(fn, CHAINS)
    start = source.index(f"void {fn.name}_entry(")
    return source[start : source.index("\n}\n", start)]


def test_the_chained_source_asks_for_the_split_and_guards_both_calls() -> None:
    """One gemm_chain call with A's 2 packs a lane; each call and each epilogue flag hang on its flag."""
    entry = _entry(mlp)
    _, second = _gemms(mlp)
    flag = f"{second.name}_chained_"
    assert entry.count("gemm_chain<GemmLayout::rcr, 2, 2>(") == 1
    assert entry.count(f"if (!{flag}) {{") == 2
    assert entry.count("gemm_epilogue<GemmLayout::rcr,") == 2
    assert entry.index("gemm_chain<") < entry.index("gemm_epilogue<GemmLayout::rcr, 2>")
    assert entry.count(f"_applied_ = {flag};") == 2


def test_k_off_256_keeps_two_calls_saying_why() -> None:
    entry = _entry(odd_mlp)
    assert "gemm_chain<" not in entry
    assert "// no chain with" in entry and "K is not a constant 256 x 1..16" in entry


@pytest.fixture(scope="module")
def linked() -> tilefoundry.LinkedModule:
    cat.require_nvcc()
    return tilefoundry.compile(Chains, target="cuda", options=CHAINS)


def test_the_chained_module_builds_with_nvcc(linked) -> None:
    assert set(linked.entries) == {"mlp", "wide_mlp"}


def _make(hidden: int, inter: int):
    def make(n: int, gen: torch.Generator) -> tuple:
        def w(*shape: int, scale: float) -> torch.Tensor:
            return (torch.randn(*shape, generator=gen) * scale).to(torch.bfloat16).cuda()

        x = w(n, hidden, scale=1.0)
        norm = w(hidden, scale=1.0)
        gate, up = w(inter, hidden, scale=hidden**-0.5), w(inter, hidden, scale=hidden**-0.5)
        return x, norm, gate, up, w(hidden, inter, scale=inter**-0.5)

    return make


@pytest.mark.gpu
@pytest.mark.parametrize(("fn", "hidden", "inter"), [(mlp, 512, 1536), (wide_mlp, 2048, 6144)])
def test_chained_mlps_match_the_evaluator_on_gpu(linked, fn, hidden, inter) -> None:
    """M = 1 runs the split launch, 2 and 5 the two calls; each against the evaluator."""
    cat.check_compiled(linked, fn, (1, 2, 5), device="cuda", tolerance=TOLERANCE, make=_make(hidden, inter))


@pytest.mark.gpu
def test_one_row_runs_the_norm_the_split_and_its_reduce_and_two_rows_do_not_on_gpu(linked) -> None:
    """At M = 1 the step is three kernels (the norm, the split, its reduce); at M = 2, no chain kernel."""
    body = CompiledFunction(load_linked_module(linked, "wide_mlp"), False)
    gen = torch.Generator().manual_seed(3)
    _, one = cat.launched(body, *_make(2048, 6144)(1, gen))
    _, two = cat.launched(body, *_make(2048, 6144)(2, gen))
    one = [k for k in one if "Memset" not in k]
    assert len(one) == 3, one
    assert "rms_norm" in one[0] and "gemm_chain_split" in one[1] and "gemm_chain_reduce" in one[2]
    assert not any("gemm_chain" in k for k in two)
