// GEMM tier for skinny M (decode: M <= 16): memory-bound on B, so B is streamed once in 16-byte
// packs, K split across the CTA's warps and across CTAs (split-K), partial sums reduced in order.
// A (M, K), B (K, N) compact row-major; needs N a multiple of 8 and 16-byte aligned B and C.
//
// Pass 1: CTA (n-slab of 256 columns, K split s), 8 warps; lane l owns columns 8l .. 8l+7 of
//         the slab, warp w the k = k_s + w, k_s + w + 8, ... of the split. Warps combine in smem
//         (warp order), the CTA writes ws[s][m][n] (f32).
// Pass 2: C[m][n] = sum over s in order of ws[s][m][n].
#pragma once

#include <cstdint>

#include <tilefoundry/runtime/cuda/atoms/scalar.cuh>
#include <tilefoundry/runtime/cuda/atoms/vector_access.cuh>

namespace tilefoundry::atoms::detail {

inline constexpr int kSkinnyMaxM = 16;
inline constexpr int kSkinnyWarps = 8;
inline constexpr int kSkinnyCols = 256;  // 32 lanes x 8 columns
inline constexpr int kSkinnyTargetCtas = 264;

template <class T, int MT>
__global__ void __launch_bounds__(kSkinnyWarps * 32)
gemm_skinny_partial(T const* __restrict__ A, T const* __restrict__ B, float* __restrict__ ws, int64_t M, int64_t N,
                    int64_t K, int64_t k_per_split) {
  __shared__ float red[kSkinnyWarps][kSkinnyCols];  // (warp, column) partials of one row m
  int64_t const batch = blockIdx.z;
  int const splits = gridDim.y;
  A += batch * M * K;
  B += batch * K * N;
  ws += (batch * splits + blockIdx.y) * M * N;
  int const lane = threadIdx.x % 32;
  int const warp = threadIdx.x / 32;
  int64_t const n = static_cast<int64_t>(blockIdx.x) * kSkinnyCols + lane * 8;
  int64_t const k_begin = static_cast<int64_t>(blockIdx.y) * k_per_split;
  int64_t const k_end = k_begin + k_per_split < K ? k_begin + k_per_split : K;
  float acc[MT][8] = {};
  if (n < N) {
#pragma unroll 4
    for (int64_t k = k_begin + warp; k < k_end; k += kSkinnyWarps) {
      T b[8];
      load_pack<8>(B + k * N + n, b);
      float bf[8];
#pragma unroll
      for (int c = 0; c < 8; ++c) bf[c] = cast<float>(b[c]);
#pragma unroll
      for (int m = 0; m < MT; ++m) {
        float const a = m < M ? cast<float>(A[m * K + k]) : 0.0f;
#pragma unroll
        for (int c = 0; c < 8; ++c) acc[m][c] = acc[m][c] + a * bf[c];
      }
    }
  }
#pragma unroll
  for (int m = 0; m < MT; ++m) {
    if (m >= M) break;
#pragma unroll
    for (int c = 0; c < 8; ++c) red[warp][lane * 8 + c] = acc[m][c];
    __syncthreads();
    int const col = threadIdx.x;  // 256 threads, one slab column each
    float total = 0.0f;
#pragma unroll
    for (int w = 0; w < kSkinnyWarps; ++w) total = total + red[w][col];
    int64_t const gn = static_cast<int64_t>(blockIdx.x) * kSkinnyCols + col;
    if (gn < N) ws[m * N + gn] = total;
    __syncthreads();
  }
}

template <class T>
__global__ void gemm_skinny_reduce(float const* __restrict__ ws, T* __restrict__ C, int64_t M, int64_t N, int splits) {
  int64_t const batch = blockIdx.y;
  int64_t const i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= M * N) return;
  float const* w = ws + batch * splits * M * N;
  float total = 0.0f;
  for (int s = 0; s < splits; ++s) total = total + w[s * M * N + i];
  C[batch * M * N + i] = cast<T>(total);
}

/// Splits of K: enough CTAs to cover the device twice, but workspace traffic under 1/8 of B's.
inline int skinny_splits(int64_t M, int64_t N, int64_t K) {
  int64_t const slabs = (N + kSkinnyCols - 1) / kSkinnyCols;
  int64_t want = (kSkinnyTargetCtas + slabs - 1) / slabs;
  int64_t const cap = K / (32 * (M > 0 ? M : 1));
  if (want > cap) want = cap;
  return static_cast<int>(want < 1 ? 1 : want);
}

inline size_t skinny_workspace_bytes(int64_t batch, int64_t M, int64_t N, int64_t K) {
  return static_cast<size_t>(batch) * skinny_splits(M, N, K) * M * N * sizeof(float);
}

template <class T, int MT>
inline void launch_skinny_partial(dim3 grid, T const* A, T const* B, float* ws, int64_t M, int64_t N, int64_t K,
                                  int64_t per, cudaStream_t stream) {
  gemm_skinny_partial<T, MT><<<grid, kSkinnyWarps * 32, 0, stream>>>(A, B, ws, M, N, K, per);
}

template <class T>
inline cudaError_t gemm_skinny(T const* A, T const* B, T* C, int64_t batch, int64_t M, int64_t N, int64_t K,
                               float* ws, cudaStream_t stream) {
  int const splits = skinny_splits(M, N, K);
  int64_t const per = (K + splits - 1) / splits;
  dim3 grid(static_cast<unsigned>((N + kSkinnyCols - 1) / kSkinnyCols), static_cast<unsigned>(splits),
            static_cast<unsigned>(batch));
  if (M <= 1) launch_skinny_partial<T, 1>(grid, A, B, ws, M, N, K, per, stream);
  else if (M <= 2) launch_skinny_partial<T, 2>(grid, A, B, ws, M, N, K, per, stream);
  else if (M <= 4) launch_skinny_partial<T, 4>(grid, A, B, ws, M, N, K, per, stream);
  else if (M <= 8) launch_skinny_partial<T, 8>(grid, A, B, ws, M, N, K, per, stream);
  else launch_skinny_partial<T, 16>(grid, A, B, ws, M, N, K, per, stream);
  dim3 rgrid(static_cast<unsigned>((M * N + 255) / 256), static_cast<unsigned>(batch));
  gemm_skinny_reduce<T><<<rgrid, 256, 0, stream>>>(ws, C, M, N, splits);
  return cudaGetLastError();
}

}  // namespace tilefoundry::atoms::detail
