"""Launch chaining on cuda (codegen/cuda/chaining.py): dependent small launches run as one cluster.

The decode layer's attention program chains its q/k head norms with the rope + cache update that
reads them: the entry launches the chain when every member covers its work with at most
kChainCtas CTAs on sm_90 code, and each stage alone otherwise. The option turns it off, and sm_80
code has no clusters. On a GPU (marker `gpu`) the chained layer equals the unchained one bit for
bit at one token with donated caches (the chain runs), without them and at 32 tokens (the stages
run), and the profile shows which ran.
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
from tilefoundry.ir.pipeline import schedule_function

sys.path.insert(0, os.path.dirname(__file__))
from catalogue_programs import require_nvcc
from decode_layer import attention_args, decode_attention

pytestmark = pytest.mark.usefixtures("fresh_build_cache")

CHAIN = "attention__k3_k6_k9_k10_chain"


def _source(arch: str, options: dict) -> str:
    fn = decode_attention()
    catalog = arch_catalog(arch)
    return emit_module(fn.name, (schedule_function(fn, catalog, options),), catalog, options)


def test_decode_attention_chains_head_norms_with_rope_and_the_cache_update() -> None:
    """Stage 0 (q and k head norms), a cluster barrier, stage 1 (rope of q, the cache update of k
    and v) in one kernel; the entry picks the chain or the two batches at run time."""
    text = _source("sm_90a", {})
    for variant in (CHAIN, f"{CHAIN}_packed"):
        start = text.index(f"__global__ void __launch_bounds__(256) {variant}(")
        kernel = text[start : text.index("\n}\n", start)]
        assert kernel.count("chain_barrier();") == 1
        # each stage's members side by side on CTA ranges whose ends the host passes
        assert "int64_t e0_0_, int64_t e1_0_) {" in kernel
        marks = [
            "// stage 0: k3_rms_norm + k6_rms_norm",
            "if (cta_ < e0_0_) {  // k3_rms_norm: CTAs [0, e0_0_)",
            "} else {  // k6_rms_norm: CTAs [e0_0_, gridDim.x)",
            "chain_barrier();",
            "// stage 1: k9_rope + k10_cache_update",
            "if (cta_ < e1_0_) {  // k9_rope: CTAs [0, e1_0_)",
            "} else {  // k10_cache_update: CTAs [e1_0_, gridDim.x)",
        ]
        at = [kernel.index(m) for m in marks]
        assert at == sorted(at)
        # t3 and t6 are written by stage 0 and read by stage 1: one writable parameter each
        assert "bf16* __restrict__ b_t3," in kernel and "const bf16* __restrict__ b_t3" not in kernel
    entry = text[text.index("void attention_entry(") :]
    # the largest stage sizes the cluster: k3 and k6 side by side, or k9 and k10 side by side
    decide = entry.index("const int64_t ctas_ = max_nan(e0_1_, e1_1_);")
    decide = entry.index("if (ctas_ <= kChainCtas && chain_supported()) {", decide)
    launch = entry.index(
        f"launch_chain(packed_ ? {CHAIN}_packed : {CHAIN}, static_cast<int>(ctas_), 256, stream_, "
    )
    alone = entry.index("launch_kernel(attention__k3_k6_batch_packed,", launch)
    assert decide < launch < alone < entry.index("launch_kernel(attention__k9_k10_batch_packed,", alone)
    assert entry.count("launch_chain(") == 1
    assert f"cuda: stage 0 of chain {CHAIN}" in text and f"cuda: stage 1 of chain {CHAIN}" in text


@pytest.mark.parametrize(("arch", "options"), [("sm_90a", {"chain_launches": False}), ("sm_80", {})])
def test_no_chain_when_turned_off_or_without_clusters(arch: str, options: dict) -> None:
    """Option chain_launches=False, or sm_80 code (no clusters): every stage keeps its own launch."""
    text = _source(arch, options)
    assert "launch_chain(" not in text and "chain_barrier();" not in text
    assert re.search(r"launch_kernel\(attention__k3_k6_batch\w*,", text)


# ---------------------------------------------------------------- on a GPU


def _run(f, args: list[torch.Tensor], donate: bool) -> tuple[torch.Tensor, ...]:
    """The layer's outputs (out0, k cache, v cache) on copies of `args`; `donate`: the caches passed
    as their own outputs, as a decode runner does, so the cache update writes only the new rows."""
    args = [a.clone() for a in args]
    if not donate:
        return tuple(f(*args))
    out0 = torch.empty_like(args[0])
    f(*args, out0, args[6], args[7])
    return out0, args[6], args[7]


@pytest.mark.gpu
@pytest.mark.parametrize(
    ("tokens", "donate", "chained"), [(1, True, True), (1, False, False), (32, True, False)]
)
def test_chained_decode_attention_equals_unchained_bit_for_bit_on_gpu(
    decode_attention_build, tokens: int, donate: bool, chained: bool
) -> None:
    """Every member runs its own body, so the chain changes no bit of the layer's outputs. The chain
    runs at one token with donated caches; without them the cache update copies both caches (9 CTAs
    with rope), and at 32 tokens the q norms take 16 CTAs: then the two batches run."""
    from tilefoundry.runtime.loader import load_linked_module

    require_nvcc()
    chain = load_linked_module(decode_attention_build[0], "attention")
    plain = load_linked_module(
        tilefoundry.compile(decode_attention(), target="cuda", options={"chain_launches": False}), "attention"
    )
    args = attention_args(tokens, torch.Generator().manual_seed(100 + tokens))
    want = _run(plain, args, donate)
    _run(chain, args, donate)  # the first call reads the device facts
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        got = _run(chain, args, donate)
        torch.cuda.synchronize()
    for i, (g, w) in enumerate(zip(got, want, strict=True)):
        assert torch.equal(g, w), f"output {i} at tokens={tokens}, donate={donate}"
    names = {e.name for e in prof.events()}
    assert any(CHAIN in x for x in names) == chained, sorted(names)
    assert any("attention__k3_k6_batch" in x for x in names) == (not chained), sorted(names)
