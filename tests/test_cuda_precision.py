"""The cuda target's precision policy (DESIGN §3): IEEE f32 math unless `fast_math=True` opts in.

By default the generated code calls CUDA's f32 math functions, each within the maximum ulp error
the CUDA C++ Programming Guide states for it (expf, exp2f, tanhf: 2 ulp; logf, log2f: 1).
`fast_math=True` builds the module with nvcc's --use_fast_math: tanh by `tanh.approx.f32`
(maximum relative error 2^-11, PTX ISA), exp and log by `ex2.approx` and `lg2.approx`, f32
denormals flushed to zero. The tests check the option reaches nvcc and the PTX, and on a GPU
that default math holds its stated bounds (an approximate function fails them by ~100 ulp or
more) while fast math holds the approximations' bounds.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
import torch

import tilefoundry
from tilefoundry.check import rel_l2, ulp
from tilefoundry.dsl import DimVar, Tensor, bf16, f32, func
from tilefoundry.dsl import tf as t
from tilefoundry.ir.errors import PlanError

sys.path.insert(0, os.path.dirname(__file__))
import catalogue_programs as cat

pytestmark = pytest.mark.usefixtures("fresh_build_cache")

M = DimVar("M", 1, 1 << 20)

# The Programming Guide's maximum ulp error of each f32 function, plus one ulp for where the
# exact value sits at a binade's edge (the check measures against the spacing above |exact|).
BOUNDS = {"exp": 3.0, "exp2": 3.0, "log": 2.0, "log2": 2.0, "tanh": 3.0}


@func
def math(x: Tensor[(M,), f32], p: Tensor[(M,), f32], u: Tensor[(M,), f32]):
    return t.exp(x), t.exp2(x), t.log(p), t.log2(p), t.tanh(u)


@func
def gelu_chain(x: Tensor[(M,), bf16], y: Tensor[(M,), bf16]):
    return t.gelu(x * 1.702 + y, approximate="tanh") * y - x


def _inputs(device: str) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(23)
    n = 1 << 18
    x = (torch.rand(n, generator=g, dtype=torch.float64) * 160 - 80).float()  # exp of normal numbers
    p = torch.exp(torch.rand(n, generator=g, dtype=torch.float64) * 60 - 30).float()  # 1e-13 .. 1e13
    u = (torch.rand(n, generator=g, dtype=torch.float64) * 20 - 10).float()
    return x.to(device), p.to(device), u.to(device)


def test_fast_math_is_off_by_default_and_reaches_nvcc_when_asked() -> None:
    from tilefoundry.codegen.cuda.build import compile_flags

    assert "--use_fast_math" not in compile_flags("sm_90a", {})
    assert "--use_fast_math" in compile_flags("sm_90a", {"fast_math": True})


def test_fast_math_refuses_a_value_it_does_not_offer() -> None:
    with pytest.raises(PlanError, match="fast_math"):
        tilefoundry.compile(gelu_chain, target="cuda", options={"fast_math": "yes"})


def test_fast_math_builds_tanh_from_the_approximate_instruction(tmp_path: Path) -> None:
    """The option changes the code, not only a flag: tanh.approx.f32 with it, never without."""
    cat.require_nvcc()
    assert "tanh.approx.f32" in cat.cuda_ptx(gelu_chain, {"fast_math": True}, tmp_path / "fast")
    assert "tanh.approx" not in cat.cuda_ptx(gelu_chain, {}, tmp_path / "ieee")


@pytest.mark.gpu
def test_default_f32_math_holds_cudas_ulp_bounds_on_gpu() -> None:
    """DESIGN §3: no approximate intrinsics unless opted in. Every function is within its stated
    bound of the exact (f64) value over 256K points (exp over [-80, 80], logs over [1e-13, 1e13],
    tanh over [-10, 10])."""
    compiled = tilefoundry.jit(math, target="cuda")
    args = _inputs("cuda")
    got = compiled(*args)
    exact = cat.exact_math(*args)
    for name, out in zip(BOUNDS, got, strict=True):
        want = exact[name]
        result = ulp(max=BOUNDS[name]).measure(out, want)
        assert result.passed, f"{name}: {result}"


@pytest.mark.gpu
def test_fast_math_holds_the_approximations_bounds_on_gpu() -> None:
    """tanh within 2^-10.9 relative (and past the IEEE bound somewhere: the option took effect),
    exp within 2^-15 relative over [-80, 80] (2 + 1.173|x| ulp, the guide's __expf bound), and a
    bf16 GELU chain within the bench's rel_l2 of the evaluator."""
    compiled = tilefoundry.jit(math, target="cuda", options={"fast_math": True})
    args = _inputs("cuda")
    exact = cat.exact_math(*args)
    got = dict(zip(BOUNDS, compiled(*args), strict=True))
    for name, bound in (("tanh", 2**-10.9), ("exp", 2**-15)):
        rel = ((got[name].double() - exact[name]).abs() / exact[name].abs()).max().item()
        assert rel <= bound, f"{name}: relative error {rel:.3g} > {bound:.3g}"
    assert not ulp(max=BOUNDS["tanh"]).measure(got["tanh"], exact["tanh"]).passed

    chain = tilefoundry.jit(gelu_chain, target="cuda", options={"fast_math": True})
    g = torch.Generator().manual_seed(5)
    x, y = (torch.randn(1 << 16, generator=g).to(torch.bfloat16).cuda() for _ in range(2))
    result = rel_l2(max=1e-2).measure(chain(x, y), gelu_chain(x, y))
    assert result.passed, str(result)
