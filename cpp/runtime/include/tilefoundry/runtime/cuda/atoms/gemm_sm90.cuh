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

#include <cute/tensor.hpp>
#include <cutlass/cutlass.h>
#include <cutlass/epilogue/collective/collective_builder.hpp>
#include <cutlass/gemm/collective/collective_builder.hpp>
#include <cutlass/gemm/device/gemm_universal_adapter.h>
#include <cutlass/gemm/dispatch_policy.hpp>
#include <cutlass/gemm/kernel/gemm_universal.hpp>

// The CTA tile (M x N, K step 64): a compile option of the module (`gemm_tile`), a knob for the
// autotuner; the cooperative schedule splits M across two consumer warpgroups (M >= 128).
#ifndef TILEFOUNDRY_SM90_TILE_M
#define TILEFOUNDRY_SM90_TILE_M 128
#endif
#ifndef TILEFOUNDRY_SM90_TILE_N
#define TILEFOUNDRY_SM90_TILE_N 128
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

template <class T, bool BKMajor>
struct Sm90Gemm {
  using Element = T;
  using Layout = cutlass::layout::RowMajor;
  using LayoutB = cute::conditional_t<BKMajor, cutlass::layout::ColumnMajor, cutlass::layout::RowMajor>;
  static constexpr int kAlignment = 8;  // elements per 16 bytes: TMA strides and bases
  using TileShape = cute::Shape<cute::Int<TILEFOUNDRY_SM90_TILE_M>, cute::Int<TILEFOUNDRY_SM90_TILE_N>, cute::_64>;
  using ClusterShape = cute::Shape<cute::_1, cute::_1, cute::_1>;

  using Epilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, TileShape, ClusterShape,
      cutlass::epilogue::collective::EpilogueTileAuto, float, float, Element, Layout, kAlignment, Element, Layout,
      kAlignment, cutlass::epilogue::TmaWarpSpecializedCooperative>::CollectiveOp;

  using Mainloop = typename cutlass::gemm::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, Element, Layout, kAlignment, Element, LayoutB, kAlignment,
      float, TileShape, ClusterShape,
      cutlass::gemm::collective::StageCountAutoCarveout<static_cast<int>(sizeof(typename Epilogue::SharedStorage))>,
      cutlass::gemm::KernelTmaWarpSpecializedCooperative>::CollectiveOp;

  using Kernel = cutlass::gemm::kernel::GemmUniversal<cute::Shape<int, int, int, int>, Mainloop, Epilogue>;
  using Device = cutlass::gemm::device::GemmUniversalAdapter<Kernel>;

  static typename Device::Arguments arguments(T const* A, T const* B, T* C, int64_t batch, int64_t M, int64_t N,
                                              int64_t K) {
    using StrideA = typename Kernel::StrideA;
    using StrideB = typename Kernel::StrideB;
    using StrideC = typename Kernel::StrideC;
    using StrideD = typename Kernel::StrideD;
    int const m = static_cast<int>(M), n = static_cast<int>(N), k = static_cast<int>(K), l = static_cast<int>(batch);
    // A is (M, K) K-major; B is seen as (N, K), N- or K-major; C and D are (M, N) N-major.
    auto const sa = packed_stride<StrideA>(M, K);
    auto const sb = packed_stride<StrideB>(N, K);
    auto const sc = packed_stride<StrideC>(M, N);
    auto const sd = packed_stride<StrideD>(M, N);
    typename Device::Arguments args{cutlass::gemm::GemmUniversalMode::kGemm,
                                    {m, n, k, l},
                                    {A, sa, B, sb},
                                    {{1.0f, 0.0f}, C, sc, C, sd}};
    return args;
  }
};

/// True when the sm90 collective can run this problem (alignment, extents within int).
template <class T, bool BKMajor>
inline bool sm90_gemm_fits(T const* A, T const* B, T* C, int64_t batch, int64_t M, int64_t N, int64_t K) {
  constexpr int64_t kIntMax = 2147483647;
  if (M > kIntMax || N > kIntMax || K > kIntMax || batch > kIntMax || K % 8 || N % 8) return false;
  using G = Sm90Gemm<T, BKMajor>;
  return G::Device::can_implement(G::arguments(A, B, C, batch, M, N, K)) == cutlass::Status::kSuccess;
}

template <class T, bool BKMajor>
inline size_t sm90_gemm_workspace_bytes(T const* A, T const* B, T* C, int64_t batch, int64_t M, int64_t N,
                                        int64_t K) {
  using G = Sm90Gemm<T, BKMajor>;
  return G::Device::get_workspace_size(G::arguments(A, B, C, batch, M, N, K));
}

template <class T, bool BKMajor>
inline cudaError_t gemm_sm90(T const* A, T const* B, T* C, int64_t batch, int64_t M, int64_t N, int64_t K,
                             void* workspace, cudaStream_t stream) {
  using G = Sm90Gemm<T, BKMajor>;
  typename G::Device gemm;
  auto args = G::arguments(A, B, C, batch, M, N, K);
  if (gemm.initialize(args, workspace, stream) != cutlass::Status::kSuccess) return cudaErrorInvalidValue;
  if (gemm.run(stream) != cutlass::Status::kSuccess) return cudaErrorLaunchFailure;
  return cudaGetLastError();
}

}  // namespace tilefoundry::atoms::detail
