// What every tier of the attention atom (attention.cuh) shares: the call's arguments, where an
// output row lies, the valid key length of a batch, and the workspace layout of split-KV partials
// that attention_merge (attention_merge.cuh) combines in split order (the in-cluster merge keeps
// them in shared memory).
//
// Output rows are numbered as q's, r = (b * Hq + h) * Sq + i. out is compact in one of two orders
// (AttentionArgs::out_bshd), so row r starts at element
//     r * D                              out (B, Hq, Sq, D), torch's attention layout
//     ((b * Sq + i) * Hq + h) * D        out (B, Sq, Hq, D), i.e. (B * Sq, Hq * D): each token's
//                                        heads side by side, as the output projection reads them
//
//   partials of split s, output row r (= (b * Hq + h) * Sq + i):
//     ml [(s * rows + r) * 2 + {0, 1}]   running max m (log2 units: scale · log2(e) · q·k) and sum l
//     acc[(s * rows + r) * D + d]        unnormalized Σ 2^(score - m) v[:, d]
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include <cuda_runtime_api.h>

namespace tilefoundry::atoms {

/// The output rows of one (batch b, kv head) block: ρ = (h - h0) · Sq + i for its q heads h0,
/// h0 + 1, ... The tensor-core tiers bound ρ below 2^31 (flash_mma_fits), so a row is placed with
/// one 32-bit division instead of AttnOutRows::row's two 64-bit ones.
template <class T>
struct AttnBlockRows {
  T* out;
  int64_t heads, sq, b, h0;
  bool bshd;

  __host__ __device__ T* row(int64_t rho, int d) const {
    if (!bshd) return out + ((b * heads + h0) * sq + rho) * d;
    uint32_t const q = static_cast<uint32_t>(rho) / static_cast<uint32_t>(sq);
    uint32_t const i = static_cast<uint32_t>(rho) - q * static_cast<uint32_t>(sq);
    return out + ((b * sq + i) * heads + h0 + q) * d;
  }
};

/// Where the rows of out lie (layout above): row r = (b * Hq + h) * Sq + i of head dim d.
template <class T>
struct AttnOutRows {
  T* out;
  int64_t heads, sq;
  bool bshd;  ///< (B, Sq, Hq, D) order, else (B, Hq, Sq, D)

  __host__ __device__ T* row(int64_t r, int d) const {
    if (!bshd) return out + r * d;
    int64_t const bh = r / sq, i = r % sq;
    return out + ((bh / heads * sq + i) * heads + bh % heads) * d;
  }
  /// The rows of batch b whose q heads start at h0 (a kv head's group).
  __host__ __device__ AttnBlockRows<T> block(int64_t b, int64_t h0) const { return {out, heads, sq, b, h0, bshd}; }
};

/// What one attention call computes; pointers are compact row-major, q (B, Hq, Sq, D), k and v
/// (B, Hkv, Skv, D), out (B, Hq, Sq, D) or, with out_bshd, (B, Sq, Hq, D).
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
  bool out_bshd = false;  ///< out's rows in (B, Sq, Hq, D) order

  __host__ __device__ AttnOutRows<T> out_rows() const { return {out, heads, sq, out_bshd}; }
};

namespace detail {

inline constexpr float kLog2e = 1.4426950408889634f;

/// Batch b's kv_len entry as stored, or skv without kv_len (kv_length clamps it).
template <class LenT>
__device__ inline int64_t kv_entry(LenT const* kv_len, bool per_batch, int64_t b, int64_t skv) {
  if constexpr (std::is_same_v<LenT, void>) {
    return skv;
  } else {
    return kv_len == nullptr ? skv : static_cast<int64_t>(kv_len[per_batch ? b : 0]);
  }
}

/// An entry clamped to [0, skv]: the keys that are valid.
__device__ inline int64_t kv_clamp(int64_t n, int64_t skv) { return n < 0 ? 0 : (n > skv ? skv : n); }

/// Keys of batch b that are valid: kv_len's entry clamped to [0, skv], or skv without kv_len.
template <class LenT>
__device__ inline int64_t kv_length(LenT const* kv_len, bool per_batch, int64_t b, int64_t skv) {
  return kv_clamp(kv_entry(kv_len, per_batch, b, skv), skv);
}

/// Where split-KV partials go (layout above); rows = batch · heads · Sq.
struct AttnPartials {
  float* ml;
  float* acc;
  int64_t rows;

  /// The partials inside a workspace of attention_partial_bytes(splits, rows, d) bytes.
  static AttnPartials in(void* workspace, int splits, int64_t rows) {
    auto* base = static_cast<unsigned char*>(workspace);
    return {reinterpret_cast<float*>(base), reinterpret_cast<float*>(base + ml_bytes(splits, rows)), rows};
  }
  /// The m, l block rounded up to 16 bytes, so acc rows start 16-byte aligned (float4 stores).
  static size_t ml_bytes(int splits, int64_t rows) {
    return (static_cast<size_t>(splits) * rows * 2 * sizeof(float) + 15) / 16 * 16;
  }
};

inline size_t attention_partial_bytes(int splits, int64_t rows, int head_dim) {
  if (splits <= 1) return 0;
  return AttnPartials::ml_bytes(splits, rows) + static_cast<size_t>(splits) * rows * head_dim * sizeof(float);
}

/// 2^x on the MUFU unit (ex2.approx.ftz: ~2 ulp, subnormal results flush to 0, 2^-inf = 0).
__host__ __device__ inline float fast_exp2(float x) {
#if defined(__CUDA_ARCH__)
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
#else
  return __builtin_exp2f(x);
#endif
}

}  // namespace detail
}  // namespace tilefoundry::atoms
