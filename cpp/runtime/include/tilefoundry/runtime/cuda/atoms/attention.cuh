// The attention atom: out = softmax(scale · q kᵀ, masked) v for torch-layout q (B, Hq, Sq, D),
// k and v (B, Hkv, Skv, D), out (B, Hq, Sq, D), grouped-query (Hq = g · Hkv), causal aligning
// the last query with the last key, kv_len masking each batch's cache to its valid prefix.
// Flash-style: keys stream through shared memory in tiles, each row keeps an online softmax
// (running max m, sum l, accumulator acc), so no score matrix is ever stored.
//
// CTA: 4 warps = 4 query rows of one (batch, kv head): the rows of the g query heads sharing a
// kv head are neighbours, so one K/V tile serves all of them (grouped-query reuse, which is what
// decode needs). Per 32-key tile, lane j scores key j (16-byte reads of a padded K row), the warp
// updates its row's (m, l) with shuffles, and lanes own D / 32 accumulator columns each.
//   Ks[stage]  (32, D + 16 B pad) smem   Vs[stage]  (32, D) smem   qs  (4, D) f32 smem
// Two-window software prefetch when Stages == 2: tile t + 1 is in flight (cp.async) while tile t
// is consumed; slot(t) = t % 2. Stages == 1 keeps the ordered load-then-compute loop.
// Split-KV (decode, few CTAs, long caches): blockIdx.y takes one chunk of keys; the partial
// (m, l, acc) of each chunk goes to a workspace and a second kernel merges them in chunk order.
// Tiers, chosen at the call: 16-bit prefill (Sq >= 32, head dim 64 or 128, aligned) runs on
// tensor cores (flash_mma_kernel below); everything else (decode, f32, other head dims) on the
// CUDA-core kernel above, which keeps f32 exact (no TF32).
#pragma once

#include <atomic>
#include <cstdint>
#include <limits>

#include <cuda_runtime_api.h>

#include <tilefoundry/runtime/cuda/atoms/gemm_sm80.cuh>
#include <tilefoundry/runtime/cuda/atoms/scalar.cuh>

namespace tilefoundry::atoms {

/// What one attention call computes; pointers are compact row-major in torch's layout.
template <class T, class LenT>
struct AttentionArgs {
  T const* q;
  T const* k;
  T const* v;
  T* out;
  LenT const* kv_len;    ///< nullptr: every key is valid; else one length, or one per batch
  bool kv_len_per_batch;
  int64_t batch, heads, kv_heads, sq, skv;
  float scale;
  bool causal;
};

namespace detail {

inline constexpr int kAttnWarps = 4;
inline constexpr int kAttnKeys = 32;

template <class T, int D>
struct AttnShape {
  static constexpr int kPad = 16 / static_cast<int>(sizeof(T));  // one 16-byte pad per K row
  static constexpr int kKPitch = D + kPad;
  static constexpr int kVec = 16 / static_cast<int>(sizeof(T));   // elements per 16-byte read
  static_assert(D % 32 == 0 && D <= 256, "attention atom: D must be a multiple of 32, at most 256");
  static_assert((D * sizeof(T)) % 16 == 0, "attention atom: rows must be whole 16-byte chunks");
  template <int Stages>
  static constexpr size_t smem_bytes() {
    return Stages * kAttnKeys * (kKPitch + D) * sizeof(T) + kAttnWarps * D * sizeof(float);
  }
};

template <class LenT>
__device__ inline int64_t kv_length(LenT const* kv_len, bool per_batch, int64_t b, int64_t skv) {
  if constexpr (std::is_same_v<LenT, void>) {
    return skv;
  } else {
    return kv_len == nullptr ? skv : static_cast<int64_t>(kv_len[per_batch ? b : 0]);
  }
}

/// One K/V tile (keys t0 .. t0 + 31 of one (batch, kv head)) into a stage; missing keys read as 0.
template <class T, int D>
__device__ inline void attn_load_tile(T* ks, T* vs, T const* k, T const* v, int64_t t0, int64_t keys, bool async) {
  using S = AttnShape<T, D>;
  constexpr int chunks = kAttnKeys * D / S::kVec;  // 16-byte chunks per tile of K (and of V)
  for (int c = threadIdx.x; c < chunks; c += kAttnWarps * 32) {
    int const row = c / (D / S::kVec), col = (c % (D / S::kVec)) * S::kVec;
    int64_t const key = t0 + row;
    bool const ok = key < keys;
    T* kd = ks + row * S::kKPitch + col;
    T* vd = vs + row * D + col;
    if (async) {
      cp_async_16(kd, ok ? k + key * D + col : k, ok);
      cp_async_16(vd, ok ? v + key * D + col : v, ok);
    } else {
#pragma unroll
      for (int e = 0; e < S::kVec; ++e) {
        kd[e] = ok ? k[key * D + col + e] : T(0);
        vd[e] = ok ? v[key * D + col + e] : T(0);
      }
    }
  }
}

template <class T, class LenT, int D, int Stages>
__global__ void __launch_bounds__(kAttnWarps * 32)
attention_kernel(AttentionArgs<T, LenT> a, float* __restrict__ ws, int64_t chunk, int aligned) {
  using S = AttnShape<T, D>;
  extern __shared__ __align__(16) unsigned char attn_smem[];
  T* ks = reinterpret_cast<T*>(attn_smem);                                // (Stages, 32, KPitch)
  T* vs = ks + Stages * kAttnKeys * S::kKPitch;                           // (Stages, 32, D)
  float* qs = reinterpret_cast<float*>(vs + Stages * kAttnKeys * D);      // (4, D)
  int const lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  int64_t const g = a.heads / a.kv_heads;
  int64_t const rows = g * a.sq;  // query rows sharing one kv head
  int64_t const blocks = (rows + kAttnWarps - 1) / kAttnWarps;
  int64_t const cta = blockIdx.x;
  int64_t const b = cta / (a.kv_heads * blocks);
  int64_t const hk = (cta / blocks) % a.kv_heads;
  int64_t const row = (cta % blocks) * kAttnWarps + warp;
  bool const valid = row < rows;
  int64_t const h = hk * g + (valid ? row / a.sq : 0);
  int64_t const i = valid ? row % a.sq : 0;
  int64_t const len = kv_length(a.kv_len, a.kv_len_per_batch, b, a.skv);
  int64_t visible = a.causal ? (len < i + len - a.sq + 1 ? len : i + len - a.sq + 1) : len;
  visible = valid && visible > 0 ? visible : 0;
  // The CTA's key range: this split's chunk, cut at the longest visible prefix of its rows.
  int64_t cta_visible = len;
  if (a.causal) {
    // The block's rows r0 .. r0 + n - 1 have i = r % Sq; the largest sees the most keys.
    int64_t const r0 = (cta % blocks) * kAttnWarps;
    int64_t const n = rows - r0 < kAttnWarps ? rows - r0 : kAttnWarps;
    int64_t const first = r0 % a.sq;
    int64_t const i_max = first + n - 1 >= a.sq ? a.sq - 1 : first + n - 1;
    int64_t const reach = i_max + len - a.sq + 1;
    cta_visible = reach < len ? reach : len;
  }
  int64_t const k_begin = static_cast<int64_t>(blockIdx.y) * chunk;
  int64_t k_end = k_begin + chunk < cta_visible ? k_begin + chunk : cta_visible;
  if (k_end < k_begin) k_end = k_begin;

  T const* qrow = a.q + ((b * a.heads + h) * a.sq + i) * D;
  for (int d = lane; d < D; d += 32) qs[warp * D + d] = valid ? cast<float>(qrow[d]) : 0.0f;
  T const* kbase = a.k + (b * a.kv_heads + hk) * a.skv * D;
  T const* vbase = a.v + (b * a.kv_heads + hk) * a.skv * D;

  float m = -std::numeric_limits<float>::infinity();
  float l = 0.0f;
  float acc[D / 32] = {};
  int64_t const tiles = (k_end - k_begin + kAttnKeys - 1) / kAttnKeys;
  if (tiles > 0) attn_load_tile<T, D>(ks, vs, kbase, vbase, k_begin, k_end, aligned);
  cp_async_commit();
  for (int64_t t = 0; t < tiles; ++t) {
    int const stage = Stages == 2 ? static_cast<int>(t % 2) : 0;
    T const* kt = ks + stage * kAttnKeys * S::kKPitch;
    T const* vt = vs + stage * kAttnKeys * D;
    if constexpr (Stages == 2) {
      if (t + 1 < tiles) {
        attn_load_tile<T, D>(ks + (stage ^ 1) * kAttnKeys * S::kKPitch, vs + (stage ^ 1) * kAttnKeys * D, kbase,
                             vbase, k_begin + (t + 1) * kAttnKeys, k_end, aligned);
      }
      cp_async_commit();
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    __syncthreads();
    int64_t const key = k_begin + t * kAttnKeys + lane;
    // Score of this lane's key: q · k in 16-byte reads of the padded K row.
    float dot = 0.0f;
#pragma unroll 4
    for (int d = 0; d < D; d += S::kVec) {
      alignas(16) T kv[S::kVec];
      *reinterpret_cast<uint4*>(kv) = *reinterpret_cast<uint4 const*>(kt + lane * S::kKPitch + d);
#pragma unroll
      for (int e = 0; e < S::kVec; ++e) dot = dot + qs[warp * D + d + e] * cast<float>(kv[e]);
    }
    float const s = key < visible ? dot * a.scale : -std::numeric_limits<float>::infinity();
    float tile_max = s;
#pragma unroll
    for (int o = 16; o > 0; o /= 2) tile_max = max_nan(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, o));
    float const m_new = max_nan(m, tile_max);
    if (m_new != -std::numeric_limits<float>::infinity()) {  // else every key so far is masked
      float const c = ::expf(m - m_new);
      float const p = ::expf(s - m_new);
      float psum = p;
#pragma unroll
      for (int o = 16; o > 0; o /= 2) psum = psum + __shfl_xor_sync(0xffffffffu, psum, o);
      l = l * c + psum;
#pragma unroll
      for (int q = 0; q < D / 32; ++q) acc[q] = acc[q] * c;
      for (int j = 0; j < kAttnKeys; ++j) {
        float const pj = __shfl_sync(0xffffffffu, p, j);
#pragma unroll
        for (int q = 0; q < D / 32; ++q) acc[q] = acc[q] + pj * cast<float>(vt[j * D + lane + 32 * q]);
      }
      m = m_new;
    }
    __syncthreads();  // the stage is refilled by the next prefetch
  }
  cp_async_wait<0>();
  if (!valid) return;
  int64_t const out_row = (b * a.heads + h) * a.sq + i;
  if (gridDim.y == 1) {
#pragma unroll
    for (int q = 0; q < D / 32; ++q) a.out[out_row * D + lane + 32 * q] = cast<T>(l > 0.0f ? acc[q] / l : 0.0f);
  } else {
    float* part = ws + (static_cast<int64_t>(blockIdx.y) * a.batch * a.heads * a.sq + out_row) * (D + 2);
    if (lane == 0) {
      part[0] = m;
      part[1] = l;
    }
#pragma unroll
    for (int q = 0; q < D / 32; ++q) part[2 + lane + 32 * q] = acc[q];
  }
}

/// Merges the split-KV partials of every row in split order: out = Σ acc_s e^(m_s - M) / Σ l_s e^(m_s - M).
template <class T, int D>
__global__ void attention_merge(float const* __restrict__ ws, T* __restrict__ out, int64_t rows, int splits) {
  int64_t const row = static_cast<int64_t>(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;
  int const lane = threadIdx.x % 32;
  if (row >= rows) return;
  float mx = -std::numeric_limits<float>::infinity();
  for (int s = 0; s < splits; ++s) mx = max_nan(mx, ws[(s * rows + row) * (D + 2)]);
  float l = 0.0f;
  float acc[D / 32] = {};
  if (mx != -std::numeric_limits<float>::infinity()) {
    for (int s = 0; s < splits; ++s) {
      float const* part = ws + (s * rows + row) * (D + 2);
      float const w = ::expf(part[0] - mx);
      l = l + part[1] * w;
#pragma unroll
      for (int q = 0; q < D / 32; ++q) acc[q] = acc[q] + part[2 + lane + 32 * q] * w;
    }
  }
#pragma unroll
  for (int q = 0; q < D / 32; ++q) out[row * D + lane + 32 * q] = cast<T>(l > 0.0f ? acc[q] / l : 0.0f);
}

inline constexpr int kAttnTargetCtas = 264;
inline constexpr int64_t kAttnMinChunk = 256;

// ---------------------------------------------------------------- tensor-core tier (prefill)
//
// 16-bit q, k, v with head dim 64 or 128: FlashAttention-2's schedule on mma.sync m16n8k16.
// CTA: 64 query rows of one (batch, head), 4 warps of 16 rows. Per 64-key tile: S = Q Kᵀ from Q
// fragments held in registers and K through ldmatrix, the online softmax on S's accumulator
// fragments (a row's values live in one quad of lanes), P rounded to the input type and reused
// in place as the A fragments of O += P V (V through ldmatrix.trans). K/V tiles are
// double-buffered with cp.async (two-window prefetch).
//   qs (64, D + 8)   ks[2] (64, D + 8)   vs[2] (64, D + 8)   smem, rows padded 16 B

inline constexpr int kFlashRows = 64;
inline constexpr int kFlashKeys = 64;
inline constexpr int kFlashMinRows = 32;  // fewer query rows than this take the SIMT tier

template <class T, int D>
struct FlashShape {
  static constexpr int kPitch = D + 8;
  static constexpr size_t kSmemBytes = static_cast<size_t>(kFlashRows + 4 * kFlashKeys) * kPitch * sizeof(T);
};

/// Two floats as one register of two 16-bit values, the first in the low half (mma operand order).
template <class T>
__device__ inline uint32_t pack_pair(float lo, float hi) {
  return static_cast<uint32_t>(T(lo).raw()) | (static_cast<uint32_t>(T(hi).raw()) << 16);
}

template <class T, class LenT, int D>
__global__ void __launch_bounds__(128) flash_mma_kernel(AttentionArgs<T, LenT> a) {
  using S = FlashShape<T, D>;
  constexpr int P = S::kPitch;
  constexpr int chunks = D / 8;  // 16-byte chunks per row
  extern __shared__ __align__(16) unsigned char flash_smem[];
  T* qs = reinterpret_cast<T*>(flash_smem);
  T* ks = qs + kFlashRows * P;
  T* vs = ks + 2 * kFlashKeys * P;
  int const lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  int const g = lane / 4, tg = lane % 4;
  int64_t const bh = blockIdx.y;  // b * heads + h
  int64_t const b = bh / a.heads, h = bh % a.heads;
  int64_t const hk = h / (a.heads / a.kv_heads);
  int64_t const i0 = static_cast<int64_t>(blockIdx.x) * kFlashRows;
  int64_t const len = kv_length(a.kv_len, a.kv_len_per_batch, b, a.skv);
  int64_t const i_last = (i0 + kFlashRows < a.sq ? i0 + kFlashRows : a.sq) - 1;
  int64_t key_end = a.causal ? (len < i_last + len - a.sq + 1 ? len : i_last + len - a.sq + 1) : len;
  key_end = key_end > 0 ? key_end : 0;  // every key any row of the block sees is below this
  T const* q = a.q + bh * a.sq * D;
  T const* k = a.k + (b * a.kv_heads + hk) * a.skv * D;
  T const* v = a.v + (b * a.kv_heads + hk) * a.skv * D;

  for (int c = threadIdx.x; c < kFlashRows * chunks; c += 128) {
    int const r = c / chunks, col = (c % chunks) * 8;
    bool const ok = i0 + r < a.sq;
    cp_async_16(qs + r * P + col, ok ? q + (i0 + r) * D + col : q, ok);
  }
  auto load_kv = [&](int stage, int64_t t0) {
    for (int c = threadIdx.x; c < kFlashKeys * chunks; c += 128) {
      int const r = c / chunks, col = (c % chunks) * 8;
      bool const ok = t0 + r < key_end;  // keys past every row's view read as 0 (and are masked)
      cp_async_16(ks + (stage * kFlashKeys + r) * P + col, ok ? k + (t0 + r) * D + col : k, ok);
      cp_async_16(vs + (stage * kFlashKeys + r) * P + col, ok ? v + (t0 + r) * D + col : v, ok);
    }
  };
  int64_t const tiles = (key_end + kFlashKeys - 1) / kFlashKeys;
  if (tiles > 0) load_kv(0, 0);
  cp_async_commit();  // one group: the Q tile and K/V tile 0

  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  uint32_t qf[D / 16][4];
  float o[D / 8][4] = {};
  float m[2] = {kNegInf, kNegInf};  // rows g and g + 8 of this warp's 16
  float l[2] = {0.0f, 0.0f};
  int64_t const row0 = i0 + warp * 16 + g;
  for (int64_t t = 0; t < tiles; ++t) {
    int const stage = static_cast<int>(t % 2);
    if (t + 1 < tiles) load_kv(stage ^ 1, (t + 1) * kFlashKeys);
    cp_async_commit();
    cp_async_wait<1>();
    __syncthreads();
    if (t == 0) {
#pragma unroll
      for (int kk = 0; kk < D / 16; ++kk) ldmatrix_x4(qf[kk], qs + (warp * 16 + lane % 16) * P + kk * 16 + (lane / 16) * 8);
    }
    T const* kt = ks + stage * kFlashKeys * P;
    T const* vt = vs + stage * kFlashKeys * P;
    float s[kFlashKeys / 8][4] = {};
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
#pragma unroll
      for (int j = 0; j < kFlashKeys / 8; ++j) {
        uint32_t kf[2];
        ldmatrix_x2(kf, kt + (j * 8 + lane % 8) * P + kk * 16 + ((lane / 8) % 2) * 8);
        mma_16816<T>(s[j], qf[kk], kf);
      }
    }
    float mx[2] = {m[0], m[1]};
#pragma unroll
    for (int j = 0; j < kFlashKeys / 8; ++j) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        int const hr = e / 2;
        int64_t const row = row0 + hr * 8;
        int64_t const key = t * kFlashKeys + j * 8 + tg * 2 + e % 2;
        int64_t const visible = a.causal ? (len < row + len - a.sq + 1 ? len : row + len - a.sq + 1) : len;
        float const val = (key < visible && row < a.sq) ? s[j][e] * a.scale : kNegInf;
        s[j][e] = val;
        mx[hr] = max_nan(mx[hr], val);
      }
    }
    float c[2], sum[2] = {0.0f, 0.0f};
#pragma unroll
    for (int hr = 0; hr < 2; ++hr) {  // a row's 64 scores sit in the 4 lanes of one quad
      mx[hr] = max_nan(mx[hr], __shfl_xor_sync(0xffffffffu, mx[hr], 1));
      mx[hr] = max_nan(mx[hr], __shfl_xor_sync(0xffffffffu, mx[hr], 2));
      c[hr] = mx[hr] == kNegInf ? 1.0f : ::expf(m[hr] - mx[hr]);
    }
#pragma unroll
    for (int j = 0; j < kFlashKeys / 8; ++j) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        int const hr = e / 2;
        float const p = mx[hr] == kNegInf ? 0.0f : ::expf(s[j][e] - mx[hr]);
        s[j][e] = p;
        sum[hr] = sum[hr] + p;
      }
    }
#pragma unroll
    for (int hr = 0; hr < 2; ++hr) {
      sum[hr] = sum[hr] + __shfl_xor_sync(0xffffffffu, sum[hr], 1);
      sum[hr] = sum[hr] + __shfl_xor_sync(0xffffffffu, sum[hr], 2);
      l[hr] = l[hr] * c[hr] + sum[hr];
      m[hr] = mx[hr];
    }
#pragma unroll
    for (int n = 0; n < D / 8; ++n) {
      o[n][0] = o[n][0] * c[0];
      o[n][1] = o[n][1] * c[0];
      o[n][2] = o[n][2] * c[1];
      o[n][3] = o[n][3] * c[1];
    }
#pragma unroll
    for (int kk = 0; kk < kFlashKeys / 16; ++kk) {
      // S tiles 2kk and 2kk+1 (keys 16kk .. 16kk+15) become the A fragment of P: rows g / g+8.
      uint32_t const pf[4] = {pack_pair<T>(s[2 * kk][0], s[2 * kk][1]), pack_pair<T>(s[2 * kk][2], s[2 * kk][3]),
                              pack_pair<T>(s[2 * kk + 1][0], s[2 * kk + 1][1]),
                              pack_pair<T>(s[2 * kk + 1][2], s[2 * kk + 1][3])};
#pragma unroll
      for (int n = 0; n < D / 8; ++n) {
        uint32_t vf[2];
        ldmatrix_x2_trans(vf, vt + (kk * 16 + lane % 16) * P + n * 8);
        mma_16816<T>(o[n], pf, vf);
      }
    }
    __syncthreads();  // the stage is refilled by the next prefetch
  }
  cp_async_wait<0>();
#pragma unroll
  for (int hr = 0; hr < 2; ++hr) {
    int64_t const row = row0 + hr * 8;
    if (row >= a.sq) continue;
    float const inv = l[hr] > 0.0f ? 1.0f / l[hr] : 0.0f;
    T* out = a.out + (bh * a.sq + row) * D;
#pragma unroll
    for (int n = 0; n < D / 8; ++n) {
      out[n * 8 + tg * 2] = T(o[n][2 * hr] * inv);
      out[n * 8 + tg * 2 + 1] = T(o[n][2 * hr + 1] * inv);
    }
  }
}

/// True when the tensor-core tier takes the call: 16-bit, head dim 64 or 128, enough query rows,
/// 16-byte aligned q, k, v (cp.async).
template <int D, class T, class LenT>
inline bool flash_mma_fits(AttentionArgs<T, LenT> const& a) {
  auto is16 = [](void const* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; };
  if constexpr (is_half_v<T> && (D == 64 || D == 128)) {
    return a.sq >= kFlashMinRows && is16(a.q) && is16(a.k) && is16(a.v);
  } else {
    return false;
  }
}

template <int D, class T, class LenT>
inline cudaError_t flash_mma(AttentionArgs<T, LenT> const& a, cudaStream_t stream) {
  if constexpr (is_half_v<T> && (D == 64 || D == 128)) {
    auto kernel = flash_mma_kernel<T, LenT, D>;
    constexpr size_t smem = FlashShape<T, D>::kSmemBytes;
    static std::atomic<unsigned long long> raised{0};
    int device = 0;
    cudaError_t err = cudaGetDevice(&device);
    if (err != cudaSuccess) return err;
    unsigned long long const bit = 1ull << (device % 64);
    if (smem > 48 * 1024 && !(raised.load() & bit)) {
      err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem));
      if (err != cudaSuccess) return err;
      raised.fetch_or(bit);
    }
    dim3 grid(static_cast<unsigned>((a.sq + kFlashRows - 1) / kFlashRows), static_cast<unsigned>(a.batch * a.heads));
    kernel<<<grid, 128, smem, stream>>>(a);
    return cudaGetLastError();
  } else {
    (void)a;
    (void)stream;
    return cudaErrorInvalidValue;
  }
}

}  // namespace detail

/// Key chunks per row block: split the keys across CTAs when the rows alone leave the device idle.
template <class T, class LenT>
inline int attention_splits(AttentionArgs<T, LenT> const& a) {
  int64_t const g = a.heads / a.kv_heads;
  int64_t const ctas = a.batch * a.kv_heads * ((g * a.sq + detail::kAttnWarps - 1) / detail::kAttnWarps);
  if (ctas >= detail::kAttnTargetCtas || a.skv < 2 * detail::kAttnMinChunk) return 1;
  int64_t splits = (detail::kAttnTargetCtas + ctas - 1) / ctas;
  int64_t const most = a.skv / detail::kAttnMinChunk;
  return static_cast<int>(splits < most ? splits : most);
}

template <class T, class LenT>
inline size_t attention_workspace_bytes(AttentionArgs<T, LenT> const& a, int head_dim) {
  bool const tensor_cores = head_dim == 64 ? detail::flash_mma_fits<64>(a)
                          : head_dim == 128 ? detail::flash_mma_fits<128>(a) : false;
  if (tensor_cores) return 0;
  int const splits = attention_splits(a);
  return splits > 1 ? static_cast<size_t>(splits) * a.batch * a.heads * a.sq * (head_dim + 2) * sizeof(float) : 0;
}

/**
 * @brief Run the attention atom on `stream`; `workspace` holds attention_workspace_bytes(a, D).
 * @tparam D head dim (q, k and v share it), a multiple of 32 up to 256
 * @tparam Stages 2: two-window K/V prefetch; 1: ordered loads (when two stages exceed shared memory)
 */
template <int D, int Stages, class T, class LenT>
inline cudaError_t attention(AttentionArgs<T, LenT> const& a, void* workspace, cudaStream_t stream) {
  using S = detail::AttnShape<T, D>;
  int64_t const rows = a.batch * a.heads * a.sq;
  if (rows == 0) return cudaSuccess;
  if (detail::flash_mma_fits<D>(a)) return detail::flash_mma<D>(a, stream);
  auto kernel = detail::attention_kernel<T, LenT, D, Stages>;
  constexpr size_t smem = S::template smem_bytes<Stages>();
  if constexpr (smem > 48 * 1024) {
    // Raise the kernel's dynamic shared-memory limit once per device (not again inside a capture).
    static std::atomic<unsigned long long> raised{0};
    int device = 0;
    cudaError_t err = cudaGetDevice(&device);
    if (err != cudaSuccess) return err;
    unsigned long long const bit = 1ull << (device % 64);
    if (!(raised.load() & bit)) {
      err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem));
      if (err != cudaSuccess) return err;
      raised.fetch_or(bit);
    }
  }
  int const splits = attention_splits(a);
  int64_t const g = a.heads / a.kv_heads;
  int64_t const blocks = (g * a.sq + detail::kAttnWarps - 1) / detail::kAttnWarps;
  int64_t const chunk = ((a.skv + splits - 1) / splits + detail::kAttnKeys - 1) / detail::kAttnKeys * detail::kAttnKeys;
  auto is16 = [](void const* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; };
  int const aligned = is16(a.q) && is16(a.k) && is16(a.v) ? 1 : 0;
  dim3 grid(static_cast<unsigned>(a.batch * a.kv_heads * blocks), static_cast<unsigned>(splits));
  kernel<<<grid, detail::kAttnWarps * 32, smem, stream>>>(a, static_cast<float*>(workspace), chunk, aligned);
  if (splits > 1) {
    detail::attention_merge<T, D><<<static_cast<unsigned>((rows + 3) / 4), 128, 0, stream>>>(
        static_cast<float const*>(workspace), a.out, rows, splits);
  }
  return cudaGetLastError();
}

}  // namespace tilefoundry::atoms
