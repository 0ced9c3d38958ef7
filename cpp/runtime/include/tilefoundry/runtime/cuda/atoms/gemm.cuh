// The whole-GEMM atom: C = A · B over compact row-major A (M, K), B (K, N), C (M, N), `batch`
// of them back to back. One public entry; the tier is chosen from facts known at the call:
//
//   sm90       Hopper device, module built with the sm90 collective, 16-bit dtype, the collective
//              can implement the problem (K, N multiples of 8, aligned bases), M > 16
//   skinny     16-bit dtype, M <= 16 (decode): split-K streaming of B in 16-byte packs
//   mma        16-bit dtype, K, N multiples of 8, 16-byte aligned bases: mma.sync tensor cores
//   simt      anything else (f32 always: no TF32 unless opted in): ordered FFMA K sums
//
//   size_t ws = gemm_workspace_bytes(A, B, C, batch, M, N, K);      // same tier as gemm()
//   cudaError_t err = gemm(A, B, C, batch, M, N, K, workspace, stream);
// K == 0 writes zeros; M, N or batch 0 launches nothing.
#pragma once

#include <cstdint>

#include <cuda_runtime_api.h>

#include <tilefoundry/runtime/cuda/atoms/gemm_simt.cuh>
#include <tilefoundry/runtime/cuda/atoms/gemm_skinny.cuh>
#include <tilefoundry/runtime/cuda/atoms/gemm_sm80.cuh>
#if defined(TILEFOUNDRY_CUDA_GEMM_SM90)
#include <tilefoundry/runtime/cuda/atoms/gemm_sm90.cuh>
#endif

namespace tilefoundry::atoms {

enum class GemmTier { none, zero, sm90, skinny, mma, simt };

namespace detail {

inline bool aligned_16(void const* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; }

/// Compute capability major of the current device (cached per device).
inline int device_major() {
  static int majors[64] = {};
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess || device < 0 || device >= 64) return 0;
  if (majors[device] == 0) cudaDeviceGetAttribute(&majors[device], cudaDevAttrComputeCapabilityMajor, device);
  return majors[device];
}

}  // namespace detail

template <class T>
inline GemmTier gemm_tier(T const* A, T const* B, T* C, int64_t batch, int64_t M, int64_t N, int64_t K) {
  if (batch <= 0 || M <= 0 || N <= 0) return GemmTier::none;
  if (K <= 0) return GemmTier::zero;
  if constexpr (is_half_v<T>) {
    bool const aligned = detail::aligned_16(A) && detail::aligned_16(B) && detail::aligned_16(C);
#if defined(TILEFOUNDRY_CUDA_GEMM_SM90)
    if (M > detail::kSkinnyMaxM && detail::device_major() == 9 && detail::sm90_gemm_fits(A, B, C, batch, M, N, K)) {
      return GemmTier::sm90;
    }
#endif
    if (M <= detail::kSkinnyMaxM && N % 8 == 0 && aligned) return GemmTier::skinny;
    if (K % 8 == 0 && N % 8 == 0 && aligned) return GemmTier::mma;
  }
  return GemmTier::simt;
}

/// Device workspace the chosen tier needs, in bytes.
template <class T>
inline size_t gemm_workspace_bytes(T const* A, T const* B, T* C, int64_t batch, int64_t M, int64_t N, int64_t K) {
  switch (gemm_tier(A, B, C, batch, M, N, K)) {
#if defined(TILEFOUNDRY_CUDA_GEMM_SM90)
    case GemmTier::sm90:
      // NOTE: only 16-bit dtypes reach this tier; the guard keeps CUTLASS from building an f32 (TF32) kernel.
      if constexpr (is_half_v<T>) return detail::sm90_gemm_workspace_bytes(A, B, C, batch, M, N, K);
      return 0;
#endif
    case GemmTier::skinny: return detail::skinny_workspace_bytes(batch, M, N, K);
    default: return 0;
  }
}

template <class T>
inline cudaError_t gemm(T const* A, T const* B, T* C, int64_t batch, int64_t M, int64_t N, int64_t K, void* workspace,
                        cudaStream_t stream) {
  switch (gemm_tier(A, B, C, batch, M, N, K)) {
    case GemmTier::none: return cudaSuccess;
    case GemmTier::zero: return cudaMemsetAsync(C, 0, static_cast<size_t>(batch * M * N) * sizeof(T), stream);
#if defined(TILEFOUNDRY_CUDA_GEMM_SM90)
    case GemmTier::sm90:
      if constexpr (is_half_v<T>) return detail::gemm_sm90(A, B, C, batch, M, N, K, workspace, stream);
      break;
#endif
    case GemmTier::skinny:
      if constexpr (is_half_v<T>) return detail::gemm_skinny(A, B, C, batch, M, N, K, static_cast<float*>(workspace), stream);
      break;
    case GemmTier::mma:
      if constexpr (is_half_v<T>) return detail::gemm_mma(A, B, C, batch, M, N, K, stream);
      break;
    default: break;
  }
  return detail::gemm_simt(A, B, C, batch, M, N, K, stream);
}

}  // namespace tilefoundry::atoms
