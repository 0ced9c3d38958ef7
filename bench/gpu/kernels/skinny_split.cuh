// Experiment (skinny_sweep.cu `split`): a decoder MLP at M = 1 as one kernel with no dependency
// between its CTAs: y = r + down(silu(gate(norm(x))) * up(norm(x))).
//
// The question: as three launches (the RMS norm, gate/up writing h through silu * mul, down adding
// the residual) the pair moves its 75 MB at ~3.2 TB/s behind the norm, and down waits for all of
// h before it streams (skinny_chain.cuh: a grid barrier in between did no better). Split over the
// intermediate dimension instead: each CTA owns a run of intermediate units j (whole groups of 8),
// computes h_j from its gate and up rows, then multiplies h_j into down's columns j (a slice of
// every output row) and adds its partial y to an f32 accumulator with vector atomics. No CTA waits
// for another; the weights of both GEMVs stream back to back in every CTA. The last CTA to finish
// (a counter) rounds the accumulator, adds the residual, writes y and zeroes the accumulator and
// the counter for the next launch. Each warp recomputes the norm of x for itself (K1 elements).
//
// The answer so far (H100, 2026-12-05, bench/results/skinny-sweep-split-2026-12-05.txt): 28.4-28.8 us
// behind o_proj against 32.9 for the three launches (-13%), results equal. Gate/up alone streams 50 MB in
// 17.7 us (2.8 TB/s); down's phase takes 13.5 us for 25 MB, its 96-byte slices of 12 KB rows the
// likely cost. `down_t` (down stored transposed, whole rows a CTA) took down's phase from 12.8 to 10.5
// us and the split with its reduce from 28.7 to 27.0 us inside a layer (H100, 2026-12-06,
// bench/results/skinny-sweep-split-shapes-nvidia-h100-2026-12-06.txt).
//
// Layout: gate, up (I, K1) and down (N2, I) row-major, as nn.Linear stores them; K1 = 256 x P
// (a lane's P packs of 8 cover a row); the CTA's h lives in shared memory as f32.
#pragma once

#include <cstdint>

#include <cuda_runtime_api.h>

#include <tilefoundry/runtime/cuda/atoms/gemm_chain.cuh>
#include <tilefoundry/runtime/cuda/atoms/gemm_skinny.cuh>
#include <tilefoundry/runtime/cuda/atoms/launch.cuh>
#include <tilefoundry/runtime/cuda/atoms/scalar.cuh>
#include <tilefoundry/runtime/cuda/atoms/vector_access.cuh>

namespace split {

using namespace tilefoundry::atoms;
using namespace tilefoundry::atoms::detail;

inline constexpr int kMaxUnits = 64;      // intermediate units a CTA owns, at most
inline constexpr int kMaxN2 = 4096;       // output rows (the accumulator a CTA stages in shared memory)

/// The accumulator and the arrival counter (zero before the first launch; the last CTA re-zeroes).
struct SplitWork {
  float* acc;
  unsigned* count;
};

struct SplitWays {
  bool finalize = true;  ///< the last CTA writes y (off: partials only, to time the tail)
  bool phase1 = true;    ///< gate/up (off: h = 1, to time down alone)
  bool phase2 = true;    ///< down (off: to time gate/up alone)
  bool atomics = true;   ///< partials into the accumulator
  float* partials = nullptr;  ///< set: each CTA stores its N2 partials here instead (gemm_chain_reduce adds them)
  bool down_t = false;  ///< down given transposed, (I, N2): the CTA's units are whole contiguous rows
};

template <class T, int P>
__device__ inline float dot_packs(uint4 const (&w)[P], T const (&xn)[P][8]) {
  float s = 0.0f;
#pragma unroll
  for (int p = 0; p < P; ++p) {
    T const* v = reinterpret_cast<T const*>(&w[p]);
#pragma unroll
    for (int c = 0; c < 8; ++c) s += cast<float>(v[c]) * cast<float>(xn[p][c]);
  }
  return s;
}

template <class T, int W, int P, int MinBlocks, int D>
__global__ void __launch_bounds__(W * 32, MinBlocks)
mlp_split(T const* __restrict__ x, T const* __restrict__ gate, T const* __restrict__ up, int I,
          T const* __restrict__ down, int N2, T const* __restrict__ resid, T* __restrict__ y, SplitWork work,
          SplitWays ways) {
  constexpr int K1 = 256 * P;
  constexpr int kThreads = W * 32;
  __shared__ float h_s[kMaxUnits];
  __shared__ float out_s[kMaxN2];
  __shared__ bool last_s;
  int const lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  int const groups = I / 8;
  int const g0 = blockIdx.x * groups / gridDim.x, g1 = (blockIdx.x + 1) * groups / gridDim.x;
  int const u0 = g0 * 8;
  int const nu = (g1 - g0) * 8;
  for (int i = threadIdx.x; i < N2; i += kThreads) out_s[i] = 0.0f;
  // Gate/up: a warp a unit; two named buffers, so one unit's packs stay in flight while the
  // other's FMAs run (a copy between buffers would wait for the loads).
  uint4 ua[2][P], ub[2][P];
  auto load_unit = [&](int j, uint4 (&w)[2][P]) {
    T const* g = gate + static_cast<int64_t>(u0 + j) * K1 + lane * 8;
    T const* v = up + static_cast<int64_t>(u0 + j) * K1 + lane * 8;
#pragma unroll
    for (int p = 0; p < P; ++p) {
      w[0][p] = load_stream_words(g + p * 256);
      w[1][p] = load_stream_words(v + p * 256);
    }
  };
  if (ways.phase1 && warp < nu) load_unit(warp, ua);  // settled weights: before the wait
  pdl_begin();
  // The norm, every warp for itself: x / rms(x) at the lane's packs.
  T xn[P][8];
  float ss = 0.0f;
#pragma unroll
  for (int p = 0; p < P; ++p) {
    load_pack<8>(x + p * 256 + lane * 8, xn[p]);
#pragma unroll
    for (int c = 0; c < 8; ++c) ss += cast<float>(xn[p][c]) * cast<float>(xn[p][c]);
  }
  float const inv = rsqrtf(chain_warp_sum(ss) / K1 + 1e-6f);
#pragma unroll
  for (int p = 0; p < P; ++p) {
#pragma unroll
    for (int c = 0; c < 8; ++c) xn[p][c] = cast<T>(cast<float>(xn[p][c]) * inv);
  }
  auto finish_unit = [&](int j, uint4 const (&w)[2][P]) {
    float const g = chain_warp_sum(dot_packs<T, P>(w[0], xn));
    float const u = chain_warp_sum(dot_packs<T, P>(w[1], xn));
    if (lane == 0) {
      float const gq = cast<float>(cast<T>(g));
      h_s[j] = cast<float>(cast<T>(gq / (1.0f + __expf(-gq)) * cast<float>(cast<T>(u))));
    }
  };
  if (ways.phase1) {
    for (int j = warp; j < nu; j += 2 * W) {
      if (j + W < nu) load_unit(j + W, ub);
      finish_unit(j, ua);
      if (j + 2 * W < nu) load_unit(j + 2 * W, ua);
      if (j + W < nu) finish_unit(j + W, ub);
    }
  } else {
    for (int j = threadIdx.x; j < nu; j += kThreads) h_s[j] = 1.0f;
  }
  // Down: the CTA's V packs of every row (ChainDownRows, atoms/gemm_chain.cuh).
  ChainDownRows<T, W, D> rows(down, u0, nu, I, N2);
  uint4 da[D], db[D];
  if (ways.down_t) {
    // Down transposed: thread t owns outputs n0 .. n0 + 7 and walks the CTA's nu rows, two named
    // batches of D rows in flight; no reduction between threads.
    __syncthreads();  // every h_j is in shared memory
    for (int n0 = threadIdx.x * 8; n0 < N2; n0 += kThreads * 8) {
      float acc[8] = {};
      T const* base = down + static_cast<int64_t>(u0) * N2 + n0;
      auto load_t = [&](int j, uint4 (&w)[D]) {
#pragma unroll
        for (int q = 0; q < D; ++q) {
          if (j + q < nu) w[q] = load_stream_words(base + static_cast<int64_t>(j + q) * N2);
        }
      };
      auto add_t = [&](int j, uint4 const (&w)[D]) {
#pragma unroll
        for (int q = 0; q < D; ++q) {
          if (j + q < nu) {
            T const* v = reinterpret_cast<T const*>(&w[q]);
            float const h = h_s[j + q];
#pragma unroll
            for (int e = 0; e < 8; ++e) acc[e] += cast<float>(v[e]) * h;
          }
        }
      };
      load_t(0, da);
      for (int j = 0; j < nu; j += 2 * D) {
        if (j + D < nu) load_t(j + D, db);
        add_t(j, da);
        if (j + 2 * D < nu) load_t(j + 2 * D, da);
        if (j + D < nu) add_t(j + D, db);
      }
#pragma unroll
      for (int e = 0; e < 8; ++e) out_s[n0 + e] = acc[e];
    }
  } else {
    if (ways.phase2) rows.first();
    __syncthreads();  // every h_j is in shared memory
    if (ways.phase2) rows.run(h_s, out_s);
  }
  __syncthreads();
  if (ways.partials != nullptr) {
    float* row = ways.partials + static_cast<int64_t>(blockIdx.x) * N2;
    for (int i = threadIdx.x * 4; i < N2; i += kThreads * 4) {
      *reinterpret_cast<float4*>(row + i) = make_float4(out_s[i], out_s[i + 1], out_s[i + 2], out_s[i + 3]);
    }
    return;
  }
  if (ways.atomics) {
    for (int i = threadIdx.x * 4; i < N2; i += kThreads * 4) {
      atomicAdd(reinterpret_cast<float4*>(work.acc + i), make_float4(out_s[i], out_s[i + 1], out_s[i + 2], out_s[i + 3]));
    }
  }
  if (!ways.finalize) return;
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) last_s = atomicAdd(work.count, 1u) == gridDim.x - 1;
  __syncthreads();
  if (!last_s) return;
  __threadfence();
  for (int i = threadIdx.x * 8; i < N2; i += kThreads * 8) {
    float4 const a0 = __ldcg(reinterpret_cast<float4 const*>(work.acc + i));
    float4 const a1 = __ldcg(reinterpret_cast<float4 const*>(work.acc + i + 4));
    float const a[8] = {a0.x, a0.y, a0.z, a0.w, a1.x, a1.y, a1.z, a1.w};
    T r[8], o[8];
    load_pack<8>(resid + i, r);
#pragma unroll
    for (int e = 0; e < 8; ++e) o[e] = cast<T>(cast<float>(r[e]) + cast<float>(cast<T>(a[e])));
    store_pack<8>(y + i, o);
    __stcg(reinterpret_cast<float4*>(work.acc + i), make_float4(0.f, 0.f, 0.f, 0.f));
    __stcg(reinterpret_cast<float4*>(work.acc + i + 4), make_float4(0.f, 0.f, 0.f, 0.f));
  }
  if (threadIdx.x == 0) *work.count = 0;
}

/// y = r + c, the second GEMM's epilogue that gemm_chain_reduce hands each rounded sum.
template <class T>
struct ResidualAdd {
  T const* resid;
  T* y;
  __device__ void operator()(int64_t, int64_t n, T const (&c)[1]) const {
    y[n] = cast<T>(cast<float>(resid[n]) + cast<float>(c[0]));
  }
};

/// Launches the split MLP on MinBlocks x `sms` CTAs (each owning whole groups of 8 units), then, where
/// `ways.partials` is set, gemm_chain_reduce on them.
template <class T, int W, int P, int MinBlocks, int D = 8>
cudaError_t launch_mlp_split(int sms, T const* x, T const* gate, T const* up, int I, T const* down, int N2,
                             T const* resid, T* y, SplitWork work, SplitWays ways, cudaStream_t st) {
  int const groups = I / 8;
  int const grid = groups < sms * MinBlocks ? groups : sms * MinBlocks;
  if (I % 8 || N2 % 8 || N2 > kMaxN2 || (groups + grid - 1) / grid * 8 > kMaxUnits) return cudaErrorInvalidValue;
  cudaError_t err = launch_kernel(mlp_split<T, W, P, MinBlocks, D>, dim3(grid), dim3(W * 32), 0, st, x, gate, up, I,
                                  down, N2, resid, y, work, ways);
  if (err != cudaSuccess || ways.partials == nullptr) return err;
  return launch_kernel(gemm_chain_reduce<T, ResidualAdd<T>>, dim3((N2 + kChainReduceCols - 1) / kChainReduceCols),
                       dim3(256), 0, st, static_cast<float const*>(ways.partials), grid, N2, ResidualAdd<T>{resid, y});
}

}  // namespace split
