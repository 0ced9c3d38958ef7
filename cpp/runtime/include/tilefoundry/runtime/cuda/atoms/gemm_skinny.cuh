// GEMM tier for skinny M (decode: M <= 8; B (N, K) up to M = 16): memory-bound on B, so B is
// streamed exactly once in 16-byte packs (non-coherent, no L1 allocation) with several packs in
// flight per thread, and the K sums are combined in a fixed order, so results do not depend on
// timing. A (M, K) and C (M, N) are compact row-major; B comes in either major:
//
// B (K, N) row-major, `gemm_skinny`: a CTA owns a slab of Cols columns (8 per thread, 16 bytes)
//   and one K split; its 256 threads cover 256 / (Cols / 8) rows of K per pass. The threads of
//   one column pack are combined in shared memory (row order), then the K splits:
//     cluster    sm90: the splits of a slab are one thread-block cluster; CTA rank 0 adds the
//                others' partials through distributed shared memory (rank order). One launch.
//     workspace  otherwise: each split writes f32 partials, a second kernel adds them in order.
//     direct     one split (N alone fills the device): the CTA writes C.
// B (N, K) row-major ("B transposed", a torch Linear weight), `gemm_skinny_bt`: a warp owns one
//   output column n, its lanes stride K in 16-byte packs, a shuffle butterfly adds the lanes.
//   Every row of B is contiguous, so one launch needs no split and no workspace. Several GEMMs
//   sharing A (q, k, v projections) run as one launch over their rows end to end
//   (`gemm_skinny_bt_rows`), so short projections do not each pay a launch and a ramp. With an
//   epilogue (`gemm_skinny_bt_epilogue`), G GEMMs of equal N share each warp (gate and up), and
//   the warp hands its G results to the caller's element-wise functor instead of writing C. A
//   functor with reads that need no result (`early(m, n)`: the residual an add takes) gets them
//   read right after the PDL wait at M = 1 (skinny_early), not after the K loop; on the H200
//   (2026-12-01, Qwen3-1.7B decode) that was neutral, +0.3%.
//   With a prologue (`Pro`, a row kernel whose output is A: the RMS norm before a projection),
//   each CTA first computes A's M rows into shared memory, a warp per row, and reads A there;
//   the row kernel is not launched and A is never written.
//   Each warp's first packs of B (the head: up to 16 per lane) go to registers before anything
//   else. When the caller vouches that no kernel still running writes any B (`settled`: weights,
//   and the launch before this one is the caller's own, which writes none), the head is loaded
//   BEFORE the PDL wait, so a GEMV launched behind a latency-bound kernel (attention, a norm)
//   streams its weights while that kernel runs: on the H200, o_proj behind a 3.3 us stretch took
//   2.6 us instead of 4.8 (bench/gpu/kernels/skinny_sweep.cu prefetch).
// B (N, K) at M = 1 of 128 MiB or more (an LM head; `gemm_skinny_bulk`, gemm_skinny_bulk.cuh, on
//   sm_90): the rows stream through a shared-memory ring by bulk copies instead of registers.
// B (N, K) with 8 < M <= 16 (`gemm_skinny_tc`; skinny_tc_fits: K a multiple of 32, every
//   member's N of 16, the rows one wave of CTAs): a warp per column would do 16 FMAs per B
//   element, more than the CUDA cores stream, so the products run on mma.sync tensor cores with
//   B's rows as the MMA's M (Cᵀ = B · Aᵀ). A CTA owns 16 rows of B (of each of G members) and its
//   warps split K; their partials meet in shared memory in warp order. No prologue: its staged
//   rows would not fit beside 16 rows of K.
#pragma once

#include <cstdint>
#include <type_traits>
#include <utility>

#include <cooperative_groups.h>
#include <cuda_runtime_api.h>

#include <tilefoundry/runtime/cuda/atoms/device_facts.cuh>
#include <tilefoundry/runtime/cuda/atoms/gemm_skinny_bulk.cuh>
#include <tilefoundry/runtime/cuda/atoms/gemm_sm80.cuh>
#include <tilefoundry/runtime/cuda/atoms/launch.cuh>
#include <tilefoundry/runtime/cuda/atoms/scalar.cuh>
#include <tilefoundry/runtime/cuda/atoms/vector_access.cuh>

namespace tilefoundry::atoms::detail {

inline constexpr int kSkinnyMaxM = 8;
inline constexpr int kSkinnyThreads = 256;
inline constexpr int kSkinnyMaxSplits = 8;  // the portable cluster size
inline constexpr int kSkinnyUnroll = 4;     // 16-byte packs of B in flight per thread
inline constexpr int kSkinnyBtWarps = 4;
inline constexpr int kSkinnyBtMembers = 4;  // GEMMs sharing A one B (N, K) launch may run
inline constexpr int64_t kSkinnyBtLongRows = 32768;  // rows past which a warp takes 4
inline constexpr size_t kSkinnyStagedBytes = 48 * 1024;  // A rows a prologue stages per CTA, at most
inline constexpr int kSkinnyHeadPacks = 16;               // 16-byte packs of B a lane holds in its head
inline constexpr int kSkinnyTcMaxM = 16;  // M past kSkinnyMaxM up to which B (N, K) runs on tensor cores
inline constexpr int kSkinnyTcWarps = 8;  // warps of a tensor-core skinny CTA, each a slice of K
inline constexpr int kSkinnyTcCtasPerSm = 2;  // ~122 registers a thread: two CTAs of 256 an SM

/// Whether B (N, K) with N rows (a launch's members end to end) takes the tensor-core skinny
/// kernel at this M and K: whole 32-element K blocks, whole 16-row tiles, and one wave of CTAs.
/// A second wave repeats a CTA's whole latency chain: on the H200 (2026-11-30, M = 16) N = 6144
/// and 12288 took 1.2-1.3x the 64 x 64 sm90 tile's time; N = 1024-4096 took 0.67-0.87x of it.
inline bool skinny_tc_fits(int64_t M, int64_t N, int64_t K) {
  return M > kSkinnyMaxM && M <= kSkinnyTcMaxM && K % 32 == 0 && N % 16 == 0 &&
         N / 16 <= static_cast<int64_t>(kSkinnyTcCtasPerSm) * device_facts().sms;
}

/// 16 bytes of B: read once, so bypass L1 (`ld.global.nc.L1::no_allocate`). Volatile: a load
/// placed before the PDL wait stays there.
__device__ inline uint4 load_stream_words(void const* __restrict__ src) {
  uint4 w;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
      : "=r"(w.x), "=r"(w.y), "=r"(w.z), "=r"(w.w)
      : "l"(src));
  return w;
}

template <class T>
__device__ inline void load_stream(T const* __restrict__ src, T (&out)[8]) {
  static_assert(sizeof(T) == 2, "load_stream: 16-bit elements");
  uint4 const w = load_stream_words(src);
  T const* v = reinterpret_cast<T const*>(&w);
#pragma unroll
  for (int i = 0; i < 8; ++i) out[i] = v[i];
}

enum class SkinnyReduce { direct, cluster, workspace };

template <class T, int MT, int Cols, SkinnyReduce R>
__global__ void __launch_bounds__(kSkinnyThreads)
gemm_skinny_kn(T const* __restrict__ A, T const* __restrict__ B, T* __restrict__ C, float* __restrict__ ws,
               int64_t M, int64_t N, int64_t K, int64_t k_per_split) {
  constexpr int kLanesPerRow = Cols / 8;
  constexpr int kRows = kSkinnyThreads / kLanesPerRow;  // rows of K one pass covers
  __shared__ float red[kRows][Cols];                    // per-thread partials of one row m
  __shared__ float part[MT][Cols];                      // the CTA's partials, for the cluster
  pdl_begin();
  int64_t const batch = blockIdx.z;
  int const split = blockIdx.y;
  A += batch * M * K;
  B += batch * K * N;
  C += batch * M * N;
  int const col = threadIdx.x % kLanesPerRow;
  int const row = threadIdx.x / kLanesPerRow;
  int64_t const n = static_cast<int64_t>(blockIdx.x) * Cols + col * 8;
  int64_t const k_begin = split * k_per_split;
  int64_t const k_end = k_begin + k_per_split < K ? k_begin + k_per_split : K;
  float acc[MT][8] = {};
  if (n < N) {
    int64_t k = k_begin + row;
    // Loads of U rows first, then their FMAs: U packs per thread stay in flight.
    for (; k + (kSkinnyUnroll - 1) * kRows < k_end; k += kSkinnyUnroll * kRows) {
      T b[kSkinnyUnroll][8];
#pragma unroll
      for (int u = 0; u < kSkinnyUnroll; ++u) load_stream(B + (k + u * kRows) * N + n, b[u]);
#pragma unroll
      for (int u = 0; u < kSkinnyUnroll; ++u) {
#pragma unroll
        for (int m = 0; m < MT; ++m) {
          float const a = m < M ? cast<float>(A[m * K + k + u * kRows]) : 0.0f;
#pragma unroll
          for (int c = 0; c < 8; ++c) acc[m][c] = acc[m][c] + a * cast<float>(b[u][c]);
        }
      }
    }
    for (; k < k_end; k += kRows) {
      T b[8];
      load_stream(B + k * N + n, b);
#pragma unroll
      for (int m = 0; m < MT; ++m) {
        float const a = m < M ? cast<float>(A[m * K + k]) : 0.0f;
#pragma unroll
        for (int c = 0; c < 8; ++c) acc[m][c] = acc[m][c] + a * cast<float>(b[c]);
      }
    }
  }
  // The threads of one column pack, in row order.
#pragma unroll
  for (int m = 0; m < MT; ++m) {
    if (m >= M) break;
#pragma unroll
    for (int c = 0; c < 8; ++c) red[row][col * 8 + c] = acc[m][c];
    __syncthreads();
    for (int t = threadIdx.x; t < Cols; t += kSkinnyThreads) {
      float total = 0.0f;
#pragma unroll 8
      for (int r = 0; r < kRows; ++r) total = total + red[r][t];
      int64_t const gn = static_cast<int64_t>(blockIdx.x) * Cols + t;
      if constexpr (R == SkinnyReduce::direct) {
        if (gn < N) C[m * N + gn] = cast<T>(total);
      } else if constexpr (R == SkinnyReduce::workspace) {
        if (gn < N) ws[((batch * gridDim.y + split) * M + m) * N + gn] = total;
      } else {
        part[m][t] = total;
      }
    }
    __syncthreads();
  }
  if constexpr (R == SkinnyReduce::cluster) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    namespace cg = cooperative_groups;
    cg::cluster_group cluster = cg::this_cluster();
    cluster.sync();  // every split's partials are in its shared memory
    if (cluster.block_rank() == 0) {
      int const splits = static_cast<int>(cluster.num_blocks());
      for (int i = threadIdx.x; i < M * Cols; i += kSkinnyThreads) {
        int const m = i / Cols;
        int const t = i % Cols;
        float total = 0.0f;
        for (int s = 0; s < splits; ++s) total = total + cluster.map_shared_rank(&part[0][0], s)[m * Cols + t];
        int64_t const gn = static_cast<int64_t>(blockIdx.x) * Cols + t;
        if (gn < N) C[m * N + gn] = cast<T>(total);
      }
    }
    cluster.sync();  // rank 0 has read every peer's shared memory before any of them exits
#else
    __trap();  // the host launches the cluster form only where sm_90 code was built
#endif
  }
}

template <class T>
__global__ void gemm_skinny_reduce(float const* __restrict__ ws, T* __restrict__ C, int64_t M, int64_t N, int splits) {
  pdl_begin();
  int64_t const batch = blockIdx.y;
  int64_t const i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= M * N) return;
  float const* w = ws + batch * splits * M * N;
  float total = 0.0f;
  for (int s = 0; s < splits; ++s) total = total + w[s * M * N + i];
  C[batch * M * N + i] = cast<T>(total);
}

/// The B (N, K) operands of one skinny launch: up to kSkinnyBtMembers GEMMs sharing A. Laid end
/// to end (G = 1: member s owns output rows [end[s - 1], end[s])) or side by side (G > 1: every
/// warp computes the same rows of all G members, end[0] rows each, for an epilogue over them).
template <class T>
struct SkinnyBtRows {
  T const* B[kSkinnyBtMembers];
  T* C[kSkinnyBtMembers];
  int64_t end[kSkinnyBtMembers];
  int count;
  bool settled;  ///< no kernel that may still run when this launch starts writes any B

  /// Output rows the launch covers with G members: all of them end to end, or one's side by side.
  template <int G>
  __host__ __device__ int64_t total() const {
    return G == 1 ? end[count - 1] : end[0];
  }

  /// The member owning launch row r (G > 1: member 0, whose rows every member shares), its first
  /// launch row and its row count.
  struct Member {
    int s;
    int64_t begin, N;
  };
  template <int G>
  __device__ Member member(int64_t r) const {
    int s = 0;
    if constexpr (G == 1) {
      while (s + 1 < count && r >= end[s]) ++s;
    }
    int64_t const begin = s == 0 ? 0 : end[s - 1];
    return {s, begin, end[s] - begin};
  }
};

/// Stores each result to its member's C (the plain GEMM).
template <class T>
struct SkinnyStore {
  SkinnyBtRows<T> rows;
  __device__ void operator()(int s, int64_t m, int64_t n, int64_t N, T const (&c)[1]) const { rows.C[s][m * N + n] = c[0]; }
};

/// No prologue: the kernel reads A from global memory.
struct NoPrologue {};

/// A prologue that folds A into the K loop instead of staging it: A's row m is a row scale times an
/// element map (the RMS norm: rsqrt(mean(x²) + eps) · (x ∘ g)). It declares `kFolds`, the row
/// statistics it sums (each an add over the row), and
///   pack(m, k, a, f):  the element map at [m, k, k + 8) into a (rounded to T), each statistic's
///                      terms there added to f[0 .. kFolds)
///   scale(m, f):       the row's factor from its statistics' totals
/// Each warp reads every k of the row (its lanes stride K), so after the lanes' butterfly its
/// totals are the whole row's, and each result is the dot product times the row's factor: the
/// norm's kernel never runs and nothing is staged.
template <class P, class = void>
struct folds_rows : std::false_type {};
template <class P>
struct folds_rows<P, std::void_t<decltype(P::kFolds)>> : std::true_type {};
template <class P>
inline constexpr bool folds_rows_v = folds_rows<P>::value;
/// The statistics a folding prologue sums (1 for any other, so arrays of it stay well-formed).
template <class P, bool = folds_rows_v<P>>
struct row_folds {
  static constexpr int value = 1;
};
template <class P>
struct row_folds<P, true> {
  static constexpr int value = P::kFolds;
};

/// Hands the G results of one output to an element-wise epilogue `f(m, n, c)` (no C is written).
template <class F>
struct SkinnyElementwise {
  F f;
  template <class T, int G>
  __device__ void operator()(int, int64_t m, int64_t n, int64_t, T const (&c)[G]) const { f(m, n, c); }
  /// The epilogue's reads that need no result (`f.early(m, n)`, where F has them).
  template <class E = F>
  __device__ auto early(int, int64_t m, int64_t n, int64_t) const -> decltype(std::declval<E const&>().early(m, n)) {
    return f.early(m, n);
  }
  template <class T, int G, class E>
  __device__ void operator()(int, int64_t m, int64_t n, int64_t, T const (&c)[G], E const& pre) const {
    f(m, n, c, pre);
  }
};

/// What `out.early(s, m, n, N)` returns (`type`), where `Out` takes its reads early (`value`):
/// the register kernel reads them right after the PDL wait, so their latency overlaps the K loop
/// instead of following the lanes' butterfly at the kernel's end.
template <class Out, class = void>
struct skinny_early : std::false_type {
  struct type {};
};
template <class Out>
struct skinny_early<Out, std::void_t<decltype(std::declval<Out const&>().early(0, int64_t{}, int64_t{}, int64_t{}))>>
    : std::true_type {
  using type = decltype(std::declval<Out const&>().early(0, int64_t{}, int64_t{}, int64_t{}));
};

/// The head of a warp's rows: packs p < P of each, at k = p · 256 + lane · 8 (those below K).
template <class T, int G, int R, int P>
__device__ inline void skinny_load_head(T const* const (&B)[G], int64_t K, int lane, T (&head)[G][R][P][8]) {
#pragma unroll
  for (int p = 0; p < P; ++p) {
    int64_t const k = p * 256 + lane * 8;
#pragma unroll
    for (int g = 0; g < G; ++g) {
#pragma unroll
      for (int r = 0; r < R; ++r) {
        if (k < K) load_stream(B[g] + r * K + k, head[g][r][p]);
      }
    }
  }
}

/// C = A · Bᵀ rows for B (N, K): a warp owns R consecutive output rows of one member (G members
/// side by side), its lanes stride K in 16-byte packs (the head, then U x R x G packs in flight),
/// a shuffle butterfly adds the lanes, and lane 0 hands the results (rounded to T, as C would hold
/// them) to `out(member, m, n, N, c)`. With a prologue, `pro(m, row)` writes A's row m (the lanes of one
/// warp together) into the CTA's shared memory first (M x K elements, dynamic), and A is not read;
/// a folding prologue (folds_rows_v) gives each pack of A from its own loads instead. `rows` and
/// `out` are read in place from the parameter space (`__grid_constant__`): a runtime member index
/// into a by-value copy put the copy on each thread's stack, stored before the first weight load.
template <class T, int MT, int G, int R, int U, class Out, class Pro = NoPrologue>
__global__ void __launch_bounds__(kSkinnyBtWarps * 32)
gemm_skinny_nk(T const* __restrict__ A, __grid_constant__ SkinnyBtRows<T> const rows, int64_t M, int64_t K,
               __grid_constant__ Out const out, Pro pro) {
  constexpr int P = kSkinnyHeadPacks / (G * R);  // head packs per lane per row
  constexpr int64_t kStride = 32 * 8;            // elements of K one pass of the warp covers
  int const lane = threadIdx.x % 32;
  int64_t const r0 = (static_cast<int64_t>(blockIdx.x) * kSkinnyBtWarps + threadIdx.x / 32) * R;
  auto const [s, begin, N] = rows.template member<G>(r0);
  bool const active = r0 < rows.template total<G>();
  int64_t const n0 = r0 - begin;
  T const* B[G];
#pragma unroll
  for (int g = 0; g < G; ++g) B[g] = rows.B[G == 1 ? s : g] + n0 * K;
  T head[G][R][P][8];
  if (!rows.settled) pdl_wait();  // B may be the output of a kernel still running
  if (active) skinny_load_head(B, K, lane, head);
  pdl_begin();
  constexpr bool kFolded = folds_rows_v<Pro>;
  if constexpr (!std::is_same_v<Pro, NoPrologue> && !kFolded) {
    extern __shared__ __align__(16) unsigned char skinny_staged_[];
    T* const staged = reinterpret_cast<T*>(skinny_staged_);
    for (int64_t m = threadIdx.x / 32; m < M; m += kSkinnyBtWarps) pro(m, staged + m * K);
    __syncthreads();  // every row is staged before any warp reads it (and before idle warps leave)
    A = staged;
  }
  if (!active) return;
  // At M = 1 the epilogue's early reads (the residual an add takes) leave now, lane 0 holding them.
  constexpr bool kEarly = skinny_early<Out>::value && MT == 1;
  [[maybe_unused]] typename skinny_early<Out>::type pre[R];
  if constexpr (kEarly) {
    if (lane == 0) {
#pragma unroll
      for (int r = 0; r < R; ++r) pre[r] = out.early(s, int64_t{0}, n0 + r, N);
    }
  }
  // The head, the U-pack loop and the tail each spell out their FMAs: one helper taking the pack
  // through a lambda changed the code nvcc made for G = 2 and R = 1 (the settled gate/up GEMV
  // behind a 6 us stretch took 14.0 us instead of 10.3 on the H200).
  float acc[G][R][MT] = {};
  float folds[MT][row_folds<Pro>::value] = {};  // a folding prologue's row statistics
#pragma unroll
  for (int p = 0; p < P; ++p) {
    int64_t const k = p * kStride + lane * 8;
    if (k >= K) break;
#pragma unroll
    for (int m = 0; m < MT; ++m) {
      if (m >= M) break;
      T a[8];
      if constexpr (kFolded) pro.pack(m, k, a, folds[m]); else load_pack<8>(A + m * K + k, a);
#pragma unroll
      for (int g = 0; g < G; ++g) {
#pragma unroll
        for (int r = 0; r < R; ++r) {
#pragma unroll
          for (int c = 0; c < 8; ++c) acc[g][r][m] = acc[g][r][m] + cast<float>(a[c]) * cast<float>(head[g][r][p][c]);
        }
      }
    }
  }
  int64_t k = P * kStride + lane * 8;  // the rest of K, in the same order
  for (; k + (U - 1) * kStride < K; k += U * kStride) {
    T b[G][R][U][8];
#pragma unroll
    for (int u = 0; u < U; ++u) {
#pragma unroll
      for (int g = 0; g < G; ++g) {
#pragma unroll
        for (int r = 0; r < R; ++r) load_stream(B[g] + r * K + k + u * kStride, b[g][r][u]);
      }
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
#pragma unroll
      for (int m = 0; m < MT; ++m) {
        if (m >= M) break;
        T a[8];
        if constexpr (kFolded) pro.pack(m, k + u * kStride, a, folds[m]);
        else load_pack<8>(A + m * K + k + u * kStride, a);
#pragma unroll
        for (int g = 0; g < G; ++g) {
#pragma unroll
          for (int r = 0; r < R; ++r) {
#pragma unroll
            for (int c = 0; c < 8; ++c) acc[g][r][m] = acc[g][r][m] + cast<float>(a[c]) * cast<float>(b[g][r][u][c]);
          }
        }
      }
    }
  }
  for (; k < K; k += kStride) {
    T b[G][R][8];
#pragma unroll
    for (int g = 0; g < G; ++g) {
#pragma unroll
      for (int r = 0; r < R; ++r) load_stream(B[g] + r * K + k, b[g][r]);
    }
#pragma unroll
    for (int m = 0; m < MT; ++m) {
      if (m >= M) break;
      T a[8];
      if constexpr (kFolded) pro.pack(m, k, a, folds[m]); else load_pack<8>(A + m * K + k, a);
#pragma unroll
      for (int g = 0; g < G; ++g) {
#pragma unroll
        for (int r = 0; r < R; ++r) {
#pragma unroll
          for (int c = 0; c < 8; ++c) acc[g][r][m] = acc[g][r][m] + cast<float>(a[c]) * cast<float>(b[g][r][c]);
        }
      }
    }
  }
#pragma unroll
  for (int g = 0; g < G; ++g) {
#pragma unroll
    for (int r = 0; r < R; ++r) {
#pragma unroll
      for (int m = 0; m < MT; ++m) {
#pragma unroll
        for (int off = 16; off > 0; off /= 2) acc[g][r][m] = acc[g][r][m] + __shfl_xor_sync(0xffffffffu, acc[g][r][m], off);
      }
    }
  }
  if constexpr (kFolded) {
#pragma unroll
    for (int m = 0; m < MT; ++m) {
#pragma unroll
      for (int f = 0; f < row_folds<Pro>::value; ++f) {
#pragma unroll
        for (int off = 16; off > 0; off /= 2) folds[m][f] += __shfl_xor_sync(0xffffffffu, folds[m][f], off);
      }
    }
  }
  if (lane == 0) {
#pragma unroll
    for (int m = 0; m < MT; ++m) {
      if (m >= M) break;
      float scale = 1.0f;
      if constexpr (kFolded) scale = pro.scale(static_cast<int64_t>(m), folds[m]);
#pragma unroll
      for (int r = 0; r < R; ++r) {
        T c[G];
#pragma unroll
        for (int g = 0; g < G; ++g) c[g] = cast<T>(kFolded ? acc[g][r][m] * scale : acc[g][r][m]);
        if constexpr (kEarly) out(s, static_cast<int64_t>(m), n0 + r, N, c, pre[r]);
        else out(s, static_cast<int64_t>(m), n0 + r, N, c);
      }
    }
  }
}

// ---------------------------------------------------------------- host side

/// How a (K, N) skinny GEMM is cut: columns per CTA, K splits, and how the splits combine.
/// Word i of a 16-byte pack (i known at compile time once unrolled).
__device__ inline uint32_t pack_word(uint4 const& w, int i) { return i == 0 ? w.x : i == 1 ? w.y : i == 2 ? w.z : w.w; }

/// Cᵀ = B · Aᵀ rows on tensor cores for kSkinnyMaxM < M <= 16 and B (N, K) (skinny_tc_fits): a
/// CTA owns 16 rows of B (of each of G members); warp w takes K's 32-element blocks w, w + W, ...,
/// the next U of them loading while it multiplies the last U. In a block, lane (g, t) loads the 16
/// bytes at k = 8t of B's rows g and g + 8 and of A's rows g and 8 + g (zeros past M); MMA step
/// st reads words 2st and 2st + 1 of each, so both operands see k in the same permuted order and
/// every dot product is unchanged. The warps' accumulators are added in shared memory in warp
/// order, and warp 0 hands each (m, n) result (rounded to T) to `out(member, m, n, N, c)`.
template <class T, int G, class Out>
__global__ void __launch_bounds__(kSkinnyTcWarps * 32)
gemm_skinny_tc(T const* __restrict__ A, __grid_constant__ SkinnyBtRows<T> const rows, int64_t M, int64_t K,
               __grid_constant__ Out const out) {
  constexpr int W = kSkinnyTcWarps;
  constexpr int U = G == 1 ? 4 : G == 2 ? 2 : 1;  // blocks in flight: 2 U G words of B a lane
  int const lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  int const g = lane / 4, t = lane % 4;
  int64_t const r0 = static_cast<int64_t>(blockIdx.x) * 16;
  auto const [s, begin, N] = rows.template member<G>(r0);
  int64_t const n0 = r0 - begin;
  T const* B[G][2];
#pragma unroll
  for (int i = 0; i < G; ++i) {
#pragma unroll
    for (int h = 0; h < 2; ++h) B[i][h] = rows.B[G == 1 ? s : i] + (n0 + g + 8 * h) * K + 8 * t;
  }
  int64_t const blocks = K / 32;
  auto load_blocks = [&](int64_t kb, uint4 (&w)[U][G][2]) {
#pragma unroll
    for (int u = 0; u < U; ++u) {
      if (kb + u * W < blocks) {
#pragma unroll
        for (int i = 0; i < G; ++i) {
#pragma unroll
          for (int h = 0; h < 2; ++h) w[u][i][h] = load_stream_words(B[i][h] + (kb + u * W) * 32);
        }
      }
    }
  };
  uint4 cur[U][G][2], nxt[U][G][2];
  if (!rows.settled) pdl_wait();  // B may be the output of a kernel still running
  load_blocks(warp, cur);
  pdl_begin();
  T const* const a_lo = A + g * K + 8 * t;  // n-tile 0: A's rows 0..7 (all below M > 8)
  bool const hi_ok = 8 + g < M;             // n-tile 1: rows 8..15, zeros past M
  T const* const a_hi = A + (hi_ok ? 8 + g : g) * K + 8 * t;
  float acc[G][2][4] = {};
  for (int64_t kb = warp; kb < blocks; kb += U * W) {
    load_blocks(kb + U * W, nxt);
#pragma unroll
    for (int u = 0; u < U; ++u) {
      int64_t const k = (kb + u * W) * 32;
      if (k >= K) break;
      uint4 const a[2] = {*reinterpret_cast<uint4 const*>(a_lo + k),
                          hi_ok ? *reinterpret_cast<uint4 const*>(a_hi + k) : make_uint4(0u, 0u, 0u, 0u)};
#pragma unroll
      for (int st = 0; st < 2; ++st) {
#pragma unroll
        for (int i = 0; i < G; ++i) {
          uint32_t const af[4] = {pack_word(cur[u][i][0], 2 * st), pack_word(cur[u][i][1], 2 * st),
                                  pack_word(cur[u][i][0], 2 * st + 1), pack_word(cur[u][i][1], 2 * st + 1)};
#pragma unroll
          for (int j = 0; j < 2; ++j) {
            uint32_t const bf[2] = {pack_word(a[j], 2 * st), pack_word(a[j], 2 * st + 1)};
            mma_16816<T>(acc[i][j], af, bf);
          }
        }
      }
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
#pragma unroll
      for (int i = 0; i < G; ++i) {
        cur[u][i][0] = nxt[u][i][0];
        cur[u][i][1] = nxt[u][i][1];
      }
    }
  }
  __shared__ float red[W][G][2][4][32];
#pragma unroll
  for (int i = 0; i < G; ++i) {
#pragma unroll
    for (int j = 0; j < 2; ++j) {
#pragma unroll
      for (int e = 0; e < 4; ++e) red[warp][i][j][e][lane] = acc[i][j][e];
    }
  }
  __syncthreads();
  if (warp != 0) return;
#pragma unroll
  for (int j = 0; j < 2; ++j) {
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      int64_t const m = 8 * j + 2 * t + e % 2;  // C element e: Cᵀ row g + 8 (e / 2), column 2t + e % 2
      if (m >= M) continue;
      T c[G];
#pragma unroll
      for (int i = 0; i < G; ++i) {
        float sum = red[0][i][j][e][lane];
#pragma unroll
        for (int w = 1; w < W; ++w) sum = sum + red[w][i][j][e][lane];
        c[i] = cast<T>(sum);
      }
      out(s, m, n0 + g + 8 * (e / 2), N, c);
    }
  }
}

struct SkinnyPlan {
  int cols = 256;
  int splits = 1;
  SkinnyReduce reduce = SkinnyReduce::direct;
};

/// The widest slab whose CTAs (with up to 8 splits of K) cover the device twice; splits only as
/// many as K holds full passes for.
inline SkinnyPlan skinny_plan(int64_t N, int64_t K) {
  DeviceFacts const dev = device_facts();
  int64_t const want = 2 * static_cast<int64_t>(dev.sms);
  SkinnyPlan plan;
  for (int cols : {256, 128, 64, 32}) {
    plan.cols = cols;
    if ((N + cols - 1) / cols * kSkinnyMaxSplits >= want) break;
  }
  int64_t const slabs = (N + plan.cols - 1) / plan.cols;
  int64_t const rows = kSkinnyThreads / (plan.cols / 8);
  int64_t splits = (want + slabs - 1) / slabs;
  int64_t const passes = K / (rows * kSkinnyUnroll);  // each split keeps at least one full pass
  if (splits > passes) splits = passes;
  if (splits > kSkinnyMaxSplits) splits = kSkinnyMaxSplits;
  plan.splits = static_cast<int>(splits < 1 ? 1 : splits);
  // Clusters need this module's sm_90 code, not just a Hopper device.
  if (plan.splits > 1) plan.reduce = dev.sm90_code ? SkinnyReduce::cluster : SkinnyReduce::workspace;
  return plan;
}

inline size_t skinny_workspace_bytes(int64_t batch, int64_t M, int64_t N, int64_t K) {
  SkinnyPlan const plan = skinny_plan(N, K);
  if (plan.reduce != SkinnyReduce::workspace) return 0;
  return static_cast<size_t>(batch) * plan.splits * M * N * sizeof(float);
}

template <class T, int MT, int Cols, SkinnyReduce R>
inline cudaError_t launch_skinny_kn(SkinnyPlan plan, T const* A, T const* B, T* C, float* ws, int64_t batch,
                                    int64_t M, int64_t N, int64_t K, cudaStream_t stream) {
  int64_t const per = (K + plan.splits - 1) / plan.splits;
  dim3 const grid(static_cast<unsigned>((N + Cols - 1) / Cols), static_cast<unsigned>(plan.splits),
                  static_cast<unsigned>(batch));
  auto kernel = gemm_skinny_kn<T, MT, Cols, R>;
  if constexpr (R == SkinnyReduce::cluster) {
    cudaLaunchConfig_t config{};
    config.gridDim = grid;
    config.blockDim = dim3(kSkinnyThreads);
    config.stream = stream;
    cudaLaunchAttribute attr[2];
    attr[0].id = cudaLaunchAttributeClusterDimension;
    attr[0].val.clusterDim.x = 1;
    attr[0].val.clusterDim.y = static_cast<unsigned>(plan.splits);
    attr[0].val.clusterDim.z = 1;
    attr[1].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[1].val.programmaticStreamSerializationAllowed = 1;
    config.attrs = attr;
    config.numAttrs = device_facts().pdl ? 2 : 1;
    return cudaLaunchKernelEx(&config, kernel, A, B, C, ws, M, N, K, per);
  } else {
    cudaError_t err = launch_kernel(kernel, grid, dim3(kSkinnyThreads), 0, stream, A, B, C, ws, M, N, K, per);
    if (err != cudaSuccess || R != SkinnyReduce::workspace) return err;
    dim3 const rgrid(static_cast<unsigned>((M * N + 255) / 256), static_cast<unsigned>(batch));
    return launch_kernel(gemm_skinny_reduce<T>, rgrid, dim3(256), 0, stream, ws, C, M, N, plan.splits);
  }
}

template <class T, int MT, int Cols>
inline cudaError_t skinny_kn_reduce(SkinnyPlan plan, T const* A, T const* B, T* C, float* ws, int64_t batch,
                                    int64_t M, int64_t N, int64_t K, cudaStream_t stream) {
  switch (plan.reduce) {
    case SkinnyReduce::cluster:
      return launch_skinny_kn<T, MT, Cols, SkinnyReduce::cluster>(plan, A, B, C, ws, batch, M, N, K, stream);
    case SkinnyReduce::workspace:
      return launch_skinny_kn<T, MT, Cols, SkinnyReduce::workspace>(plan, A, B, C, ws, batch, M, N, K, stream);
    default:
      return launch_skinny_kn<T, MT, Cols, SkinnyReduce::direct>(plan, A, B, C, ws, batch, M, N, K, stream);
  }
}

template <class T, int MT>
inline cudaError_t skinny_kn_cols(SkinnyPlan plan, T const* A, T const* B, T* C, float* ws, int64_t batch,
                                  int64_t M, int64_t N, int64_t K, cudaStream_t stream) {
  switch (plan.cols) {
    case 256: return skinny_kn_reduce<T, MT, 256>(plan, A, B, C, ws, batch, M, N, K, stream);
    case 128: return skinny_kn_reduce<T, MT, 128>(plan, A, B, C, ws, batch, M, N, K, stream);
    case 64: return skinny_kn_reduce<T, MT, 64>(plan, A, B, C, ws, batch, M, N, K, stream);
    default: return skinny_kn_reduce<T, MT, 32>(plan, A, B, C, ws, batch, M, N, K, stream);
  }
}

/// C = A · B with B (K, N) row-major, M <= 8, N a multiple of 8, 16-byte aligned B and C.
template <class T>
inline cudaError_t gemm_skinny(T const* A, T const* B, T* C, int64_t batch, int64_t M, int64_t N, int64_t K,
                               float* ws, cudaStream_t stream) {
  SkinnyPlan const plan = skinny_plan(N, K);
  if (M <= 1) return skinny_kn_cols<T, 1>(plan, A, B, C, ws, batch, M, N, K, stream);
  if (M <= 2) return skinny_kn_cols<T, 2>(plan, A, B, C, ws, batch, M, N, K, stream);
  if (M <= 4) return skinny_kn_cols<T, 4>(plan, A, B, C, ws, batch, M, N, K, stream);
  return skinny_kn_cols<T, 8>(plan, A, B, C, ws, batch, M, N, K, stream);
}

/// Rows per warp of a B (N, K) launch: the most (up to `most`) that divide every member's rows,
/// so no warp straddles two members.
template <class T>
inline int skinny_bt_rows_per_warp(SkinnyBtRows<T> const& rows, int G, int most) {
  int r = most;
  for (; r > 1; r /= 2) {
    bool fits = true;
    int64_t begin = 0;
    for (int s = 0; s < (G == 1 ? rows.count : 1); ++s) {
      fits = fits && (rows.end[s] - begin) % r == 0;
      begin = rows.end[s];
    }
    if (fits) break;
  }
  return r;
}

/// For a launch of at least `min_bytes` of B (gemm_skinny_bulk.cuh): the most rows a unit (8, 4
/// or 2) that divide every member's rows, cut K in 16-byte slices over the unit's warps, and leave
/// the ring kBulkMinStages stages; ru = 0 where none does.
template <class T, int G>
inline BulkPlan skinny_bulk_plan(SkinnyBtRows<T> const& rows, int64_t K, int64_t min_bytes = kBulkMinBytes) {
  if (G * rows.template total<G>() * K * static_cast<int64_t>(sizeof(T)) < min_bytes) return {};
  for (int ru = skinny_bt_rows_per_warp(rows, G, 8); ru >= 2; ru /= 2) {
    size_t const unit_bytes = static_cast<size_t>(G) * ru * K * sizeof(T);
    int64_t const stages = static_cast<int64_t>(kBulkRingBytes / unit_bytes);
    if (K % (8 * (kBulkWarps / ru)) == 0 && stages >= kBulkMinStages) {
      return {ru, static_cast<int>(stages < kBulkMaxStages ? stages : kBulkMaxStages)};
    }
  }
  return {};
}

/// Shared memory a prologue's staged A rows take (0 without a prologue, or with a folding one).
template <class T, class Pro>
inline size_t skinny_staged_bytes(int64_t M, int64_t K) {
  return std::is_same_v<Pro, NoPrologue> || folds_rows_v<Pro> ? 0 : static_cast<size_t>(M * K) * sizeof(T);
}

template <class T, int MT, int G, int R, int U, class Out, class Pro>
inline cudaError_t launch_skinny_nk(T const* A, SkinnyBtRows<T> const& rows, int64_t M, int64_t K, Out const& out,
                                    Pro const& pro, cudaStream_t stream) {
  int64_t const total = rows.template total<G>();
  int64_t const per_cta = static_cast<int64_t>(kSkinnyBtWarps) * R;
  dim3 const grid(static_cast<unsigned>((total + per_cta - 1) / per_cta));
  return launch_kernel(gemm_skinny_nk<T, MT, G, R, U, Out, Pro>, grid, dim3(kSkinnyBtWarps * 32),
                       skinny_staged_bytes<T, Pro>(M, K), stream, A, rows, M, K, out, pro);
}

/// The launch shape, from a sweep on the H200 in a decode-like chain (bench/gpu/kernels/skinny_sweep.cu):
/// 4 rows per warp with 2 packs in flight for a long B (the LM head), else 2 x 4 (also for a long K:
/// Qwen3-1.7B's down projection, K = 6144, took 9.5-10.1 us at 2 x 4 against 11.0-11.9 at 1 x 4 in
/// three of the four sweeps of 2026-11-29/30).
/// Splitting K over a CTA's warps and prefetching B into L2 before the PDL wait did not pay there.
template <class T, int MT, int G, class Out, class Pro>
inline cudaError_t skinny_nk_rows(T const* A, SkinnyBtRows<T> const& rows, int64_t M, int64_t K, Out const& out,
                                  Pro const& pro, cudaStream_t stream) {
  int64_t const total = rows.template total<G>();
  int const most = total >= kSkinnyBtLongRows ? 4 : 2;
  switch (skinny_bt_rows_per_warp(rows, G, most)) {
    case 4: return launch_skinny_nk<T, MT, G, 4, 2>(A, rows, M, K, out, pro, stream);
    case 2: return launch_skinny_nk<T, MT, G, 2, 4>(A, rows, M, K, out, pro, stream);
    default: return launch_skinny_nk<T, MT, G, 1, 4>(A, rows, M, K, out, pro, stream);
  }
}

/// The tensor-core skinny launch: a CTA of kSkinnyTcWarps warps per 16 rows.
template <class T, int G, class Out>
inline cudaError_t launch_skinny_tc(T const* A, SkinnyBtRows<T> const& rows, int64_t M, int64_t K, Out const& out,
                                    cudaStream_t stream) {
  int64_t const total = rows.template total<G>();
  return launch_kernel(gemm_skinny_tc<T, G, Out>, dim3(static_cast<unsigned>(total / 16)), dim3(kSkinnyTcWarps * 32),
                       0, stream, A, rows, M, K, out);
}

/// Every output of the launch through `out` (G = 1: rows end to end; G > 1: side by side), K a
/// multiple of 8, 16-byte aligned A and B rows; A staged by `pro` when it is a prologue. M <= 8 on
/// CUDA cores: M = 1 without a prologue streams B by bulk copies where sm_90 code runs and
/// skinny_bulk_plan cuts it (the kernel: gemm_skinny_bulk.cuh), else through registers; past M = 8 on tensor
/// cores (skinny_tc_fits held, no prologue).
template <class T, int G, class Out, class Pro = NoPrologue>
inline cudaError_t gemm_skinny_bt_launch(T const* A, SkinnyBtRows<T> const& rows, int64_t M, int64_t K, Out const& out,
                                         cudaStream_t stream, Pro const& pro = {}) {
  if (M > kSkinnyMaxM) {  // skinny_tc_fits held for every member (gemm_tier)
    if constexpr (std::is_same_v<Pro, NoPrologue>) {
      return launch_skinny_tc<T, G>(A, rows, M, K, out, stream);
    } else {
      return cudaErrorNotSupported;  // gemm_stages_prologue stages no rows past kSkinnyMaxM
    }
  }
  if constexpr (std::is_same_v<Pro, NoPrologue>) {
    if (M == 1 && device_facts().sm90_code) {
      BulkPlan const plan = skinny_bulk_plan<T, G>(rows, K);
      if (plan.ru > 0) return skinny_bulk_rows<T, G>(plan, A, rows, K, out, stream);
    }
  }
  if (M <= 1) return skinny_nk_rows<T, 1, G>(A, rows, M, K, out, pro, stream);
  if (M <= 2) return skinny_nk_rows<T, 2, G>(A, rows, M, K, out, pro, stream);
  if (M <= 4) return skinny_nk_rows<T, 4, G>(A, rows, M, K, out, pro, stream);
  return skinny_nk_rows<T, 8, G>(A, rows, M, K, out, pro, stream);
}

/// C_s = A · B_sᵀ for every member s of `rows` (rows end to end): one launch.
template <class T, class Pro = NoPrologue>
inline cudaError_t gemm_skinny_bt_rows(T const* A, SkinnyBtRows<T> const& rows, int64_t M, int64_t K,
                                       cudaStream_t stream, Pro const& pro = {}) {
  return gemm_skinny_bt_launch<T, 1>(A, rows, M, K, SkinnyStore<T>{rows}, stream, pro);
}

/// C = A · Bᵀ with B (N, K) row-major, M <= 8, K a multiple of 8, 16-byte aligned A and B;
/// `settled`: no kernel that may still run when this call's launches start writes B.
template <class T>
inline cudaError_t gemm_skinny_bt(T const* A, T const* B, T* C, int64_t batch, int64_t M, int64_t N, int64_t K,
                                  cudaStream_t stream, bool settled = false) {
  SkinnyBtRows<T> rows{};
  rows.count = 1;
  rows.end[0] = N;
  rows.settled = settled;
  for (int64_t b = 0; b < batch; ++b) {
    rows.B[0] = B + b * N * K;
    rows.C[0] = C + b * M * N;
    cudaError_t const err = gemm_skinny_bt_rows(A + b * M * K, rows, M, K, stream);
    if (err != cudaSuccess) return err;
  }
  return cudaSuccess;
}

/// f(m, n, c) over c[g] = (A · B_gᵀ)[m, n] for the G members of `rows` (side by side, end[0] rows
/// each): one launch, no C written.
template <class T, int G, class F, class Pro = NoPrologue>
inline cudaError_t gemm_skinny_bt_epilogue(T const* A, SkinnyBtRows<T> const& rows, int64_t M, int64_t K, F const& f,
                                           cudaStream_t stream, Pro const& pro = {}) {
  return gemm_skinny_bt_launch<T, G>(A, rows, M, K, SkinnyElementwise<F>{f}, stream, pro);
}

}  // namespace tilefoundry::atoms::detail
