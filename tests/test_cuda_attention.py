"""The attention atom's tiers on a GPU against torch sdpa in f32 (runtime atoms/attention.cuh).

One Module holds the cases, compiled once (nvcc in CI, no GPU needed for that). On a GPU each
function runs at (Sq, Skv) pairs with ragged lengths (1, 17, 100, 333), Sq != Skv both ways, a
decode-sized query over a long cache (split-KV) and chunked prefill over one; outputs start as
NaN so an unwritten element fails. The reference is F.scaled_dot_product_attention on f32 copies
with the atom's masks spelled out: causal aligns the last query with the last valid key, kv_len
keeps a prefix per batch (or one for all), and a row that sees no key is 0.

Tiers hit (attention_plan): 16-bit head dim 64/128 with g · Sq <= 16 the tensor-core keys
config (decode, split-KV past ~128 keys per CTA), larger g · Sq the rows config (prefill); a
misaligned 16-bit q takes the SIMT tier.
"""

from __future__ import annotations

import math
import os
import sys

import pytest
import torch
import torch.nn.functional as F

import tilefoundry
from tilefoundry.dsl import DimVar, Tensor, bf16, f16, func, i32, i64, module, tf

sys.path.insert(0, os.path.dirname(__file__))
import catalogue_programs as cat

Q = DimVar("q", 1, 400)
K = DimVar("k", 1, 3001)

# (Sq, Skv): decode rows over short and long caches, a few query tokens (g · Sq <= 16 still takes
# the keys config, with causal rows of several heads in one tile), ragged prefill, Sq > Skv
# (causal rows that see nothing), chunked prefill over a long cache (the rows config split).
SIZES = [
    (1, 1),
    (1, 17),
    (1, 333),
    (1, 2048),
    (4, 100),
    (8, 2048),
    (16, 64),
    (17, 17),
    (17, 100),
    (100, 100),
    (100, 333),
    (333, 333),
    (333, 100),
    (40, 3000),
]
# about four units in the last place of each 16-bit format
TOLERANCE = {torch.bfloat16: 3e-2, torch.float16: 4e-3}


@module
class Cases:
    @func
    def mha_bf16_d128(
        q: Tensor[(2, 4, Q, 128), bf16], k: Tensor[(2, 4, K, 128), bf16], v: Tensor[(2, 4, K, 128), bf16]
    ):
        return tf.attention(q, k, v, causal=True), tf.attention(q, k, v)

    @func
    def gqa2_f16_d64(
        q: Tensor[(1, 4, Q, 64), f16],
        k: Tensor[(1, 2, K, 64), f16],
        v: Tensor[(1, 2, K, 64), f16],
        n: Tensor[(1,), i32],
    ):
        return tf.attention(q, k, v, causal=True, kv_len=n), tf.attention(q, k, v, scale=0.3)

    @func
    def gqa4_bf16_d64(
        q: Tensor[(2, 8, Q, 64), bf16],
        k: Tensor[(2, 2, K, 64), bf16],
        v: Tensor[(2, 2, K, 64), bf16],
        n: Tensor[(2,), i64],
    ):
        return tf.attention(q, k, v, causal=True, kv_len=n), tf.attention(q, k, v, kv_len=n)

    @func
    def gqa4_f16_d128(
        q: Tensor[(1, 8, Q, 128), f16],
        k: Tensor[(1, 2, K, 128), f16],
        v: Tensor[(1, 2, K, 128), f16],
        n: Tensor[(), i32],
    ):
        return tf.attention(q, k, v, causal=True, kv_len=n), tf.attention(q, k, v, scale=-0.05)


# What each case computes: (causal, scale or None for 1/sqrt(D), whether it takes kv_len), per output.
OUTPUTS = {
    "mha_bf16_d128": ((True, None, False), (False, None, False)),
    "gqa2_f16_d64": ((True, None, True), (False, 0.3, False)),
    "gqa4_bf16_d64": ((True, None, True), (False, None, True)),
    "gqa4_f16_d128": ((True, None, True), (False, -0.05, False)),
}


def reference(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    causal: bool,
    scale: float | None,
    kv_len: torch.Tensor | None,
) -> torch.Tensor:
    """sdpa on f32 CPU copies (torch's math kernel) with the atom's masks; rows that see no key are 0."""
    b, hq, sq, d = q.shape
    hkv, skv = k.shape[1], k.shape[2]
    kf = k.float().cpu().repeat_interleave(hq // hkv, dim=1)
    vf = v.float().cpu().repeat_interleave(hq // hkv, dim=1)
    lens = torch.full((b,), skv) if kv_len is None else kv_len.cpu().long().expand(b)
    limit = lens.view(b, 1, 1)
    if causal:
        limit = torch.minimum(limit, torch.arange(sq).view(1, sq, 1) + limit - sq + 1)
    mask = torch.arange(skv).view(1, 1, skv) < limit  # (B, Sq, Skv)
    scale = 1 / math.sqrt(d) if scale is None else scale
    out = F.scaled_dot_product_attention(q.float().cpu(), kf, vf, attn_mask=mask[:, None], scale=scale)
    return torch.where(mask.any(-1)[:, None, :, None], out, 0.0)


def make_inputs(name: str, sq: int, skv: int, gen: torch.Generator) -> tuple[torch.Tensor, ...]:
    """Seeded q, k, v (and kv_len) for a case at (Sq, Skv), on the GPU."""
    fn = Cases.functions[name]
    out = []
    for p in fn.params[:3]:
        b, h, _, d = p.type.shape
        shape = (b, h, sq if p.name == "q" else skv, d)
        out.append(torch.randn(shape, generator=gen).to(p.type.dtype.torch).cuda())
    if len(fn.params) == 4:
        kv = fn.params[3].type
        lens = [max(skv - 3, 0), skv // 3][: kv.shape[0]] if kv.rank else max(skv - 3, 0)
        out.append(torch.tensor(lens, dtype=kv.dtype.torch).cuda())
    return tuple(out)


@pytest.fixture(scope="module")
def linked(tmp_path_factory: pytest.TempPathFactory):
    """Every case, compiled once for cuda."""
    cat.require_nvcc()
    mp = pytest.MonkeyPatch()
    mp.setenv("TILEFOUNDRY_CACHE_DIR", str(tmp_path_factory.mktemp("tilefoundry-attention-cache")))
    yield tilefoundry.compile(Cases, target="cuda")
    mp.undo()


def test_attention_cases_compile_with_nvcc(linked) -> None:
    """Every tier of the atom (tensor-core rows and keys configs, SIMT, merge) builds for each case."""
    assert linked.library.is_file() and set(linked.entries) == set(Cases.functions)


def _run_and_check(f, name: str, args: tuple[torch.Tensor, ...], where: str) -> None:
    fn = Cases.functions[name]
    outs = tuple(torch.full_like(args[0], float("nan")) for _ in OUTPUTS[name])
    f(*args, *outs)
    torch.cuda.synchronize()
    q, k, v, *kv = args
    for i, (causal, scale, masked) in enumerate(OUTPUTS[name]):
        ref = reference(q, k, v, causal=causal, scale=scale, kv_len=kv[0] if masked else None)
        tol = TOLERANCE[q.dtype]
        what = f"{fn.name} output {i} {where}"
        torch.testing.assert_close(
            outs[i].float().cpu(), ref, atol=tol, rtol=tol, msg=lambda m, what=what: f"{what}: {m}"
        )


@pytest.mark.gpu
@pytest.mark.parametrize("name", list(OUTPUTS))
def test_attention_atom_matches_sdpa_on_gpu(linked, name: str) -> None:
    """Causal and full, GQA g = 1, 2, 4, kv_len per batch and shared, D 64 and 128, bf16 and f16."""
    from tilefoundry.runtime.loader import load_linked_module

    f = load_linked_module(linked, name)
    gen = torch.Generator().manual_seed(7)
    for sq, skv in SIZES:
        _run_and_check(f, name, make_inputs(name, sq, skv, gen), f"at Sq={sq}, Skv={skv}")


@pytest.mark.gpu
def test_misaligned_16_bit_q_takes_the_simt_tier_on_gpu(linked) -> None:
    """A q whose data sits 2 bytes off 16-byte alignment runs on CUDA cores, with the same result."""
    from tilefoundry.runtime.loader import load_linked_module

    f = load_linked_module(linked, "gqa4_bf16_d64")
    gen = torch.Generator().manual_seed(11)
    for sq, skv in [(1, 333), (17, 100), (100, 2048)]:
        q, k, v, n = make_inputs("gqa4_bf16_d64", sq, skv, gen)
        shifted = torch.empty(q.numel() + 8, dtype=q.dtype, device="cuda")[1 : 1 + q.numel()].view(q.shape)
        shifted.copy_(q)
        assert shifted.data_ptr() % 16 != 0
        _run_and_check(f, "gqa4_bf16_d64", (shifted, k, v, n), f"misaligned at Sq={sq}, Skv={skv}")


@pytest.mark.gpu
@pytest.mark.parametrize(("name", "sq", "skv"), [("gqa4_bf16_d64", 1, 2048), ("mha_bf16_d128", 40, 3000)])
def test_split_kv_merge_replays_in_a_cuda_graph_on_gpu(linked, name: str, sq: int, skv: int) -> None:
    """Split-KV on tensor cores with its merge launched as a programmatic dependent: correct on a
    side stream, and replayed from a CUDA graph after the inputs change in place."""
    from tilefoundry.runtime.loader import load_linked_module

    f = load_linked_module(linked, name)
    gen = torch.Generator().manual_seed(5)
    args = make_inputs(name, sq, skv, gen)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        _run_and_check(f, name, args, "on a side stream")
        outs = tuple(torch.empty_like(args[0]) for _ in OUTPUTS[name])
        f(*args, *outs)  # warm up off the default stream, as torch's graph recipe asks
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        f(*args, *outs)
    for a, b in zip(args, make_inputs(name, sq, skv, gen), strict=True):
        a.copy_(b)
    for o in outs:
        o.fill_(float("nan"))
    graph.replay()
    torch.cuda.synchronize()
    q, k, v, *kv = args
    for out, (causal, scale, masked) in zip(outs, OUTPUTS[name], strict=True):
        ref = reference(q, k, v, causal=causal, scale=scale, kv_len=kv[0] if masked else None)
        tol = TOLERANCE[q.dtype]
        torch.testing.assert_close(out.float().cpu(), ref, atol=tol, rtol=tol)
