"""Launch batching on cuda (codegen/cuda/batching.py): independent neighbours share one launch.

The decode layer's attention program launches its per-head q and k norms as one kernel, and
rope with the cache update as another; the source builds with nvcc. On a GPU (marker `gpu`)
batched row norms and element grids, packed and not, with aligned and misaligned tensors,
match the evaluator, and the batched decode attention equals the unbatched one bit for bit.
"""

from __future__ import annotations

import os
import re
import sys

import pytest
import torch

import tilefoundry
from tilefoundry.codegen.cuda.catalog import arch_catalog
from tilefoundry.codegen.cuda.emit import emit_module
from tilefoundry.dsl import ConstTensor, DimVar, Tensor, bf16, f32, func, module, tf
from tilefoundry.ir.pipeline import schedule_function

sys.path.insert(0, os.path.dirname(__file__))
from catalogue_programs import inputs, misaligned, require_nvcc
from decode_layer import attention_args, decode_attention

pytestmark = pytest.mark.usefixtures("fresh_build_cache")

T = DimVar("T", 1, 33)
TOLERANCE = {torch.float32: 2e-4, torch.bfloat16: 3e-2}


@module
class Batched:
    @func
    def head_norms(
        q: Tensor[(T, 4, 64), bf16],
        k: Tensor[(T, 2, 64), bf16],
        gq: ConstTensor[(64,), bf16],
        gk: ConstTensor[(64,), bf16],
    ):
        # two independent per-head RMS norms: rows members, a warp per row
        return tf.rms_norm(q, gq), tf.rms_norm(k, gk)

    @func
    def grids(a: Tensor[(T, 64), f32], b: Tensor[(T, 5), f32], c: Tensor[(T, 3, 32), bf16]):
        # three independent element grids: a and c with 16-byte packs, b without
        return tf.exp(a) * 2.0, tf.tanh(b), c + c


def test_decode_attention_launches_rope_and_cache_update_once_with_the_head_norms_inside() -> None:
    """k7 + k8 (rope of q, the cache update of k and v): one launch, which also recomputes the q and
    k head norms (each thread folds its pack's squares, a head's 8 threads combine them by
    shuffles); the norms launch nothing."""
    fn = decode_attention()
    catalog = arch_catalog("sm_90a")
    text = emit_module(fn.name, (schedule_function(fn, catalog, {}),), catalog, {})
    entry = text[text.index("void attention_entry(") :]
    launched = re.findall(r"launch_kernel\((\w+),", entry)
    assert {"attention__k7_k8_batch_packed", "attention__k7_k8_batch"} <= set(launched)
    assert not any("rms_norm" in x and "k0" not in x for x in launched)
    for alone in ("k7_rope", "k8_cache_update"):
        assert f"attention__{alone}" not in launched
    assert "// batch attention__k7_k8_batch: k7_rope + k8_cache_update" in text
    assert "(k7_rope writes t7; k8_cache_update writes out1, out2)" in text
    packed = text[text.index("attention__k7_k8_batch_packed(") :]
    packed = packed[: packed.index("\n}\n")]
    assert packed.count("float gf0_ = 0.0f;") == 2  # one fold per member
    # rope's packs (4 heads x 8 packs a token) come in whole warps, so its shuffles take the full
    # mask; the cache update's region test skips single rows, so each head's threads keep theirs
    rope, cache = packed.split("// k8_cache_update: ")
    assert rope.count("gf0_ = lane_group_reduce<8, Callers::warp>(add_combine{}, gf0_);") == 1
    assert cache.count("gf0_ = lane_group_reduce<8>(add_combine{}, gf0_);") == 1
    # q: its own pack and the fold's; its normalized rotated half is the partner thread's own,
    # exchanged by shuffles. k (written under the cache region's branch): its own pack, the
    # rotated half's (one load for both branches), the fold's
    assert packed.count("load_pack<8>(b_t2 + ") == 2 and packed.count("load_pack<8>(b_t4 + ") == 3
    assert rope.count("lane_group_exchange<8, 4, Callers::warp>(ge0_, ge0x_);") == 1
    # the index checks ride with the first RMS norm, which reads none of the indices they validate
    assert {"attention__checks_k0_batch_packed", "attention__checks_k0_batch"} <= set(launched)
    assert "attention__checks" not in launched and "attention__k0_rms_norm" not in launched
    assert "// batch attention__checks_k0_batch: checks + k0_rms_norm" in text


def test_grid_ctas_per_sm_caps_the_registers_of_packed_grids_only() -> None:
    """Option grid_ctas_per_sm=6 puts `__launch_bounds__(threads, 6)` on every packed flat grid, a
    batch of them included; their scalar twins and the row kernels keep ptxas's choice, as does
    every kernel without the option."""
    fn = decode_attention()
    catalog = arch_catalog("sm_90a")
    opts = {"grid_ctas_per_sm": 6}
    capped = emit_module(fn.name, (schedule_function(fn, catalog, opts),), catalog, opts)
    found = re.findall(r"__global__ void __launch_bounds__\(([\d, ]+)\) (\w+)\(", capped)
    heads = {name: bounds for bounds, name in found}
    assert heads["attention__k7_k8_batch_packed"].endswith(", 6")
    assert ", " not in heads["attention__k7_k8_batch"]
    assert ", " not in heads["attention__checks_k0_batch_packed"]  # a rows member: not a grid
    assert "registers capped for 6 CTAs an SM (grid_ctas_per_sm)" in capped
    plain = emit_module(fn.name, (schedule_function(fn, catalog, {}),), catalog, {})
    assert not re.search(r"__launch_bounds__\(\d+, ", plain)


@pytest.fixture(scope="module")
def linked():
    require_nvcc()
    return tilefoundry.compile(Batched, target="cuda")


def _attention_build(batched: bool):
    require_nvcc()
    return tilefoundry.compile(decode_attention(), target="cuda", options={"batch_launches": batched})


@pytest.fixture(scope="module")
def attention_batched(decode_attention_build):
    """The decode attention built with its batches (the default options: the session's build)."""
    return decode_attention_build[0]


def test_batched_sources_build_with_nvcc(linked, attention_batched) -> None:
    """The batch kernels (rows, grids with and without packs, the decode attention's) compile with nvcc."""
    assert set(linked.entries) == {"head_norms", "grids"}
    assert attention_batched.library.is_file() and "attention" in attention_batched.entries


# ---------------------------------------------------------------- on a GPU


CASES = [
    ("head_norms", None),
    ("head_norms", ("input", 1)),  # k: k1's packed input -> the scalar batch for both norms
    ("head_norms", ("input", 2)),  # gq: k0's packed weight
    ("head_norms", ("output", 0)),  # k0's packed output
    ("grids", None),
    ("grids", ("input", 0)),  # a: k0's packed input -> the scalar batch
    ("grids", ("input", 2)),  # c: k2's packed input -> the scalar batch
    ("grids", ("output", 0)),  # k0's packed output -> the scalar batch
    ("grids", ("input", 1)),  # b: k1 has no packs -> the packed batch still runs
]


@pytest.mark.gpu
@pytest.mark.parametrize(("name", "shift"), CASES)
def test_batched_kernels_match_evaluator_on_gpu(linked, name: str, shift: tuple[str, int] | None) -> None:
    """Each member computes what it computes alone, whichever variant of the batch the alignment of
    the packed members' tensors picks: the evaluator's values at T = 1, 7, 32."""
    from tilefoundry.runtime.loader import load_linked_module

    fn = Batched.functions[name]
    f = load_linked_module(linked, name)
    gen = torch.Generator().manual_seed(7)
    for n in (1, 7, 32):
        args = list(inputs(fn, n, gen, "cuda"))
        ref = fn(*args)
        outs = [torch.full_like(r, float("nan")) for r in ref]
        if shift is not None:
            where, i = shift
            tensors = args if where == "input" else outs
            tensors[i] = misaligned(tensors[i])
        f(*args, *outs)
        torch.cuda.synchronize()
        for i, (got, want) in enumerate(zip(outs, ref, strict=True)):
            tol = TOLERANCE[want.dtype]
            what = f"{name} output {i}, T={n}, misaligned {shift}"
            torch.testing.assert_close(got, want, atol=tol, rtol=tol, msg=lambda m, w=what: f"{w}: {m}")


@pytest.mark.gpu
@pytest.mark.parametrize("tokens", [1, 5])
def test_batched_decode_attention_equals_unbatched_bit_for_bit_on_gpu(attention_batched, tokens: int) -> None:
    """Every member runs its own body unchanged, so batching changes no bit of the layer's outputs; the
    profile shows the batch kernels, not their members."""
    from tilefoundry.runtime.loader import load_linked_module

    batched = load_linked_module(attention_batched, "attention")
    alone = load_linked_module(_attention_build(False), "attention")
    args = attention_args(tokens, torch.Generator().manual_seed(tokens))
    want = alone(*args)
    batched(*args)  # the first call reads the device facts
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        got = batched(*args)
        torch.cuda.synchronize()
    for i, (g, w) in enumerate(zip(got, want, strict=True)):
        assert torch.equal(g, w), f"output {i} at tokens={tokens}"
    names = {e.name for e in prof.events()}
    assert any("attention__k7_k8_batch" in x for x in names)
    assert not any("attention__k7_rope" in x or "attention__k8_cache_update" in x for x in names)
