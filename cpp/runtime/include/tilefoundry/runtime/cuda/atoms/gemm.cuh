// The whole-GEMM atom: C = A · B over compact A (M, K) and C (M, N) row-major, B in the storage
// the layout names, `batch` of them back to back. One public entry; the tier is chosen from
// facts known at the call:
//
//   GemmLayout::rrr  B (K, N) row-major (N-major)
//   GemmLayout::rcr  B stored (N, K) (K-major): x @ w.T reading w in place, the canonical TN GEMM
//
//   sm90       Hopper device, module built with the sm90 collective, 16-bit dtype, the collective
//              can implement the problem (K, N multiples of 8, aligned bases), M > 8
//   skinny     16-bit dtype, M <= 8 (decode): B streamed once in 16-byte packs, K splits
//              combined in order (rrr: N a multiple of 8; rcr: K a multiple of 8; gemm_skinny.cuh)
//   mma        16-bit dtype, K, N multiples of 8, 16-byte aligned bases: mma.sync tensor cores
//   simt       anything else (f32 always: no TF32 unless opted in): ordered FFMA K sums
//
//   size_t ws = gemm_workspace_bytes<GemmLayout::rcr>(A, B, C, batch, M, N, K);  // same tier as gemm()
//   cudaError_t err = gemm<GemmLayout::rcr>(A, B, C, batch, M, N, K, workspace, stream);
// The layout defaults to rrr. K == 0 writes zeros; M, N or batch 0 launches nothing.
#pragma once

#include <cstdint>

#include <cuda_runtime_api.h>

#include <tilefoundry/runtime/cuda/atoms/device_facts.cuh>
#include <tilefoundry/runtime/cuda/atoms/gemm_simt.cuh>
#include <tilefoundry/runtime/cuda/atoms/gemm_skinny.cuh>
#include <tilefoundry/runtime/cuda/atoms/gemm_sm80.cuh>
#if defined(TILEFOUNDRY_CUDA_GEMM_SM90)
#include <tilefoundry/runtime/cuda/atoms/gemm_sm90.cuh>
#endif

namespace tilefoundry::atoms {

/// Storage of A, B and C in turn: r row-major, c column-major (the catalog atom name's suffix).
enum class GemmLayout { rrr, rcr };

enum class GemmTier { none, zero, sm90, skinny, mma, simt };

namespace detail {

inline bool aligned_16(void const* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; }

}  // namespace detail

template <GemmLayout L = GemmLayout::rrr, class T>
inline GemmTier gemm_tier(T const* A, T const* B, T* C, int64_t batch, int64_t M, int64_t N, int64_t K) {
  constexpr bool kBKMajor = L == GemmLayout::rcr;
  if (batch <= 0 || M <= 0 || N <= 0) return GemmTier::none;
  if (K <= 0) return GemmTier::zero;
  if constexpr (is_half_v<T>) {
    bool const aligned = detail::aligned_16(A) && detail::aligned_16(B) && detail::aligned_16(C);
#if defined(TILEFOUNDRY_CUDA_GEMM_SM90)
    if (M > detail::kSkinnyMaxM && detail::device_facts().major == 9 &&
        detail::sm90_gemm_fits<T, kBKMajor>(A, B, C, batch, M, N, K)) {
      return GemmTier::sm90;
    }
#endif
    // B is streamed in 16-byte packs along its contiguous mode: N when N-major, K when K-major.
    if (M <= detail::kSkinnyMaxM && (kBKMajor ? K : N) % 8 == 0 && aligned) return GemmTier::skinny;
    if (K % 8 == 0 && N % 8 == 0 && aligned) return GemmTier::mma;
  }
  return GemmTier::simt;
}

/// Device workspace the chosen tier needs, in bytes.
template <GemmLayout L = GemmLayout::rrr, class T>
inline size_t gemm_workspace_bytes(T const* A, T const* B, T* C, int64_t batch, int64_t M, int64_t N, int64_t K) {
  constexpr bool kBKMajor = L == GemmLayout::rcr;
  switch (gemm_tier<L>(A, B, C, batch, M, N, K)) {
#if defined(TILEFOUNDRY_CUDA_GEMM_SM90)
    case GemmTier::sm90:
      // NOTE: only 16-bit dtypes reach this tier; the guard keeps CUTLASS from building an f32 (TF32) kernel.
      if constexpr (is_half_v<T>) return detail::sm90_gemm_workspace_bytes<T, kBKMajor>(A, B, C, batch, M, N, K);
      return 0;
#endif
    case GemmTier::skinny:
      if constexpr (kBKMajor) return detail::skinny_bt_workspace_bytes(batch, M, N, K);
      return detail::skinny_workspace_bytes(batch, M, N, K);
    default: return 0;
  }
}

template <GemmLayout L = GemmLayout::rrr, class T>
inline cudaError_t gemm(T const* A, T const* B, T* C, int64_t batch, int64_t M, int64_t N, int64_t K, void* workspace,
                        cudaStream_t stream) {
  constexpr bool kBKMajor = L == GemmLayout::rcr;
  switch (gemm_tier<L>(A, B, C, batch, M, N, K)) {
    case GemmTier::none: return cudaSuccess;
    case GemmTier::zero: return cudaMemsetAsync(C, 0, static_cast<size_t>(batch * M * N) * sizeof(T), stream);
#if defined(TILEFOUNDRY_CUDA_GEMM_SM90)
    case GemmTier::sm90:
      if constexpr (is_half_v<T>) return detail::gemm_sm90<T, kBKMajor>(A, B, C, batch, M, N, K, workspace, stream);
      break;
#endif
    case GemmTier::skinny:
      if constexpr (is_half_v<T> && kBKMajor) {
        return detail::gemm_skinny_bt(A, B, C, batch, M, N, K, static_cast<float*>(workspace), stream);
      } else if constexpr (is_half_v<T>) {
        return detail::gemm_skinny(A, B, C, batch, M, N, K, static_cast<float*>(workspace), stream);
      }
      break;
    case GemmTier::mma:
      if constexpr (is_half_v<T>) return detail::gemm_mma<T, kBKMajor>(A, B, C, batch, M, N, K, stream);
      break;
    default: break;
  }
  return detail::gemm_simt<T, kBKMajor>(A, B, C, batch, M, N, K, stream);
}

}  // namespace tilefoundry::atoms
