// Experiment (skinny_sweep.cu `wave`): the M = 1 GEMV over B (N, K) as one wave of wide CTAs.
//
// The question: the chain experiment (skinny_chain.cuh) streamed gate/up's 50 MB in 12-13 us
// (one CTA of 16 warps an SM, each warp a whole row in flight as raw words), where the atom's
// register kernel (gemm_skinny_nk, R2U4: 768 CTAs of 8 warps, two waves) takes 14.4 behind a
// norm. Does that shape serve every projection? Each warp takes rows gw, gw + W, ... (gw its
// index over the grid, W the grid's warps) and holds CP packs a lane a member in flight (K in
// chunks of CP x 256 elements); lane 0 hands the G results to `out` as gemm_skinny_nk does.
// The answer (H200, 2026-12-01, bench/results/skinny-sweep-wave-*): no. Behind a norm it lost on
// q/k/v (8.0-8.6 us against 6.5-7.0) and down (11.6 against 9.8), tied on o_proj and gate/up, and
// won only where the register kernel runs long or in waves: the lone 6144-row GEMV (10.5 against
// 11.8-12.6) and the LM head (146.5 against 188; the atom streams that one by bulk copies, 146).
#pragma once

#include <cstdint>

#include <cuda_runtime_api.h>

#include <tilefoundry/runtime/cuda/atoms/gemm_skinny.cuh>

namespace wave {

using namespace tilefoundry::atoms;
using namespace tilefoundry::atoms::detail;

inline constexpr int kWaveWarps = 16;

/// acc[g] += the lane's packs of A from k0 on · b[g]'s CP packs (those below K).
template <class T, int G, int CP>
__device__ inline void wave_fma(T const* A, int64_t k0, int64_t K, int lane, uint4 const (&b)[G][CP],
                                float (&acc)[G]) {
#pragma unroll
  for (int p = 0; p < CP; ++p) {
    int64_t const k = k0 + p * 256 + lane * 8;
    if (k >= K) break;
    T a[8];  // A is read again for each row (from L1: every warp shares it)
    load_pack<8>(A + k, a);
#pragma unroll
    for (int g = 0; g < G; ++g) {
      T const* w = reinterpret_cast<T const*>(&b[g][p]);
#pragma unroll
      for (int c = 0; c < 8; ++c) acc[g] = acc[g] + cast<float>(a[c]) * cast<float>(w[c]);
    }
  }
}

/// The lanes' sums added by a butterfly and rounded to T, as an epilogue receives them.
template <class T, int G>
__device__ inline void wave_results(float (&acc)[G], T (&c)[G]) {
#pragma unroll
  for (int g = 0; g < G; ++g) {
#pragma unroll
    for (int off = 16; off > 0; off /= 2) acc[g] = acc[g] + __shfl_xor_sync(0xffffffffu, acc[g], off);
    c[g] = cast<T>(acc[g]);
  }
}

template <class T, int G, int CP, class Out>
__global__ void __launch_bounds__(kWaveWarps * 32, 1)
gemv_wave(T const* __restrict__ A, SkinnyBtRows<T> rows, int64_t K, Out out) {
  int const lane = threadIdx.x % 32;
  int64_t const warps = static_cast<int64_t>(gridDim.x) * kWaveWarps;
  int64_t const total = rows.template total<G>();
  uint4 b[G][CP];  // raw words: 16-bit arrays this size made ptxas spill (skinny_chain.cuh)
  auto load = [&](int64_t r, int64_t k0) {
    auto const [s, begin, N] = rows.template member<G>(r);
#pragma unroll
    for (int g = 0; g < G; ++g) {
      T const* B = rows.B[G == 1 ? s : g] + (r - begin) * K + k0;
#pragma unroll
      for (int p = 0; p < CP; ++p) {
        if (k0 + p * 256 + lane * 8 < K) b[g][p] = load_stream_words(B + p * 256 + lane * 8);
      }
    }
  };
  int64_t n = static_cast<int64_t>(blockIdx.x) * kWaveWarps + threadIdx.x / 32;
  if (!rows.settled) pdl_wait();
  if (n < total) load(n, 0);
  pdl_begin();
  for (bool first = true; n < total; n += warps, first = false) {
    float acc[G] = {};
    for (int64_t k0 = 0; k0 < K; k0 += CP * 256) {
      if (!(first && k0 == 0)) load(n, k0);
      wave_fma<T, G, CP>(A, k0, K, lane, b, acc);
    }
    T c[G];
    wave_results(acc, c);
    if (lane == 0) {
      auto const [s, begin, N] = rows.template member<G>(n);
      out(s, int64_t{0}, n - begin, N, c);
    }
  }
}

/// One CTA an SM (at most one a warp's worth of rows each), 16 warps.
template <class T, int G, int CP, class Out>
inline cudaError_t launch_wave(T const* A, SkinnyBtRows<T> const& rows, int64_t K, Out const& out, cudaStream_t st) {
  int64_t const ctas = (rows.template total<G>() + kWaveWarps - 1) / kWaveWarps;
  int const sms = device_facts().sms;
  dim3 const grid(static_cast<unsigned>(ctas < sms ? ctas : sms));
  return launch_kernel(gemv_wave<T, G, CP, Out>, grid, dim3(kWaveWarps * 32), 0, st, A, rows, K, out);
}

}  // namespace wave
