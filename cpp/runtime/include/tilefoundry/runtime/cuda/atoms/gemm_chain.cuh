// GEMM chain at M = 1: two GEMMs with B stored (N, K) where the second's A is the first's
// element-wise epilogue output and nothing else reads it (`ir.plan.gemm_chains`). A decoder MLP:
//
//   h = epi(A · gateᵀ, A · upᵀ)        (silu(g) * u: the first call's epilogue, G = 2 members)
//   y = epi2(h · downᵀ)                (r + d: the second call's epilogue)
//
// As two skinny launches the second waits for all of h before it streams down's weights. Here the
// pair runs split over their shared dimension I (the first's N, the second's K) with no dependency
// between CTAs: each CTA owns whole groups of 8 units j of I, computes their results of the first
// GEMM (a warp a unit, two named buffers of packs in flight), hands them to `epi` (which stores
// h_j), then multiplies its h_j into down's columns j of every row (32 / V rows a warp
// instruction, V lanes a row, a segmented shuffle tree) and stores its partial sums of y, f32, in
// a workspace row of its own. A second launch adds the rows in a fixed order and hands each sum,
// rounded to T, to `epi2`: deterministic, and no state persists between calls. The CTA reads its h_j
// back from memory after a barrier (its own stores; L2 reads), so both epilogues are the
// generated functors of the unchained calls, unchanged.
//
// On the H100 (2026-12-05, bench/gpu/kernels/skinny_split.cuh, Qwen3-1.7B's MLP with its norm
// recomputed in every warp) the split and its reduce took 28.4 us behind o_proj against 32.9 for
// the norm and the two skinny launches. Fits (gemm_chain_fits): M = 1, half types, K = 256 · P
// (each lane P packs of A), I a multiple of 8 and at most kChainMaxUnits units a CTA in the
// shape's grid, N2 a multiple of 8 up to kChainMaxN, every operand 16-byte aligned. Otherwise
// `*chained` is false and the caller runs the two calls as before.
//
// The shape (ChainShape) defaults to 8 warps, one CTA an SM. Inside a layer (behind o_proj, before
// the next norm and q/k/v GEMV) the sweep timed it at 31.7 us on the H100 against 33.5 for the
// three launches; 4 warps an SM took 42.7, 2 warps x 2 44.0, and registers capped for two CTAs
// an SM spilled (63.2) (2026-12-06, bench/results/skinny-sweep-split-shapes-nvidia-h100-2026-12-06.txt).
#pragma once

#include <cstdint>

#include <cuda_runtime_api.h>

#include <tilefoundry/runtime/cuda/atoms/device_facts.cuh>
#include <tilefoundry/runtime/cuda/atoms/gemm.cuh>
#include <tilefoundry/runtime/cuda/atoms/gemm_skinny.cuh>
#include <tilefoundry/runtime/cuda/atoms/launch.cuh>
#include <tilefoundry/runtime/cuda/atoms/scalar.cuh>
#include <tilefoundry/runtime/cuda/atoms/vector_access.cuh>

namespace tilefoundry::atoms {

/// The split launch's shape: W warps a CTA, C CTAs an SM in the grid, D rows of the second B a
/// lane keeps in flight (twice), and registers capped for R CTAs an SM (__launch_bounds__). R > C
/// would leave an SM room for the next kernel's CTAs; on the H100 it spilled and ran slower (file
/// comment), as did fewer warps.
template <int W = 8, int C = 1, int D = 8, int R = C>
struct ChainShape {
  static constexpr int kWarps = W;
  static constexpr int kCtasPerSm = C;
  static constexpr int kDownBatch = D;
  static constexpr int kRegisterCtas = R;
  static_assert(W >= 1 && W <= 32 && C >= 1 && D >= 1 && R >= C, "ChainShape: W warps, C <= R CTAs an SM");
};

namespace detail {

inline constexpr int kChainMaxUnits = 64;    // units of I a CTA owns, at most (its h in shared memory)
inline constexpr int kChainMaxN = 4096;      // N of the second GEMM (its partial row in shared memory)
inline constexpr int kChainReduceCols = 64;  // outputs a reduce CTA adds

__device__ inline float chain_warp_sum(float v) {
#pragma unroll
  for (int off = 16; off > 0; off /= 2) v += __shfl_xor_sync(0xffffffffu, v, off);
  return v;
}

/// CTAs of the split launch: S::kCtasPerSm an SM, each at least one group of 8 units.
template <class S>
inline int chain_grid(int64_t I) {
  int64_t const groups = I / 8, ctas = int64_t{device_facts().sms} * S::kCtasPerSm;
  return static_cast<int>(groups < ctas ? groups : ctas);
}

/// A split CTA's share of the second GEMM: out[n] = sum over its nu units j of B2[n, u0 + j] · h[j],
/// for every row n < N2 of B2 (N2, I). A warp covers 32 / V rows an instruction, V = nu / 8 lanes a
/// row (lane % V its pack, whose 8 values of h it holds); the row's V sums meet in its first lane
/// by a segmented shuffle tree (shared-memory atomics from the V lanes of a row serialize: 25 us for
/// this phase alone on the H100), which stores it. Two named batches of D rows in flight. `first()`
/// loads the first batch (before h is known), `run(h, out)` the rest; every lane of the CTA calls
/// both (the shuffles need whole warps).
template <class T, int W, int D>
struct ChainDownRows {
  int V, per_warp, c, step, r0, warp, N2, I;
  bool lives;
  T const* col;
  uint4 da[D], db[D];
  float hc[8];

  __device__ ChainDownRows(T const* B2, int u0, int nu, int I_, int N2_)
      : V(nu / 8), per_warp(32 / V), c(static_cast<int>(threadIdx.x % 32) % V), step(W * per_warp),
        r0(static_cast<int>(threadIdx.x / 32) * per_warp + static_cast<int>(threadIdx.x % 32) / V),
        warp(static_cast<int>(threadIdx.x / 32)), N2(N2_), I(I_),
        lives(static_cast<int>(threadIdx.x % 32) / V < per_warp), col(B2 + u0 + c * 8) {}

  __device__ void load_rows(int r, uint4 (&w)[D]) const {
#pragma unroll
    for (int q = 0; q < D; ++q) {
      if (lives && r + q * step < N2) w[q] = load_stream_words(col + static_cast<int64_t>(r + q * step) * I);
    }
  }
  __device__ void add_rows(int r, uint4 const (&w)[D], float* out) const {
#pragma unroll
    for (int q = 0; q < D; ++q) {
      float s = 0.0f;
      if (lives && r + q * step < N2) {
        T const* v = reinterpret_cast<T const*>(&w[q]);
#pragma unroll
        for (int e = 0; e < 8; ++e) s += cast<float>(v[e]) * hc[e];
      }
#pragma unroll
      for (int off = 1; off < 8; off *= 2) {
        float const o = __shfl_down_sync(0xffffffffu, s, off);
        if (c + off < V) s += o;
      }
      if (lives && c == 0 && r + q * step < N2) out[r + q * step] = s;
    }
  }
  __device__ void first() { load_rows(r0, da); }
  /// The rows' sums into out[0, N2), h[0, nu) the CTA's units' values (shared memory).
  __device__ void run(float const* h, float* out) {
#pragma unroll
    for (int e = 0; e < 8; ++e) hc[e] = h[c * 8 + e];
    // Bounded by the warp's first row, so that every lane runs each iteration.
    for (int r = r0, base = warp * per_warp; base < N2; r += 2 * D * step, base += 2 * D * step) {
      if (base + D * step < N2) load_rows(r + D * step, db);
      add_rows(r, da, out);
      if (base + 2 * D * step < N2) load_rows(r + 2 * D * step, da);
      if (base + D * step < N2) add_rows(r + D * step, db, out);
    }
  }
};

/// The split launch: CTA b's units [u0, u0 + nu), their first-GEMM results through `epi`, then
/// its partial y (N2 floats) into partials row b.
template <class T, int G, int P, class S, class Epi>
__global__ void __launch_bounds__(S::kWarps * 32, S::kRegisterCtas)
gemm_chain_split(T const* __restrict__ A, GemmGroup<T> g, int I, Epi epi, T const* H, T const* __restrict__ B2,
                 int N2, float* __restrict__ partials) {
  constexpr int K = 256 * P;
  constexpr int W = S::kWarps;
  constexpr int kThreads = W * 32;
  __shared__ float h_s[kChainMaxUnits];
  __shared__ float out_s[kChainMaxN];
  int const lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  int const groups = I / 8;
  int const g0 = blockIdx.x * groups / gridDim.x, g1 = (blockIdx.x + 1) * groups / gridDim.x;
  int const u0 = g0 * 8, nu = (g1 - g0) * 8;
  // The first GEMM, a warp a unit; two named buffers, so one unit's packs stay in flight while
  // the other's FMAs run (a copy between buffers would wait for the loads).
  uint4 ua[G][P], ub[G][P];
  auto load_unit = [&](int j, uint4 (&w)[G][P]) {
#pragma unroll
    for (int s = 0; s < G; ++s) {
      T const* b = g.B[s] + static_cast<int64_t>(u0 + j) * K + lane * 8;
#pragma unroll
      for (int p = 0; p < P; ++p) w[s][p] = load_stream_words(b + p * 256);
    }
  };
  if (g.b_settled && warp < nu) load_unit(warp, ua);  // weights no running kernel writes: before the wait
  pdl_begin();
  if (!g.b_settled && warp < nu) load_unit(warp, ua);
  T a[P][8];
#pragma unroll
  for (int p = 0; p < P; ++p) load_pack<8>(A + p * 256 + lane * 8, a[p]);
  auto finish_unit = [&](int j, uint4 const (&w)[G][P]) {
    T c[G];
#pragma unroll
    for (int s = 0; s < G; ++s) {
      float dot = 0.0f;
#pragma unroll
      for (int p = 0; p < P; ++p) {
        T const* v = reinterpret_cast<T const*>(&w[s][p]);
#pragma unroll
        for (int e = 0; e < 8; ++e) dot += cast<float>(v[e]) * cast<float>(a[p][e]);
      }
      c[s] = cast<T>(chain_warp_sum(dot));  // rounded as the GEMM's C would hold it
    }
    if (lane == 0) epi(int64_t{0}, static_cast<int64_t>(u0 + j), c);
  };
  for (int j = warp; j < nu; j += 2 * W) {
    if (j + W < nu) load_unit(j + W, ub);
    finish_unit(j, ua);
    if (j + 2 * W < nu) load_unit(j + 2 * W, ua);
    if (j + W < nu) finish_unit(j + W, ub);
  }
  ChainDownRows<T, W, S::kDownBatch> down(B2, u0, nu, I, N2);
  down.first();
  __syncthreads();  // every h_j the CTA's epilogue stored is visible to the CTA
  for (int j = threadIdx.x; j < nu; j += kThreads) {
    static_assert(sizeof(T) == sizeof(unsigned short), "gemm_chain_split: 16-bit elements");
    unsigned short const bits = __ldcg(reinterpret_cast<unsigned short const*>(H) + u0 + j);  // L2: just stored
    h_s[j] = cast<float>(*reinterpret_cast<T const*>(&bits));
  }
  __syncthreads();
  down.run(h_s, out_s);
  __syncthreads();
  float* row = partials + static_cast<int64_t>(blockIdx.x) * N2;
  for (int i = threadIdx.x * 4; i < N2; i += kThreads * 4) {
    *reinterpret_cast<float4*>(row + i) = make_float4(out_s[i], out_s[i + 1], out_s[i + 2], out_s[i + 3]);
  }
}

/// y_n = epi2(the `splits` partial rows added at n, rounded to T): kChainReduceCols outputs a CTA,
/// 16 float4 columns x 16 lanes of splits, the lanes' sums added through shared memory in lane
/// order (deterministic).
template <class T, class Epi2>
__global__ void __launch_bounds__(256) gemm_chain_reduce(float const* __restrict__ partials, int splits, int N2,
                                                         Epi2 epi2) {
  __shared__ float4 sum_s[16][16];
  pdl_begin();
  int const col = threadIdx.x % 16, part = threadIdx.x / 16;
  int const n = blockIdx.x * kChainReduceCols + col * 4;
  float4 s = make_float4(0.f, 0.f, 0.f, 0.f);
  if (n < N2) {
    for (int p = part; p < splits; p += 16) {
      float4 const v = __ldcg(reinterpret_cast<float4 const*>(partials + static_cast<int64_t>(p) * N2 + n));
      s.x += v.x;
      s.y += v.y;
      s.z += v.z;
      s.w += v.w;
    }
  }
  sum_s[part][col] = s;
  __syncthreads();
  if (part == 0 && n < N2) {
    float4 t = sum_s[0][col];
    for (int q = 1; q < 16; ++q) {
      t.x += sum_s[q][col].x;
      t.y += sum_s[q][col].y;
      t.z += sum_s[q][col].z;
      t.w += sum_s[q][col].w;
    }
    float const sums[4] = {t.x, t.y, t.z, t.w};
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      T const c[1] = {cast<T>(sums[e])};
      epi2(int64_t{0}, static_cast<int64_t>(n + e), c);
    }
  }
}

}  // namespace detail

/// Whether the chain runs as the split launch (file comment): `g`'s G members of equal N = I
/// reading A (1, K) with K = 256 · P, then `g2`'s one member (N2, I) reading H.
template <GemmLayout L, int G, int P, class S = ChainShape<>, class T>
inline bool gemm_chain_fits(T const* A, GemmGroup<T> const& g, int64_t M, int64_t K, T const* H,
                            GemmGroup<T> const& g2, int64_t K2) {
  if constexpr (L != GemmLayout::rcr || !is_half_v<T> || G < 1 || G > detail::kSkinnyBtMembers) {
    return false;
  } else {
    if (M != 1 || K != 256 * P || g.count != G || g2.count != 1) return false;
    int64_t const I = g.N[0], N2 = g2.N[0];
    bool ok = K2 == I && I % 8 == 0 && N2 % 8 == 0 && N2 <= detail::kChainMaxN && aligned16({A, H, g2.B[0]});
    for (int s = 0; s < G; ++s) ok = ok && g.N[s] == I && aligned16({g.B[s]});
    if (!ok) return false;
    int64_t const grid = detail::chain_grid<S>(I), groups = I / 8;
    return grid >= 1 && (groups + grid - 1) / grid * 8 <= detail::kChainMaxUnits;
  }
}

/// Workspace the split launch needs: a row of N2 floats a CTA (0 where it does not fit).
template <GemmLayout L, int G, int P, class S = ChainShape<>, class T>
inline size_t gemm_chain_workspace_bytes(T const* A, GemmGroup<T> const& g, int64_t M, int64_t K, T const* H,
                                         GemmGroup<T> const& g2, int64_t K2) {
  if (!gemm_chain_fits<L, G, P, S>(A, g, M, K, H, g2, K2)) return 0;
  return static_cast<size_t>(detail::chain_grid<S>(g.N[0])) * static_cast<size_t>(g2.N[0]) * sizeof(float);
}

/// The chain as the split launch and its reduce where it fits (`*chained` = true: `epi` has stored
/// H and `epi2` applied to every result of the second GEMM, no C written); else nothing runs
/// (`*chained` = false) and the caller makes the two calls. `workspace`: gemm_chain_workspace_bytes.
template <GemmLayout L, int G, int P, class S = ChainShape<>, class T, class Epi, class Epi2>
inline cudaError_t gemm_chain(T const* A, GemmGroup<T> const& g, int64_t M, int64_t K, Epi const& epi, T const* H,
                              GemmGroup<T> const& g2, int64_t K2, Epi2 const& epi2, void* workspace,
                              cudaStream_t stream, bool* chained) {
  *chained = false;
  if (!gemm_chain_fits<L, G, P, S>(A, g, M, K, H, g2, K2)) return cudaSuccess;
  int const grid = detail::chain_grid<S>(g.N[0]);
  int const N2 = static_cast<int>(g2.N[0]);
  auto* partials = static_cast<float*>(workspace);
  cudaError_t err = launch_kernel(detail::gemm_chain_split<T, G, P, S, Epi>, dim3(grid), dim3(S::kWarps * 32),
                                  0, stream, A, g, static_cast<int>(g.N[0]), epi, H, g2.B[0], N2, partials);
  if (err != cudaSuccess) return err;
  err = launch_kernel(detail::gemm_chain_reduce<T, Epi2>,
                      dim3((N2 + detail::kChainReduceCols - 1) / detail::kChainReduceCols), dim3(256), 0, stream,
                      static_cast<float const*>(partials), grid, N2, epi2);
  *chained = err == cudaSuccess;
  return err;
}

}  // namespace tilefoundry::atoms
