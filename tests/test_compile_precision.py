"""The cpu target's precision policy: compiled f32 math within stated ulp bounds of the exact value.

DESIGN §3: f32 work stays f32. By default vector math goes through glibc's libmvec (documented
<= 4 ulp; measured worst below); `vector_math=False` keeps glibc's scalar functions (<= 1 ulp for
exp/log, 2 for tanh). The bounds sit just above the measured worst, so a worse approximation (a
fast-math exp, a polynomial of lower degree) fails them.
"""

from __future__ import annotations

import os
import sys

import pytest
import torch

import tilefoundry
from tilefoundry.check import max_abs, ulp
from tilefoundry.dsl import DimVar, Tensor, f32, func
from tilefoundry.dsl import tf as t
from tilefoundry.ir.errors import PlanError

sys.path.insert(0, os.path.dirname(__file__))
from catalogue_programs import exact_math

M = DimVar("M", 1, 1 << 20)

# function -> (libmvec bound, scalar glibc bound) in ulp; measured worst over 4M points:
# libmvec exp 2.61, exp2 0.99, log 3.93, log2 1.90, tanh 1.36, sigmoid 3.45, softplus 3.09;
# scalar  exp 0.50, exp2 0.50, log 0.81, log2 0.74, tanh 2.10, sigmoid 2.45, softplus 1.48.
BOUNDS = {
    "exp": (3.0, 1.0),
    "exp2": (1.5, 1.0),
    "log": (4.0, 1.0),
    "log2": (2.5, 1.0),
    "tanh": (2.0, 2.5),
    "sigmoid": (4.0, 3.0),
    "softplus": (4.0, 2.0),
}


pytestmark = pytest.mark.usefixtures("fresh_build_cache")


@func
def math(x: Tensor[(M,), f32], p: Tensor[(M,), f32], u: Tensor[(M,), f32]):
    return t.exp(x), t.exp2(x), t.log(p), t.log2(p), t.tanh(u), t.sigmoid(u), t.softplus(u), t.gelu(u)


def _inputs() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(11)
    n = 1 << 16
    x = (torch.rand(n, generator=g, dtype=torch.float64) * 174 - 87).float()  # exp without overflow
    p = torch.exp(torch.rand(n, generator=g, dtype=torch.float64) * 60 - 30).float()  # 1e-13 .. 1e13
    u = (torch.rand(n, generator=g, dtype=torch.float64) * 40 - 20).float()
    return x, p, u


@pytest.mark.parametrize("vector_math", [True, False])
def test_precision_f32_math_stays_within_stated_ulp_bounds(vector_math: bool) -> None:
    """DESIGN §3 (f32 stays f32, no approximate math unless opted in): each compiled math function
    is within its stated ulp bound of the exact (f64) value, for libmvec and for scalar glibc."""
    compiled = tilefoundry.jit(math, target="cpu", options={"vector_math": vector_math})
    args = _inputs()
    got = compiled(*args)
    exact = exact_math(*args)
    for (name, want), out in zip(exact.items(), got, strict=True):
        if name == "gelu":  # near its zero crossing gelu's ulp is unbounded for torch too
            assert max_abs(max=1e-6).measure(out, want).passed
            continue
        bound = BOUNDS[name][0 if vector_math else 1]
        result = ulp(max=bound).measure(out, want)
        worst = result.values["max_ulp"]
        assert result.passed, f"{name}: {worst:.2f} ulp > {bound} (vector_math={vector_math})"


def test_vector_math_option_must_be_a_bool() -> None:
    """A misspelled vector_math value is refused before planning, naming the option."""
    with pytest.raises(PlanError, match=r"cpu: option vector_math must be True or False, got 'no'"):
        tilefoundry.compile(math, target="cpu", options={"vector_math": "no"})
