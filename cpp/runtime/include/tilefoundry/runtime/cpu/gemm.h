// The cpu GEMM atoms `cpu_avx512_gemm_6x64_{f32,bf16}_rrr`: C = A . B over compact row-major
// matrices, realized as packed, register-blocked AVX-512 (BLIS-style loops around a 6x64 f32
// micro-kernel). bf16 operands become f32 as they are packed (or loaded, when B is read in
// place); the sum is f32 and each bf16 result is rounded once, as torch computes a bf16 matmul.
//
//   gemm(a, b, c, batch, m, n, k);   // C[b] (m,n) = A[b] (m,k) . B[b] (k,n); float or bf16
//
// Loops, outermost first: batch; row chunks (the packed A copy stays within 16 MiB); A packed
// into 6-row slivers by the worker team (one barrier). With 48 rows or more, rectangles of C
// (about 4 per worker, whole 64-column panels, split by columns before rows) go dynamically to
// free workers; each runs, per block of KC = 256: pack its B panels [kc][64], then for 96-row
// blocks, for panels (one panel stays hot while 16 slivers sweep it), for slivers: the 6x64
// micro-kernel, 24 zmm accumulators, one broadcast of A and four B vectors per k step. With fewer rows (decode, GEMV) B is read in place:
// 256-column blocks go dynamically to free workers, K blocks are 16 rows, and the micro-kernel
// prefetches the rows of the next block.
//
// NOTE: the K sum runs in blocks of KC: within a block in order, block partials then added to C
// in block order. That is a reassociation of the checked loop's single ordered sum; selecting the
// atom is the numerical policy any BLAS call has (seed 003 lets a proved region become one atom).
#pragma once

// The atoms need AVX-512 F, BW (16-bit masked loads) and VL: the catalog lists them only then.
#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__)

#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <type_traits>

#if defined(_OPENMP)
#include <omp.h>
#endif

#include <tilefoundry/runtime/cpu/host_entry.h>

namespace tilefoundry::host {
namespace detail {

constexpr int kGemmMR = 6;         // rows of a micro-tile: 6 x 4 accumulators + 4 B vectors + 1 broadcast
constexpr int kGemmNR = 64;        // columns of a micro-tile: 4 zmm of 16 f32
constexpr int64_t kGemmKC = 256;   // K block: a 64-column B panel of KC rows is 64 KiB, streamed via L1/L2
// K block when B is read in place (few rows): each tile then reads KC rows of 256 bytes, 16 KiB
// apart; short blocks keep those rows few enough for the hardware prefetchers to follow.
constexpr int64_t kGemmKCInPlace = 16;
constexpr int64_t kGemmNCInPlace = 256;  // columns of one dynamically scheduled in-place task
constexpr int64_t kGemmMC = 96;    // M block: 16 slivers sweep one B panel while it is hot
constexpr int64_t kGemmNC = 1024;  // N block: the B columns a worker packs at once (1 MiB at KC)
// B is packed only when enough A slivers reuse each panel; below this many rows it is read in place.
constexpr int64_t kGemmPackBRows = 48;

// The 6x64 micro-kernel: acc (6, 64) = A sliver (kc, 6) . B panel (kc, 64); then
// C (rows, cols) = or += acc. `a` is packed [kc][6]; `b` has row stride `ldb` and each of its four
// 16-column vectors loads under its mask (zero beyond `cols`), so a ragged panel is read in place.
// NOTE: the 24 accumulators are named variables, not an array: g++ keeps an array of 24 zmm in
// memory and reloads it every k step.
#define TILEFOUNDRY_GEMM_ROW(i) \
  __m512 c##i##0 = _mm512_setzero_ps(), c##i##1 = _mm512_setzero_ps(), c##i##2 = _mm512_setzero_ps(), \
         c##i##3 = _mm512_setzero_ps();
#define TILEFOUNDRY_GEMM_FMA(i)                       \
  {                                                  \
    const __m512 ai = _mm512_set1_ps(ap[i]);         \
    c##i##0 = _mm512_fmadd_ps(ai, b0, c##i##0);      \
    c##i##1 = _mm512_fmadd_ps(ai, b1, c##i##1);      \
    c##i##2 = _mm512_fmadd_ps(ai, b2, c##i##2);      \
    c##i##3 = _mm512_fmadd_ps(ai, b3, c##i##3);      \
  }
#define TILEFOUNDRY_GEMM_OUT(i)                                       \
  if (i < rows) {                                                    \
    float* ci = c + i * ldc;                                         \
    const __m512 r[4] = {c##i##0, c##i##1, c##i##2, c##i##3};        \
    for (int v = 0; v < 4; ++v) {                                    \
      __m512 o = r[v];                                               \
      if (accumulate) o = _mm512_add_ps(o, _mm512_maskz_loadu_ps(m[v], ci + 16 * v)); \
      _mm512_mask_storeu_ps(ci + 16 * v, m[v], o);                   \
    }                                                                \
  }

// 16 columns of B as f32: a bf16 row widens by a 16-bit shift (exact).
inline __m512 gemm_load_b(__mmask16 m, const float* p) { return _mm512_maskz_loadu_ps(m, p); }
inline __m512 gemm_load_b(__mmask16 m, const bf16* p) {
  const __m256i h = _mm256_maskz_loadu_epi16(m, p);
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

template <class TB>
inline void gemm_f32_tile(int64_t kc, const float* __restrict__ a, const TB* __restrict__ b, int64_t ldb,
                          float* __restrict__ c, int64_t ldc, int rows, int64_t cols, bool accumulate) {
  __mmask16 m[4];
  for (int v = 0; v < 4; ++v) {
    const int64_t left = std::clamp<int64_t>(cols - 16 * v, 0, 16);
    m[v] = static_cast<__mmask16>(left == 16 ? 0xffffu : (1u << left) - 1u);
  }
  TILEFOUNDRY_GEMM_ROW(0) TILEFOUNDRY_GEMM_ROW(1) TILEFOUNDRY_GEMM_ROW(2)
  TILEFOUNDRY_GEMM_ROW(3) TILEFOUNDRY_GEMM_ROW(4) TILEFOUNDRY_GEMM_ROW(5)
  for (int64_t p = 0; p < kc; ++p) {
    const TB* bp = b + p * ldb;
    if (ldb != kGemmNR) {  // B read in place: fetch the same columns kc rows ahead (next K block)
      const char* ahead = reinterpret_cast<const char*>(bp + kc * ldb);
      for (int line = 0; line < static_cast<int>(sizeof(TB)) * kGemmNR / 64; ++line) {
        _mm_prefetch(ahead + 64 * line, _MM_HINT_T0);
      }
    }
    const __m512 b0 = gemm_load_b(m[0], bp), b1 = gemm_load_b(m[1], bp + 16);
    const __m512 b2 = gemm_load_b(m[2], bp + 32), b3 = gemm_load_b(m[3], bp + 48);
    const float* ap = a + p * kGemmMR;
    TILEFOUNDRY_GEMM_FMA(0) TILEFOUNDRY_GEMM_FMA(1) TILEFOUNDRY_GEMM_FMA(2)
    TILEFOUNDRY_GEMM_FMA(3) TILEFOUNDRY_GEMM_FMA(4) TILEFOUNDRY_GEMM_FMA(5)
  }
  TILEFOUNDRY_GEMM_OUT(0) TILEFOUNDRY_GEMM_OUT(1) TILEFOUNDRY_GEMM_OUT(2)
  TILEFOUNDRY_GEMM_OUT(3) TILEFOUNDRY_GEMM_OUT(4) TILEFOUNDRY_GEMM_OUT(5)
}
#undef TILEFOUNDRY_GEMM_ROW
#undef TILEFOUNDRY_GEMM_FMA
#undef TILEFOUNDRY_GEMM_OUT

// A (rows, kc) at row stride lda -> slivers [rows / MR][kc][MR], the last sliver zero-padded.
inline float gemm_f32_of(float v) { return v; }
inline float gemm_f32_of(bf16 v) { return to_f32(v); }

template <class TA>
inline void gemm_pack_a(const TA* __restrict__ a, int64_t lda, int64_t rows, int64_t kc,
                        float* __restrict__ out) {
  for (int64_t s = 0; s < rows; s += kGemmMR) {
    const int64_t mr = std::min<int64_t>(kGemmMR, rows - s);
    float* o = out + s * kc;
    for (int64_t p = 0; p < kc; ++p) {
      for (int64_t i = 0; i < mr; ++i) o[p * kGemmMR + i] = gemm_f32_of(a[(s + i) * lda + p]);
      for (int64_t i = mr; i < kGemmMR; ++i) o[p * kGemmMR + i] = 0.0f;
    }
  }
}

// One 64-column panel of B (kc, cols <= 64) at row stride ldb -> [kc][64], zero-padded.
template <class TB>
inline void gemm_pack_b_panel(const TB* __restrict__ b, int64_t ldb, int64_t kc, int64_t cols,
                              float* __restrict__ out) {
  for (int64_t p = 0; p < kc; ++p) {
    if constexpr (std::is_same_v<TB, float>) {
      std::memcpy(out + p * kGemmNR, b + p * ldb, sizeof(float) * cols);
    } else {
      for (int64_t j = 0; j < cols; ++j) out[p * kGemmNR + j] = gemm_f32_of(b[p * ldb + j]);
    }
    std::memset(out + p * kGemmNR + cols, 0, sizeof(float) * (kGemmNR - cols));
  }
}

struct AlignedFloats {
  explicit AlignedFloats(int64_t n)
      : ptr(static_cast<float*>(std::aligned_alloc(64, ((std::max<int64_t>(n, 1) * 4 + 63) / 64) * 64))) {}
  ~AlignedFloats() { std::free(ptr); }
  AlignedFloats(const AlignedFloats&) = delete;
  AlignedFloats& operator=(const AlignedFloats&) = delete;
  float* ptr;
};

// A rectangle of C: rows [r0, r1) x columns [c0, c1).
struct GemmShare {
  int64_t r0, r1, c0, c1;
};

// Task `i` of a grid of `cb` column blocks (whole 64-column panels) by `rg` row groups (whole
// slivers), column-major so consecutive tasks share rows of A.
inline GemmShare gemm_task(int64_t i, int64_t cb, int64_t rg, int64_t m, int64_t n) {
  const int64_t panels = (n + kGemmNR - 1) / kGemmNR, slivers = (m + kGemmMR - 1) / kGemmMR;
  const int64_t cj = i / rg, ri = i % rg;
  return {std::min(m, slivers * ri / rg * kGemmMR), std::min(m, slivers * (ri + 1) / rg * kGemmMR),
          std::min(n, panels * cj / cb * kGemmNR), std::min(n, panels * (cj + 1) / cb * kGemmNR)};
}

// Rows [r0, r1) x columns [c0, c1) of C (m,n) = A . B, reading A packed by K block:
// apack + pc * padded_m + (row) * kc.  `bpack` holds (kc, kGemmNC) for this worker.
template <class TB>
inline void gemm_f32_share(const TB* b, float* c, int64_t m_pad, int64_t n, int64_t k, int64_t kb,
                           const float* apack, const GemmShare& sh, float* bpack, bool pack_b) {
  for (int64_t nc0 = sh.c0; nc0 < sh.c1; nc0 += kGemmNC) {
    const int64_t nc1 = std::min(sh.c1, nc0 + kGemmNC);
    for (int64_t pc = 0; pc < k; pc += kb) {
      const int64_t kc = std::min(kb, k - pc);
      if (pack_b) {
        for (int64_t j0 = nc0; j0 < nc1; j0 += kGemmNR) {
          gemm_pack_b_panel(b + pc * n + j0, n, kc, std::min<int64_t>(kGemmNR, nc1 - j0),
                            bpack + (j0 - nc0) * kc);
        }
      }
      const float* ablock = apack + pc * m_pad;
      for (int64_t i1 = sh.r0; i1 < sh.r1; i1 += kGemmMC) {
        const int64_t i_end = std::min(sh.r1, i1 + kGemmMC);
        for (int64_t j0 = nc0; j0 < nc1; j0 += kGemmNR) {
          const int64_t cols = std::min<int64_t>(kGemmNR, nc1 - j0);
          for (int64_t i0 = i1; i0 < i_end; i0 += kGemmMR) {
            const int rows = static_cast<int>(std::min<int64_t>(kGemmMR, i_end - i0));
            float* ct = c + i0 * n + j0;
            if (pack_b) {
              gemm_f32_tile(kc, ablock + i0 * kc, bpack + (j0 - nc0) * kc, kGemmNR, ct, n, rows, cols, pc > 0);
            } else {
              gemm_f32_tile(kc, ablock + i0 * kc, b + pc * n + j0, n, ct, n, rows, cols, pc > 0);
            }
          }
        }
      }
    }
  }
}

// One GEMM (no batch) of at most the chunk's rows: A packed once (every K block) by the team, one
// barrier; then rectangles of C are taken dynamically, each packing its own B panels (or, with
// few rows, reading B in place in 256-column blocks).
template <class TA, class TB>
inline void gemm_f32_one(const TA* a, const TB* b, float* c, int64_t m, int64_t n, int64_t k,
                         float* apack, bool parallel) {
  const int64_t m_pad = (m + kGemmMR - 1) / kGemmMR * kGemmMR;
  const int64_t slivers = m_pad / kGemmMR;
  const bool pack_b = m >= kGemmPackBRows;
  const int64_t kb = pack_b ? kGemmKC : kGemmKCInPlace;
  const int64_t kblocks = (k + kb - 1) / kb;
#pragma omp parallel if (parallel)
  {
#pragma omp for collapse(2) schedule(static)
    for (int64_t pb = 0; pb < kblocks; ++pb) {
      for (int64_t s = 0; s < slivers; ++s) {
        const int64_t pc = pb * kb, kc = std::min(kb, k - pc);
        gemm_pack_a(a + s * kGemmMR * k + pc, k, std::min<int64_t>(kGemmMR, m - s * kGemmMR), kc,
                    apack + pc * m_pad + s * kGemmMR * kc);
      }
    }
    if (pack_b) {
      // About 4 tasks per worker, taken dynamically: a worker whose core is busy leaves its
      // share to the others. Columns split first, so each task packs B panels no other task
      // needs; rows split only when there are too few panels.
      int64_t workers = 1;
#if defined(_OPENMP)
      workers = omp_get_num_threads();
#endif
      const int64_t panels = (n + kGemmNR - 1) / kGemmNR;
      const int64_t cb = std::min(panels, 4 * workers);
      const int64_t rg = std::min(slivers, (4 * workers + cb - 1) / cb);
      AlignedFloats bpack(kGemmKC * kGemmNC);
#pragma omp for schedule(dynamic)
      for (int64_t i = 0; i < cb * rg; ++i) {
        gemm_f32_share(b, c, m_pad, n, k, kb, apack, gemm_task(i, cb, rg, m, n), bpack.ptr, true);
      }
    } else {
      // B read in place: memory-bound, so column blocks go dynamically to whichever worker is free.
      const int64_t blocks = (n + kGemmNCInPlace - 1) / kGemmNCInPlace;
#pragma omp for schedule(dynamic)
      for (int64_t j = 0; j < blocks; ++j) {
        const GemmShare sh{0, m, j * kGemmNCInPlace, std::min(n, (j + 1) * kGemmNCInPlace)};
        gemm_f32_share(b, c, m_pad, n, k, kb, apack, sh, nullptr, false);
      }
    }
  }
}


// C[b] (m,n) = A[b] (m,k) . B[b] (k,n) for b < batch into f32 C; A and B float or bf16.
template <class TA, class TB>
inline void gemm_run(const TA* a, const TB* b, float* c, int64_t batch, int64_t m, int64_t n, int64_t k) {
  if (batch <= 0 || m <= 0 || n <= 0) return;
  if (k <= 0) {
    std::memset(c, 0, sizeof(float) * batch * m * n);
    return;
  }
  const int64_t chunk = std::max<int64_t>(kGemmMR, (int64_t(1) << 22) / k / kGemmMR * kGemmMR);
  const int64_t rows = std::min(m, chunk);
  AlignedFloats apack((rows + kGemmMR) * k);
  const bool parallel = m * n * k >= (int64_t(1) << 18);
  for (int64_t i = 0; i < batch; ++i) {
    for (int64_t r = 0; r < m; r += rows) {
      const int64_t mr = std::min(rows, m - r);
      gemm_f32_one(a + (i * m + r) * k, b + i * k * n, c + (i * m + r) * n, mr, n, k, apack.ptr, parallel);
    }
  }
}

}  // namespace detail

// C[b] (m,n) = A[b] (m,k) . B[b] (k,n) for b < batch; compact row-major, f32 accumulation.
// K == 0 writes zeros; an empty M or N does nothing. Work below ~2^18 multiply-adds stays on
// the calling thread; rows go in chunks so the packed copy of A stays within 16 MiB.
inline void gemm(const float* a, const float* b, float* c, int64_t batch, int64_t m, int64_t n, int64_t k) {
  detail::gemm_run(a, b, c, batch, m, n, k);
}

// bf16 operands: the f32 sums land in a scratch C, then each result is rounded to bf16 once.
inline void gemm(const bf16* a, const bf16* b, bf16* c, int64_t batch, int64_t m, int64_t n, int64_t k) {
  if (batch <= 0 || m <= 0 || n <= 0) return;
  detail::AlignedFloats sums(m * n);
  for (int64_t i = 0; i < batch; ++i) {
    detail::gemm_run(a + i * m * k, b + i * k * n, sums.ptr, 1, m, n, k);
    bf16* ci = c + i * m * n;
#pragma omp parallel for schedule(static) if (m * n >= (int64_t(1) << 16))
    for (int64_t e = 0; e < m * n; ++e) ci[e] = to_bf16(sums.ptr[e]);
  }
}

}  // namespace tilefoundry::host

#endif  // __AVX512F__ && __AVX512BW__ && __AVX512VL__
