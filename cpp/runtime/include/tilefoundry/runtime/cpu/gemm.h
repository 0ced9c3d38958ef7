// The cpu GEMM atoms `cpu_avx512_gemm_6x64_{f32,bf16}_rrr`: C = A . B over compact row-major
// matrices, realized as packed, register-blocked AVX-512 (BLIS-style loops around a 6x64 f32
// micro-kernel). bf16 operands are packed as k-pairs for vdpbf16ps where the host has
// AVX512-BF16 (and 48 rows or more), else widened to f32 as they are packed or loaded; the sum is
// f32 and each bf16 result is rounded once, as torch computes a bf16 matmul.
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
#if defined(__AVX512BF16__)
// The same 6x64 tile on bf16 pairs: `a` packed [kcp][6] and `b` [kcp][64], each 32-bit word two
// bf16 of consecutive k; one vdpbf16ps adds both products per lane (the instruction treats
// subnormal inputs as zero and rounds to nearest even, as torch's AVX512-BF16 path does).
#define TILEFOUNDRY_GEMM_DOT(i)                                  \
  {                                                             \
    const __m512bh ai = (__m512bh)_mm512_set1_epi32(ap[i]);     \
    c##i##0 = _mm512_dpbf16_ps(c##i##0, ai, b0);                \
    c##i##1 = _mm512_dpbf16_ps(c##i##1, ai, b1);                \
    c##i##2 = _mm512_dpbf16_ps(c##i##2, ai, b2);                \
    c##i##3 = _mm512_dpbf16_ps(c##i##3, ai, b3);                \
  }
inline void gemm_bf16_dot_tile(int64_t kcp, const uint32_t* __restrict__ a, const uint32_t* __restrict__ b,
                               float* __restrict__ c, int64_t ldc, int rows, int64_t cols, bool accumulate) {
  __mmask16 m[4];
  for (int v = 0; v < 4; ++v) {
    const int64_t left = std::clamp<int64_t>(cols - 16 * v, 0, 16);
    m[v] = static_cast<__mmask16>(left == 16 ? 0xffffu : (1u << left) - 1u);
  }
  TILEFOUNDRY_GEMM_ROW(0) TILEFOUNDRY_GEMM_ROW(1) TILEFOUNDRY_GEMM_ROW(2)
  TILEFOUNDRY_GEMM_ROW(3) TILEFOUNDRY_GEMM_ROW(4) TILEFOUNDRY_GEMM_ROW(5)
  for (int64_t p = 0; p < kcp; ++p) {
    const uint32_t* bp = b + p * kGemmNR;
    const __m512bh b0 = (__m512bh)_mm512_loadu_si512(bp), b1 = (__m512bh)_mm512_loadu_si512(bp + 16);
    const __m512bh b2 = (__m512bh)_mm512_loadu_si512(bp + 32), b3 = (__m512bh)_mm512_loadu_si512(bp + 48);
    const uint32_t* ap = a + p * kGemmMR;
    TILEFOUNDRY_GEMM_DOT(0) TILEFOUNDRY_GEMM_DOT(1) TILEFOUNDRY_GEMM_DOT(2)
    TILEFOUNDRY_GEMM_DOT(3) TILEFOUNDRY_GEMM_DOT(4) TILEFOUNDRY_GEMM_DOT(5)
  }
  TILEFOUNDRY_GEMM_OUT(0) TILEFOUNDRY_GEMM_OUT(1) TILEFOUNDRY_GEMM_OUT(2)
  TILEFOUNDRY_GEMM_OUT(3) TILEFOUNDRY_GEMM_OUT(4) TILEFOUNDRY_GEMM_OUT(5)
}
#undef TILEFOUNDRY_GEMM_DOT
#endif  // __AVX512BF16__
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

#if defined(__AVX512BF16__)
inline uint32_t gemm_pair(const bf16* p, bool both) {
  return static_cast<uint32_t>(p[0].bits) | (both ? static_cast<uint32_t>(p[1].bits) << 16 : 0u);
}

// A (rows, kc) bf16 -> slivers [rows / MR][ceil(kc / 2)][MR] of k-pairs, zero-padded.
inline void gemm_pack_a_pairs(const bf16* __restrict__ a, int64_t lda, int64_t rows, int64_t kc,
                              uint32_t* __restrict__ out) {
  const int64_t kcp = (kc + 1) / 2;
  for (int64_t s = 0; s < rows; s += kGemmMR) {
    const int64_t mr = std::min<int64_t>(kGemmMR, rows - s);
    uint32_t* o = out + s * kcp;
    for (int64_t p = 0; p < kcp; ++p) {
      for (int64_t i = 0; i < mr; ++i) o[p * kGemmMR + i] = gemm_pair(a + (s + i) * lda + 2 * p, 2 * p + 1 < kc);
      for (int64_t i = mr; i < kGemmMR; ++i) o[p * kGemmMR + i] = 0u;
    }
  }
}

// One 64-column panel of B (kc, cols) bf16 -> [ceil(kc / 2)][64] k-pairs, zero-padded.
inline void gemm_pack_b_pairs(const bf16* __restrict__ b, int64_t ldb, int64_t kc, int64_t cols,
                              uint32_t* __restrict__ out) {
  for (int64_t p = 0; p < (kc + 1) / 2; ++p) {
    const bool both = 2 * p + 1 < kc;
    for (int64_t j = 0; j < kGemmNR; ++j) {
      const bf16 lo = j < cols ? b[2 * p * ldb + j] : bf16{0};
      const bf16 hi = j < cols && both ? b[(2 * p + 1) * ldb + j] : bf16{0};
      out[p * kGemmNR + j] = static_cast<uint32_t>(lo.bits) | (static_cast<uint32_t>(hi.bits) << 16);
    }
  }
}
#endif  // __AVX512BF16__

template <class T>
struct Aligned {
  explicit Aligned(int64_t n)
      : ptr(static_cast<T*>(std::aligned_alloc(64, ((std::max<int64_t>(n, 1) * sizeof(T) + 63) / 64) * 64))) {}
  ~Aligned() { std::free(ptr); }
  Aligned(const Aligned&) = delete;
  Aligned& operator=(const Aligned&) = delete;
  T* ptr;
};

// How the operands are packed for one micro-kernel: widened to f32 (any A and B), or kept as
// bf16 k-pairs for vdpbf16ps. `kStep` k values share one packed element.
template <class TA, class TB>
struct GemmF32Path {
  using Packed = float;
  static constexpr int64_t kStep = 1;
  static void pack_a(const TA* a, int64_t lda, int64_t rows, int64_t kc, float* out) {
    gemm_pack_a(a, lda, rows, kc, out);
  }
  static void pack_b(const TB* b, int64_t ldb, int64_t kc, int64_t cols, float* out) {
    gemm_pack_b_panel(b, ldb, kc, cols, out);
  }
  static void tile(int64_t kcp, const float* a, const float* b, float* c, int64_t ldc, int rows, int64_t cols,
                   bool accumulate) {
    gemm_f32_tile(kcp, a, b, kGemmNR, c, ldc, rows, cols, accumulate);
  }
};

#if defined(__AVX512BF16__)
struct GemmBf16DotPath {
  using Packed = uint32_t;
  static constexpr int64_t kStep = 2;
  static void pack_a(const bf16* a, int64_t lda, int64_t rows, int64_t kc, uint32_t* out) {
    gemm_pack_a_pairs(a, lda, rows, kc, out);
  }
  static void pack_b(const bf16* b, int64_t ldb, int64_t kc, int64_t cols, uint32_t* out) {
    gemm_pack_b_pairs(b, ldb, kc, cols, out);
  }
  static void tile(int64_t kcp, const uint32_t* a, const uint32_t* b, float* c, int64_t ldc, int rows,
                   int64_t cols, bool accumulate) {
    gemm_bf16_dot_tile(kcp, a, b, c, ldc, rows, cols, accumulate);
  }
};
#endif  // __AVX512BF16__

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
// apack + (pc / kStep) * m_pad + (row) * kcp. `bpack` holds (kcp, kGemmNC) for this worker; without
// it (f32 path only) B is read in place. With `round_to`, each finished block of f32 sums is also
// rounded into that bf16 C (same offsets), inside the task: no second pass over the team.
template <class Path, class TB>
inline void gemm_f32_share(const TB* b, float* c, int64_t m_pad, int64_t n, int64_t k, int64_t kb,
                           const typename Path::Packed* apack, const GemmShare& sh,
                           typename Path::Packed* bpack, bf16* round_to) {
  for (int64_t nc0 = sh.c0; nc0 < sh.c1; nc0 += kGemmNC) {
    const int64_t nc1 = std::min(sh.c1, nc0 + kGemmNC);
    for (int64_t pc = 0; pc < k; pc += kb) {
      const int64_t kc = std::min(kb, k - pc), kcp = (kc + Path::kStep - 1) / Path::kStep;
      if (bpack != nullptr) {
        for (int64_t j0 = nc0; j0 < nc1; j0 += kGemmNR) {
          Path::pack_b(b + pc * n + j0, n, kc, std::min<int64_t>(kGemmNR, nc1 - j0), bpack + (j0 - nc0) * kcp);
        }
      }
      const typename Path::Packed* ablock = apack + pc / Path::kStep * m_pad;
      for (int64_t i1 = sh.r0; i1 < sh.r1; i1 += kGemmMC) {
        const int64_t i_end = std::min(sh.r1, i1 + kGemmMC);
        for (int64_t j0 = nc0; j0 < nc1; j0 += kGemmNR) {
          const int64_t cols = std::min<int64_t>(kGemmNR, nc1 - j0);
          for (int64_t i0 = i1; i0 < i_end; i0 += kGemmMR) {
            const int rows = static_cast<int>(std::min<int64_t>(kGemmMR, i_end - i0));
            float* ct = c + i0 * n + j0;
            if (bpack != nullptr) {
              Path::tile(kcp, ablock + i0 * kcp, bpack + (j0 - nc0) * kcp, ct, n, rows, cols, pc > 0);
            } else if constexpr (Path::kStep == 1) {
              gemm_f32_tile(kc, ablock + i0 * kc, b + pc * n + j0, n, ct, n, rows, cols, pc > 0);
            }
          }
        }
      }
    }
    if (round_to != nullptr) {
      for (int64_t i = sh.r0; i < sh.r1; ++i) {
        for (int64_t j = nc0; j < nc1; ++j) round_to[i * n + j] = to_bf16(c[i * n + j]);
      }
    }
  }
}

// One GEMM (no batch) of at most the chunk's rows: A packed once (every K block) by the team, one
// barrier; then rectangles of C are taken dynamically, each packing its own B panels (or, with
// few rows, reading B in place in 256-column blocks).
template <class Path, class TA, class TB>
inline void gemm_f32_one(const TA* a, const TB* b, float* c, bf16* round_to, int64_t m, int64_t n, int64_t k,
                         typename Path::Packed* apack, bool parallel) {
  using Packed = typename Path::Packed;
  const int64_t m_pad = (m + kGemmMR - 1) / kGemmMR * kGemmMR;
  const int64_t slivers = m_pad / kGemmMR;
  const bool pack_b = Path::kStep > 1 || m >= kGemmPackBRows;
  const int64_t kb = pack_b ? kGemmKC : kGemmKCInPlace;
  const int64_t kblocks = (k + kb - 1) / kb;
#pragma omp parallel if (parallel)
  {
#pragma omp for collapse(2) schedule(static)
    for (int64_t pb = 0; pb < kblocks; ++pb) {
      for (int64_t s = 0; s < slivers; ++s) {
        const int64_t pc = pb * kb, kc = std::min(kb, k - pc), kcp = (kc + Path::kStep - 1) / Path::kStep;
        Path::pack_a(a + s * kGemmMR * k + pc, k, std::min<int64_t>(kGemmMR, m - s * kGemmMR), kc,
                     apack + pc / Path::kStep * m_pad + s * kGemmMR * kcp);
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
      Aligned<Packed> bpack(kGemmKC * kGemmNC);
#pragma omp for schedule(dynamic)
      for (int64_t i = 0; i < cb * rg; ++i) {
        gemm_f32_share<Path>(b, c, m_pad, n, k, kb, apack, gemm_task(i, cb, rg, m, n), bpack.ptr, round_to);
      }
    } else {
      // B read in place: memory-bound, so column blocks go dynamically to whichever worker is free.
      const int64_t blocks = (n + kGemmNCInPlace - 1) / kGemmNCInPlace;
#pragma omp for schedule(dynamic)
      for (int64_t j = 0; j < blocks; ++j) {
        const GemmShare sh{0, m, j * kGemmNCInPlace, std::min(n, (j + 1) * kGemmNCInPlace)};
        gemm_f32_share<Path>(b, c, m_pad, n, k, kb, apack, sh, static_cast<Packed*>(nullptr), round_to);
      }
    }
  }
}


// C[b] (m,n) = A[b] (m,k) . B[b] (k,n) for b < batch into f32 C (and rounded into `round_to`
// when given), the operands packed by `Path`. Needs k >= 1.
template <class Path, class TA, class TB>
inline void gemm_run(const TA* a, const TB* b, float* c, bf16* round_to, int64_t batch, int64_t m, int64_t n,
                     int64_t k) {
  const int64_t chunk = std::max<int64_t>(kGemmMR, (int64_t(1) << 22) / k / kGemmMR * kGemmMR);
  const int64_t rows = std::min(m, chunk);
  Aligned<typename Path::Packed> apack((rows + kGemmMR) * (k + Path::kStep));
  const bool parallel = m * n * k >= (int64_t(1) << 18);
  for (int64_t i = 0; i < batch; ++i) {
    for (int64_t r = 0; r < m; r += rows) {
      const int64_t mr = std::min(rows, m - r);
      bf16* rounded = round_to == nullptr ? nullptr : round_to + (i * m + r) * n;
      gemm_f32_one<Path>(a + (i * m + r) * k, b + i * k * n, c + (i * m + r) * n, rounded, mr, n, k, apack.ptr,
                         parallel);
    }
  }
}

}  // namespace detail

// C[b] (m,n) = A[b] (m,k) . B[b] (k,n) for b < batch; compact row-major, f32 accumulation.
// K == 0 writes zeros; an empty M or N does nothing. Work below ~2^18 multiply-adds stays on
// the calling thread; rows go in chunks so the packed copy of A stays within 16 MiB.
inline void gemm(const float* a, const float* b, float* c, int64_t batch, int64_t m, int64_t n, int64_t k) {
  if (batch <= 0 || m <= 0 || n <= 0) return;
  if (k <= 0) {
    std::memset(c, 0, sizeof(float) * batch * m * n);
    return;
  }
  detail::gemm_run<detail::GemmF32Path<float, float>>(a, b, c, nullptr, batch, m, n, k);
}

// bf16 operands: the f32 sums land in a scratch C, and each finished block is rounded to bf16
// once. With AVX512-BF16 and enough rows to pack B, pairs of products go through vdpbf16ps;
// otherwise the operands are widened to f32 (B read in place below 48 rows).
inline void gemm(const bf16* a, const bf16* b, bf16* c, int64_t batch, int64_t m, int64_t n, int64_t k) {
  if (batch <= 0 || m <= 0 || n <= 0) return;
  if (k <= 0) {
    std::memset(c, 0, sizeof(bf16) * batch * m * n);  // +0.0 in bf16 is all-zero bits
    return;
  }
  detail::Aligned<float> sums(m * n);
  for (int64_t i = 0; i < batch; ++i) {
    const bf16 *ai = a + i * m * k, *bi = b + i * k * n;
#if defined(__AVX512BF16__)
    if (m >= detail::kGemmPackBRows) {
      detail::gemm_run<detail::GemmBf16DotPath>(ai, bi, sums.ptr, c + i * m * n, 1, m, n, k);
      continue;
    }
#endif
    detail::gemm_run<detail::GemmF32Path<bf16, bf16>>(ai, bi, sums.ptr, c + i * m * n, 1, m, n, k);
  }
}

}  // namespace tilefoundry::host

#endif  // __AVX512F__ && __AVX512BW__ && __AVX512VL__
