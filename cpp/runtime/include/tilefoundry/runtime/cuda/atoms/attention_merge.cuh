// How the split-KV partials of the attention atom (attention.cuh) combine into out. Split s of
// an output row holds (m_s, l_s, acc_s) (attention_args.cuh: m in log2 units, acc unnormalized);
// the merged row is
//   out = Σ_s 2^(m_s - M) acc_s / Σ_s 2^(m_s - M) l_s,   M = max_s m_s,
// with an empty split (m_s = -inf, l_s = 0, acc_s = 0) weighted 0 and a row no split saw written 0.
// The sums have one fixed association, whoever computes them: the splits fall into kMergeRuns
// contiguous runs (merge_run_bounds), each run is folded from 0 in split order (merge_run: fma),
// and the runs' sums are then added in run order. So the result never depends on timing, and
// both merges below agree bit for bit on the same partials (tests/cpp/test_attention_fragments.cu
// checks merge_unrolled against merge_run's composition):
//   attention_merge  a second kernel over partials in global memory: one CTA per row, warp w
//                    folds run w with merge_run (its loads in flight together), the runs added
//                    through smem.
//   cluster_merge    sm_90, the splits (<= kClusterMaxSplits) of a row block are one thread-block
//                    cluster and each CTA parked its partial in its own shared memory: after
//                    cluster.sync() the cluster's threads share the block's (row, 4 columns)
//                    pieces; a piece's thread loads every rank's partial through distributed
//                    shared memory at once (into registers: compile-time indices, no branches),
//                    then folds them in split (= rank) order with merge_unrolled.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>

#include <cooperative_groups.h>
#include <cuda_runtime_api.h>

#include <tilefoundry/runtime/cuda/atoms/attention_args.cuh>
#include <tilefoundry/runtime/cuda/atoms/launch.cuh>
#include <tilefoundry/runtime/cuda/atoms/scalar.cuh>

namespace tilefoundry::atoms::detail {

inline constexpr int kMergeRuns = 4;          // runs of the fixed association; attention_merge's warps
inline constexpr int kClusterMaxSplits = 16;   // the largest cluster (non-portable) cluster_merge serves

/// Splits [first, last) of run `run` (of kMergeRuns contiguous runs covering `splits` splits).
__host__ __device__ inline void merge_run_bounds(int splits, int run, int& first, int& last) {
  int const per = (splits + kMergeRuns - 1) / kMergeRuns;
  first = run * per < splits ? run * per : splits;
  last = first + per < splits ? first + per : splits;
}

/// A split's weight 2^(m - mx) in a merge whose max is mx (log2 units); 0 for an empty split
/// (computed either way and selected: no branch between a merge's loads).
__host__ __device__ inline float merge_weight(float m, float mx) {
  float const w = fast_exp2(m - mx);
  return m == -std::numeric_limits<float>::infinity() ? 0.0f : w;
}

/// Folds splits [first, last) into (l, acc) in split order: l += w_s l_s, acc[i] += w_s x_s[i].
/// `partial(s, m, l, x)` reads split s's max, sum and the N accumulator values merged here.
template <int N, class Partial>
__host__ __device__ inline void merge_run(float mx, int first, int last, float& l, float (&acc)[N], Partial&& partial) {
#if defined(__CUDA_ARCH__)
#pragma unroll 8
#endif
  for (int s = first; s < last; ++s) {
    float ms, ls, x[N];
    partial(s, ms, ls, x);
    float const w = merge_weight(ms, mx);
    l = fmaf(w, ls, l);
    for (int i = 0; i < N; ++i) acc[i] = fmaf(w, x[i], acc[i]);
  }
}

/**
 * @brief The whole fixed association over at most MaxSplits partials held in registers (fully
 * unrolled: compile-time indices), bit for bit what merge_run over each run, the runs' sums added
 * in order, gives. Returns Σ w_s l_s; acc gets Σ w_s x_s.
 * @param m, l, x split s's max (log2 units), sum and N accumulator values, s < splits <= MaxSplits
 */
template <int MaxSplits, int N>
__host__ __device__ inline float merge_unrolled(int splits, float const (&m)[MaxSplits], float const (&l)[MaxSplits],
                                                float const (&x)[MaxSplits][N], float (&acc)[N]) {
  float mx = -std::numeric_limits<float>::infinity();
#if defined(__CUDA_ARCH__)
#pragma unroll
#endif
  for (int s = 0; s < MaxSplits; ++s) mx = s < splits ? fmaxf(mx, m[s]) : mx;
  int const per = (splits + kMergeRuns - 1) / kMergeRuns;
  int end = per < splits ? per : splits;  // where the open run ends
  int closed = 0;
  float total = 0.0f, run_l = 0.0f, run_acc[N] = {};
  for (int i = 0; i < N; ++i) acc[i] = 0.0f;
#if defined(__CUDA_ARCH__)
#pragma unroll
#endif
  for (int s = 0; s < MaxSplits; ++s) {
    if (s < splits) {
      float const w = merge_weight(m[s], mx);
      run_l = fmaf(w, l[s], run_l);
      for (int i = 0; i < N; ++i) run_acc[i] = fmaf(w, x[s][i], run_acc[i]);
      if (s + 1 == end) {
        total += run_l;
        for (int i = 0; i < N; ++i) acc[i] += run_acc[i];
        run_l = 0.0f;
        for (int i = 0; i < N; ++i) run_acc[i] = 0.0f;
        end = end + per < splits ? end + per : splits;
        ++closed;
      }
    }
  }
  for (; closed < kMergeRuns; ++closed) {  // empty runs add their zero sums, as attention_merge's warps do
    total += 0.0f;
    for (int i = 0; i < N; ++i) acc[i] += 0.0f;
  }
  return total;
}

/// A merged output value: the weighted accumulator over the weighted sum, 0 where no key was seen.
__host__ __device__ inline float merge_output(float acc, float total) { return total > 0.0f ? acc / total : 0.0f; }

/// The rows a split kernel wrote itself (its solo path): those of a batch whose valid keys number
/// at most `solo` (0: none); the merge leaves them alone.
template <class LenT>
struct SoloRows {
  LenT const* kv_len;
  bool per_batch;
  int64_t skv;
  int64_t rows_per_batch;  ///< Hq · Sq
  int solo;

  __device__ bool written(int64_t row) const {
    return solo > 0 && kv_length(kv_len, per_batch, row / rows_per_batch, skv) <= solo;
  }
};

/// Merges the split-KV partials in global memory, one row per CTA; warp w folds run w.
template <class T, int D, class LenT>
__global__ void __launch_bounds__(kMergeRuns * 32)
attention_merge(AttnPartials part, AttnOutRows<T> out, int splits, SoloRows<LenT> solo) {
  pdl_begin();
  if (solo.written(blockIdx.x)) return;
  __shared__ float red[kMergeRuns];
  __shared__ float sums[kMergeRuns];
  __shared__ float accs[kMergeRuns][D];
  int64_t const row = blockIdx.x;
  int const lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  float mx = -std::numeric_limits<float>::infinity();
  for (int s = threadIdx.x; s < splits; s += kMergeRuns * 32) mx = fmaxf(mx, part.ml[(s * part.rows + row) * 2]);
#pragma unroll
  for (int o = 16; o > 0; o /= 2) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
  if (lane == 0) red[warp] = mx;
  __syncthreads();
#pragma unroll
  for (int w = 0; w < kMergeRuns; ++w) mx = fmaxf(mx, red[w]);
  int first, last;
  merge_run_bounds(splits, warp, first, last);
  float l = 0.0f;
  float acc[D / 32] = {};
  merge_run<D / 32>(mx, first, last, l, acc, [&](int s, float& m, float& ls, float (&x)[D / 32]) {
    float const* ml = part.ml + (s * part.rows + row) * 2;
    float const* src = part.acc + (s * part.rows + row) * D;
    m = ml[0];
    ls = ml[1];
#pragma unroll
    for (int q = 0; q < D / 32; ++q) x[q] = src[lane + 32 * q];
  });
  if (lane == 0) sums[warp] = l;
#pragma unroll
  for (int q = 0; q < D / 32; ++q) accs[warp][lane + 32 * q] = acc[q];
  __syncthreads();
  float total = 0.0f;
#pragma unroll
  for (int w = 0; w < kMergeRuns; ++w) total += sums[w];
  T* const dst = out.row(row, D);
  for (int c = threadIdx.x; c < D; c += kMergeRuns * 32) {
    float a = 0.0f;
#pragma unroll
    for (int w = 0; w < kMergeRuns; ++w) a += accs[w][c];
    dst[c] = cast<T>(merge_output(a, total));
  }
}

/**
 * @brief The in-cluster merge: every CTA of the calling cluster (rank = split) parked the partial
 * of the same `rows` rows at the same shared-memory offsets; writes those rows of `out`.
 * @param acc (rows, D) unnormalized accumulators; @param ml (rows, 2) max m (log2 units) and sum l
 * @param out the block's rows of out (each 8-byte aligned, in 4-column pieces); @param rho0 its first row ρ
 * Every thread of every CTA must call it (two cluster barriers), whatever its chunk held.
 */
template <class T, int D, int Threads>
__device__ inline void cluster_merge(float const* acc, float const* ml, int rows, AttnBlockRows<T> out, int64_t rho0) {
  static_assert(sizeof(T) == 2 && D % 4 == 0, "attention cluster merge: 16-bit outputs in 4-column pieces");
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  constexpr int S = kClusterMaxSplits;
  namespace cg = cooperative_groups;
  cg::cluster_group cluster = cg::this_cluster();
  cluster.sync();  // every split's partial is in its CTA's shared memory
  int const splits = static_cast<int>(cluster.num_blocks());
  int const me = static_cast<int>(cluster.block_rank());
  int const pieces = rows * (D / 4);
  for (int i = me * Threads + threadIdx.x; i < pieces; i += splits * Threads) {
    int const r = i / (D / 4), c = (i % (D / 4)) * 4;
    float m[S], l[S], x[S][4];
    // Every split's loads in flight together; slots past the cluster read this CTA's own partial
    // (no branch between the loads) and merge_unrolled ignores them.
#pragma unroll
    for (int s = 0; s < S; ++s) {
      int const peer = s < splits ? s : me;
      float2 const pml = *reinterpret_cast<float2 const*>(cluster.map_shared_rank(ml, peer) + r * 2);
      float4 const v = *reinterpret_cast<float4 const*>(cluster.map_shared_rank(acc, peer) + r * D + c);
      m[s] = pml.x;
      l[s] = pml.y;
      x[s][0] = v.x;
      x[s][1] = v.y;
      x[s][2] = v.z;
      x[s][3] = v.w;
    }
    float sum[4];
    float const total = merge_unrolled<S, 4>(splits, m, l, x, sum);
    uint32_t bits[4];
#pragma unroll
    for (int k = 0; k < 4; ++k) bits[k] = cast<T>(merge_output(sum[k], total)).raw();
    *reinterpret_cast<uint2*>(out.row(rho0 + r, D) + c) = make_uint2(bits[0] | bits[1] << 16, bits[2] | bits[3] << 16);
  }
  cluster.sync();  // no CTA exits while a peer still reads its shared memory
#else
  (void)acc, (void)ml, (void)rows, (void)out, (void)rho0;
  __trap();  // the host launches the cluster form only where this module's sm_90 code runs
#endif
}

}  // namespace tilefoundry::atoms::detail
