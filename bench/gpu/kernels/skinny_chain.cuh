// Experiment (skinny_sweep.cu `chain`): two M = 1 GEMVs in a row as one sm_90 kernel,
// C2 = B2 · mid(B1 · A1), where the first GEMV's epilogue `mid` writes the second's A (a decoder
// MLP: h = silu(x·Wgᵀ) * (x·Wuᵀ), then h·Wdᵀ added to the residual stream).
//
// The question: in the Qwen3-1.7B decode step (2026-12-01) down's end came 13.7 us after
// gate/up's for 25 MB (1.8 TB/s). As two launches the second GEMV starts streaming only once the
// first is done and pays a ramp and tail of its own. Here each CTA (one an SM, all resident at
// once) issues one bulk copy of its slice of B2 (its rows, one contiguous run) into shared
// memory, streams its share of the first GEMV from registers while the copy lands, meets every
// other CTA at a grid barrier (the whole of A2 is written), then reads B2 from shared memory: the
// second GEMV's bytes travel during the first's. The answer (H200, 2026-12-01,
// bench/results/skinny-sweep-chain-*): no. Behind a norm, in a graph, the pair took 26.1-27.0 us
// a step as one launch against 25.8-25.9 as two; copying the slice before the PDL wait slowed the
// norm (its wait ended 5.3 us after the chain's start instead of 2.6), and warps taking rows from
// a counter (`dynamic_rows`) cost 2.5 us. One launch's phases, median over CTAs: the first GEMV
// done 12 us after the PDL wait (the slowest CTA 1.3 us later), the barrier 1.4 us after the last
// arrival, the second GEMV from shared memory and its residual add 3.7 us. Both forms move the
// pair's 75 MB near HBM's rate; what a layer loses is around them, not between them.
//
// `skinny_chain_plan` picks the widest grid (one CTA a multiprocessor at most) dividing both
// GEMVs' rows whose B2 slice fits the shared memory a block may opt into; every CTA must be
// resident for the barrier, which one CTA an SM and a grid no larger than the SM count guarantee.
// The barrier is a counter and a generation word in global memory (zero before the first
// launch); the last CTA to arrive resets the counter and bumps the generation, so the words serve
// every later launch in stream order. First GEMV: G members side by side, a warp a row, all of K1
// in flight; lane 0 hands the G results (rounded to T) to `mid(s, m, n, N1, c)` as
// gemm_skinny_nk's `out`. Second GEMV: the CTA's rows of B2, each warp a slice of K2 (A2's packs
// in registers), the warps' partials added in warp order. `stamps` (nullptr: none) takes each
// CTA's globaltimer at its start, after the PDL wait, after the first GEMV, after the barrier,
// once the slice has landed, and at its end.
#pragma once

#include <cstdint>

#include <cuda_runtime_api.h>

#include <tilefoundry/runtime/cuda/atoms/gemm_skinny.cuh>
#include <tilefoundry/runtime/cuda/atoms/gemm_skinny_bulk.cuh>
#include <tilefoundry/runtime/cuda/atoms/launch.cuh>
#include <tilefoundry/runtime/cuda/atoms/scalar.cuh>
#include <tilefoundry/runtime/cuda/atoms/vector_access.cuh>

#include "skinny_wave.cuh"

namespace chain {

using namespace tilefoundry::atoms;
using namespace tilefoundry::atoms::detail;

inline constexpr int kChainWarps = 16;
inline constexpr int kChainThreads = kChainWarps * 32;
inline constexpr int kChainMaxRows2 = 16;    // rows of B2 a CTA holds (each lane keeps a sum a row)
inline constexpr int kChainMaxLanePacks = 2;  // packs of A2 a lane holds: K2 <= 16 warps x 32 x 2 x 8
inline constexpr int kChainMaxK1Packs = 8;    // packs of K1 a lane streams a member: K1 <= 2048
// The mbarrier, then the warps' partials of the second GEMV ([kChainWarps][kChainMaxRows2]).
inline constexpr size_t kChainHeaderBytes = 128 + kChainWarps * kChainMaxRows2 * sizeof(float);
static_assert(kChainHeaderBytes % 128 == 0, "gemm_skinny_chain: B2's slice starts 128-byte aligned");

/// The grid barrier's words (global memory, zero before the first launch).
struct ChainBarrier {
  unsigned count;
  unsigned generation;
  unsigned next;  ///< rows of the first GEMV handed out past each warp's first (dynamic rows)
};

/// How a launch runs (the experiment's switches).
struct ChainWays {
  bool early_slice = false;  ///< B2's slice copied before the PDL wait (else right after it)
  bool dynamic_rows = false;  ///< warps past their first row take the next from a counter
  bool sleep = true;          ///< the barrier's waiters back off (__nanosleep) between polls
};

struct ChainPlan {
  int grid = 0;      ///< CTAs (one an SM); 0: no cut fits
  int64_t rows2 = 0;  ///< rows of B2 a CTA holds
  size_t smem = 0;   ///< dynamic shared memory a CTA takes
};

/// The widest grid of at most `sms` CTAs dividing N1 and N2 whose slice of B2 (N2 / grid rows of
/// K2) fits `smem_optin`; grid 0 where none does or the shapes leave the kernel's limits.
inline ChainPlan skinny_chain_plan(int64_t N1, int64_t K1, int64_t N2, int64_t K2, size_t elem, int sms,
                                   size_t smem_optin) {
  if (K1 % 256 != 0 || K1 / 256 > kChainMaxK1Packs || K2 % (8 * kChainWarps) != 0 ||
      K2 / (8 * kChainWarps) > 32 * kChainMaxLanePacks) {
    return {};
  }
  for (int grid = sms; grid >= 1; --grid) {
    if (N1 % grid != 0 || N2 % grid != 0) continue;
    int64_t const rows2 = N2 / grid;
    size_t const smem = kChainHeaderBytes + static_cast<size_t>(rows2 * K2) * elem;
    if (rows2 > kChainMaxRows2 || smem > smem_optin) return {};  // narrower grids only hold more rows
    return {grid, rows2, smem};
  }
  return {};
}

__device__ inline unsigned load_acquire(unsigned const* p) {
  unsigned v;
  asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

/// Every CTA of the grid arrives before any leaves; what each wrote before is visible after.
__device__ inline void chain_grid_barrier(ChainBarrier* bar, bool sleep) {
  __syncthreads();
  if (threadIdx.x == 0) {
    unsigned const gen = load_acquire(&bar->generation);
    __threadfence();  // this CTA's writes (mid's outputs) before its arrival
    if (atomicAdd(&bar->count, 1u) == gridDim.x - 1) {
      bar->count = 0;
      bar->next = 0;
      __threadfence();
      atomicAdd(&bar->generation, 1u);
    } else {
      while (load_acquire(&bar->generation) == gen) {
        if (sleep) __nanosleep(20);
      }
    }
    __threadfence();
  }
  __syncthreads();
}

/// 16 bytes of global memory written in this kernel by other CTAs: through L2, never a stale L1 line.
template <class T>
__device__ inline void load_fresh(T const* src, T (&out)[8]) {
  uint4 const w = __ldcg(reinterpret_cast<uint4 const*>(src));
  T const* v = reinterpret_cast<T const*>(&w);
#pragma unroll
  for (int i = 0; i < 8; ++i) out[i] = v[i];
}

/// See the file comment. `rows1` has G members side by side (N1 rows each); B2 is (N2, K2) with
/// K2 = N1, A2 what `mid` writes; `settled`: no kernel that may still run writes B1 or B2.
template <class T, int G, int KP, class Mid, class Out>
__global__ void __launch_bounds__(kChainThreads, 1)
gemm_skinny_chain(T const* __restrict__ A1, SkinnyBtRows<T> rows1, Mid mid, T const* A2, T const* __restrict__ B2,
                  int64_t N2, int64_t rows2, ChainBarrier* bar, ChainWays ways, Out out, uint64_t* stamps) {
  auto stamp = [&](int at) {
    if (stamps != nullptr && threadIdx.x == 0) {
      uint64_t t;
      asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
      stamps[blockIdx.x * 6 + at] = t;
    }
  };
  stamp(0);
  constexpr int64_t K1 = static_cast<int64_t>(KP) * 256;
  extern __shared__ __align__(128) unsigned char chain_smem_[];
  uint64_t* const landed = reinterpret_cast<uint64_t*>(chain_smem_);
  float* const parts = reinterpret_cast<float*>(chain_smem_ + 128);  // [kChainWarps][kChainMaxRows2]
  T* const slice = reinterpret_cast<T*>(chain_smem_ + kChainHeaderBytes);
  int64_t const N1 = rows1.template total<G>();
  int64_t const K2 = N1;
  int const warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  int64_t const row2 = static_cast<int64_t>(blockIdx.x) * rows2;
  uint32_t const slice_bytes = static_cast<uint32_t>(rows2 * K2 * sizeof(T));
  if (threadIdx.x == 0) {
    bulk_barrier_init(landed, 1);
    bulk_barrier_fence_init();
  }
  __syncthreads();
  bool const settled = rows1.settled;
  auto issue_slice = [&] {
    if (threadIdx.x == 0) {
      bulk_barrier_expect(landed, slice_bytes);
      bulk_copy(slice, B2 + row2 * K2, slice_bytes, landed);
    }
  };
  if (settled && ways.early_slice) issue_slice();
  // The first GEMV: a warp a row, the whole of K1 for every member in flight at once.
  int64_t const warps = static_cast<int64_t>(gridDim.x) * kChainWarps;
  int64_t n = static_cast<int64_t>(blockIdx.x) * kChainWarps + warp;
  uint4 b[G][KP];  // raw words: T arrays of this size made ptxas spill
  auto load_row = [&](int64_t r) {
#pragma unroll
    for (int g = 0; g < G; ++g) {
#pragma unroll
      for (int p = 0; p < KP; ++p) b[g][p] = load_stream_words(rows1.B[g] + r * K1 + p * 256 + lane * 8);
    }
  };
  if (settled && n < N1) load_row(n);
  pdl_begin();
  stamp(1);
  if (!(settled && ways.early_slice)) issue_slice();
  for (bool first = true; n < N1; first = false) {
    if (!(settled && first)) load_row(n);
    // The warp's next row, asked for while this one's loads are in flight.
    unsigned taken = 0;
    if (ways.dynamic_rows && lane == 0) taken = atomicAdd(&bar->next, 1u);
    int64_t const following = ways.dynamic_rows ? warps + __shfl_sync(0xffffffffu, taken, 0) : n + warps;
    float acc[G] = {};
    wave::wave_fma<T, G, KP>(A1, 0, K1, lane, b, acc);
    T c[G];
    wave::wave_results(acc, c);
    if (lane == 0) {
      mid(0, int64_t{0}, n, N1, c);
    }
    n = following;
  }
  stamp(2);
  chain_grid_barrier(bar, ways.sleep);
  stamp(3);
  // The second GEMV: warp w sums its slice of K2 (packs w * PW .. w * PW + PW - 1) over the CTA's
  // rows, A2's packs in registers, B2's from shared memory.
  int64_t const PW = K2 / 8 / kChainWarps;
  T h[kChainMaxLanePacks][8];
#pragma unroll
  for (int q = 0; q < kChainMaxLanePacks; ++q) {
    int64_t const pack = lane + 32 * q;
    if (pack < PW) load_fresh(A2 + (warp * PW + pack) * 8, h[q]);
  }
  bulk_barrier_wait(landed, 0);
  stamp(4);
  float acc[kChainMaxRows2] = {};
#pragma unroll
  for (int r = 0; r < kChainMaxRows2; ++r) {
    if (r >= rows2) break;
#pragma unroll
    for (int q = 0; q < kChainMaxLanePacks; ++q) {
      int64_t const pack = lane + 32 * q;
      if (pack >= PW) break;
      T w[8];
      load_pack<8>(slice + r * K2 + (warp * PW + pack) * 8, w);
#pragma unroll
      for (int c = 0; c < 8; ++c) acc[r] = acc[r] + cast<float>(h[q][c]) * cast<float>(w[c]);
    }
  }
#pragma unroll
  for (int r = 0; r < kChainMaxRows2; ++r) {
#pragma unroll
    for (int off = 16; off > 0; off /= 2) acc[r] = acc[r] + __shfl_xor_sync(0xffffffffu, acc[r], off);
  }
  if (lane == 0) {
#pragma unroll
    for (int r = 0; r < kChainMaxRows2; ++r) parts[warp * kChainMaxRows2 + r] = acc[r];
  }
  __syncthreads();
  if (threadIdx.x < rows2) {
    float total = 0.0f;
    for (int w = 0; w < kChainWarps; ++w) total = total + parts[w * kChainMaxRows2 + threadIdx.x];
    T const c[1] = {cast<T>(total)};
    out(0, int64_t{0}, row2 + threadIdx.x, N2, c);
  }
  stamp(5);
}


/// C2 = B2 · mid(B1 · A1) in one launch where `plan.grid` > 0 (see the file comment); K1 must
/// be KP x 256. Opts the kernel into the plan's shared memory.
template <class T, int G, int KP, class Mid, class Out>
inline cudaError_t skinny_chain(ChainPlan const& plan, T const* A1, SkinnyBtRows<T> const& rows1,
                                Mid const& mid, T const* A2, T const* B2, int64_t N2, ChainBarrier* bar,
                                ChainWays ways, Out const& out, cudaStream_t stream, uint64_t* stamps = nullptr) {
  auto* kernel = gemm_skinny_chain<T, G, KP, Mid, Out>;
  cudaError_t const err =
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(plan.smem));
  if (err != cudaSuccess) return err;
  return launch_kernel(kernel, dim3(static_cast<unsigned>(plan.grid)), dim3(kChainThreads), plan.smem,
                       stream, A1, rows1, mid, A2, B2, N2, plan.rows2, bar, ways, out, stamps);
}

}  // namespace chain
