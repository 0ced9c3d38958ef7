"""The kernels' resource report (resources.py): what ptxas built, read back without a GPU.

Built with the real nvcc where one is installed: a kernel whose live values cannot fit the
registers its `__launch_bounds__` leave must show its spills, and the CTAs an SM follow the
occupancy rules of the SM (64K registers in units of 256 a warp, 64 warps, 32 CTAs)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tilefoundry.codegen.cuda import build
from tilefoundry.codegen.cuda.resources import KernelResources, kernel_resources, parse_ptxas_report
from tilefoundry.ir.target import Sources, get_target

# Twenty-four float4 values live at once, every pair multiplied: far more than the 32 registers
# that two CTAs of 1024 threads leave each thread.
SOURCE = """
__global__ void __launch_bounds__(1024, 2) pressure(const float4* __restrict__ x, float* __restrict__ y) {
  float4 v[24];
#pragma unroll
  for (int i = 0; i < 24; ++i) v[i] = x[threadIdx.x + i * 1024];
  float acc = 0.f;
#pragma unroll
  for (int i = 0; i < 24; ++i)
#pragma unroll
    for (int j = 0; j < 24; ++j) acc += v[i].x * v[j].y + v[i].z * v[j].w;
  y[threadIdx.x] = acc;
}

template <int N>
__global__ void scale(float* y, float a) {
  __shared__ float s[N];
  s[threadIdx.x % N] = y[threadIdx.x];
  __syncthreads();
  y[threadIdx.x] = a * s[(threadIdx.x + 1) % N];
}
template __global__ void scale<64>(float*, float);

__global__ void __launch_bounds__(128) light(float* y) { y[threadIdx.x] += 1.f; }
"""


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict[str, KernelResources]:
    if not get_target("cuda").availability.can_compile:
        pytest.skip("cuda cannot compile here: " + "; ".join(get_target("cuda").availability.reasons))
    cache = tmp_path_factory.mktemp("resources")
    lib = build.build(Sources(target="cuda", files={"m.cu": SOURCE}, entries=()), {}, cache, "sm_90a")
    return {k.identifier: k for k in kernel_resources(lib.path)}


def test_a_kernel_short_of_registers_shows_its_spills_and_its_bounds(built) -> None:
    k = built["pressure"]
    assert k.arch == "sm_90a" and (k.threads, k.min_ctas) == (1024, 2)
    assert k.registers <= 32  # what two CTAs of 1024 threads leave a thread
    assert k.spills and k.spill_store_bytes > 0 and k.spill_load_bytes > 0 and k.stack_bytes > 0
    assert k.ctas_per_sm() == 2


def test_a_light_kernel_has_no_spills_and_templates_are_demangled(built) -> None:
    light, scale = built["light"], built["scale"]
    assert not light.spills and light.threads == 128 and 0 < light.registers <= 32
    assert light.ctas_per_sm() == 16  # 4 warps a CTA: the 64-warp limit, not the registers
    assert scale.name == "void scale<64>(float*, float)"
    assert scale.shared_bytes == 64 * 4 and scale.barriers == 1 and scale.threads is None
    with pytest.raises(ValueError, match=r"scale<64>.*declares no CTA size"):
        scale.ctas_per_sm()
    assert scale.ctas_per_sm(256) == 8


@pytest.mark.parametrize(
    ("registers", "threads", "ctas"),
    [
        (40, 256, 6),  # 1280 registers a warp, 8 warps: 65536 / 10240
        (42, 256, 5),  # rounded up to 48 a lane
        (32, 1024, 2),
        (255, 1024, 0),  # more than an SM holds: such a CTA cannot launch
        (16, 32, 32),  # the CTA limit
        (24, 96, 21),  # 3 warps a CTA: the 64-warp limit
    ],
)
def test_ctas_per_sm_follow_the_sms_register_and_warp_limits(registers: int, threads: int, ctas: int) -> None:
    k = KernelResources("k", "k", "sm_90a", registers, 0, 0, 0, 0, 0)
    assert k.ctas_per_sm(threads) == ctas


def test_ctas_per_sm_refuses_a_cta_size_no_gpu_launches() -> None:
    k = KernelResources("k", "k", "sm_90a", 32, 0, 0, 0, 0, 0, threads=256)
    with pytest.raises(ValueError, match=r"threads must be in \[1, 1024\], got 2048"):
        k.ctas_per_sm(2048)


def test_a_report_cut_short_names_the_entry_left_open() -> None:
    text = (
        "ptxas info    : Compiling entry function '_Z1fv' for 'sm_90a'\n"
        "ptxas info    : Function properties for _Z1fv\n"
        "    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
    )
    with pytest.raises(ValueError, match=r"entry '_Z1fv' \(sm_90a\) has no 'Used N registers' line"):
        parse_ptxas_report(text)


def test_device_functions_frames_are_not_taken_for_the_entrys() -> None:
    """ptxas lists a called function's frame inside an entry's block; only the entry's own counts."""
    text = (
        "ptxas info    : Compiling entry function 'k' for 'sm_90a'\n"
        "ptxas info    : Function properties for __internal_trig_reduction\n"
        "    40 bytes stack frame, 8 bytes spill stores, 8 bytes spill loads\n"
        "ptxas info    : Function properties for k\n"
        "    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
        "ptxas info    : Used 20 registers, used 0 barriers, 512 bytes smem, 380 bytes cmem[0]\n"
    )
    [(symbol, arch, figures)] = parse_ptxas_report(text)
    assert (symbol, arch) == ("k", "sm_90a")
    assert figures == {
        "stack_bytes": 0,
        "spill_store_bytes": 0,
        "spill_load_bytes": 0,
        "registers": 20,
        "barriers": 0,
        "shared_bytes": 512,
    }


def test_a_library_without_a_report_is_named(tmp_path: Path) -> None:
    lib = tmp_path / "other.so"
    lib.write_text("not ours")
    with pytest.raises(FileNotFoundError, match=r"no resource report at .*other\.kernels\.json"):
        kernel_resources(lib)
    with pytest.raises(TypeError, match=r"int holds no compiled library"):
        kernel_resources(3)
