"""Every catalogue op compiled for "cuda": built with nvcc in CI, checked against the evaluator on a GPU.

One Module holds every op, so CI compiles one translation unit (nvcc parses the runtime headers
once per unit; the bf16 GEMM pulls in the CUTLASS sm90 collective). The build cache lives in one
directory for the session. On a machine with a GPU (marker `gpu`), each function runs compiled
and is checked with `check` against the evaluator across DimVar values, bounds included.
"""

from __future__ import annotations

import re

import pytest
import torch

import tilefoundry
from tilefoundry.check import allclose, check, equal
from tilefoundry.dsl import ConstTensor, DimVar, Tensor, bf16, f16, f32, func, i32, i64, module, tf
from tilefoundry.ir.target import get_target

T = DimVar("T", 1, 33)
M = DimVar("M", 1, 600)  # GEMM rows: ragged against every tile size
P = DimVar("P", 1, 300)  # prefill length: several 32-key tiles with a ragged tail
S = DimVar("S", 1, 2049)  # decode cache length: long enough to split the keys across CTAs


@pytest.fixture(scope="module", autouse=True)
def _build_cache(tmp_path_factory: pytest.TempPathFactory) -> None:
    mp = pytest.MonkeyPatch()
    mp.setenv("TILEFOUNDRY_CACHE_DIR", str(tmp_path_factory.mktemp("tilefoundry-cuda-cache")))
    yield
    mp.undo()


@module
class Ops:
    @func
    def unary(x: Tensor[(T, 24), f32]):
        return (
            tf.exp(x),
            tf.exp2(x),
            tf.log(tf.abs(x) + 0.5),
            tf.log2(tf.abs(x) + 0.5),
            tf.sqrt(tf.abs(x)),
            tf.rsqrt(tf.abs(x) + 0.1),
            tf.tanh(x),
            tf.sigmoid(x),
            tf.silu(x),
            tf.gelu(x),
            tf.gelu(x, approximate="tanh"),
            tf.relu(x),
            tf.softplus(x * 8.0),
            -x,
            tf.abs(x),
        )

    @func
    def binary(a: Tensor[(T, 24), f32], b: Tensor[(24,), f32]):
        return (
            a + b,
            a - b,
            a * b,
            a / (tf.abs(b) + 1.0),
            tf.maximum(a, b),
            tf.minimum(a, b),
            tf.pow(tf.abs(a) + 0.5, b),
            tf.where(a > b, a, b),
            tf.clamp(a, -0.5, 0.5),
            tf.cast(a < b, "f32") + tf.cast(a >= b, "f32") * 2.0,
            tf.cast(a, "bf16"),
            tf.cast(tf.cast(a * 100.0, "i32"), "f32"),
        )

    @func
    def halves(x: Tensor[(T, 64), bf16], y: Tensor[(T, 64), bf16]):
        return tf.silu(x) * y + x, tf.cast(tf.exp(tf.cast(x, "f32")), "bf16")

    @func
    def logic(a: Tensor[(T, 20), i32], b: Tensor[(T, 20), i32]):
        return (a + b) * b - a, tf.maximum(a, b), (a > b) & (b > 0), tf.where(a == b, a, -b)

    @func
    def reduce(x: Tensor[(T, 6, 10), f32]):
        return (
            tf.sum(x, -1),
            tf.mean(x, (0, 2)),
            tf.max(x, 1, keepdim=True),
            tf.min(x, -1),
            tf.reduce(x, -1, False, "absmax"),
            tf.argmax(x, -1),
            tf.softmax(x, -1),
            tf.log_softmax(x, 1),
            tf.sum(x, 0),
        )

    @func
    def rows(x: Tensor[(T, 2048), f32], h: Tensor[(T, 512), bf16], hw: ConstTensor[(512,), bf16]):
        # 2048-wide rows take a CTA per row; 512-wide ones a warp per row.
        return tf.softmax(x, -1), tf.rms_norm(h, hw), tf.max(x, -1)

    @func
    def norms(x: Tensor[(T, 24), f32], w: ConstTensor[(24,), f32], b: ConstTensor[(24,), f32]):
        return tf.rms_norm(x, w), tf.layer_norm(x, w, b), tf.rms_norm(tf.cast(x, "bf16"), tf.cast(w, "bf16"))

    @func
    def matmuls(a: Tensor[(T, 12), f32], wm: ConstTensor[(12, 9), f32], bat: Tensor[(3, T, 12), f32]):
        return a @ wm, bat @ wm, tf.cast(tf.cast(a, "bf16") @ tf.cast(wm, "bf16"), "f32"), a[0] @ wm

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

    @func
    def shapes(x: Tensor[(T, 4, 6), f32], y: Tensor[(T, 4, 6), f32]):
        return (
            tf.reshape(x, (T, 24)),
            tf.transpose(x, (2, 0, 1)),
            x[:, 1:3, ::2],
            tf.concat((x, y), 1),
            tf.stack((x, y), 0),
            tf.repeat_interleave(x, 2, 1),
            tf.broadcast_to(x[:, :1, :], (T, 4, 6)),
            tf.full((T, 3), 1.5, "f32"),
            tf.arange(0, T, 1, "i64"),
            x,
        )

    @func
    def indexing(x: Tensor[(T, 8), f32], ids: Tensor[(5,), i64], gi: Tensor[(T, 3), i64]):
        return tf.index_select(x, 1, ids), tf.gather(x, 1, gi), tf.embedding(x, gi)

    @func
    def cache(cache: Tensor[(2, 16, 4), f32], pos: Tensor[(), i32], new: Tensor[(2, T, 4), f32]):
        return tf.cache_update(cache, pos, new, axis=1)

    @func
    def rope(
        x: Tensor[(2, 3, T, 8), f32],
        cos: Tensor[(40, 8), f32],
        sin: Tensor[(40, 8), f32],
        positions: Tensor[(T,), i64],
    ):
        return tf.rope(x, cos, sin, positions)

    @func
    def attend(
        q: Tensor[(2, 4, T, 8), f32],
        k: Tensor[(2, 2, T, 8), f32],
        v: Tensor[(2, 2, T, 8), f32],
        kv_len: Tensor[(2,), i32],
    ):
        return (
            tf.attention(q, k, v, causal=True),
            tf.attention(q, k, v, scale=0.3),
            tf.attention(q, k, v, causal=True, kv_len=kv_len),
        )


def _require_nvcc() -> None:
    if not get_target("cuda").availability.can_compile:
        pytest.skip("cuda cannot compile here: " + "; ".join(get_target("cuda").availability.reasons))


@pytest.fixture(scope="module")
def linked():
    """Every op of `Ops`, compiled once for cuda."""
    _require_nvcc()
    return tilefoundry.compile(Ops, target="cuda")


def test_every_catalogue_op_compiles_with_nvcc(linked) -> None:
    """Issue 5: every catalogue op emits CUDA C++ that nvcc builds into one loadable library."""
    assert linked.library.is_file() and linked.library.stat().st_size > 0
    assert set(linked.entries) == set(Ops.functions)
    assert linked.target == "cuda"


# ---------------------------------------------------------------- on a GPU


def _inputs(fn, n: int, gen: torch.Generator) -> tuple:
    out = []
    for p in fn.params:
        shape = tuple(n if not isinstance(d, int) else d for d in p.type.shape)
        dt = p.type.dtype.torch
        if p.type.dtype.is_float:
            out.append(torch.randn(shape, generator=gen).to(dt).cuda())
        else:
            out.append(torch.randint(-20, 20, shape, generator=gen).to(dt).cuda())
    return tuple(out)


def _expect(ref) -> dict:
    outs = ref if isinstance(ref, tuple) else (ref,)
    names = ["output"] if not isinstance(ref, tuple) else [f"output[{i}]" for i in range(len(outs))]
    rules = {}
    for name, o in zip(names, outs, strict=True):
        if o.dtype.is_floating_point:
            # about four units in the last place of each 16-bit format; f32 work stays f32
            tol = {torch.bfloat16: 3e-2, torch.float16: 4e-3}.get(o.dtype, 2e-4)
            rules[name] = [allclose(atol=tol, rtol=tol)]
        else:
            rules[name] = [equal()]
    return rules


def _run(linked, fn_name: str, sizes: tuple[int, ...], make=None) -> None:
    from tilefoundry.runtime.loader import CompiledFunction, load_linked_module

    fn = Ops.functions[fn_name]
    body = CompiledFunction(load_linked_module(linked, fn_name), fn.returns_tuple)
    gen = torch.Generator().manual_seed(0)
    for n in sizes:
        args = make(n, gen) if make else _inputs(fn, n, gen)
        ref = fn(*args)
        report = check(body, fn, args, expect=_expect(ref))
        assert report.passed, f"{fn_name} at T={n}:\n{report}"


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
        return _inputs(fn, n, gen)

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
    report = check(lambda *_: outs if isinstance(first, tuple) else outs[0], fn, args, expect=_expect(ref))
    assert report.passed, f"{name} replayed:\n{report}"


@pytest.mark.gpu
def test_kernels_run_on_the_callers_stream(linked) -> None:
    """Work issued under torch.cuda.stream(s) runs on s: its result is ready once s is synchronized."""
    from tilefoundry.runtime.loader import load_linked_module

    f = load_linked_module(linked, "gemm_tiles")
    gen = torch.Generator().manual_seed(3)
    args = _inputs(Ops.functions["gemm_tiles"], 130, gen)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        outs = f(*args)
    s.synchronize()
    ref = Ops.functions["gemm_tiles"](*args)
    for o, r in zip(outs, ref, strict=True):
        torch.testing.assert_close(o.float(), r.float(), atol=3e-2, rtol=3e-2)
