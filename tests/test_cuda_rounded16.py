"""16-bit adds, subtractions and products computed in their own type (add_rn / sub_rn / mul_rn).

Where the evaluator computes `a op b` of two bf16 (or two f16) values in f32 and rounds the
result back, the generated code prints the 16-bit operation itself (tilefoundry/ir/tile/cexpr.py
says why the value is the same). The cuda runtime runs it as one `add.rn.bf16`-class instruction,
which ptxas pairs into HADD2 / HMUL2; the cpu runtime computes it through f32. Both must give the
evaluator's bits on every input, subnormals, infinities and signed zeros included.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
import torch

import tilefoundry
from tilefoundry.dsl import DimVar, Tensor, bf16, f16, func

sys.path.insert(0, os.path.dirname(__file__))
import catalogue_programs as cat

pytestmark = pytest.mark.usefixtures("fresh_build_cache")

M = DimVar("M", 1, 1 << 22)


@func
def chain_bf16(a: Tensor[(M,), bf16], b: Tensor[(M,), bf16], c: Tensor[(M,), bf16]):
    return (a * b + c) - b * c, a * a - c


@func
def chain_f16(a: Tensor[(M,), f16], b: Tensor[(M,), f16], c: Tensor[(M,), f16]):
    return (a * b + c) - b * c, a * a - c


def _random_bit_patterns(dtype: torch.dtype, n: int, seed: int) -> list[torch.Tensor]:
    """Three tensors of random 16-bit patterns: every exponent, subnormals, infinities, NaNs."""
    g = torch.Generator().manual_seed(seed)
    bits = (torch.randint(-(1 << 15), 1 << 15, (n,), generator=g, dtype=torch.int16) for _ in range(3))
    return [b.view(dtype) for b in bits]


def _assert_same_bits(got: torch.Tensor, want: torch.Tensor) -> None:
    """Equal bit patterns, NaN payloads aside (any NaN matches any NaN)."""
    nan = want.isnan()
    assert torch.equal(got.isnan(), nan), "NaNs differ"
    differ = (got.view(torch.int16) != want.view(torch.int16)) & ~nan
    assert not differ.any(), (
        f"{int(differ.sum())} of {want.numel()} differ, first at {int(differ.nonzero()[0])}: "
        f"got {got[differ][:4].tolist()}, want {want[differ][:4].tolist()}"
    )


def test_the_default_build_computes_16_bit_chains_in_16_bit_instructions(tmp_path: Path) -> None:
    cat.require_nvcc()
    ptx = cat.cuda_ptx(chain_bf16, {}, tmp_path / "bf16")
    for op in ("mul.rn.bf16", "add.rn.bf16", "sub.rn.bf16"):
        assert op in ptx, op
    ptx = cat.cuda_ptx(chain_f16, {}, tmp_path / "f16")
    for op in ("mul.rn.f16", "add.rn.f16", "sub.rn.f16"):
        assert op in ptx, op


@pytest.mark.parametrize("fn", [chain_bf16, chain_f16], ids=["bf16", "f16"])
def test_cpu_target_gives_the_evaluators_bits(fn) -> None:
    dtype = torch.bfloat16 if fn is chain_bf16 else torch.float16
    args = _random_bit_patterns(dtype, 1 << 14, seed=3)
    compiled = tilefoundry.jit(fn, target="cpu")
    for got, want in zip(compiled(*args), fn(*args), strict=True):
        _assert_same_bits(got, want)


@pytest.mark.gpu
@pytest.mark.parametrize("fn", [chain_bf16, chain_f16], ids=["bf16", "f16"])
def test_cuda_target_gives_the_evaluators_bits_on_gpu(fn) -> None:
    """1M random bit patterns a tensor (with 16-byte packs and the odd tail's scalar lanes)."""
    dtype = torch.bfloat16 if fn is chain_bf16 else torch.float16
    compiled = tilefoundry.jit(fn, target="cuda")
    for n in (1 << 20, (1 << 20) - 3):
        args = [t.cuda() for t in _random_bit_patterns(dtype, n, seed=n)]
        for got, want in zip(compiled(*args), fn(*args), strict=True):
            _assert_same_bits(got, want)
