"""Every catalogue op compiled for "cuda": built with nvcc in CI, checked against the evaluator on a GPU.

One Module holds every op, so CI compiles one translation unit (nvcc parses the runtime headers
once per unit; the bf16 GEMM pulls in the CUTLASS sm90 collective). The build cache lives in one
directory for the session. On a machine with a GPU (marker `gpu`), each function runs compiled
and is checked with `check` against the evaluator across DimVar values, bounds included.
"""

from __future__ import annotations

import os
import re
import sys

import pytest
import torch

import tilefoundry
from tilefoundry.check import check
from tilefoundry.dsl import ConstTensor, DimVar, Tensor, bf16, f16, f32, func, i32, i64, module, tf

sys.path.insert(0, os.path.dirname(__file__))
import catalogue_programs as cat

T = cat.T
M = DimVar("M", 1, 600)  # GEMM rows: ragged against every tile size
P = DimVar("P", 1, 300)  # prefill length: several 32-key tiles with a ragged tail
S = DimVar("S", 1, 2049)  # decode cache length: long enough to split the keys across CTAs


pytestmark = pytest.mark.usefixtures("fresh_build_cache")


@module
class Ops:
    unary, binary, halves = cat.pointwise(24, 64)
    logic = cat.logic
    reduce = cat.reduce
    norms = cat.norms
    matmuls = cat.matmuls
    shapes = cat.shapes
    indexing = cat.indexing
    cache = cat.cache
    rope = cat.rope
    attend = cat.attend

    @func
    def rows(x: Tensor[(T, 2048), f32], h: Tensor[(T, 512), bf16], hw: ConstTensor[(512,), bf16]):
        # 2048-wide rows take a CTA per row; 512-wide ones a warp per row.
        return tf.softmax(x, -1), tf.rms_norm(h, hw), tf.max(x, -1)

    @func
    def gemm(x: Tensor[(T, 256), bf16], wg: ConstTensor[(256, 384), bf16]):
        # bf16 with K and N multiples of 8: the tensor-core tiers (skinny for T <= 16).
        return x @ wg

    @func
    def gemm_tiles(
        x: Tensor[(M, 256), bf16],
        wg: ConstTensor[(256, 384), bf16],
        xf: Tensor[(2, M, 64), f16],
        wf: ConstTensor[(64, 136), f16],
        xr: Tensor[(M, 20), bf16],
        wr: ConstTensor[(20, 12), bf16],
    ):
        # sm90 / mma.sync tiles with ragged M; a batched x folded into M (f16); K, N off 8 (SIMT tier).
        return x @ wg, xf @ wf, xr @ wr

    @func
    def flash(q: Tensor[(1, 4, P, 64), bf16], k: Tensor[(1, 2, P, 64), bf16], v: Tensor[(1, 2, P, 64), bf16]):
        return tf.attention(q, k, v, causal=True), tf.attention(q, k, v, scale=0.2)

    @func
    def flash_f16(
        q: Tensor[(1, 2, P, 128), f16],
        k: Tensor[(1, 1, P, 128), f16],
        v: Tensor[(1, 1, P, 128), f16],
        n: Tensor[(1,), i32],
    ):
        return tf.attention(q, k, v, causal=True, kv_len=n)

    @func
    def decode(
        q: Tensor[(2, 8, 1, 128), f32],
        kc: Tensor[(2, 2, S, 128), f32],
        vc: Tensor[(2, 2, S, 128), f32],
        lens: Tensor[(2,), i64],
    ):
        return tf.attention(q, kc, vc, causal=True, kv_len=lens)


@pytest.fixture(scope="module")
def linked():
    """Every op of `Ops`, compiled once for cuda."""
    cat.require_nvcc()
    return tilefoundry.compile(Ops, target="cuda")


def test_every_catalogue_op_compiles_with_nvcc(linked) -> None:
    """Issue 5: every catalogue op emits CUDA C++ that nvcc builds into one loadable library."""
    assert linked.library.is_file() and linked.library.stat().st_size > 0
    assert set(linked.entries) == set(Ops.functions)
    assert linked.target == "cuda"


# ---------------------------------------------------------------- on a GPU


# about four units in the last place of each 16-bit format; f32 work stays f32
TOLERANCE = {torch.float32: 2e-4, torch.bfloat16: 3e-2, torch.float16: 4e-3}


def _run(linked, fn_name: str, sizes: tuple[int, ...], make=None) -> None:
    cat.check_compiled(linked, Ops.functions[fn_name], sizes, device="cuda", tolerance=TOLERANCE, make=make)


@pytest.mark.gpu
@pytest.mark.parametrize("name", ["unary", "binary", "halves", "logic"])
def test_pointwise_ops_match_evaluator_on_gpu(linked, name: str) -> None:
    """Pointwise ops (flat grids, 16-byte packs) at T = 1 (lower bound), 7 and 32 (upper bound)."""
    _run(linked, name, (1, 7, 32))


@pytest.mark.gpu
@pytest.mark.parametrize("name", ["reduce", "rows", "norms", "matmuls", "gemm"])
def test_reduction_and_contraction_ops_match_evaluator_on_gpu(linked, name: str) -> None:
    """Reductions, warp- and CTA-per-row kernels, norms, and every GEMM tier (skinny and tiled) across T."""
    _run(linked, name, (1, 5, 16, 17, 32))


@pytest.mark.gpu
def test_gemm_atom_tiers_match_evaluator_on_gpu(linked) -> None:
    """GEMM atom tiers: skinny (M <= 16), sm90 / mma.sync tiles with ragged M, batch folded into M, SIMT."""

    def make(n: int, gen: torch.Generator) -> tuple:
        return (
            torch.randn(n, 256, generator=gen).to(torch.bfloat16).cuda(),
            (torch.randn(256, 384, generator=gen) / 16).to(torch.bfloat16).cuda(),
            torch.randn(2, n, 64, generator=gen).to(torch.float16).cuda(),
            (torch.randn(64, 136, generator=gen) / 8).to(torch.float16).cuda(),
            torch.randn(n, 20, generator=gen).to(torch.bfloat16).cuda(),
            torch.randn(20, 12, generator=gen).to(torch.bfloat16).cuda(),
        )

    _run(linked, "gemm_tiles", (1, 16, 17, 130, 599), make)


@pytest.mark.gpu
def test_flash_attention_atom_matches_evaluator_on_gpu(linked) -> None:
    """The flash atom (bf16, d 64, grouped-query) causal and full: SIMT at one row, tensor cores past 32."""
    _run(linked, "flash", (1, 45, 299))


@pytest.mark.gpu
def test_tensor_core_flash_with_kv_len_matches_evaluator_on_gpu(linked) -> None:
    """f16, head dim 128, causal with a cache prefix: the tensor-core tier (and SIMT below 32 rows)."""

    def make(n: int, gen: torch.Generator) -> tuple:
        return (
            torch.randn(1, 2, n, 128, generator=gen).to(torch.float16).cuda(),
            torch.randn(1, 1, n, 128, generator=gen).to(torch.float16).cuda(),
            torch.randn(1, 1, n, 128, generator=gen).to(torch.float16).cuda(),
            torch.tensor([max(n - 5, 0)], dtype=torch.int32).cuda(),
        )

    _run(linked, "flash_f16", (1, 31, 64, 200), make)


@pytest.mark.gpu
def test_split_kv_decode_matches_evaluator_on_gpu(linked) -> None:
    """Decode (one query row per head) over a long cache splits the keys across CTAs and merges in order."""

    def make(n: int, gen: torch.Generator) -> tuple:
        return (
            torch.randn(2, 8, 1, 128, generator=gen).cuda(),
            torch.randn(2, 2, n, 128, generator=gen).cuda(),
            torch.randn(2, 2, n, 128, generator=gen).cuda(),
            torch.tensor([n, max(n // 3, 0)], dtype=torch.int64).cuda(),
        )

    _run(linked, "decode", (1, 700, 2048), make)


@pytest.mark.gpu
def test_movement_ops_match_evaluator_on_gpu(linked) -> None:
    """Reshape, transpose, slices, concat, stack, repeat, broadcast, full, arange, identity result."""
    _run(linked, "shapes", (1, 9, 32))


@pytest.mark.gpu
def test_indexing_ops_match_evaluator_on_gpu(linked) -> None:
    """index_select, gather and embedding with in-range data-dependent indices."""

    def make(n: int, gen: torch.Generator) -> tuple:
        return (
            torch.randn(n, 8, generator=gen).cuda(),
            torch.randint(0, 8, (5,), generator=gen).cuda(),
            torch.randint(0, min(n, 8), (n, 3), generator=gen).cuda(),
        )

    _run(linked, "indexing", (1, 6, 32), make)


@pytest.mark.gpu
def test_out_of_range_index_raises_naming_the_op(linked) -> None:
    """An index outside x's axis raises IndexError after the check kernel, naming the op and the value."""
    from tilefoundry.runtime.loader import load_linked_module

    f = load_linked_module(linked, "indexing")
    x = torch.randn(4, 8, device="cuda")
    ids = torch.randint(0, 8, (5,), device="cuda")
    gi = torch.full((4, 3), 2, dtype=torch.int64, device="cuda")
    gi[1, 2] = 9
    message = "indexing: gather: index holds a value outside [0, extent of x's axis): 9"
    with pytest.raises(IndexError, match=re.escape(message)):
        f(x, ids, gi)


@pytest.mark.gpu
def test_cache_update_matches_evaluator_on_gpu(linked) -> None:
    """cache_update at a position read from a device tensor."""

    def make(n: int, gen: torch.Generator) -> tuple:
        return (
            torch.randn(2, 16, 4, generator=gen).cuda(),
            torch.tensor(16 - min(n, 16), dtype=torch.int32).cuda(),
            torch.randn(2, n, 4, generator=gen).cuda(),
        )

    _run(linked, "cache", (1, 5, 16), make)


@pytest.mark.gpu
def test_rope_and_attention_match_evaluator_on_gpu(linked) -> None:
    """rope, and attention (grouped-query, causal, scaled, kv_len) across T."""

    def rope_in(n: int, gen: torch.Generator) -> tuple:
        return (
            torch.randn(2, 3, n, 8, generator=gen).cuda(),
            torch.randn(40, 8, generator=gen).cuda(),
            torch.randn(40, 8, generator=gen).cuda(),
            torch.randint(0, 40, (n,), generator=gen).cuda(),
        )

    def attn_in(n: int, gen: torch.Generator) -> tuple:
        return (
            torch.randn(2, 4, n, 8, generator=gen).cuda(),
            torch.randn(2, 2, n, 8, generator=gen).cuda(),
            torch.randn(2, 2, n, 8, generator=gen).cuda(),
            torch.tensor([n, max(n - 2, 0)], dtype=torch.int32).cuda(),
        )

    _run(linked, "rope", (1, 4, 32), rope_in)
    _run(linked, "attend", (1, 4, 32), attn_in)


# ---------------------------------------------------------------- the entry: devices, streams, graphs


def test_cpu_tensor_to_a_cuda_entry_names_the_parameter(linked) -> None:
    """Issue 5: a CPU tensor passed to a CUDA entry raises TypeError naming the parameter (no GPU needed)."""
    from tilefoundry.runtime.loader import load_linked_module

    f = load_linked_module(linked, "binary")
    a, b = torch.randn(4, 24), torch.randn(24)
    with pytest.raises(TypeError, match=r"binary: parameter 'a' must be a CUDA tensor, got a cpu tensor"):
        f(a, b)


@pytest.mark.gpu
def test_a_cpu_weight_among_cuda_tensors_is_named_on_gpu(linked) -> None:
    """One CPU tensor among CUDA ones is refused by name, before anything is launched."""
    from tilefoundry.runtime.loader import load_linked_module

    f = load_linked_module(linked, "rows")
    x, h = torch.randn(3, 2048, device="cuda"), torch.randn(3, 512, device="cuda").to(torch.bfloat16)
    hw = torch.randn(512).to(torch.bfloat16)
    with pytest.raises(TypeError, match=r"rows: parameter 'hw' must be a CUDA tensor, got a cpu tensor"):
        f(x, h, hw)


@pytest.mark.gpu
@pytest.mark.parametrize(("name", "n"), [("rows", 9), ("gemm_tiles", 7), ("indexing", 5), ("decode", 1500)])
def test_cuda_graph_capture_replays_on_new_inputs(linked, name: str, n: int) -> None:
    """A compiled function captured by torch.cuda.graph replays correctly after its inputs change in place:
    launches, temporaries, workspaces and index checks all ride the capturing stream."""
    from tilefoundry.runtime.loader import load_linked_module

    fn = Ops.functions[name]
    f = load_linked_module(linked, name)
    gen = torch.Generator().manual_seed(n)

    def fresh() -> tuple:
        if name == "indexing":
            return (
                torch.randn(n, 8, generator=gen).cuda(),
                torch.randint(0, 8, (5,), generator=gen).cuda(),
                torch.randint(0, min(n, 8), (n, 3), generator=gen).cuda(),
            )
        if name == "decode":
            q, k, v = (
                torch.randn(2, 8, 1, 128, generator=gen),
                torch.randn(2, 2, n, 128, generator=gen),
                torch.randn(2, 2, n, 128, generator=gen),
            )
            return (q.cuda(), k.cuda(), v.cuda(), torch.tensor([n, n // 2], dtype=torch.int64).cuda())
        return cat.inputs(fn, n, gen, "cuda")

    args = fresh()
    first = f(*args)
    outs = first if isinstance(first, tuple) else (first,)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        f(*args, *outs)  # warm up off the default stream, as torch's graph recipe asks
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        f(*args, *outs)
    for a, b in zip(args, fresh(), strict=True):
        a.copy_(b)
    for o in outs:
        o.fill_(float("nan") if o.dtype.is_floating_point else -1)
    graph.replay()
    torch.cuda.synchronize()
    ref = fn(*args)
    replayed = outs if isinstance(first, tuple) else outs[0]
    report = check(lambda *_: replayed, fn, args, expect=cat.expect(ref, TOLERANCE))
    assert report.passed, f"{name} replayed:\n{report}"


@pytest.mark.gpu
def test_kernels_run_on_the_callers_stream(linked) -> None:
    """Work issued under torch.cuda.stream(s) runs on s: its result is ready once s is synchronized."""
    from tilefoundry.runtime.loader import load_linked_module

    f = load_linked_module(linked, "gemm_tiles")
    gen = torch.Generator().manual_seed(3)
    args = cat.inputs(Ops.functions["gemm_tiles"], 130, gen, "cuda")
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        outs = f(*args)
    s.synchronize()
    ref = Ops.functions["gemm_tiles"](*args)
    for o, r in zip(outs, ref, strict=True):
        torch.testing.assert_close(o.float(), r.float(), atol=3e-2, rtol=3e-2)
