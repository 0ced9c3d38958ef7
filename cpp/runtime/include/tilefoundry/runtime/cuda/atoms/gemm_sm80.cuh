// GEMM tier on tensor cores with mma.sync (sm_80+): C = A · B for 16-bit floats, f32 accumulation.
// A (M, K) compact row-major (K-major); B (K, N) row-major (N-major) or, with BKMajor, stored
// (N, K) (K-major); batch-strided; needs K and N multiples of 8 and 16-byte aligned bases (every
// 16-byte chunk inside one row). Ragged M, N, K edges are zero-filled by cp.async's source size.
//
// CTA tile (128, 128) over (M, N), K in steps of 32, 8 warps as (2, 4), each a (64, 32) warp
// tile of (4, 4) m16n8k16 atoms (SM80_16x8x16_F32BF16BF16F32_TN):
//   As[2]  (128, 32 + 8) smem, K-major, rows padded 16 B so ldmatrix rows hit distinct banks
//   Bs[2]  N-major: (32, 128 + 8) smem; ldmatrix.trans yields the K-pairs the B fragment holds
//          K-major: (128, 32 + 8) smem like As; plain ldmatrix yields them (the fragment's own order)
// Two-window software prefetch: the tile for k + 1 is in flight (cp.async) while tile k is
// multiplied; slot(k) = k % 2.
#pragma once

#include <cstdint>
#include <type_traits>

#include <tilefoundry/runtime/cuda/atoms/scalar.cuh>

namespace tilefoundry::atoms::detail {

inline constexpr int kMmaBM = 128;
inline constexpr int kMmaBN = 128;
inline constexpr int kMmaBK = 32;
inline constexpr int kMmaStages = 2;
inline constexpr int kMmaThreads = 256;
inline constexpr int kMmaPadA = kMmaBK + 8;  // As row pitch, elements
inline constexpr int kMmaPadB = kMmaBN + 8;  // Bs row pitch, elements

template <class T, bool BKMajor>
struct MmaSmem {
  T a[kMmaStages][kMmaBM][kMmaPadA];  // (stage, BM, BK) K-major
  // (stage, BN, BK) K-major, or (stage, BK, BN) N-major
  std::conditional_t<BKMajor, T[kMmaStages][kMmaBN][kMmaPadA], T[kMmaStages][kMmaBK][kMmaPadB]> b;
};

__device__ inline uint32_t smem_addr(void const* p) { return static_cast<uint32_t>(__cvta_generic_to_shared(p)); }

/// 16 bytes gmem -> smem, asynchronously; `valid` false zero-fills the destination.
__device__ inline void cp_async_16(void* dst, void const* src, bool valid) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  int const bytes = valid ? 16 : 0;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr(dst)), "l"(src), "r"(bytes));
#endif
}

__device__ inline void cp_async_commit() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.commit_group;\n" ::);
#endif
}

template <int Pending>
__device__ inline void cp_async_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_group %0;\n" ::"n"(Pending));
#endif
}

template <class T>
struct MmaName;
template <>
struct MmaName<bf16> {
  static constexpr bool bf = true;
};
template <>
struct MmaName<f16> {
  static constexpr bool bf = false;
};

/// d += a · b for one m16n8k16 atom (A row, B col, f32 accumulators).
template <class T>
__device__ inline void mma_16816(float (&d)[4], uint32_t const (&a)[4], uint32_t const (&b)[2]) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  if constexpr (MmaName<T>::bf) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  } else {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  }
#endif
}

/// A fragment (16 rows x 16 k) from K-major smem: matrices (rows 0-7 | 8-15) x (k 0-7 | 8-15).
__device__ inline void ldmatrix_x4(uint32_t (&r)[4], void const* row_addr) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(row_addr)));
#endif
}

/// B fragment (16 k x 8 n) from K-major smem (rows are n): two 8x8 matrices (k 0-7 | 8-15), each lane
/// holding the k-pairs (2t, 2t+1) of row g.
__device__ inline void ldmatrix_x2(uint32_t (&r)[2], void const* row_addr) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0,%1}, [%2];\n"
               : "=r"(r[0]), "=r"(r[1])
               : "r"(smem_addr(row_addr)));
#endif
}

/// B fragment (16 k x 8 n) from N-major smem: two 8x8 matrices (k 0-7 | 8-15), transposed so each
/// lane holds the k-pairs (2t, 2t+1) of column g.
__device__ inline void ldmatrix_x2_trans(uint32_t (&r)[2], void const* row_addr) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0,%1}, [%2];\n"
               : "=r"(r[0]), "=r"(r[1])
               : "r"(smem_addr(row_addr)));
#endif
}

template <class T, bool BKMajor>
__device__ inline void mma_load_tiles(MmaSmem<T, BKMajor>& s, int stage, T const* __restrict__ A,
                                      T const* __restrict__ B, int64_t M, int64_t N, int64_t K, int64_t m0, int64_t n0,
                                      int64_t k0) {
  int const tid = threadIdx.x;
  // A tile (128, 32): 512 chunks of 8 elements, 4 per row.
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    int const c = tid + i * kMmaThreads;
    int const row = c / 4, col = (c % 4) * 8;
    int64_t const gm = m0 + row, gk = k0 + col;
    bool const ok = gm < M && gk < K;
    cp_async_16(&s.a[stage][row][col], ok ? A + gm * K + gk : A, ok);
  }
  if constexpr (BKMajor) {
    // B tile (128 n, 32 k) of B stored (N, K): 512 chunks, 4 per row, as A's.
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      int const c = tid + i * kMmaThreads;
      int const row = c / 4, col = (c % 4) * 8;
      int64_t const gn = n0 + row, gk = k0 + col;
      bool const ok = gn < N && gk < K;
      cp_async_16(&s.b[stage][row][col], ok ? B + gn * K + gk : B, ok);
    }
  } else {
    // B tile (32, 128): 512 chunks, 16 per row.
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      int const c = tid + i * kMmaThreads;
      int const row = c / 16, col = (c % 16) * 8;
      int64_t const gk = k0 + row, gn = n0 + col;
      bool const ok = gk < K && gn < N;
      cp_async_16(&s.b[stage][row][col], ok ? B + gk * N + gn : B, ok);
    }
  }
}

template <class T, bool BKMajor>
__global__ void __launch_bounds__(kMmaThreads)
gemm_mma_kernel(T const* __restrict__ A, T const* __restrict__ B, T* __restrict__ C, int64_t M, int64_t N,
                int64_t K) {
  __shared__ alignas(128) MmaSmem<T, BKMajor> s;
  int64_t const batch = blockIdx.z;
  A += batch * M * K;
  B += batch * K * N;
  C += batch * M * N;
  int64_t const m0 = static_cast<int64_t>(blockIdx.y) * kMmaBM;
  int64_t const n0 = static_cast<int64_t>(blockIdx.x) * kMmaBN;
  int const lane = threadIdx.x % 32;
  int const warp = threadIdx.x / 32;
  int const wm = (warp / 4) * 64;  // warp tile origin in the CTA tile: (2, 4) warps of (64, 32)
  int const wn = (warp % 4) * 32;
  float acc[4][4][4] = {};  // (m16 atoms, n8 atoms, fragment)
  int64_t const tiles = (K + kMmaBK - 1) / kMmaBK;
  if (tiles > 0) mma_load_tiles(s, 0, A, B, M, N, K, m0, n0, 0);
  cp_async_commit();
  for (int64_t t = 0; t < tiles; ++t) {
    int const stage = static_cast<int>(t % kMmaStages);
    if (t + 1 < tiles) mma_load_tiles(s, (stage + 1) % kMmaStages, A, B, M, N, K, m0, n0, (t + 1) * kMmaBK);
    cp_async_commit();
    cp_async_wait<1>();  // tile t has landed; tile t + 1 may still be in flight
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < kMmaBK; kk += 16) {
      uint32_t a[4][4];
      uint32_t b[4][2];
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        // lanes 0-15 address rows 0-15 at k, lanes 16-31 the same rows at k + 8
        ldmatrix_x4(a[i], &s.a[stage][wm + i * 16 + lane % 16][kk + (lane / 16) * 8]);
      }
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        if constexpr (BKMajor) {
          // lanes 0-7 address the 8 n rows of atom j at k, lanes 8-15 the same rows at k + 8
          ldmatrix_x2(b[j], &s.b[stage][wn + j * 8 + lane % 8][kk + (lane / 8) % 2 * 8]);
        } else {
          // lanes 0-15 address k rows kk .. kk+15 of the 8 columns of atom j
          ldmatrix_x2_trans(b[j], &s.b[stage][kk + lane % 16][wn + j * 8]);
        }
      }
#pragma unroll
      for (int i = 0; i < 4; ++i) {
#pragma unroll
        for (int j = 0; j < 4; ++j) mma_16816<T>(acc[i][j], a[i], b[j]);
      }
    }
    __syncthreads();  // the slot is refilled by the next iteration's prefetch
  }
  cp_async_wait<0>();
  int const g = lane / 4, tg = lane % 4;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      int64_t const col = n0 + wn + j * 8 + tg * 2;
#pragma unroll
      for (int h = 0; h < 2; ++h) {  // fragment rows g and g + 8
        int64_t const row = m0 + wm + i * 16 + g + h * 8;
        if (row < M && col < N) {  // N is even: the pair (col, col + 1) is in range together
          C[row * N + col] = cast<T>(acc[i][j][2 * h]);
          C[row * N + col + 1] = cast<T>(acc[i][j][2 * h + 1]);
        }
      }
    }
  }
}

template <class T, bool BKMajor>
inline cudaError_t gemm_mma(T const* A, T const* B, T* C, int64_t batch, int64_t M, int64_t N, int64_t K,
                            cudaStream_t stream) {
  dim3 grid(static_cast<unsigned>((N + kMmaBN - 1) / kMmaBN), static_cast<unsigned>((M + kMmaBM - 1) / kMmaBM),
            static_cast<unsigned>(batch));
  gemm_mma_kernel<T, BKMajor><<<grid, kMmaThreads, 0, stream>>>(A, B, C, M, N, K);
  return cudaGetLastError();
}

}  // namespace tilefoundry::atoms::detail
