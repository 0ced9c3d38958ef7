// Sweep of how a generated elementwise kernel rounds an f32 intermediate to bf16 and back, on the
// bench's gelu_chain (gelu_tanh(x * 1.702 + y) * y - x, 32768 x 4096 bf16; bench.gpu 2026-11-30:
// 0.228 ms, 82% of copy, 0.89x torch.compile). The evaluator rounds each op's result to the
// tensor's dtype as torch does, so the kernel converts four intermediates per element to bf16 and
// back. nvcc emits one F2F.BF16.F32 for each; with tanh's two MUFU ops that is six conversions or
// transcendentals per element, which at 16 a clock an SM would take ~190 us, above the 188 us the
// bytes need. Variants of round_bf16(x) = float(bf16(x)), round to nearest even:
//   f2f      the runtime's cast (cvt.rn.bf16.f32: F2F.BF16.F32), as the code generator emits it
//   f2fp     cvt.rn.bf16x2.f32 of (x, x): F2FP.BF16.F32.PACK_AB, then the low half shifted up
//   integer  the f32 bits plus 0x7fff plus the kept lsb, low half cleared (NaN kept quiet)
// and `none` (f32 throughout, as torch.compile computes; not the evaluator's values) for scale.
// Each prints us per call (median of 9 CUDA-graph replays of 10 calls) and the largest difference
// from `f2f` (the integer and f2fp variants must be bit-identical to it).
//
//   nvcc -std=c++17 -O3 -gencode arch=compute_90a,code=sm_90a --expt-relaxed-constexpr -DNDEBUG \
//        -I cpp/runtime/include -I <cutlass>/include bench/gpu/kernels/bf16_round_sweep.cu -o /tmp/round
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <vector>

#include <cuda_runtime.h>

#include <tilefoundry/runtime/cuda/atoms/scalar.cuh>
#include <tilefoundry/runtime/cuda/atoms/vector_access.cuh>

#include "check_status.cuh"
#include "graph_timing.cuh"
#include "random_fill.cuh"

using tilefoundry::atoms::bf16;
using tilefoundry::atoms::cast;
using tilefoundry::atoms::load_pack;
using tilefoundry::atoms::store_pack;

enum class Round { f2f, f2fp, integer, none };

template <Round R>
__device__ __forceinline__ float round_bf16(float x) {
  if constexpr (R == Round::f2f) {
    return cast<float>(cast<bf16>(x));
  } else if constexpr (R == Round::f2fp) {
    unsigned d;
    asm("cvt.rn.bf16x2.f32 %0, %1, %1;" : "=r"(d) : "f"(x));
    return __uint_as_float(d << 16);
  } else if constexpr (R == Round::integer) {
    unsigned const u = __float_as_uint(x);
    if ((u & 0x7fffffffu) > 0x7f800000u) return __uint_as_float((u | 0x00400000u) & 0xffff0000u);
    return __uint_as_float((u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u);
  } else {
    return x;
  }
}

template <Round R>
__global__ void __launch_bounds__(256) gelu_chain(const bf16* __restrict__ x, const bf16* __restrict__ y,
                                                  bf16* __restrict__ out, int64_t packs) {
  for (int64_t p = blockIdx.x * int64_t(256) + threadIdx.x; p < packs; p += int64_t(gridDim.x) * 256) {
    bf16 a[8], b[8], o[8];
    load_pack<8>(x + p * 8, a);
    load_pack<8>(y + p * 8, b);
#pragma unroll
    for (int l = 0; l < 8; ++l) {
      float const xa = cast<float>(a[l]), yb = cast<float>(b[l]);
      float const v = round_bf16<R>(round_bf16<R>(xa * 1.702f) + yb);
      float const g = round_bf16<R>(0.5f * v * (1.0f + std::tanh(0.7978845608028654f * (v + 0.044715f * v * v * v))));
      o[l] = cast<bf16>(round_bf16<R>(g * yb) - xa);
    }
    store_pack<8>(out + p * 8, o);
  }
}

template <Round R>
float time_us(const bf16* x, const bf16* y, bf16* out, int64_t n, cudaStream_t st) {
  int sms = 0;
  CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  int64_t const packs = n / 8;
  int const blocks = static_cast<int>(std::min<int64_t>((packs + 255) / 256, int64_t(sms) * 8));
  return graph_median_us([&] { gelu_chain<R><<<blocks, 256, 0, st>>>(x, y, out, packs); }, st);
}

int main() {
  int64_t const n = int64_t(32768) * 4096;
  bf16 *x, *y, *out, *ref;
  CHECK(cudaMalloc(&x, n * sizeof(bf16)));
  CHECK(cudaMalloc(&y, n * sizeof(bf16)));
  CHECK(cudaMalloc(&out, n * sizeof(bf16)));
  CHECK(cudaMalloc(&ref, n * sizeof(bf16)));
  fill_random<<<1024, 256>>>(x, n, 1);
  fill_random<<<1024, 256>>>(y, n, 2);
  cudaStream_t st;
  CHECK(cudaStreamCreate(&st));
  std::vector<uint16_t> want(n), got(n);
  float const base = time_us<Round::f2f>(x, y, ref, n, st);
  CHECK(cudaMemcpy(want.data(), ref, n * sizeof(bf16), cudaMemcpyDeviceToHost));
  double const bytes = 3.0 * n * sizeof(bf16);
  auto report = [&](const char* name, float us) {
    CHECK(cudaMemcpy(got.data(), out, n * sizeof(bf16), cudaMemcpyDeviceToHost));
    int64_t differ = 0;
    for (int64_t i = 0; i < n; ++i) differ += got[i] != want[i];
    std::printf("  %-8s %8.1f us  %5.2f TB/s  %lld of %lld outputs differ from f2f\n", name, us,
                bytes / us * 1e-6, static_cast<long long>(differ), static_cast<long long>(n));
  };
  std::printf("gelu_chain 32768 x 4096 bf16 (3 x 256 MiB moved)\n");
  std::printf("  %-8s %8.1f us  %5.2f TB/s\n", "f2f", base, bytes / base * 1e-6);
  report("f2fp", time_us<Round::f2fp>(x, y, out, n, st));
  report("integer", time_us<Round::integer>(x, y, out, n, st));
  report("none", time_us<Round::none>(x, y, out, n, st));
  return 0;
}
