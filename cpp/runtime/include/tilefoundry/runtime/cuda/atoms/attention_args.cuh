// What every tier of the attention atom (attention.cuh) shares: the call's arguments, the valid
// key length of a batch, and the workspace layout of split-KV partials that attention_merge
// (attention_merge.cuh) combines in split order (the in-cluster merge keeps them in shared memory).
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

inline constexpr float kLog2e = 1.4426950408889634f;

/// Keys of batch b that are valid: kv_len's entry clamped to [0, skv], or skv without kv_len.
template <class LenT>
__device__ inline int64_t kv_length(LenT const* kv_len, bool per_batch, int64_t b, int64_t skv) {
  if constexpr (std::is_same_v<LenT, void>) {
    return skv;
  } else {
    if (kv_len == nullptr) return skv;
    int64_t const n = static_cast<int64_t>(kv_len[per_batch ? b : 0]);
    return n < 0 ? 0 : (n > skv ? skv : n);
  }
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
