"""Caches updated in place on cuda (codegen/cuda/in_place.py): one kernel, the region alone when donated.

A cache update keeps one kernel, batched with its neighbour as before; it takes a flag the host
sets when every output it updates is passed as its source, and then counts the axis loop over
the region alone, skipping an index outside the cache. The source builds with nvcc; on a GPU
(marker `gpu`) a donated call equals an undonated one bit for bit and the evaluator within
bf16 bounds, returns the cache itself, and a bad pos raises without writing around the cache.
"""

from __future__ import annotations

import os
import re
import sys

import pytest
import torch

import tilefoundry
from tilefoundry.check import allclose
from tilefoundry.codegen.cuda.catalog import arch_catalog
from tilefoundry.codegen.cuda.emit import emit_module
from tilefoundry.dsl import DimVar, Tensor, bf16, func, i64, tf
from tilefoundry.ir.pipeline import schedule_function
from tilefoundry.models import open_model, write_random_checkpoint
from tilefoundry.runtime import donate, generate

sys.path.insert(0, os.path.dirname(__file__))
from catalogue_programs import require_nvcc
from decode_layer import decode_attention
from generation_doubles import no_donation, spy_on_caches

pytestmark = pytest.mark.usefixtures("fresh_build_cache")

T = DimVar("T", 1, 129)
CACHE = (1, 2, 128, 64)
POS = "cache_update: pos + new's extent does not fit the cache; pos = "
BF16 = allclose(atol=2e-2, rtol=2e-2)  # rope's products rounded to bf16 where the evaluator rounds once


@func
def rope_append(
    q: Tensor[(1, 4, T, 64), bf16],
    k: Tensor[(1, 2, T, 64), bf16],
    cos: Tensor[(128, 64), bf16],
    sin: Tensor[(128, 64), bf16],
    positions: Tensor[(T,), i64],
    pos: Tensor[(), i64],
    cache: Tensor[CACHE, bf16],
):
    # rope of q and the cache update of rope(k): two independent grids, one batched launch
    return tf.rope(q, cos, sin, positions), tf.cache_update(cache, pos, tf.rope(k, cos, sin, positions))


def _source(fn) -> str:
    catalog = arch_catalog("sm_90a")
    return emit_module(fn.name, (schedule_function(fn, catalog, {}),), catalog, {})


def test_the_cache_update_takes_a_flag_and_counts_the_region_when_it_is_set() -> None:
    """The batch of rope and the update passes the update's flag; its loop over the cache rows counts
    T from pos when set, 128 from 0 otherwise, and skips a row outside the cache. pos is read once,
    before the loop, so its load need not wait behind the loop index's divisions."""
    text = _source(rope_append)
    (flag,) = set(re.findall(r"const bool (\w+_in_place_) = b_out1 == b_cache;", text))
    entry = text[text.index("void rope_append_entry(") :]
    assert re.search(r"e\.noalias\(\{.*\}, 2, \{\{8, 6\}\}\);", entry)
    batches = re.findall(rf"launch_kernel\((rope_append__\w+_batch(?:_packed)?), .*, {flag}, end0_\);", entry)
    assert sorted(batches) == ["rope_append__k0_k1_batch", "rope_append__k0_k1_batch_packed"]
    assert entry.count(f"({flag} ? d_T : int64_t(128LL))") == 2  # each variant's host work
    for name in batches:
        kernel = text[text.index(f"__global__ void __launch_bounds__(256) {name}(") :]
        kernel = kernel[: kernel.index("\n}\n")]
        assert f"bool {flag}, int64_t end0_)" in kernel
        start = "const int64_t k1_cache_update_start_ = b_pos[0];"
        assert kernel.index(start) < kernel.rindex("for (int64_t lin_ = ")  # the update is second
        assert f"const int64_t i2 = {flag} ? (k1_cache_update_start_ + i2_r) : i2_r;" in kernel
        assert "if (i2 < 0 || i2 >= int64_t(128LL)) continue;  // outside the tensor" in kernel


def test_decode_attention_updates_both_caches_in_its_batched_launch() -> None:
    """The decode layer's k and v cache updates share one flag, set when both are their sources."""
    text = _source(decode_attention())
    assert "const bool k8_cache_update_in_place_ = b_out1 == b_k_cache && b_out2 == b_v_cache;" in text
    assert ", {{16, 6}, {17, 7}});" in text
    assert text.count("bool k8_cache_update_in_place_, int64_t end0_)") == 2  # scalar and packed batch
    assert "cuda: in place when out1 == k_cache, out2 == v_cache (k8_cache_update_in_place_)" in text


def test_in_place_source_builds_with_nvcc() -> None:
    """The batched update with its flag compiles with nvcc (no GPU needed)."""
    require_nvcc()
    linked = tilefoundry.compile(rope_append, target="cuda")
    assert linked.library.is_file() and dict(linked.entry.updates) == {1: 6}


def _args(n: int, pos: int, gen: torch.Generator) -> list[torch.Tensor]:
    def w(*shape: int) -> torch.Tensor:
        return torch.randn(*shape, generator=gen).to(torch.bfloat16).cuda()

    return [
        w(1, 4, n, 64),
        w(1, 2, n, 64),
        w(128, 64),
        w(128, 64),
        torch.arange(pos, pos + n, dtype=torch.int64).cuda(),
        torch.tensor(pos, dtype=torch.int64).cuda(),
        w(*CACHE),
    ]


@pytest.fixture(scope="module")
def on_gpu():
    return tilefoundry.build(rope_append, target="cuda")


@pytest.mark.gpu
@pytest.mark.parametrize(("n", "pos"), [(1, 40), (1, 127), (5, 123), (128, 0)])
def test_donated_update_equals_the_undonated_one_and_the_evaluator(on_gpu, n: int, pos: int) -> None:
    """Donated: the result is the cache, bit-identical to the undonated call, within bf16 of the evaluator."""
    gen = torch.Generator().manual_seed(n * 1000 + pos)
    args = _args(n, pos, gen)
    ref = rope_append(*[a.cpu() for a in args])
    q1, plain = on_gpu(*[a.clone() for a in args])
    cache = args[6]
    with donate(cache):
        q2, got = on_gpu(*args)
    torch.cuda.synchronize()
    assert got is cache and plain is not cache
    assert torch.equal(got, plain) and torch.equal(q1, q2)
    assert BF16.measure(got.cpu(), ref[1]).passed


@pytest.mark.gpu
def test_a_bad_pos_raises_and_writes_nothing_around_the_cache(on_gpu) -> None:
    """pos + T past the cache: IndexError, and the donated cache and the memory around it unchanged."""
    gen = torch.Generator().manual_seed(3)
    n = CACHE[0] * CACHE[1] * CACHE[2] * CACHE[3]
    buf = torch.randn(3 * n, generator=gen).to(torch.bfloat16).cuda()
    cache = buf[n : 2 * n].view(CACHE)
    before = buf.clone()
    for bad in (126, -1):
        args = _args(3, 10, gen)
        args[5].fill_(bad)
        with donate(cache), pytest.raises(IndexError, match=re.escape(f"rope_append: {POS}{bad}")):
            on_gpu(*args[:6], cache)
        torch.cuda.synchronize()
        assert torch.equal(buf, before)


@pytest.mark.gpu
def test_a_captured_donated_update_replays_in_place(on_gpu) -> None:
    """Captured in a CUDA graph with the cache donated, each replay writes the new rows into it."""
    gen = torch.Generator().manual_seed(9)
    args = _args(1, 7, gen)
    cache = args[6]
    on_gpu(*[a.clone() for a in args])  # warm-up outside the capture
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph), donate(cache):
        _, got = on_gpu(*args)
    assert got is cache
    for pos in (7, 8, 9):
        args[5].fill_(pos)
        args[4].fill_(pos)
        want = rope_append(*[a.cpu() for a in args])[1]
        graph.replay()
        torch.cuda.synchronize()
        assert BF16.measure(cache.cpu(), want).passed


@pytest.mark.gpu
def test_generation_with_donated_caches_gives_the_undonated_tokens(tmp_path, monkeypatch) -> None:
    """The compiled cuda twin of the demo LM: eager and graphed decoding, both donating their caches,
    give the tokens of decoding that donates nothing; the graphed steps hand back the caches made."""
    ckpt = write_random_checkpoint(tmp_path / "ckpt", seed=5)
    model = open_model(ckpt, target="cuda", device="cuda", context=64).model
    prompt = torch.tensor([7, 3, 250, 19, 4], device="cuda")
    with no_donation(monkeypatch):
        before = generate(model, prompt, max_new_tokens=16, cuda_graph=False).new_tokens.tolist()
    made, returned = spy_on_caches(model, monkeypatch)
    eager = generate(model, prompt, max_new_tokens=16, cuda_graph=False)
    graphed = generate(model, prompt, max_new_tokens=16, cuda_graph=True)
    assert graphed.cuda_graph and graphed.graph_refusal is None
    assert eager.new_tokens.tolist() == before and graphed.new_tokens.tolist() == before
    # the graphed run's prefill, warm-up and captured step all return the caches init_caches made
    assert returned and all(all(a is b for a, b in zip(step, made, strict=True)) for step in returned[-3:])
