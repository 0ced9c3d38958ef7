// GEMM tier for any shape and float dtype: C = A · B on CUDA cores (FFMA), f32 accumulation.
// A (M, K), C (M, N) compact row-major; B (K, N) row-major or, with BKMajor, stored (N, K); all
// batch-strided. Each output keeps its K sum in order k = 0, 1, ..., K-1, exactly as the
// reference contraction loop (no TF32).
//
// CTA tile (64, 64) over (M, N), K in steps of 16; 256 threads, each a (4, 4) register tile:
//   As  (16, 64) smem, A transposed (k-major) so a thread's 4 rows are one broadcast read
//   Bs  (16, 64) smem; B stored (N, K) is read along K and transposed into it like A
#pragma once

#include <cstdint>

#include <tilefoundry/runtime/cuda/atoms/scalar.cuh>

namespace tilefoundry::atoms::detail {

inline constexpr int kSimtBM = 64;
inline constexpr int kSimtBN = 64;
inline constexpr int kSimtBK = 16;
inline constexpr int kSimtThreads = 256;

template <class T, bool BKMajor>
__global__ void __launch_bounds__(kSimtThreads)
gemm_simt_kernel(T const* __restrict__ A, T const* __restrict__ B, T* __restrict__ C, int64_t M, int64_t N,
                 int64_t K) {
  __shared__ float As[kSimtBK][kSimtBM];  // (BK, BM): A^T tile
  __shared__ float Bs[kSimtBK][kSimtBN];  // (BK, BN)
  int64_t const batch = blockIdx.z;
  A += batch * M * K;
  B += batch * K * N;
  C += batch * M * N;
  int64_t const m0 = static_cast<int64_t>(blockIdx.y) * kSimtBM;
  int64_t const n0 = static_cast<int64_t>(blockIdx.x) * kSimtBN;
  int const tid = threadIdx.x;
  int const ty = tid / 16;  // rows ty*4 .. ty*4+3 of the tile
  int const tx = tid % 16;  // cols tx*4 .. tx*4+3
  float acc[4][4] = {};
  for (int64_t k0 = 0; k0 < K; k0 += kSimtBK) {
    // 1024 elements of each tile, 4 per thread; out-of-range elements read as 0.
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      int const e = tid + i * kSimtThreads;
      int const ar = e / kSimtBK, ac = e % kSimtBK;  // A tile (BM, BK), row-major walk
      int64_t const gm = m0 + ar, gk = k0 + ac;
      As[ac][ar] = (gm < M && gk < K) ? cast<float>(A[gm * K + gk]) : 0.0f;
      // B tile (BK, BN): walked along B's contiguous mode, so the global reads coalesce
      int const br = BKMajor ? e % kSimtBK : e / kSimtBN, bc = BKMajor ? e / kSimtBK : e % kSimtBN;
      int64_t const hk = k0 + br, hn = n0 + bc;
      Bs[br][bc] = (hk < K && hn < N) ? cast<float>(B[BKMajor ? hn * K + hk : hk * N + hn]) : 0.0f;
    }
    __syncthreads();
    int const kmax = static_cast<int>(K - k0 < kSimtBK ? K - k0 : kSimtBK);
    for (int kk = 0; kk < kmax; ++kk) {
      float a[4], b[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) a[i] = As[kk][ty * 4 + i];
#pragma unroll
      for (int j = 0; j < 4; ++j) b[j] = Bs[kk][tx * 4 + j];
#pragma unroll
      for (int i = 0; i < 4; ++i) {
#pragma unroll
        for (int j = 0; j < 4; ++j) acc[i][j] = acc[i][j] + a[i] * b[j];
      }
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    int64_t const gm = m0 + ty * 4 + i;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      int64_t const gn = n0 + tx * 4 + j;
      if (gm < M && gn < N) C[gm * N + gn] = cast<T>(acc[i][j]);
    }
  }
}

template <class T, bool BKMajor>
inline cudaError_t gemm_simt(T const* A, T const* B, T* C, int64_t batch, int64_t M, int64_t N, int64_t K,
                             cudaStream_t stream) {
  dim3 grid(static_cast<unsigned>((N + kSimtBN - 1) / kSimtBN), static_cast<unsigned>((M + kSimtBM - 1) / kSimtBM),
            static_cast<unsigned>(batch));
  gemm_simt_kernel<T, BKMajor><<<grid, kSimtThreads, 0, stream>>>(A, B, C, M, N, K);
  return cudaGetLastError();
}

}  // namespace tilefoundry::atoms::detail
