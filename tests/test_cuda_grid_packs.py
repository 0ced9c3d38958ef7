"""Packs a thread in packed flat grids (option `grid_packs`, codegen/cuda/kernels.py).

A thread of a packed grid takes U = `grid_packs` 16-byte packs, `stride_` apart, each pack's loads
written before the earlier packs' arithmetic; the host launches 1/U of the CTAs. `auto` gives a
gather (every packed address depends on a load) two packs and every other grid one; launches that
may update their outputs in place keep one. Where a row's threads fold and exchange values by
shuffles (a head's norm and rotate-half), every pack's loads come before any pack's shuffles.
On a GPU (marker `gpu`) every count computes the evaluator's values, ragged tails and the scalar
twin included.
"""

from __future__ import annotations

import os
import re
import sys

import pytest
import torch

import tilefoundry
from tilefoundry.dsl import DimVar, Tensor, bf16, f32, func, i64, module, tf
from tilefoundry.ir.errors import PlanError

sys.path.insert(0, os.path.dirname(__file__))
import catalogue_programs as cat

pytestmark = pytest.mark.usefixtures("fresh_build_cache")

T = DimVar("T", 1, 71)


@module
class Grids:
    @func
    def gelu(x: Tensor[(T, 64), bf16], y: Tensor[(T, 64), bf16]):
        return tf.gelu(x * 1.702 + y, approximate="tanh") * y - x

    @func
    def rows(table: Tensor[(50, 32), f32], ids: Tensor[(T,), i64]):
        return tf.embedding(table, ids)

    @func
    def head_rope(
        x: Tensor[(1, 2, T, 64), bf16],
        w: Tensor[(64,), bf16],
        cos: Tensor[(80, 64), bf16],
        sin: Tensor[(80, 64), bf16],
        positions: Tensor[(T,), i64],
    ):
        return tf.rope(tf.rms_norm(x, w, eps=1e-6), cos, sin, positions)


def _packed_kernel(text: str, name: str) -> str:
    start = text.index(f"{name}_v")
    return text[start : text.index("\n}\n", start)]


def _packed_launch_per_block(text: str) -> int:
    entry = text[text.rindex("_entry(") :]
    found = re.findall(r"launch_kernel\(\w+_v\d+, grid_blocks\(work_, (\d+)\), 256,", entry)
    assert len(found) == 1, entry
    return int(found[0])


def test_auto_gives_a_gather_two_packs_and_an_elementwise_grid_one() -> None:
    """The embedding's pack address waits on its id: two packs a thread, the second `stride_` ahead
    (redoing the first past the end, so no branch holds its id and row loads back), and half the
    CTAs. gelu_chain's packs keep one a thread."""
    rows = cat.cuda_source(Grids.functions["rows"], {})
    kernel = _packed_kernel(rows, "rows__k0_embedding")
    assert "lin_ += 2 * stride_" in kernel
    assert "const int64_t lin1_ = lin_ + stride_ < work_ ? lin_ + stride_ : lin_;" in kernel
    assert "if (" not in kernel
    assert kernel.count("load_pack<4>(") == 2  # f32: 16-byte packs of 4
    assert kernel.index("load_pack<4>(", kernel.index("lin1_")) < kernel.index("store_pack<4>(")
    note = "2 packs a thread, grid-strided, each pack's loads written before the arithmetic of the packs"
    assert note + " before it (grid_packs)" in rows
    assert _packed_launch_per_block(rows) == 512
    gelu = cat.cuda_source(Grids.functions["gelu"], {})
    assert "lin1_" not in gelu and "packs a thread" not in gelu
    assert _packed_launch_per_block(gelu) == 256


@pytest.mark.parametrize("count", [1, 2, 4])
def test_grid_packs_sets_every_packed_grid_and_its_launch(count: int) -> None:
    """An explicit count applies to gathers and elementwise grids alike: U - 1 nested packs, the
    loop advancing U strides, and U times fewer CTAs; the scalar twin keeps one element a thread."""
    grids = ((Grids.functions["gelu"], "gelu__k0_sub"), (Grids.functions["rows"], "rows__k0_embedding"))
    for fn, kernel in grids:
        text = cat.cuda_source(fn, {"grid_packs": count})
        packed = _packed_kernel(text, kernel)
        assert sum(f"const int64_t lin{u}_ = " in packed for u in range(1, 4)) == count - 1, packed
        assert ("lin_ += stride_)" if count == 1 else f"lin_ += {count} * stride_)") in packed
        assert _packed_launch_per_block(text) == 256 * count
        scalar = text[text.index(f"{kernel}") : text.index(f"{kernel}_v")]
        assert "lin1_" not in scalar


def test_shuffling_grids_take_the_count_and_in_place_grids_keep_one() -> None:
    """Under grid_packs=2 a head's threads still fold its norm and exchange halves by shuffles: every
    pack's loads come first, then each pack's shuffles (past the end a row's threads all redo their
    first pack). The catalogue's cache update (in place when the cache is donated) keeps one pack,
    and says why."""
    text = cat.cuda_source(Grids.functions["head_rope"], {"grid_packs": 2})
    kernel = _packed_kernel(text, "head_rope__k0_rope")
    later = kernel.index("const int64_t lin1_ = ")
    assert kernel.count("lane_group_reduce<8>(") == 2 and kernel.count("lane_group_exchange<8, 4>(") == 2
    first_loads = kernel[:later].count("load_pack<8>(")
    assert first_loads >= 4 and "lane_group" not in kernel[:later]  # x, w, cos and sin of pack 0
    assert _packed_launch_per_block(text) == 512
    cache = cat.cuda_source(cat.cache, {"grid_packs": 2})
    assert "cuda: one pack a thread: the launch may update its outputs in place" in cache
    assert "lin1_" not in cache


def test_grid_packs_refuses_a_count_it_does_not_offer() -> None:
    with pytest.raises(PlanError, match="grid_packs"):
        cat.cuda_source(Grids.functions["gelu"], {"grid_packs": 3})


# ---------------------------------------------------------------- nvcc, and on a GPU


@pytest.fixture(scope="module")
def linked_by_count():
    cat.require_nvcc()
    return {n: tilefoundry.compile(Grids, target="cuda", options={"grid_packs": n}) for n in (2, 4)}


def test_packed_grids_build_with_nvcc(linked_by_count) -> None:
    for linked in linked_by_count.values():
        assert linked.library.is_file() and set(linked.entries) == {"gelu", "rows", "head_rope"}


@pytest.mark.gpu
@pytest.mark.parametrize("count", [2, 4])
@pytest.mark.parametrize("name", ["gelu", "rows", "head_rope"])
def test_packs_a_thread_match_evaluator_on_gpu(linked_by_count, count: int, name: str) -> None:
    """Each output element is written once with the evaluator's value: T = 1, 3, 33 and 70 leave
    ragged last strides (70 rows of gelu are 560 packs, 2.2 CTAs of 256), and a misaligned input
    runs the scalar twin."""
    from tilefoundry.runtime.loader import load_linked_module

    fn = Grids.functions[name]
    f = load_linked_module(linked_by_count[count], name)
    gen = torch.Generator().manual_seed(count)
    for n in (1, 3, 33, 70):
        for shifted in (False, True):
            args = list(cat.inputs(fn, n, gen, "cuda"))
            if name == "rows":
                args[1] = torch.randint(0, 50, (n,), generator=gen).cuda()
            if name == "head_rope":
                args[4] = torch.randint(0, 80, (n,), generator=gen).cuda()
            want = fn(*args)
            if shifted:
                args[0] = cat.misaligned(args[0])
            got = torch.full_like(want, float("nan"))
            f(*args, got)
            torch.cuda.synchronize()
            what = f"{name}, grid_packs={count}, T={n}, misaligned={shifted}"
            torch.testing.assert_close(got, want, atol=3e-2, rtol=3e-2, msg=lambda m, w=what: f"{w}: {m}")
