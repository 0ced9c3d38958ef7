"""The kernels' SASS figures (sass.py): what the machine code does before its first global load.

Built with the real nvcc and read with cuobjdump where both are found: a read of settled data
placed before the PDL wait, the convergence test ptxas puts around a shuffle under a runtime group
mask (and not around one under the full mask), a 64-bit division's subroutine call between the
wait and the first load (and none for a 32-bit one), and a stack array's local accesses."""

from __future__ import annotations

import pytest

from tilefoundry.codegen.cuda import build
from tilefoundry.codegen.cuda.sass import KernelSass, cuobjdump, kernel_sass, parse_sass
from tilefoundry.ir.target import Sources, get_target

SOURCE = """
// pdl_begin (launch.cuh): let the next kernel launch, then wait for this one's inputs.
__device__ __forceinline__ void pdl_begin() {
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
  asm volatile("griddepcontrol.wait;" ::: "memory");
}

// w is settled (a weight): read before pdl_begin, as the skinny GEMV reads its weights; x only
// after it.
__global__ void settled(const float* __restrict__ w, const float* __restrict__ x, float* __restrict__ y) {
  float const a = w[threadIdx.x];
  pdl_begin();
  y[threadIdx.x] = a * x[threadIdx.x];
}

// The 16 lanes of a row sum by shuffles under their own mask, or under the full one, in a
// grid-stride loop (lane_group_reduce's shape).
template <bool Whole>
__global__ void rows(const float* __restrict__ x, float* __restrict__ y, long n) {
  unsigned const mask = Whole ? 0xffffffffu : ((1u << 16) - 1u) << (threadIdx.x % 32 / 16 * 16);
  for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n; i += (long)gridDim.x * blockDim.x) {
    float v = x[i];
#pragma unroll
    for (int o = 8; o > 0; o /= 2) v += __shfl_xor_sync(mask, v, o, 16);
    y[i] = v * x[i ^ 8];
  }
}
template __global__ void rows<false>(const float*, float*, long);
template __global__ void rows<true>(const float*, float*, long);

// A row index divided by a run-time extent between the wait and the load: in 64 bits ptxas tests
// whether both operands fit 32 bits and calls a subroutine where not; in 32 bits it never calls.
template <class I>
__global__ void divided(const float* __restrict__ x, float* __restrict__ y, I n) {
  pdl_begin();
  I const row = static_cast<I>(blockIdx.x) / n;
  y[threadIdx.x] = x[row];
}
template __global__ void divided<long>(const float*, float*, long);
template __global__ void divided<unsigned>(const float*, float*, unsigned);

// A table written and read at run-time indices lives on the stack.
__global__ void stacked(const float* __restrict__ x, const int* __restrict__ at, float* __restrict__ y) {
  float t[64];
#pragma unroll
  for (int i = 0; i < 64; ++i) t[i] = x[threadIdx.x * 64 + i];
  t[at[threadIdx.x] & 63] += 1.0f;
  y[threadIdx.x] = t[at[threadIdx.x + 1] & 63];
}
"""


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict[str, KernelSass]:
    if not get_target("cuda").availability.can_compile:
        pytest.skip("cuda cannot compile here: " + "; ".join(get_target("cuda").availability.reasons))
    try:
        cuobjdump()
    except FileNotFoundError as err:
        pytest.skip(str(err))
    cache = tmp_path_factory.mktemp("sass")
    lib = build.build(Sources(target="cuda", files={"m.cu": SOURCE}, entries=()), {}, cache, "sm_90a")
    names = {"_Z7settledPKfS0_Pf": "settled", "_Z7stackedPKfPKiPf": "stacked"}
    names |= {"_Z4rowsILb0EEvPKfPfl": "group", "_Z4rowsILb1EEvPKfPfl": "whole"}
    names |= {"_Z7dividedIlEvPKfPfT_": "divided64", "_Z7dividedIjEvPKfPfT_": "divided32"}
    return {names[k.symbol]: k for k in kernel_sass(lib.path, "sm_90a") if k.symbol in names}


def test_a_settled_read_sits_before_the_wait_and_the_rest_after_it(built) -> None:
    k = built["settled"]
    assert k.arch == "sm_90a" and k.waits == 1 and k.loads_before_wait == 1
    assert k.wait_at is not None and 0 < k.wait_to_load < k.instructions - k.wait_at
    assert k.local_accesses == 0


def test_a_runtime_group_mask_costs_a_convergence_test_and_the_full_mask_none(built) -> None:
    group, whole = built["group"], built["whole"]
    assert group.convergence_tests >= 1 and whole.convergence_tests == 0
    assert group.waits == whole.waits == 0 and whole.wait_to_load is not None  # from the start
    assert whole.instructions < group.instructions


def test_a_64_bit_division_before_the_first_load_calls_a_subroutine_and_a_32_bit_one_none(built) -> None:
    wide, narrow = built["divided64"], built["divided32"]
    assert wide.waits == narrow.waits == 1
    assert wide.calls_to_load >= 1 and narrow.calls_to_load == 0
    assert narrow.wait_to_load < wide.wait_to_load
    assert built["settled"].calls_to_load == 0


def test_a_runtime_indexed_array_shows_its_local_accesses(built) -> None:
    assert built["stacked"].local_accesses > 0
    assert built["settled"].local_accesses == built["whole"].local_accesses == 0


LISTING = """
Fatbin elf code:
================
arch = sm_90a

\tcode for sm_90a
\t\tFunction : _Z1fv
        /*0000*/                   LDC R1, c[0x0][0x28] ;
        /*0010*/                   LDG.E.128.CONSTANT R4, desc[UR4][R2.64] ;
        /*0020*/                   ACQBULK ;
        /*0030*/              @!P0 BRA 0x70 ;
        /*0040*/                   ACQBULK ;
        /*0050*/                   IMAD R3, R3, 0x4, RZ ;
        /*0060*/                   MATCH.ANY R14, R30 ;
        /*0070*/                   STL [R1], R3 ;
        /*0080*/                   CALL.REL.NOINC 0xc0 ;
        /*0090*/                   LDG.E R6, desc[UR4][R2.64] ;
        /*00a0*/                   EXIT ;
        /*00b0*/                   BRA 0xb0;
        /*00c0*/                   RET.REL.NODEC R2 0x0 ;
        /*00d0*/                   NOP;

Fatbin elf code:
================
arch = sm_90a

\tcode for sm_90a
\t\tFunction : _Z1fv
        /*0000*/                   EXIT ;

Fatbin elf code:
================
arch = sm_80

\tcode for sm_80
\t\tFunction : _Z1fv
        /*0000*/                   LDG.E R6, desc[UR4][R2.64] ;
        /*0010*/                   EXIT ;
"""


def test_the_listing_is_read_per_arch_once_a_symbol_from_the_last_wait() -> None:
    """Two waits (the last one counts), a predicated branch, padding NOPs left out, a symbol that a
    second cubin of the same arch holds again listed once, and another arch's copy apart."""
    sm90, sm80 = parse_sass(LISTING)
    assert (sm90.symbol, sm90.arch, sm90.instructions) == ("_Z1fv", "sm_90a", 13)
    assert (sm90.waits, sm90.wait_at, sm90.loads_before_wait, sm90.wait_to_load) == (2, 4, 1, 5)
    assert sm90.calls_to_load == 1
    assert (sm90.local_accesses, sm90.convergence_tests) == (1, 1)
    assert (sm80.arch, sm80.instructions, sm80.waits, sm80.wait_at) == ("sm_80", 2, 0, None)
    assert sm80.wait_to_load == 0 and sm80.calls_to_load == 0  # from the function's start


def test_a_missing_library_is_named(tmp_path) -> None:
    with pytest.raises(FileNotFoundError, match=r"no library at .*absent\.so"):
        kernel_sass(tmp_path / "absent.so")
