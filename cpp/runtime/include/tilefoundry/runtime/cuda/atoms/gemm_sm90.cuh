// GEMM tier on Hopper: the CUTLASS 3 sm90 collective (TMA loads, wgmma, warp-specialized
// cooperative schedule) realizing a whole GEMM region as one atom. bf16 / f16 operands, f32
// accumulation, C = A · B with A (M, K) K-major, C (M, N) N-major, and B either (K, N) N-major
// (CUTLASS RowMajor) or stored (N, K) K-major (ColumnMajor: the TN GEMM, wgmma's native operand
// order, no transposing smem reads), all compact and batch-strided (the L mode). Each layout is
// its own collective, instantiated only when a module calls it. Built only for sm_90a (wgmma
// traps on plain sm_90).
// Included only when the generated source defines TILEFOUNDRY_CUDA_GEMM_SM90: a CUTLASS sm90
// translation unit costs ~20-30 s and ~2 GB to compile, so modules without one never pay it.
#pragma once

#include <cstdint>
#include <type_traits>

#include <cute/tensor.hpp>
#include <cutlass/cutlass.h>
#include <cutlass/epilogue/collective/collective_builder.hpp>
#include <cutlass/gemm/collective/collective_builder.hpp>
#include <cutlass/gemm/device/gemm_universal_adapter.h>
#include <cutlass/gemm/dispatch_policy.hpp>
#include <cutlass/gemm/kernel/gemm_universal.hpp>

#include <tilefoundry/runtime/cuda/atoms/device_facts.cuh>
#include <tilefoundry/runtime/cuda/atoms/gemm_skinny.cuh>

// The CTA tile (M x N, K step 64); the cooperative schedule splits M across two consumer
// warpgroups (M >= 128). Option `gemm_tile` fixes one tile for the whole module (these macros),
// a knob for the autotuner. Its default, "auto", keeps 128 x 128 and, in a module with a GEMM
// whose N and K are both at least kSm90WideMinNK (TILEFOUNDRY_SM90_WIDE_TILE, defined by the code
// generator), adds 128 x 256 for the calls where sm90_wide_tile_pays: each tile then moves half
// as many A bytes per flop, as long as there are tiles enough for every SM. Under "auto" too, a
// module with a GEMM whose M may be at most kSm90SmallTileMaxM (TILEFOUNDRY_SM90_SMALL_TILE) runs
// the calls where sm90_small_tile_pays on 64 x 64 tiles with the ping-pong schedule: four times
// the tiles of 128 x 128, so a short M (a batch of 128 tokens) still feeds every SM. And a
// module with a GEMM whose constant K is at least kSm90StreamKMinK (TILEFOUNDRY_SM90_STREAM_K)
// runs the calls with fewer 128 x 128 tiles than SMs that the small tile does not take
// on CUTLASS's stream-K scheduler: CTAs share the K extent of the few tiles and add their
// partials in a fixed order (the scheduler's deterministic reduction), so every SM streams.
// And a module with a TN GEMM (B stored (N, K)) whose M may be at most kSm90SwappedMaxM
// (TILEFOUNDRY_SM90_SWAPPED) runs the calls where sm90_swapped_pays with A and B swapped
// (Sm90GemmSwapped): B's rows on the tile's 64-row M mode, A's few rows on its N mode; one whose M
// may be past that up to kSm90SwappedMidMaxM (TILEFOUNDRY_SM90_SWAPPED_MID), the calls where
// sm90_swapped_mid_pays on 64 x 32 swapped tiles, before the 64 x 64 tile. The swapped 64 x 16 tile
// runs as 4 x 1 clusters up to kSm90SwappedQuadMaxN; where the small tile's 64 x 64 tiles would
// take more than one wave a TN call runs 64 x 96 tiles (TILEFOUNDRY_SM90_SMALL_WIDE).
#ifndef TILEFOUNDRY_SM90_TILE_M
#define TILEFOUNDRY_SM90_TILE_M 128
#endif
#ifndef TILEFOUNDRY_SM90_TILE_N
#define TILEFOUNDRY_SM90_TILE_N 128
#endif
// The thread-block cluster (M x N CTAs) of every collective: option `gemm_cluster` when set. At
// 2 x 1 the two CTAs of neighbouring M tiles share each B tile, which TMA multicasts to both (at
// 1 x 2, each A tile to two N tiles), so L2 serves that operand once for two tiles. Under its
// "auto" (TILEFOUNDRY_SM90_WIDE_PAIR in place of TILEFOUNDRY_SM90_WIDE_TILE) the 128 x 256 tile
// alone runs as 2 x 1, where sm90_wide_pair_pays, and every other collective as 1 x 1.
#ifndef TILEFOUNDRY_SM90_CLUSTER_M
#define TILEFOUNDRY_SM90_CLUSTER_M 1
#endif
#ifndef TILEFOUNDRY_SM90_CLUSTER_N
#define TILEFOUNDRY_SM90_CLUSTER_N 1
#endif
// The persistent tile scheduler's swizzle (option `gemm_swizzle`, CUTLASS's max_swizzle_size): the
// output tiles are visited in bands this many tiles across, so the CTAs running at once share more
// of their A and B tiles in L2. A launch argument, not an instantiation.
#ifndef TILEFOUNDRY_SM90_SWIZZLE
#define TILEFOUNDRY_SM90_SWIZZLE 1
#endif

namespace tilefoundry::atoms::detail {

/// The (rows, cols, batch) strides of a compact operand in the collective's stride type, whose
/// static unit mode says which of rows or cols is contiguous.
template <class Stride>
inline Stride packed_stride(int64_t rows, int64_t cols) {
  Stride s{};
  if constexpr (cute::is_static<cute::remove_cvref_t<decltype(cute::get<1>(s))>>::value) {
    cute::get<0>(s) = cols;  // cols contiguous: a row advances by cols
  } else {
    cute::get<1>(s) = rows;  // rows contiguous: a column advances by rows
  }
  cute::get<2>(s) = rows * cols;
  return s;
}

/// The CUTLASS kernel of one configuration: A (M, K) K-major, B per `LayoutB` (ColumnMajor: stored
/// (N, K)), D per `LayoutD`, f32 accumulation. `Pingpong`: two consumer warpgroups on alternate
/// tiles (TileM may be 64) instead of the cooperative schedule's two halves of one tile (TileM >=
/// 128). `ClusterM` x `ClusterN`: the cluster's CTAs along M and N.
template <class T, class LayoutB, class LayoutD, int TileM, int TileN, int TileK, class Scheduler, bool Pingpong,
          int ClusterM, int ClusterN>
struct Sm90Collective {
  using Element = T;
  static constexpr int kAlignment = 8;  // elements per 16 bytes: TMA strides and bases
  using TileShape = cute::Shape<cute::Int<TileM>, cute::Int<TileN>, cute::Int<TileK>>;
  using ClusterShape = cute::Shape<cute::Int<ClusterM>, cute::Int<ClusterN>, cute::_1>;

  using Epilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, TileShape, ClusterShape,
      cutlass::epilogue::collective::EpilogueTileAuto, float, float, Element, LayoutD, kAlignment, Element, LayoutD,
      kAlignment,
      cute::conditional_t<Pingpong, cutlass::epilogue::TmaWarpSpecialized,
                          cutlass::epilogue::TmaWarpSpecializedCooperative>>::CollectiveOp;

  using Mainloop = typename cutlass::gemm::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, Element, cutlass::layout::RowMajor, kAlignment, Element,
      LayoutB, kAlignment, float, TileShape, ClusterShape,
      cutlass::gemm::collective::StageCountAutoCarveout<static_cast<int>(sizeof(typename Epilogue::SharedStorage))>,
      cute::conditional_t<Pingpong, cutlass::gemm::KernelTmaWarpSpecializedPingpong,
                          cutlass::gemm::KernelTmaWarpSpecializedCooperative>>::CollectiveOp;

  using Kernel = cutlass::gemm::kernel::GemmUniversal<cute::Shape<int, int, int, int>, Mainloop, Epilogue, Scheduler>;
  using Device = cutlass::gemm::device::GemmUniversalAdapter<Kernel>;

  /// Arguments of D (rows, cols) = A (rows, K) . B, B seen as (cols, K), `batch` of each back to back.
  static typename Device::Arguments operands(T const* A, T const* B, T* D, int64_t batch, int64_t rows,
                                             int64_t cols, int64_t K) {
    typename Device::Arguments args{
        cutlass::gemm::GemmUniversalMode::kGemm,
        {static_cast<int>(rows), static_cast<int>(cols), static_cast<int>(K), static_cast<int>(batch)},
        {A, packed_stride<typename Kernel::StrideA>(rows, K), B, packed_stride<typename Kernel::StrideB>(cols, K)},
        {{1.0f, 0.0f},
         D,
         packed_stride<typename Kernel::StrideC>(rows, cols),
         D,
         packed_stride<typename Kernel::StrideD>(rows, cols)}};
    args.scheduler.max_swizzle_size = TILEFOUNDRY_SM90_SWIZZLE;
    return args;
  }
};

/// C (M, N) row-major = A (M, K) . B, B (K, N) N-major (CUTLASS RowMajor) or stored (N, K) K-major
/// (ColumnMajor), on TileM x TileN x 64 tiles.
template <class T, bool BKMajor, int TileM = TILEFOUNDRY_SM90_TILE_M, int TileN = TILEFOUNDRY_SM90_TILE_N,
          class Scheduler = void, bool Pingpong = false, int ClusterM = TILEFOUNDRY_SM90_CLUSTER_M,
          int ClusterN = TILEFOUNDRY_SM90_CLUSTER_N>
struct Sm90Gemm
    : Sm90Collective<T, cute::conditional_t<BKMajor, cutlass::layout::ColumnMajor, cutlass::layout::RowMajor>,
                     cutlass::layout::RowMajor, TileM, TileN, 64, Scheduler, Pingpong, ClusterM, ClusterN> {
  static auto arguments(T const* A, T const* B, T* C, int64_t batch, int64_t M, int64_t N, int64_t K) {
    return Sm90Gemm::operands(A, B, C, batch, M, N, K);
  }
};

/// The same TN GEMM (B stored (N, K)) with its operands swapped, for a short M: C^T (N, M) = B . A^T.
/// B's rows fill the tile's M mode and the M rows of A its N mode (TileN at least M), so no box TMA
/// loads runs past its tensor's rows: with M = 16 on a 128-row tile, the boundary-checked boxes
/// of A had cost the 128 x 128 tile 40% of its time at N = 151936 (bench.gpu, 2026-12-02).
/// C (M, N) row-major is C^T column-major, which the epilogue stores as it stands.
/// `ClusterN` CTAs of neighbouring tiles along A's rows share each tile of B by TMA multicast;
/// `ClusterM` CTAs along B's rows, each tile of A.
template <class T, int TileM = 128, int TileN = 16, int TileK = 64, class Scheduler = void, bool Pingpong = false,
          int ClusterN = 1, int ClusterM = 1>
struct Sm90GemmSwapped : Sm90Collective<T, cutlass::layout::ColumnMajor, cutlass::layout::ColumnMajor, TileM, TileN,
                                        TileK, Scheduler, Pingpong, ClusterM, ClusterN> {
  static auto arguments(T const* A, T const* B, T* C, int64_t batch, int64_t M, int64_t N, int64_t K) {
    return Sm90GemmSwapped::operands(B, A, C, batch, N, M, K);
  }
};

inline constexpr int64_t kSm90WideMinNK = 4096;  // N and K from which 128 x 256 may serve a call

/// At least one 128 x 256 tile for every SM (a 4096^3 GEMM has 512; M = 128 with N = 4096, 16).
inline bool sm90_wide_tiles_fill(int64_t batch, int64_t M, int64_t N) {
  return batch * ((M + 127) / 128) * ((N + 255) / 256) >= device_facts().sms;
}

/// Whether 128 x 256 serves the problem better than 128 x 128 on a 1 x 1 cluster: N and K at
/// least kSm90WideMinNK, and tiles to fill the SMs.
inline bool sm90_wide_tile_pays(int64_t batch, int64_t M, int64_t N, int64_t K) {
  return N >= kSm90WideMinNK && K >= kSm90WideMinNK && sm90_wide_tiles_fill(batch, M, N);
}

// M up to which the 64 x 64 ping-pong tile may serve a call. On the H200 (bench/gpu/kernels/
// sm90_sweep.cu, M = 128, 2026-11-30) it beat 128 x 128 on every Qwen3 projection with fewer
// 128 x 128 tiles than SMs whose 64 x 64 tiles fit two waves: 1.7B q 13.3 -> 7.2 us (cuBLAS 6.4),
// 1.7B down 31.6 -> 13.7 (12.7), 8B q 22.8 -> 13.0 (13.0), 8B down 59.6 -> 31.5 (stream-K 41.8,
// cuBLAS 32.7); 8B gate_up (384 small tiles) kept 128 x 128: 30.2 against 31.8 us. Larger M
// was not measured.
inline constexpr int64_t kSm90SmallTileMaxM = 128;

/// Whether 64 x 64 ping-pong serves the problem: M at most kSm90SmallTileMaxM, fewer 128 x 128
/// tiles than SMs (SMs would idle) and at most two waves of 64 x 64 tiles.
inline bool sm90_small_tile_pays(int64_t batch, int64_t M, int64_t N) {
  if (M > kSm90SmallTileMaxM) return false;
  int64_t const sms = device_facts().sms;
  int64_t const large = batch * ((M + 127) / 128) * ((N + 127) / 128);
  int64_t const small = batch * ((M + 63) / 64) * ((N + 63) / 64);
  return large < sms && small <= 2 * sms;
}

/// Whether a call the small tile serves (sm90_small_tile_pays) with B stored (N, K) runs on 64 x 96
/// ping-pong tiles instead (TILEFOUNDRY_SM90_SMALL_WIDE): where its 64 x 64 tiles exceed one wave.
/// cuBLAS runs such shapes on 96 x 64 tiles of its column-major view; on the H200 (bench/gpu/
/// kernels/sm90_sweep.cu, 2026-12-04) 64 x 96 took Qwen3-1.7B's gate_up at M = 128 (192 tiles of
/// 64 x 64) from 0.76x to 0.90x cuBLAS and Qwen3-8B's at M = 32 and 64 (192) from 0.85x / 0.92x
/// to 0.98x / 1.02x, and lost where 64 x 64 is one wave (8B q and down at M = 128: 0.94x / 0.97x
/// against 1.01x / 1.04x; every 64 x 32 swapped row). B (K, N) keeps 64 x 64: its N-major shared
/// tile is built of 64-column swizzle atoms.
inline bool sm90_small_wide_pays(int64_t batch, int64_t M, int64_t N) {
  return batch * ((M + 63) / 64) * ((N + 63) / 64) > device_facts().sms;
}

// K from which stream-K may serve a call. On the H200 (bench.gpu, M = 128, 2026-11-30) it took
// Qwen3-8B's down projection (K = 12288, 32 tiles) from 60.4 to 42.5 us, and lost wherever K was
// 2048-4096 (Qwen3-1.7B's q: 13.5 -> 17.4 us; Qwen3-8B's q: 23.3 -> 24.7): there the ordered
// reduction of the partial tiles costs more than the idle SMs.
inline constexpr int64_t kSm90StreamKMinK = 8192;

/// Whether stream-K serves the problem: fewer 128 x 128 tiles than SMs, so a data-parallel grid
/// would leave SMs idle, along a K of at least kSm90StreamKMinK to share out.
inline bool sm90_stream_k_pays(int64_t batch, int64_t M, int64_t N, int64_t K) {
  if (K < kSm90StreamKMinK) return false;
  return batch * ((M + 127) / 128) * ((N + 127) / 128) < device_facts().sms;
}

// M, N and K from which the 128 x 256 tile runs as a 2 x 1 cluster under gemm_cluster "auto", with
// tiles for at least 7/8 of the SMs. M: two full M tiles, so a cluster's second CTA has a tile of
// its own; below, the wide tile is not taken (B is streamed once at any tile, and 128 x 128
// serves). On the H200 (bench/gpu/kernels/sm90_sweep.cu, 2026-12-02) 2 x 1 took the wide tile from
// 0.86x to 0.98x cuBLAS at 4096^3, 0.95x to 0.97x at 8192^3, on Qwen3-8B at M = 2048 gate_up 0.97x
// to 1.12x and down 0.99x to 1.01x, and on Qwen3-1.7B's gate_up (K = 2048, where 1 x 1 wide tiles
// do not pay) 0.95x to 1.04x, against 0.99x for 128 x 128. N: in bench.gpu (2026-12-02) Qwen3-1.7B
// at M = 2048 (N = 2048: 128 wide tiles for 132 SMs) ran o at 1.00x against 0.92x on 128 x 128,
// down 0.98x against 0.93x and q 0.94x against 0.93x; its kv (N = 1024, 64 tiles) fell to 0.55x.
inline constexpr int64_t kSm90WidePairMinM = 256;
inline constexpr int64_t kSm90WidePairMinN = 2048;
inline constexpr int64_t kSm90WidePairMinK = 2048;

/// Whether the 2 x 1 cluster of 128 x 256 tiles serves the problem (gemm_cluster "auto").
inline bool sm90_wide_pair_pays(int64_t batch, int64_t M, int64_t N, int64_t K) {
  int64_t const tiles = batch * ((M + 127) / 128) * ((N + 255) / 256);
  return M >= kSm90WidePairMinM && N >= kSm90WidePairMinN && K >= kSm90WidePairMinK &&
         8 * tiles >= 7 * device_facts().sms;
}

// When a TN GEMM (B stored (N, K)) runs swapped on 64 x 16 ping-pong tiles with K steps of 128
// (Sm90GemmSwapped), in a module built with TILEFOUNDRY_SM90_SWAPPED. On the H200
// (bench/gpu/kernels/sm90_sweep.cu -DSM90_SWEEP_SKINNY, 2026-12-03, every Qwen3-1.7B and Qwen3-8B
// projection; bench/results/sm90-sweep-skinny*.txt):
// - 8 < M <= 16: 0.91-1.09x cuBLAS from 4Mi elements of B, against 0.64-0.84x for the tensor-core
//   skinny kernel or the unswapped tiles (the LM heads 0.64x -> 1.05x); below, on 1.7B's kv
//   (2Mi), the tensor-core skinny kernel kept 4.98 us against 5.69. 128-row tiles, K steps of 64
//   and stream-K all ran slower.
// - 1 < M <= 8: the register skinny kernel's cost grows with M (1.7B kv: 4.3 us at M = 1, 15.7 at
//   M = 8, 0.23-0.52x cuBLAS there) while the swapped tile's does not (0.89-1.10x at M = 8, 1.7B
//   kv 5.59 us), so it serves every B from 2Mi elements.
// - M = 1: the swapped tile beat the skinny kernel on B of 8Mi elements with N >= K (1.7B gate_up
//   9.56 against 14.67 us) and on every B of 16Mi or more (8B q 11.8 / 16.4, 8B down 27.3 / 33.9,
//   the LM heads 143 / 154 and 279 / 295), and lost on 1.7B's down (12.6Mi, K = 6144: 11.72
//   against 11.22), its q (5.98 / 5.80) and the kv rows. That is a lone call with B not settled;
//   a call whose launch carries more (`skinny_first`: B settled, read before the PDL wait, or a
//   group, epilogue or prologue riding on one launch) keeps the skinny kernel, which the decode
//   step is tuned around.
inline constexpr int64_t kSm90SwappedMaxM = 16;
inline constexpr int64_t kSm90SwappedMinNK = 4194304;      // 4Mi (8 MB of bf16): 8 < M <= 16
inline constexpr int64_t kSm90SwappedRowsMinNK = 2097152;  // 2Mi: 1 < M <= 8
inline constexpr int64_t kSm90SwappedLoneMinNK = 8388608;  // 8Mi, with N >= K; 16Mi with any N: M = 1

/// Whether the swapped TN GEMM serves the problem (B stored (N, K)); `skinny_first` per the note above.
inline bool sm90_swapped_pays(int64_t M, int64_t N, int64_t K, bool skinny_first = false) {
  int64_t const nk = N * K;
  if (M == 1) return !skinny_first && nk >= kSm90SwappedLoneMinNK && (N >= K || nk >= 2 * kSm90SwappedLoneMinNK);
  if (M <= kSkinnyMaxM) return nk >= kSm90SwappedRowsMinNK;
  return M <= kSm90SwappedMaxM && nk >= kSm90SwappedMinNK;
}

// N up to which the swapped 64 x 16 tile runs as 4 x 1 clusters, four neighbouring tiles of B's rows
// sharing each tile of A by multicast (cuBLAS's own shape for these calls). On the H200
// (sm90_sweep.cu -DSM90_SWEEP_SKINNY, 2026-12-04) that ran every Qwen3 projection but the LM heads
// 1-7% faster at M = 8 and 16 (1.7B down 0.999x -> 1.075x cuBLAS, 8B kv 0.906x -> 0.953x at
// M = 16) and at M = 1 on the 8B rows, and the LM heads (N = 151936, 2374 tiles) 3-7% slower.
inline constexpr int64_t kSm90SwappedQuadMaxN = 16384;

/// Whether a call the swapped TN GEMM serves runs it as 4 x 1 clusters (kSm90SwappedQuadMaxN).
inline bool sm90_swapped_quad_pays(int64_t N) { return N <= kSm90SwappedQuadMaxN; }

// M past kSm90SwappedMaxM up to which a TN GEMM runs swapped on 64 x 32 ping-pong tiles with K steps
// of 128 (TILEFOUNDRY_SM90_SWAPPED_MID) when those tiles are one wave at most: 64 rows of B by 32 of
// A a tile, each B tile streamed once per 32 rows of A. On the H200 (bench/gpu/kernels/sm90_sweep.cu,
// M = 128, 2026-12-04) it ran Qwen3-1.7B's q 1.01x cuBLAS (64 x 64 ping-pong: 0.90x), kv 0.99x
// (0.85x), down 1.10x (0.93x) and Qwen3-8B's kv 0.95x (0.78x), 64-128 tiles each; where its tiles
// took two waves or more (8B q: 256, 1.7B gate_up: 384) it lost to the 64 x 64 tile (0.87x against
// 1.00x, 0.74x against 0.76x). 16 rows of A a tile ran kv alike and lost elsewhere; 64 and 128 lost.
// At M = 32 and 64 (-DSM90_SWEEP_MID) the calls it takes ran 0.88-1.13x cuBLAS (8B kv lowest, 8B
// down highest). As 1 x 2 clusters sharing B it lost but on 8B gate_up at M = 64 (0.99x against
// the 64 x 64 tile's 0.92x), so it stays 1 x 1.
inline constexpr int64_t kSm90SwappedMidMaxM = 128;

/// Whether the 64 x 32 swapped TN GEMM serves the problem: kSm90SwappedMaxM < M <= kSm90SwappedMidMaxM
/// with at most one wave of its tiles.
inline bool sm90_swapped_mid_pays(int64_t batch, int64_t M, int64_t N) {
  if (M <= kSm90SwappedMaxM || M > kSm90SwappedMidMaxM) return false;
  return batch * ((N + 63) / 64) * ((M + 31) / 32) <= device_facts().sms;
}

/// The collective of each of with_sm90_gemm's branches (its slot): a module built split
/// (TILEFOUNDRY_SM90_SPLIT) builds each slot its calls may reach in a source of its own, compiled
/// beside its main source, where nvcc would otherwise compile every collective in turn in one.
template <int Slot, class T, bool BKMajor>
struct Sm90SlotCollective;
template <class T, bool BKMajor>  // the swapped 64 x 16 tile as 4 x 1 clusters (BKMajor only)
struct Sm90SlotCollective<0, T, BKMajor> { using type = Sm90GemmSwapped<T, 64, 16, 128, void, true, 1, 4>; };
template <class T, bool BKMajor>  // the swapped 64 x 16 tile alone
struct Sm90SlotCollective<1, T, BKMajor> { using type = Sm90GemmSwapped<T, 64, 16, 128, void, true>; };
template <class T, bool BKMajor>  // the swapped 64 x 32 tile
struct Sm90SlotCollective<2, T, BKMajor> { using type = Sm90GemmSwapped<T, 64, 32, 128, void, true>; };
template <class T, bool BKMajor>  // 128 x 256 as 2 x 1 clusters
struct Sm90SlotCollective<3, T, BKMajor> { using type = Sm90Gemm<T, BKMajor, 128, 256, void, false, 2, 1>; };
template <class T, bool BKMajor>  // 128 x 256
struct Sm90SlotCollective<4, T, BKMajor> { using type = Sm90Gemm<T, BKMajor, 128, 256>; };
template <class T, bool BKMajor>  // 64 x 96 ping-pong
struct Sm90SlotCollective<5, T, BKMajor> { using type = Sm90Gemm<T, BKMajor, 64, 96, void, true>; };
template <class T, bool BKMajor>  // 64 x 64 ping-pong
struct Sm90SlotCollective<6, T, BKMajor> { using type = Sm90Gemm<T, BKMajor, 64, 64, void, true>; };
template <class T, bool BKMajor>  // the module's tile on the stream-K scheduler
struct Sm90SlotCollective<7, T, BKMajor> {
  using type = Sm90Gemm<T, BKMajor, TILEFOUNDRY_SM90_TILE_M, TILEFOUNDRY_SM90_TILE_N, cutlass::gemm::StreamKScheduler>;
};
template <class T, bool BKMajor>  // the module's tile
struct Sm90SlotCollective<8, T, BKMajor> { using type = Sm90Gemm<T, BKMajor>; };

/// `f(Sm90SlotCollective<s, T, BKMajor>::type{})` for the slot s that serves the problem; fits,
/// workspace and run ask it in turn, so all three agree.
template <class T, bool BKMajor, class F>
inline decltype(auto) with_sm90_gemm(int64_t batch, int64_t M, int64_t N, int64_t K, F&& f) {
  auto slot = [&](auto s) { return f(typename Sm90SlotCollective<decltype(s)::value, T, BKMajor>::type{}); };
  using cute::Int;
#if defined(TILEFOUNDRY_SM90_SWAPPED)
  // The code generator defines ..._QUAD_ONLY or ..._SINGLE_ONLY where every swapped call's N is on
  // one side of kSm90SwappedQuadMaxN, so the module builds one of the two forms.
  if constexpr (BKMajor) {
    if (sm90_swapped_pays(M, N, K)) {
#if defined(TILEFOUNDRY_SM90_SWAPPED_QUAD_ONLY)
      return slot(Int<0>{});
#elif defined(TILEFOUNDRY_SM90_SWAPPED_SINGLE_ONLY)
      return slot(Int<1>{});
#else
      if (sm90_swapped_quad_pays(N)) return slot(Int<0>{});
      return slot(Int<1>{});
#endif
    }
  }
#endif
#if defined(TILEFOUNDRY_SM90_SWAPPED_MID)
  if constexpr (BKMajor) {
    if (sm90_swapped_mid_pays(batch, M, N)) return slot(Int<2>{});
  }
#endif
#if defined(TILEFOUNDRY_SM90_WIDE_PAIR)
  if (sm90_wide_pair_pays(batch, M, N, K)) return slot(Int<3>{});
#elif defined(TILEFOUNDRY_SM90_WIDE_TILE)
  if (sm90_wide_tile_pays(batch, M, N, K)) return slot(Int<4>{});
#endif
#if defined(TILEFOUNDRY_SM90_SMALL_TILE)
  if (sm90_small_tile_pays(batch, M, N)) {
#if defined(TILEFOUNDRY_SM90_SMALL_WIDE)
    if constexpr (BKMajor) {
      if (sm90_small_wide_pays(batch, M, N)) return slot(Int<5>{});
    }
#endif
    return slot(Int<6>{});
  }
#endif
#if defined(TILEFOUNDRY_SM90_STREAM_K)
  if (sm90_stream_k_pays(batch, M, N, K)) return slot(Int<7>{});
#endif
  return slot(Int<8>{});
}

/// What the runtime asks of one collective G (element T), defined in gemm_sm90_ops.cuh: included at
/// the end of this header unless the including source defines TILEFOUNDRY_SM90_SPLIT. A split
/// module's main source only calls these, and the source of each slot includes the definitions and
/// instantiates them for its collective (`template struct Sm90Ops<...>`), so the CUTLASS kernels are
/// compiled there.
template <class G, class T>
struct Sm90Ops {
  static bool fits(T const* A, T const* B, T* C, int64_t batch, int64_t M, int64_t N, int64_t K);
  static size_t workspace_bytes(T const* A, T const* B, T* C, int64_t batch, int64_t M, int64_t N, int64_t K);
  static cudaError_t run(T const* A, T const* B, T* C, int64_t batch, int64_t M, int64_t N, int64_t K,
                         void* workspace, cudaStream_t stream);
};

/// True when the sm90 collective can run this problem (alignment, extents within int).
template <class T, bool BKMajor>
inline bool sm90_gemm_fits(T const* A, T const* B, T* C, int64_t batch, int64_t M, int64_t N, int64_t K) {
  constexpr int64_t kIntMax = 2147483647;
  if (M > kIntMax || N > kIntMax || K > kIntMax || batch > kIntMax || K % 8 || N % 8) return false;
  return with_sm90_gemm<T, BKMajor>(batch, M, N, K, [&](auto g) {
    return Sm90Ops<decltype(g), T>::fits(A, B, C, batch, M, N, K);
  });
}

template <class T, bool BKMajor>
inline size_t sm90_gemm_workspace_bytes(T const* A, T const* B, T* C, int64_t batch, int64_t M, int64_t N,
                                        int64_t K) {
  return with_sm90_gemm<T, BKMajor>(batch, M, N, K, [&](auto g) {
    return Sm90Ops<decltype(g), T>::workspace_bytes(A, B, C, batch, M, N, K);
  });
}

template <class T, bool BKMajor>
inline cudaError_t gemm_sm90(T const* A, T const* B, T* C, int64_t batch, int64_t M, int64_t N, int64_t K,
                             void* workspace, cudaStream_t stream) {
  return with_sm90_gemm<T, BKMajor>(batch, M, N, K, [&](auto g) {
    return Sm90Ops<decltype(g), T>::run(A, B, C, batch, M, N, K, workspace, stream);
  });
}

}  // namespace tilefoundry::atoms::detail

#if !defined(TILEFOUNDRY_SM90_SPLIT)
#include <tilefoundry/runtime/cuda/atoms/gemm_sm90_ops.cuh>
#endif
