"""Caches updated in place on cpu: `donate` (runtime/loader.py), EntryABI.updates, ir/plan/in_place.py.

A cache_update function compiled for cpu declares `updates`; called with the cache donated it
writes the new rows into the cache itself and returns it, otherwise it returns a fresh copy and
leaves the cache alone (seed 000 §1.1.2). Both agree with the evaluator bit for bit.
"""

from __future__ import annotations

import re

import pytest
import torch

import tilefoundry
from tilefoundry.dsl import DimVar, Tensor, f32, func, i64, tf
from tilefoundry.runtime import donate
from tilefoundry.runtime.loader import CompiledModule

pytestmark = pytest.mark.usefixtures("fresh_build_cache")

T = DimVar("T", 1, 17)
CACHE = (1, 2, 16, 8)
POS = "cache_update: pos + new's extent does not fit the cache; pos = "


@func
def append(
    k: Tensor[CACHE, f32], v: Tensor[CACHE, f32], pos: Tensor[(), i64], new: Tensor[(1, 2, T, 8), f32]
):
    return tf.cache_update(k, pos, new + 1.0), tf.cache_update(v, pos, new * 2.0)


@func
def reread(k: Tensor[CACHE, f32], pos: Tensor[(), i64], new: Tensor[(1, 2, T, 8), f32]):
    return tf.cache_update(k, pos, new), k * 3.0


@pytest.fixture(scope="module")
def compiled() -> CompiledModule:
    return tilefoundry.build(append, target="cpu")


def _args(n: int, pos: int, seed: int) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return [
        torch.randn(CACHE, generator=g),
        torch.randn(CACHE, generator=g),
        torch.tensor(pos),
        torch.randn(1, 2, n, 8, generator=g),
    ]


def test_entry_abi_declares_the_updated_outputs(compiled: CompiledModule) -> None:
    assert dict(compiled.type.updates) == {0: 0, 1: 1}
    assert str(compiled.type).endswith("; updates out0 <- k, out1 <- v)")


def test_1_1_2_an_undonated_call_leaves_the_caches_unchanged(compiled: CompiledModule) -> None:
    """seed 000 §1.1.2: a step MUST NOT mutate the caches it is given; without donate it does not."""
    args = _args(3, 5, 0)
    before = [a.clone() for a in args]
    k2, v2 = compiled(*args)
    assert k2 is not args[0] and v2 is not args[1]
    assert all(torch.equal(a, b) for a, b in zip(args, before, strict=True))
    ref = append(*before)
    assert torch.equal(k2, ref[0]) and torch.equal(v2, ref[1])


@pytest.mark.parametrize(
    ("n", "pos"), [(3, 5), (1, 15), (4, 12), (16, 0)], ids=["mid", "last-row", "last-rows", "all"]
)
def test_donated_call_writes_the_region_into_the_cache_itself(
    compiled: CompiledModule, n: int, pos: int
) -> None:
    """Donated: the result is the cache, equal to the undonated result and to the evaluator, up to
    the last valid pos."""
    args = _args(n, pos, n + pos)
    ref = append(*[a.clone() for a in args])
    undonated = compiled(*[a.clone() for a in args])
    with donate(args[0], args[1]):
        k2, v2 = compiled(*args)
    assert k2 is args[0] and v2 is args[1]
    for got, plain, want in zip((k2, v2), undonated, ref, strict=True):
        assert torch.equal(got, want) and torch.equal(plain, want)


def test_a_bad_pos_raises_and_writes_nothing(compiled: CompiledModule) -> None:
    """pos + T past the cache: the index error, and no byte written in or around the donated caches."""
    g = torch.Generator().manual_seed(7)
    n = CACHE[0] * CACHE[1] * CACHE[2] * CACHE[3]
    # Each cache is the middle third of a larger buffer: a write out of its bounds would show.
    bufs = [torch.randn(3 * n, generator=g) for _ in range(2)]
    k, v = (b[n : 2 * n].view(CACHE) for b in bufs)
    before = [b.clone() for b in bufs]
    for bad in (14, -1):
        with donate(k, v), pytest.raises(IndexError, match=re.escape(f"append: {POS}{bad}")):
            compiled(k, v, torch.tensor(bad), torch.randn(1, 2, 3, 8, generator=g))
        assert all(torch.equal(a, b) for a, b in zip(bufs, before, strict=True))


def test_donating_one_cache_updates_that_one_alone(compiled: CompiledModule) -> None:
    """k donated, v not: k is written in place (the whole kernel runs), v is copied."""
    args = _args(2, 9, 3)
    ref = append(*[a.clone() for a in args])
    v_before = args[1].clone()
    with donate(args[0]):
        k2, v2 = compiled(*args)
    assert k2 is args[0] and v2 is not args[1] and torch.equal(args[1], v_before)
    assert torch.equal(k2, ref[0]) and torch.equal(v2, ref[1])


def test_a_donated_tensor_serves_one_call(compiled: CompiledModule) -> None:
    """After its call the cache holds the result, which the caller owns again: the next call copies."""
    args = _args(1, 2, 4)
    with donate(args[0], args[1]):
        k2, v2 = compiled(*args)
        k3, v3 = compiled(k2, v2, torch.tensor(3), args[3])
    assert k2 is args[0] and k3 is not k2 and v3 is not v2


def test_a_non_contiguous_donation_is_left_alone(compiled: CompiledModule) -> None:
    """A donated view the call must copy is not the caller's tensor: it stays unchanged."""
    args = _args(2, 4, 5)
    k = torch.randn(1, 2, 8, 16).transpose(2, 3)  # (1, 2, 16, 8), not contiguous
    before = k.clone()
    with donate(k):
        k2, _ = compiled(k, *args[1:])
    assert k2 is not k and torch.equal(k, before)
    assert torch.equal(k2, append(before, *args[1:])[0])


def test_an_output_read_elsewhere_declares_no_update() -> None:
    """k is also read by k * 3: no updates, so donating it changes nothing."""
    f = tilefoundry.build(reread, target="cpu")
    assert dict(f.type.updates) == {}
    k, pos, new = torch.randn(CACHE), torch.tensor(2), torch.randn(1, 2, 3, 8)
    before = k.clone()
    with donate(k):
        k2, k3 = f(k, pos, new)
    assert k2 is not k and torch.equal(k, before) and torch.equal(k3, before * 3.0)


def test_1_2_pre_alloc_may_pass_an_updated_output_as_exactly_its_input(compiled: CompiledModule) -> None:
    """seed 000 §1.2 pre-alloc: an output may be the very input it updates, and is filled in place."""
    args = _args(3, 6, 6)
    ref = append(*[a.clone() for a in args])
    out = compiled(*args, args[0], args[1])
    assert out[0] is args[0] and torch.equal(args[0], ref[0]) and torch.equal(args[1], ref[1])


def test_1_2_pre_alloc_refuses_any_other_overlap_naming_both_parameters(compiled: CompiledModule) -> None:
    """seed 000 §1.2 pre-alloc: an output overlapping another parameter (a part of its source, another
    input, another output) is a TypeError naming both."""
    k, v, pos, new = _args(3, 6, 8)
    big = torch.randn(2 * k.numel())
    part = big[1 : 1 + k.numel()].view(CACHE)  # overlaps the cache stored at big[:k.numel()]
    with pytest.raises(TypeError, match=r"^append: output 'out0' overlaps parameter 'k' in memory; pass a "
                       r"separate tensor, or exactly 'k', which it updates in place$"):
        compiled(big[: k.numel()].view(CACHE), v, pos, new, part, torch.empty(CACHE))
    with pytest.raises(TypeError, match=r"^append: output 'out1' overlaps parameter 'k' in memory"):
        compiled(k, v, pos, new, torch.empty(CACHE), k)
    out = torch.empty(CACHE)
    with pytest.raises(TypeError, match=r"^append: output 'out1' overlaps parameter 'out0' in memory"):
        compiled(k, v, pos, new, out, out)


def test_donate_takes_tensors_only() -> None:
    with (
        pytest.raises(TypeError, match=r"^donate: argument 1 must be a torch.Tensor, got list$"),
        donate(torch.zeros(1), [1]),  # type: ignore[arg-type]
    ):
        pass
