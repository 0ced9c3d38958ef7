// Experiment (skinny_sweep.cu `attention`): decode attention at short context as one CTA a kv
// head, against the atom's split-KV cluster kernel (attention_mma.cuh).
//
// The question: in the Qwen3-1.7B decode step (2026-12-01) attention adds 8.2 us a layer at
// 16-144 keys. The atom launches 16-CTA clusters a kv head (the plan sizes its splits by the
// cache's capacity); at 144 keys three CTAs of a cluster do one masked 64-key tensor-core step
// each, and the cluster merges 16 partials over two cluster barriers. Here one CTA of 4 warps
// takes every key of its kv head: lane j of a warp scores key j of the warp's 32 (the whole
// 128-wide K row from global memory, q from shared memory), the warp keeps an online softmax per
// query row, lanes own 4 output columns each for P · V, and the warps' (m, l, acc) meet in shared
// memory. G query heads share a kv head; D = 128; q (B, Hq, 1, D), k and v (B, Hkv, Skv, D).
#pragma once

#include <cmath>
#include <cstdint>

#include <cuda_runtime.h>

#include <tilefoundry/runtime/cuda/atoms/launch.cuh>
#include <tilefoundry/runtime/cuda/atoms/scalar.cuh>

namespace small_attention {

using namespace tilefoundry::atoms;

inline constexpr int kWarps = 4;
inline constexpr int kD = 128;

template <class T, int G>
__global__ void __launch_bounds__(kWarps * 32)
decode_attention_small(T const* q, T const* k, T const* v, T* out, int64_t const* kv_len, int64_t kv_heads,
                       int64_t skv, float scale) {
  pdl_begin();
  __shared__ float qs[G][kD];
  __shared__ float part_ml[kWarps][G][2];
  __shared__ float part_acc[kWarps][G][kD];
  int const warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  int64_t const hk = blockIdx.x % kv_heads, b = blockIdx.x / kv_heads;
  int64_t n = kv_len[0];
  n = n < 0 ? 0 : (n > skv ? skv : n);
  T const* qh = q + (b * kv_heads + hk) * G * kD;  // the G query heads of kv head hk, one row each
  for (int i = threadIdx.x; i < G * kD; i += kWarps * 32) qs[i / kD][i % kD] = cast<float>(qh[i]);
  __syncthreads();
  T const* kh = k + (b * kv_heads + hk) * skv * kD;
  T const* vh = v + (b * kv_heads + hk) * skv * kD;
  float const s2 = scale * 1.4426950408889634f;
  float m[G], l[G], acc[G][4];
#pragma unroll
  for (int g = 0; g < G; ++g) {
    m[g] = -INFINITY;
    l[g] = 0.0f;
#pragma unroll
    for (int c = 0; c < 4; ++c) acc[g][c] = 0.0f;
  }
  for (int64_t base = warp * 32; base < n; base += kWarps * 32) {
    int64_t const key = base + lane;
    bool const valid = key < n;
    float s[G] = {};
    if (valid) {
#pragma unroll
      for (int p = 0; p < kD / 8; ++p) {
        uint4 const w = *reinterpret_cast<uint4 const*>(kh + key * kD + p * 8);
        T const* kv8 = reinterpret_cast<T const*>(&w);
#pragma unroll
        for (int c = 0; c < 8; ++c) {
#pragma unroll
          for (int g = 0; g < G; ++g) s[g] += qs[g][p * 8 + c] * cast<float>(kv8[c]);
        }
      }
    }
    float pr[G];
#pragma unroll
    for (int g = 0; g < G; ++g) {
      float const sc = valid ? s[g] * s2 : -INFINITY;
      float mx = sc;
#pragma unroll
      for (int off = 16; off > 0; off /= 2) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, off));
      float const mn = fmaxf(m[g], mx);  // finite: the block holds a valid key (base < n)
      float const keep = exp2f(m[g] - mn);
      pr[g] = valid ? exp2f(sc - mn) : 0.0f;
      float sum = pr[g];
#pragma unroll
      for (int off = 16; off > 0; off /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, off);
      l[g] = l[g] * keep + sum;
#pragma unroll
      for (int c = 0; c < 4; ++c) acc[g][c] *= keep;
      m[g] = mn;
    }
    int64_t const keys = n - base < 32 ? n - base : 32;
    for (int j0 = 0; j0 < keys; j0 += 8) {
      uint2 vw[8];  // this lane's 4 columns of 8 keys' V rows, in flight together
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        if (j0 + j < keys) vw[j] = *reinterpret_cast<uint2 const*>(vh + (base + j0 + j) * kD + lane * 4);
      }
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        float pj[G];
#pragma unroll
        for (int g = 0; g < G; ++g) pj[g] = __shfl_sync(0xffffffffu, pr[g], j0 + j);
        if (j0 + j >= keys) continue;
        T const* v4 = reinterpret_cast<T const*>(&vw[j]);
#pragma unroll
        for (int g = 0; g < G; ++g) {
#pragma unroll
          for (int c = 0; c < 4; ++c) acc[g][c] += pj[g] * cast<float>(v4[c]);
        }
      }
    }
  }
#pragma unroll
  for (int g = 0; g < G; ++g) {
    if (lane == 0) {
      part_ml[warp][g][0] = m[g];
      part_ml[warp][g][1] = l[g];
    }
#pragma unroll
    for (int c = 0; c < 4; ++c) part_acc[warp][g][lane * 4 + c] = acc[g][c];
  }
  __syncthreads();
  int const d = threadIdx.x;  // kWarps * 32 == kD: a thread a column
#pragma unroll
  for (int g = 0; g < G; ++g) {
    float mm = -INFINITY;
    for (int w = 0; w < kWarps; ++w) mm = fmaxf(mm, part_ml[w][g][0]);
    float ll = 0.0f, o = 0.0f;
    for (int w = 0; w < kWarps; ++w) {
      float const f = part_ml[w][g][0] == -INFINITY ? 0.0f : exp2f(part_ml[w][g][0] - mm);
      ll += part_ml[w][g][1] * f;
      o += part_acc[w][g][d] * f;
    }
    out[((b * kv_heads + hk) * G + g) * kD + d] = cast<T>(ll > 0.0f ? o / ll : 0.0f);
  }
}

static_assert(kWarps * 32 == kD, "decode_attention_small: a thread a column in the combine");

template <class T, int G>
inline cudaError_t launch_small(T const* q, T const* k, T const* v, T* out, int64_t const* kv_len, int64_t batch,
                                int64_t kv_heads, int64_t skv, float scale, cudaStream_t st) {
  return launch_kernel(decode_attention_small<T, G>, dim3(static_cast<unsigned>(batch * kv_heads)),
                       dim3(kWarps * 32), 0, st, q, k, v, out, kv_len, kv_heads, skv, scale);
}

}  // namespace small_attention
