"""The cuda target: its entry point, its per-arch catalogs, and its probe."""

from importlib.metadata import entry_points

import pytest

import tilefoundry.codegen.cuda.plugin as cuda_plugin
from tilefoundry.codegen.cuda.catalog import ARCHS, DEFAULT_ARCH, arch_catalog, part_for
from tilefoundry.codegen.cuda.probe import CudaFacts, GpuFacts, arch_name, cuda_facts, probe
from tilefoundry.ir.layout import Layout
from tilefoundry.ir.target import GROUP, TargetCatalog, get_target


def test_entry_point_loads_the_plugin_module():
    (ep,) = [ep for ep in entry_points(group=GROUP) if ep.name == "cuda"]
    assert ep.value == "tilefoundry.codegen.cuda.plugin"
    assert ep.load() is cuda_plugin


def test_registry_loads_the_catalog_of_this_machine():
    t = get_target("cuda")
    gpu = cuda_facts().gpu
    assert t.catalog.arch == (gpu.arch if gpu is not None and gpu.arch in ARCHS else DEFAULT_ARCH)
    assert t.catalog_for({"arch": "sm_80"}).arch == "sm_80"
    assert t.probe.can_compile == (cuda_facts().nvcc is not None)


@pytest.mark.parametrize("arch", sorted(ARCHS))
def test_catalogs_round_trip_through_json(arch):
    c = arch_catalog(arch)
    assert TargetCatalog.model_validate_json(c.model_dump_json()) == c


def test_sm90a_is_an_h200_with_wgmma_and_tma():
    c = arch_catalog("sm_90a")
    assert c.device == "NVIDIA H200" and c.smem_bytes == 227 * 1024
    assert c.peak.flops_per_s["bf16"] == 989e12 and c.peak.bytes_per_s["global"] == 4.8e12
    assert c.scope_order() == ("cluster", "cta", "thread", "warp", "lane") and c.axis("cta").max_extent == 8
    # seed 000 §2.1: `thread` (threadIdx) is warp x lane flattened, up to a CTA's 1024 threads.
    thread = c.axis("thread")
    assert (thread.parent, thread.max_extent, thread.granule) == ("cta", 1024, 32)
    w = c.atom("sm90_wgmma_m64n128k16_f32_bf16_bf16_ss")
    assert (w.m, w.n, w.k, w.participants, w.a_storage, w.b_storage) == (64, 128, 16, 4, "smem", "smem")
    assert c.atom("sm90_tma_load").asynchronous and c.atom("sm90_tma_load").alignment_bytes == 128


def test_sm90_has_tma_but_no_wgmma_and_sm80_neither():
    sm90, sm80 = arch_catalog("sm_90"), arch_catalog("sm_80")
    assert "tma" in sm90.capabilities and "wgmma" not in sm90.capabilities
    assert not [a for a in sm90.atoms_of("mma") if "wgmma" in a.name]
    assert sm80.smem_bytes == 163 * 1024 and sm80.device == "NVIDIA A100-SXM4-80GB"
    assert "cluster" not in sm80.scope_order() and "tma" not in sm80.capabilities
    assert sm80.atom("sm80_cp_async_16b").alignment_bytes == 16
    assert [a.name for a in sm80.atoms_of("mma") if a.a_storage != "gmem"] == [
        "sm80_mma_m16n8k16_f32_bf16_bf16_tn",
        "sm80_mma_m16n8k16_f32_f16_f16_tn",
        "sm80_mma_m16n8k16_f16_f16_f16_tn",
    ]


def _covers(layout: Layout, rows: int, cols: int) -> bool:
    return sorted({layout(i) for i in range(layout.size)}) == list(range(rows * cols))


def test_mma_operand_layouts_cover_their_tiles():
    """The (thread, value) layouts name every element of the A, B and C tiles."""
    c = arch_catalog("sm_90a")
    mma = c.atom("sm80_mma_m16n8k16_f32_bf16_bf16_tn")
    a = Layout(((4, 8), (2, 2, 2)), ((32, 1), (16, 8, 128)))
    b = Layout(((4, 8), (2, 2)), ((16, 1), (8, 64)))
    acc = Layout(((4, 8), (2, 2)), ((32, 1), (16, 8)))
    assert (mma.a_layout, mma.b_layout, mma.c_layout) == (str(a), str(b), str(acc))
    assert _covers(a, 16, 16) and _covers(b, 8, 16) and _covers(acc, 16, 8)
    for n in (64, 128, 256):
        w = c.atom(f"sm90_wgmma_m64n{n}k16_f32_bf16_bf16_ss")
        wc = Layout(((4, 8, 4), (2, 2, n // 8)), ((128, 1, 16), (64, 8, 512)))
        wb = Layout((128, (n, 16)), (0, (1, n)))
        assert (w.c_layout, w.b_layout) == (str(wc), str(wb))
        assert _covers(wc, 64, n) and _covers(wb, n, 16)


def test_unknown_arch_is_refused():
    with pytest.raises(ValueError, match=r"cuda: no catalog for arch 'sm_70'; known: sm_80, sm_90, sm_90a"):
        arch_catalog("sm_70")


def test_a_probed_gpu_sizes_its_arch():
    h100 = GpuFacts(name="NVIDIA H100 80GB HBM3", arch="sm_90a", sms=132, memory_bytes=80 << 30,
                    smem_per_cta=232448)
    c = arch_catalog("sm_90", h100)
    assert c.device == "NVIDIA H100 80GB HBM3" and c.peak.bytes_per_s["global"] == 3.35e12
    assert c.resource("global").capacity_bytes == 80 << 30
    other = GpuFacts(name="NVIDIA A30", arch="sm_80", sms=54, memory_bytes=24 << 30, smem_per_cta=166912)
    assert part_for("sm_80", other).flops_per_s["bf16"] == pytest.approx(312e12 * 54 / 108)
    assert part_for("sm_90a", other).device == "NVIDIA H200"
    assert arch_name(9, 0) == "sm_90a" and arch_name(8, 6) == "sm_86"


def test_probe_says_what_is_missing():
    none = probe(CudaFacts(nvcc=None, nvcc_version="", gpu=None, capability=None))
    assert (none.can_compile, none.can_run) == (False, False)
    assert none.reasons == (
        "nvcc not found on PATH, in $CUDA_HOME/bin or /usr/local/cuda/bin (install the CUDA toolkit)",
        "no CUDA GPU: torch.cuda.is_available() is False",
    )
    turing = GpuFacts(name="Tesla T4", arch="sm_75", sms=40, memory_bytes=16 << 30, smem_per_cta=65536)
    old = probe(CudaFacts(nvcc="/usr/bin/nvcc", nvcc_version="12.4", gpu=turing, capability=(7, 5)))
    assert (old.can_compile, old.can_run) == (True, False)
    assert old.reasons == ("GPU Tesla T4 is sm_75; the oldest supported arch is sm_80",)
    assert old.facts["nvcc_version"] == "12.4" and old.facts["gpu"] == "Tesla T4"
