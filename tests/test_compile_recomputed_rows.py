"""Head norms recomputed by their readers (plan/partition.py, `Fold`), compiled and run.

A per-head RMS norm read only by rope, or stored by a cache update, has no kernel: each reader
folds its head's sum of squares itself. On cpu (a C++ loop in a lambda) and on cuda (marker
`gpu`: once per 16-byte pack, or the scalar kernel's lambda when a tensor is misaligned) the
results match the evaluator on fresh random inputs, and a donated cache is written in place.
"""

from __future__ import annotations

import os
import sys

import pytest
import torch

import tilefoundry
from tilefoundry.check import allclose
from tilefoundry.dsl import ConstTensor, DimVar, Tensor, bf16, func, i64, module, tf
from tilefoundry.runtime import donate

sys.path.insert(0, os.path.dirname(__file__))
from catalogue_programs import cuda_source, misaligned

pytestmark = pytest.mark.usefixtures("fresh_build_cache")

T = DimVar("T", 1, 33)
CACHE = (1, 2, 64, 128)
# the norm rounds to bf16 before rope, as the evaluator does; products then round once more
BF16 = allclose(atol=3e-2, rtol=3e-2)


@module
class Heads:
    @func
    def q_rope(
        q: Tensor[(1, 4, T, 128), bf16],
        g: ConstTensor[(128,), bf16],
        cos: Tensor[(64, 128), bf16],
        sin: Tensor[(64, 128), bf16],
        positions: Tensor[(T,), i64],
    ):
        return tf.rope(tf.rms_norm(q, g), cos, sin, positions)

    @func
    def k_append(
        cache: Tensor[CACHE, bf16],
        k: Tensor[(1, 2, T, 128), bf16],
        g: ConstTensor[(128,), bf16],
        cos: Tensor[(64, 128), bf16],
        sin: Tensor[(64, 128), bf16],
        positions: Tensor[(T,), i64],
        pos: Tensor[(), i64],
    ):
        return tf.cache_update(cache, pos, tf.rope(tf.rms_norm(k, g), cos, sin, positions))


def _args(name: str, n: int, pos: int, gen: torch.Generator, device: str) -> list[torch.Tensor]:
    def r(*shape: int) -> torch.Tensor:
        return torch.randn(*shape, generator=gen).to(torch.bfloat16).to(device)

    positions = torch.randint(0, 64, (n,), generator=gen).to(device)
    tables = [r(128), r(64, 128), r(64, 128), positions]
    if name == "q_rope":
        return [r(1, 4, n, 128) * 3.0, *tables]
    return [r(*CACHE), r(1, 2, n, 128) * 3.0, *tables, torch.tensor(pos).to(device)]


def _check(got: torch.Tensor, want: torch.Tensor, what: str) -> None:
    result = BF16.measure(got.cpu(), want.cpu())
    assert result.passed, f"{what}: {result.values}"


@pytest.fixture(scope="module")
def cpu():
    return {name: tilefoundry.build(Heads.functions[name], target="cpu") for name in Heads.functions}


def test_the_norms_have_no_kernel_and_the_readers_say_why() -> None:
    """Each function compiles to one element grid (after the index checks) that folds the norm."""
    for name, fn in Heads.functions.items():
        stages: dict[str, str] = {}
        tilefoundry.compile(fn, target="cpu", dump=stages.__setitem__)
        text = stages["check budget"]
        assert "[row]" not in text and text.count("[element grid]") == 1, name
        assert "recomputed here" in text and "fold_add(" in text, name


def test_shuffles_take_the_full_mask_where_whole_warps_run_the_loop() -> None:
    """q_rope's packs (4 heads of 16 a token) come in whole warps, so its fold and its exchange of
    rotated halves shuffle under the full mask. One head a token leaves half warps, and k_append's
    region test skips single heads: both keep each head's own mask (group_reduce.cuh, Callers)."""

    @func
    def one_head(
        q: Tensor[(1, 1, T, 128), bf16],
        g: ConstTensor[(128,), bf16],
        cos: Tensor[(64, 128), bf16],
        sin: Tensor[(64, 128), bf16],
        positions: Tensor[(T,), i64],
    ):
        return tf.rope(tf.rms_norm(q, g), cos, sin, positions)

    def packed(fn) -> str:
        text = cuda_source(fn, {})
        start = text.index(f"{fn.name}__k0_rope_v8(")
        return text[start : text.index("\n}\n", start)]

    q = packed(Heads.functions["q_rope"])
    assert "lane_group_reduce<16, Callers::warp>(add_combine{}, gf0_)" in q
    assert "lane_group_exchange<16, 8, Callers::warp>(ge0_, ge0x_)" in q
    for fn in (one_head, Heads.functions["k_append"]):
        kernel = packed(fn) if fn is one_head else cuda_source(fn, {})
        assert "lane_group_reduce<16>(add_combine{}, gf0_)" in kernel, fn.name
        assert "Callers::warp" not in kernel, fn.name


@pytest.mark.parametrize("n", [1, 5, 32])
def test_recomputed_norms_match_the_evaluator_on_cpu(cpu, n: int) -> None:
    """rope(rms_norm(q)) and the cache update of rope(rms_norm(k)), donated or not, on fresh inputs."""
    gen = torch.Generator().manual_seed(100 + n)
    pos = 64 - n - 3 if n < 32 else 0
    for name, fn in Heads.functions.items():
        args = _args(name, n, pos, gen, "cpu")
        want = fn(*args)
        _check(cpu[name](*args), want, f"{name} T={n}")
    args = _args("k_append", n, pos, gen, "cpu")
    want = Heads.functions["k_append"](*args)
    with donate(args[0]):
        got = cpu["k_append"](*args)
    assert got is args[0]
    _check(got, want, f"k_append donated T={n}")


# ---------------------------------------------------------------- on a GPU


@pytest.fixture(scope="module")
def cuda():
    return {name: tilefoundry.build(fn, target="cuda") for name, fn in Heads.functions.items()}


@pytest.mark.gpu
@pytest.mark.parametrize("n", [1, 7, 32])
def test_recomputed_norms_match_the_evaluator_on_gpu(cuda, n: int) -> None:
    """Packed (a fold per pack) and, with the input misaligned, scalar (a fold per element)."""
    gen = torch.Generator().manual_seed(200 + n)
    pos = 64 - n - 3 if n < 32 else 0
    for name, fn in Heads.functions.items():
        for shifted in (False, True):
            args = _args(name, n, pos, gen, "cuda")
            want = fn(*args)
            where = 0 if name == "q_rope" else 1
            if shifted:
                args[where] = misaligned(args[where])
            got = cuda[name](*args)
            torch.cuda.synchronize()
            _check(got, want, f"{name} T={n} misaligned={shifted}")
    args = _args("k_append", n, pos, gen, "cuda")
    want = Heads.functions["k_append"](*args)
    with donate(args[0]):
        got = cuda["k_append"](*args)
    torch.cuda.synchronize()
    assert got is args[0]
    _check(got, want, f"k_append donated T={n}")
