"""The attention atom's tiers on a GPU against torch sdpa in f32 (runtime atoms/attention.cuh).

One Module holds the cases, compiled once (nvcc in CI, no GPU needed for that). On a GPU each
function runs at (Sq, Skv) pairs with ragged lengths (1, 17, 100, 333), Sq != Skv both ways, a
decode-sized query over a long cache (split-KV) and chunked prefill over one; outputs start as
NaN so an unwritten element fails. The reference is F.scaled_dot_product_attention on f32 copies
with the atom's masks spelled out: causal aligns the last query with the last valid key, kv_len
keeps a prefix per batch (or one for all), and a row that sees no key is 0.

Tiers hit (attention_plan): 16-bit head dim 64/128 with g · Sq <= 16 the tensor-core keys
config (decode, split-KV past ~128 keys per CTA), larger g · Sq the rows config (prefill); a
misaligned 16-bit q takes the SIMT tier. How split-KV partials merge: on an sm_90 device the
default (sm_90a) build runs the keys config's splits as one thread-block cluster that merges
through distributed shared memory (one launch); the same cases built for sm_80 (run on the same
GPU) take the split kernel and its merge kernel, as the rows config and the SIMT tier always do.

Attention whose output is only read through `reshape(transpose(o, (0, 2, 1, 3)), (B·Sq, Hq·D))`
(or the transpose alone) stores (B, Sq, Hq, D) itself (ir.plan.permuted_stores, out_bshd): the
BSHD cases check every path that writes out (rows and keys tiers, the cluster and the two-kernel
merges, SIMT) against the evaluator, and the Qwen3-shaped attention program has no reshape kernel.
"""

from __future__ import annotations

import math
import os
import re
import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

import tilefoundry
from tilefoundry.codegen.cuda.sass import kernel_sass
from tilefoundry.dsl import DimVar, Tensor, bf16, f16, f32, func, i32, i64, module, tf

sys.path.insert(0, os.path.dirname(__file__))
import catalogue_programs as cat

Q = DimVar("q", 1, 400)
K = DimVar("k", 1, 8193)

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
# Decode over a cache of 2048 keys (the cluster form on sm_90) and of 8192 (past kClusterMaxKeys:
# the workspace form) with kv_len short (split 0 alone up to kFlashSoloKeys = 128, attention.cuh),
# either side of that bound, mid and full; per-batch kv_len takes the pairs (one launch, both
# paths in it), one shared kv_len the first of each.
DECODE_LENS = {
    2048: [(1, 700), (5, 2048), (128, 129), (129, 128), (700, 1), (2048, 5)],
    8192: [(1, 8192), (128, 5000), (129, 3), (8192, 128)],
}


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


def _compile(mod, tmp_path_factory: pytest.TempPathFactory, options: dict[str, str] | None):
    """`mod` compiled for cuda into a fresh build cache, with the generated source of its module."""
    cat.require_nvcc()
    mp = pytest.MonkeyPatch()
    mp.setenv("TILEFOUNDRY_CACHE_DIR", str(tmp_path_factory.mktemp("tilefoundry-attention-cache")))
    sources: list[str] = []

    def dump(stage: str, text: str) -> None:
        if stage.startswith("generate source"):
            sources.append(text)

    try:
        return tilefoundry.compile(mod, target="cuda", options=options, dump=dump), "\n".join(sources)
    finally:
        mp.undo()


@pytest.fixture(scope="module")
def linked(tmp_path_factory: pytest.TempPathFactory):
    """Every case, compiled once for cuda (the GPU's arch, else sm_90a)."""
    return _compile(Cases, tmp_path_factory, None)[0]


@pytest.fixture(scope="module")
def linked_warp_rows_32(tmp_path_factory: pytest.TempPathFactory):
    """Every case built with option attention_warp_rows=32: the prefill's warps own two m16 tiles."""
    return _compile(Cases, tmp_path_factory, {"attention_warp_rows": 32})[0]


@pytest.fixture(scope="module")
def linked_sm80(tmp_path_factory: pytest.TempPathFactory):
    """Every case built for sm_80: on a Hopper its split-KV keeps the workspace and merge kernel."""
    return _compile(Cases, tmp_path_factory, {"arch": "sm_80"})[0]


def test_attention_cases_compile_with_nvcc(linked) -> None:
    """Every tier of the atom (tensor-core rows and keys configs, SIMT, merge) builds for each case."""
    assert linked.library.is_file() and set(linked.entries) == set(Cases.functions)


# flash_mma_kernel's mangled name: its kv_len type (v, i, l) and FlashConfig's KeyWarps
KEYS_MANGLED = r"flash_mma_kernelIN7cutlass\d+\w+?_tE([vil])NS1_11FlashConfigILi\d+ELi\d+ELi(\d+)E"


def test_tensor_core_tiers_reach_their_first_copy_without_a_subroutine_call(linked) -> None:
    """flash_range / flash_visible divide the head, row and key indices by run-time extents in 32
    bits (flash_mma_fits bounds them): in 64 bits each division is a range test and a subroutine
    call, and 8-10 of them stood between every CTA's PDL wait and its first copy. The mma kernels'
    keys configs read kv_len before the wait. Read off the build's SASS (cuobjdump)."""
    cat.require_cuobjdump()
    flash = [k for k in kernel_sass(linked.library) if "flash_" in k.symbol]
    tiers = {n for k in flash for n in re.findall(r"flash_\w+_kernel", k.symbol)}
    assert {"flash_mma_kernel", "flash_wgmma_kernel"} <= tiers
    with_len = set()
    for k in flash:
        assert k.waits >= 1 and k.wait_to_load is not None, k.symbol
        assert k.calls_to_load == 0, (k.symbol, k.arch, k.calls_to_load)
        # the keys configs (decode: key warps > 1) with a kv_len read it before the wait (a guess
        # checked after it); the rows configs wait first
        cfg = re.search(KEYS_MANGLED, k.symbol)
        if cfg is not None and cfg.group(1) != "v":
            guesses = int(cfg.group(2)) > 1
            assert (k.loads_before_wait >= 1) == guesses, (k.symbol, k.arch, k.loads_before_wait)
            with_len.add(guesses)
    assert with_len == {True, False}  # both kinds of config were built with a kv_len


# The keys config's two forms and the merge kernel, for one head dim and 16-bit type.
KEYS_TIER_SOURCE = """
#include <tilefoundry/runtime/cuda/atoms/attention.cuh>
namespace ta = tilefoundry::atoms;
cudaError_t decode(ta::AttentionArgs<ta::bf16, int> const& a, void* ws, cudaStream_t s) {
  return ta::attention<128, 2>(a, ws, s);
}
"""


def _ptx_entries(arch: str, tmp_path: Path) -> dict[str, str]:
    """PTX text per kernel entry of KEYS_TIER_SOURCE built for `arch` (virtual arch only)."""
    ptx = tmp_path / "keys_tier.ptx"
    number = arch.removeprefix("sm_")
    code = f"-gencode=arch=compute_{number},code=compute_{number}"
    flags = ["-O3", "-DTILEFOUNDRY_TARGET_CUDA", code, "-ptx"]
    cat.nvcc_compile(KEYS_TIER_SOURCE, ptx, *flags)
    text = ptx.read_text()
    return {m["name"]: m["body"] for m in re.finditer(r"\.entry (?P<name>\w+)\((?P<body>.*?)\n}", text, re.S)}


@pytest.mark.parametrize("arch", ["sm_90a", "sm_80"])
def test_keys_tier_cluster_form_compiles(arch: str, tmp_path: Path) -> None:
    """The keys config builds in both forms for sm_90a and sm_80: the cluster form's sm_90 code
    syncs the cluster twice and maps peers' shared memory, its sm_80 code only traps (the plan
    never launches it there); the workspace form, the two prefill configs and the merge kernel
    have no cluster barrier."""
    cat.require_nvcc()
    entries = _ptx_entries(arch, tmp_path)
    flash = {n: b for n, b in entries.items() if "flash_mma_kernel" in n}
    # Mangled template arguments: FlashConfig<128, 1, 4, ...> is the keys config, Lb1E Cluster = true.
    cluster = [b for n, b in flash.items() if "Li128ELi1ELi4E" in n and "Lb1E" in n]
    plain = [b for n, b in flash.items() if "Lb0E" in n]
    merge = [b for n, b in entries.items() if "attention_merge" in n]
    assert len(cluster) == 1 and len(plain) == 3 and len(merge) == 1, sorted(entries)
    (body,) = cluster
    if arch == "sm_90a":
        assert body.count("barrier.cluster.arrive") == 2 and body.count("barrier.cluster.wait") == 2
        assert "mapa" in body and body.index("griddepcontrol.wait") < body.index("barrier.cluster")
    else:
        assert "trap" in body and "barrier.cluster" not in body
    assert all("barrier.cluster" not in b for b in [*plain, *merge])


def test_tensor_core_splits_share_the_keys_by_the_split_count_on_the_device(tmp_path: Path) -> None:
    """Every tensor-core kernel, both forms of the keys config and both prefill configs among them,
    divides the keys its row block sees by the launch's splits (%nctaid.z) at run time; built for
    sm_90a."""
    cat.require_nvcc()
    flash = {n: b for n, b in _ptx_entries("sm_90a", tmp_path).items() if "flash_mma_kernel" in n}
    # Mangled template arguments: FlashConfig<128, 1, 4, ...> is the keys config.
    assert len(flash) == 5 and sum("Li128ELi1ELi4E" in n for n in flash) == 2, sorted(flash)
    assert sum(config in n for n in flash for config in (ROWS_CONFIG, PAIRED_CONFIG)) == 2, sorted(flash)
    assert all("%nctaid.z" in b for b in flash.values())


ROWS_TIER_SOURCE = """
#include <tilefoundry/runtime/cuda/atoms/attention.cuh>
namespace ta = tilefoundry::atoms;
namespace td = tilefoundry::atoms::detail;
cudaError_t prefill(ta::AttentionArgs<ta::bf16, int> const& a, td::AttnPlan const& p, cudaStream_t s) {
  return td::flash_rows<128>(a, td::AttnPartials{nullptr, nullptr, 0}, p, s);
}
"""
ROWS_ARGS = (128, 8, 1, 64, 3, 1, 1)  # FlashConfig's template arguments
PAIRED_ARGS = (128, 4, 1, 32, 3, 2, 2)


def _mangled(args: tuple[int, ...]) -> str:
    """FlashConfig's arguments as the Itanium mangling writes them in PTX (Li128E...)."""
    return "".join(f"Li{v}E" for v in args)


def _demangled(args: tuple[int, ...]) -> str:
    """FlashConfig's arguments as a demangled kernel name shows them (the profiler's event names)."""
    return f"FlashConfig<{', '.join(map(str, args))}>"


ROWS_CONFIG, PAIRED_CONFIG = _mangled(ROWS_ARGS), _mangled(PAIRED_ARGS)


def test_two_row_tiles_a_warp_build_the_paired_rows_config_alone(tmp_path: Path) -> None:
    """TILEFOUNDRY_FLASH_WARP_ROWS=32 (option attention_warp_rows=32) builds the prefill dispatch
    (flash_rows) with the paired rows config alone: 4 warps of two m16 tiles, 32-key steps, three
    stages, two CTAs an SM; sm_90a PTX. (Under "auto" both configs build: the splits test above.)"""
    cat.require_nvcc()
    ptx = tmp_path / "rows_tier.ptx"
    flags = ["-O3", "-DTILEFOUNDRY_TARGET_CUDA", "-DTILEFOUNDRY_FLASH_WARP_ROWS=32"]
    cat.nvcc_compile(ROWS_TIER_SOURCE, ptx, *flags, "-gencode=arch=compute_90a,code=compute_90a", "-ptx")
    names = [n for n in re.findall(r"\.entry (\w+)\(", ptx.read_text()) if "flash_mma_kernel" in n]
    assert len(names) == 1 and PAIRED_CONFIG in names[0], names


@pytest.mark.parametrize("arch", ["90a", "90"])
def test_the_wgmma_tier_builds_for_sm_90a_and_traps_elsewhere(arch: str, tmp_path: Path) -> None:
    """With TILEFOUNDRY_FLASH_WGMMA=1 (what the code generator sets for sm_90a under "auto") the
    prefill dispatch builds the wgmma kernel beside both mma.sync configs. Its sm_90a PTX issues 8
    wgmma for S = Q Kᵀ (both operands in shared memory) and 8 for O += P V (P in registers) a step,
    fences cp.async's writes for the async proxy, waits for the grid before it (PDL) and divides the
    keys by the launch's splits; plain sm_90 code of it only traps."""
    cat.require_nvcc()
    ptx = tmp_path / "rows_tier.ptx"
    flags = ["-O3", "-DTILEFOUNDRY_TARGET_CUDA", "-DTILEFOUNDRY_FLASH_WGMMA=1"]
    code = f"-gencode=arch=compute_{arch},code=compute_{arch}"
    cat.nvcc_compile(ROWS_TIER_SOURCE, ptx, *flags, code, "-ptx")
    # each entry up to the next (the inline asm's own braces end no entry)
    parts = re.split(r"\.entry (\w+)\(", ptx.read_text())
    entries = dict(zip(parts[1::2], parts[2::2], strict=True))
    wgmma = [b for n, b in entries.items() if "flash_wgmma_kernel" in n]
    assert len(wgmma) == 1 and sum("flash_mma_kernel" in n for n in entries) == 2, sorted(entries)
    (body,) = wgmma
    if arch == "90a":
        wgmma_op = r"wgmma\.mma_async\.sync\.aligned\.m64n128k16\.f32\.bf16\.bf16"
        issued = re.findall(wgmma_op + r" \{[^}]*\}, (\S+)", body)
        assert len(issued) == 16 and sum(a.startswith("{") for a in issued) == 8, issued
        assert "fence.proxy.async.shared::cta" in body and "%nctaid.z" in body
        assert body.index("griddepcontrol.wait") < body.index("cp.async")
    else:
        assert "trap" in body and "wgmma." not in body


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
@pytest.mark.parametrize("build", ["default", "warp_rows_32"])
@pytest.mark.parametrize("name", list(OUTPUTS))
def test_attention_atom_matches_sdpa_on_gpu(request, build: str, name: str) -> None:
    """Causal and full, GQA g = 1, 2, 4, kv_len per batch and shared, D 64 and 128, bf16 and f16; in
    the default build and with attention_warp_rows=32 (the prefill rows in two m16 tiles a warp,
    masked tiles, rows past the end and the split-KV merge among them)."""
    from tilefoundry.runtime.loader import load_linked_module

    linked = request.getfixturevalue("linked" if build == "default" else "linked_warp_rows_32")
    f = load_linked_module(linked, name)
    gen = torch.Generator().manual_seed(7)
    for sq, skv in SIZES:
        _run_and_check(f, name, make_inputs(name, sq, skv, gen), f"at Sq={sq}, Skv={skv}")


def _decode_inputs(
    name: str, sq: int, skv: int, lens: tuple[int, int], gen: torch.Generator
) -> tuple[torch.Tensor, ...]:
    """make_inputs at (Sq, Skv) with kv_len set to `lens` (per batch) or its first (shared)."""
    q, k, v, _ = make_inputs(name, sq, skv, gen)
    kv = Cases.functions[name].params[3].type
    chosen = list(lens[: kv.shape[0]]) if kv.rank else lens[0]
    return q, k, v, torch.tensor(chosen, dtype=kv.dtype.torch).cuda()


@pytest.mark.gpu
@pytest.mark.parametrize("build", ["default", "sm_80"])
@pytest.mark.parametrize("name", ["gqa2_f16_d64", "gqa4_bf16_d64", "gqa4_f16_d128"])
def test_decode_with_short_mid_and_full_kv_len_on_gpu(request, build: str, name: str) -> None:
    """Decode rows (g · Sq = g and 16) over a 2048-key cache with kv_len 1, 5, 128, 129, 700 and 2048
    and an 8192-key one with 1-8192 (split 0 alone, the splits sharing them with most empty, some,
    none), GQA g = 2 and 4, D 64 and 128: the default build on sm_90 (the one-launch cluster form
    at 2048 keys, the split kernel plus merge kernel at 8192, solo or merged) and the sm_80 build
    (always the two kernels) agree with sdpa."""
    from tilefoundry.runtime.loader import load_linked_module

    linked = request.getfixturevalue("linked" if build == "default" else "linked_sm80")
    f = load_linked_module(linked, name)
    q_heads, kv_heads = (p.type.shape[1] for p in Cases.functions[name].params[:2])
    gen = torch.Generator().manual_seed(13)
    for sq in (1, 16 // (q_heads // kv_heads)):
        for skv, cases in DECODE_LENS.items():
            for lens in cases:
                where = f"{build} build at Sq={sq}, Skv={skv}, kv_len={lens}"
                _run_and_check(f, name, _decode_inputs(name, sq, skv, lens, gen), where)


@func
def counted_decode(
    q: Tensor[(1, 8, 1, 128), bf16],
    k: Tensor[(1, 2, 2048, 128), bf16],
    v: Tensor[(1, 2, 2048, 128), bf16],
    lens: Tensor[(1, 2), i64],
):
    return tf.attention(q, k, v, causal=True, kv_len=tf.reduce(lens, 1, False, "max"))


@pytest.mark.gpu
def test_decode_behind_the_kernel_writing_its_kv_len_on_gpu(tmp_path_factory) -> None:
    """kv_len written by the launch before attention's index checks (a reduction): the keys tier's
    guess, read before its PDL wait, may be the last call's value, and a stale guess must give way
    to the value after the wait. Called back to back with kv_len changing every time (solo and
    split ranges, 1 to 2048 keys), each result against sdpa."""
    from tilefoundry.runtime.loader import load_linked_module

    f = load_linked_module(_compile(counted_decode, tmp_path_factory, None)[0], "counted_decode")
    gen = torch.Generator().manual_seed(29)
    q = torch.randn(1, 8, 1, 128, generator=gen).to(torch.bfloat16).cuda()
    k, v = (torch.randn(1, 2, 2048, 128, generator=gen).to(torch.bfloat16).cuda() for _ in "kv")
    sequence = [1, 700, 5, 2048, 128, 129, 1500, 64, 2047, 3] * 3
    lens = [torch.tensor([[n, n // 2]], dtype=torch.int64).cuda() for n in sequence]
    outs = [torch.full_like(q, float("nan")) for _ in sequence]
    for x, out in zip(lens, outs, strict=True):
        f(q, k, v, x, out)  # queued back to back: no host wait between the calls
    torch.cuda.synchronize()
    tol = TOLERANCE[torch.bfloat16]
    for n, out in zip(sequence, outs, strict=True):
        ref = reference(q, k, v, causal=True, scale=None, kv_len=torch.tensor([n]))
        what = f"kv_len {n} written by the kernel before"
        torch.testing.assert_close(
            out.float().cpu(), ref, atol=tol, rtol=tol, msg=lambda m, what=what: f"{what}: {m}"
        )


@pytest.mark.gpu
def test_decode_split_kv_is_one_launch_on_sm90_up_to_4096_keys_on_gpu(linked, linked_sm80) -> None:
    """On an sm_90 device the default build's decode split-KV over a 2048-key cache is one cluster
    launch per attention (no merge kernel); over 8192 keys (past kClusterMaxKeys), and in the sm_80
    build at any length, a merge kernel follows each split kernel."""
    from tilefoundry.runtime.loader import load_linked_module

    if torch.cuda.get_device_capability()[0] < 9:
        pytest.skip("thread-block clusters need an sm_90 device")
    gen = torch.Generator().manual_seed(17)
    counts = {}
    calls = (("default", linked, 2048), ("default", linked, 8192), ("sm_80", linked_sm80, 2048))
    for build, lib, skv in calls:
        f = load_linked_module(lib, "gqa4_f16_d128")
        args = make_inputs("gqa4_f16_d128", 1, skv, gen)
        outs = tuple(torch.empty_like(args[0]) for _ in OUTPUTS["gqa4_f16_d128"])
        f(*args, *outs)  # the plan's per-device facts are read on the first call
        torch.cuda.synchronize()
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
            f(*args, *outs)
            torch.cuda.synchronize()
        names = [e.name for e in prof.events()]
        counts[build, skv] = tuple(
            sum(kernel in n for n in names) for kernel in ("flash_mma_kernel", "attention_merge")
        )
    assert counts == {("default", 2048): (2, 0), ("default", 8192): (2, 2), ("sm_80", 2048): (2, 2)}


B = DimVar("b", 1, 9)
S = DimVar("s", 1, 1025)


@func
def prefill_bf16_d128(
    q: Tensor[(B, 32, S, 128), bf16], k: Tensor[(B, 32, S, 128), bf16], v: Tensor[(B, 32, S, 128), bf16]
):
    return tf.attention(q, k, v, causal=True), tf.attention(q, k, v)


@pytest.mark.gpu
@pytest.mark.parametrize("arch", ["default", "sm_80"])
def test_prefill_tier_by_arch_and_grid_on_gpu(tmp_path_factory, arch: str) -> None:
    """Under attention_warp_rows "auto" the default (sm_90a) build runs head dim 128's prefill on the
    wgmma tier whatever the grid; an sm_80 build (on the same GPU) runs a call with at least
    kFlashPairedMinCtasPerSm CTAs of 128 rows an SM (B8 H32 S1024: 2048 CTAs) on the paired rows
    config, and B1 H32 S1024 (256) on the rows config. All match sdpa in f32, causal and full."""
    from tilefoundry.runtime.loader import load_linked_module

    if torch.cuda.get_device_properties(0).multi_processor_count * 8 > 2048:
        pytest.skip("B8 H32 S1024 has fewer than 8 CTAs an SM on this device")
    options = None if arch == "default" else {"arch": arch}
    f = load_linked_module(_compile(prefill_bf16_d128, tmp_path_factory, options)[0], "prefill_bf16_d128")
    if arch == "default":
        if torch.cuda.get_device_capability(0) != (9, 0):
            pytest.skip("the default build is the GPU's arch; wgmma is sm_90a's")
        kernels = (("flash_wgmma_kernel", "flash_wgmma_kernel"),) * 2
    else:
        kernels = (("flash_mma_kernel", _demangled(PAIRED_ARGS)), ("flash_mma_kernel", _demangled(ROWS_ARGS)))
    gen = torch.Generator().manual_seed(23)
    for batch, (kernel, config) in zip((8, 1), kernels, strict=True):
        q, k, v = (torch.randn(batch, 32, 1024, 128, generator=gen).to(torch.bfloat16).cuda() for _ in "qkv")
        f(q, k, v, torch.empty_like(q), torch.empty_like(q))  # the plan reads the device's facts once
        torch.cuda.synchronize()
        outs = tuple(torch.full_like(q, float("nan")) for _ in range(2))
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
            f(q, k, v, *outs)
            torch.cuda.synchronize()
        names = [e.name for e in prof.events() if "flash_" in e.name]
        assert len(names) == 2 and all(kernel in n and config in n for n in names), (batch, names)
        for out, causal in zip(outs, (True, False), strict=True):
            ref = F.scaled_dot_product_attention(q.float(), k.float(), v.float(), is_causal=causal)
            tol, what = TOLERANCE[torch.bfloat16], f"B{batch} H32 S1024 causal={causal}"
            torch.testing.assert_close(
                out.float(), ref, atol=tol, rtol=tol, msg=lambda m, what=what: f"{what}: {m}"
            )


@pytest.mark.gpu
def test_misaligned_16_bit_q_takes_the_simt_tier_on_gpu(linked) -> None:
    """A q whose data sits 2 bytes off 16-byte alignment runs on CUDA cores, with the same result."""
    from tilefoundry.runtime.loader import load_linked_module

    f = load_linked_module(linked, "gqa4_bf16_d64")
    gen = torch.Generator().manual_seed(11)
    for sq, skv in [(1, 333), (17, 100), (100, 2048)]:
        q, k, v, n = make_inputs("gqa4_bf16_d64", sq, skv, gen)
        _run_and_check(f, "gqa4_bf16_d64", (cat.misaligned(q), k, v, n), f"misaligned at Sq={sq}, Skv={skv}")


@pytest.mark.gpu
@pytest.mark.parametrize(
    ("name", "sq", "skv"),
    [("gqa4_bf16_d64", 1, 2048), ("gqa4_bf16_d64", 1, 8192), ("mha_bf16_d128", 40, 3000)],
)
def test_split_kv_merge_replays_in_a_cuda_graph_on_gpu(linked, name: str, sq: int, skv: int) -> None:
    """Split-KV on tensor cores, decode as one cluster launch (sm_90, 2048 keys) or with its merge
    (8192 keys) and prefill with its merge launched as a programmatic dependent: correct on a side
    stream, and replayed from a CUDA graph after the inputs change in place."""
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


# ---------------------------------------------------------------- attention storing (B, Sq, Hq, D)


def _bshd(o, rows: object, width: int):
    """o (B, Hq, Sq, D) as the output projection reads it: (B·Sq, Hq·D)."""
    return tf.reshape(tf.transpose(o, (0, 2, 1, 3)), (rows, width))


@module
class Bshd:
    @func
    def gqa4_bf16_d64(
        q: Tensor[(1, 8, Q, 64), bf16],
        k: Tensor[(1, 2, K, 64), bf16],
        v: Tensor[(1, 2, K, 64), bf16],
        n: Tensor[(1,), i64],
    ):
        return _bshd(tf.attention(q, k, v, causal=True, kv_len=n), Q, 512)

    @func
    def gqa2_f16_d128(
        q: Tensor[(2, 4, Q, 128), f16],
        k: Tensor[(2, 2, K, 128), f16],
        v: Tensor[(2, 2, K, 128), f16],
        n: Tensor[(2,), i32],
    ):
        o = tf.attention(q, k, v, causal=True, kv_len=n)
        return _bshd(o, 2 * Q, 512), tf.transpose(tf.attention(q, k, v, scale=0.3), (0, 2, 1, 3))

    @func
    def gqa2_f32_d64(
        q: Tensor[(1, 4, Q, 64), f32], k: Tensor[(1, 2, K, 64), f32], v: Tensor[(1, 2, K, 64), f32]
    ):
        return _bshd(tf.attention(q, k, v, causal=True), Q, 256)


BSHD_TOLERANCE = {**TOLERANCE, torch.float32: 1e-4}


@pytest.fixture(scope="module")
def bshd(tmp_path_factory: pytest.TempPathFactory):
    """The BSHD cases compiled once for cuda (the GPU's arch, else sm_90a), and their source."""
    return _compile(Bshd, tmp_path_factory, None)


@pytest.fixture(scope="module")
def bshd_sm80(tmp_path_factory: pytest.TempPathFactory):
    """The BSHD cases built for sm_80: split-KV decode keeps the workspace and the merge kernel."""
    return _compile(Bshd, tmp_path_factory, {"arch": "sm_80"})


def test_bshd_cases_store_through_the_atom_without_a_copy_kernel(bshd) -> None:
    """Each attention of the BSHD cases is the atom called with out_bshd = true, its copy kernel
    folded away; the cases build with nvcc."""
    linked, text = bshd
    assert linked.library.is_file() and set(linked.entries) == set(Bshd.functions)
    assert text.count("/*out_bshd=*/true};") == 4 and "/*out_bshd=*/false" not in text
    assert "[element grid]: reshape@" not in text and "[element grid]: transpose@" not in text


def test_qwen3_attention_program_has_no_reshape_kernel(decode_attention_build) -> None:
    """The Qwen3-shaped layer's attention program: the attention atom writes (tokens, Hq·D) for the
    output projection itself (out_bshd), no reshape kernel is left, and it builds with nvcc."""
    linked, seen = decode_attention_build
    source = next(text for stage, text in seen.items() if stage.startswith("generate source"))  # the main one
    assert "k10_reshape and t8 dropped" in seen["check budget"]
    assert "  kernel k10_reshape  [" not in seen["check budget"] and "k10_reshape(" not in source
    assert "const AttentionArgs<bf16, int64_t> a_{b_t7, b_out1, b_out2, b_t9, " in source
    assert "0.125f, true, /*out_bshd=*/true};" in source
    assert linked.library.is_file()


def _run_bshd(f, name: str, args: tuple[torch.Tensor, ...], where: str) -> None:
    """Run case `name` into outputs filled with NaN and compare with the evaluator on CPU copies."""
    fn = Bshd.functions[name]
    want = fn(*(a.cpu() for a in args))
    want = want if isinstance(want, tuple) else (want,)
    outs = tuple(torch.full(w.shape, float("nan"), dtype=w.dtype, device="cuda") for w in want)
    f(*args, *outs)
    torch.cuda.synchronize()
    tol = BSHD_TOLERANCE[args[0].dtype]
    for i, (got, ref) in enumerate(zip(outs, want, strict=True)):
        what = f"{name} output {i} {where}"
        torch.testing.assert_close(
            got.float().cpu(), ref.float(), atol=tol, rtol=tol, msg=lambda m, what=what: f"{what}: {m}"
        )


def _bshd_inputs(name: str, sq: int, skv: int, lens: tuple[int, int], gen: torch.Generator):
    """Seeded q, k, v at (Sq, Skv), and kv_len `lens` (per batch) where the case takes one, on the GPU."""
    fn = Bshd.functions[name]
    out = []
    for p in fn.params[:3]:
        b, h, _, d = p.type.shape
        shape = (b, h, sq if p.name == "q" else skv, d)
        out.append(torch.randn(shape, generator=gen).to(p.type.dtype.torch).cuda())
    if len(fn.params) == 4:
        kv = fn.params[3].type
        out.append(torch.tensor(list(lens[: kv.shape[0]]), dtype=kv.dtype.torch).cuda())
    return tuple(out)


@pytest.mark.gpu
@pytest.mark.parametrize("name", ["gqa4_bf16_d64", "gqa2_f16_d128"])
def test_bshd_prefill_rows_tier_on_gpu(bshd, name: str) -> None:
    """g · Sq > 16: the tensor-core rows config writes (B, Sq, Hq, D), alone and split-KV (40 rows
    over 3000 keys: the merge kernel writes the rows), causal with kv_len, B = 1 and 2."""
    from tilefoundry.runtime.loader import load_linked_module

    f = load_linked_module(bshd[0], name)
    gen = torch.Generator().manual_seed(23)
    for sq, skv in [(17, 17), (100, 333), (333, 100), (40, 3000)]:
        _run_bshd(f, name, _bshd_inputs(name, sq, skv, (skv - 3, skv // 3), gen), f"at Sq={sq}, Skv={skv}")


@pytest.mark.gpu
@pytest.mark.parametrize("build", ["default", "sm_80"])
@pytest.mark.parametrize("name", ["gqa4_bf16_d64", "gqa2_f16_d128"])
def test_bshd_decode_keys_tier_on_gpu(request, build: str, name: str) -> None:
    """g · Sq <= 16 over a 2048- and an 8192-key cache: the keys config's split-KV merged in one
    cluster (default build on sm_90, 2048 keys) or by the merge kernel (8192 keys, sm_80 build), or
    split 0 alone, writes (B, Sq, Hq, D)."""
    from tilefoundry.runtime.loader import load_linked_module

    f = load_linked_module(request.getfixturevalue("bshd" if build == "default" else "bshd_sm80")[0], name)
    q_heads, kv_heads = (p.type.shape[1] for p in Bshd.functions[name].params[:2])
    gen = torch.Generator().manual_seed(29)
    for sq in (1, 16 // (q_heads // kv_heads)):
        for skv, cases in DECODE_LENS.items():
            for lens in cases:
                where = f"{build} build at Sq={sq}, Skv={skv}, kv_len={lens}"
                _run_bshd(f, name, _bshd_inputs(name, sq, skv, lens, gen), where)


@pytest.mark.gpu
def test_bshd_f32_simt_tier_on_gpu(bshd) -> None:
    """f32 takes the SIMT tier: its rows, and over 2048 keys its split-KV merge, land in (Sq, Hq, D)."""
    from tilefoundry.runtime.loader import load_linked_module

    f = load_linked_module(bshd[0], "gqa2_f32_d64")
    gen = torch.Generator().manual_seed(31)
    for sq, skv in [(1, 1), (1, 2048), (17, 100), (100, 333)]:
        _run_bshd(
            f, "gqa2_f32_d64", _bshd_inputs("gqa2_f32_d64", sq, skv, (0, 0), gen), f"at Sq={sq}, Skv={skv}"
        )
