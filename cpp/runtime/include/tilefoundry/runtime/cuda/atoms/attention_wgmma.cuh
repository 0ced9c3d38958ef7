// Hopper tier of the attention atom (attention.cuh) for prefill: 16-bit q, k, v with head dim 128
// on wgmma (warpgroup MMA, sm_90a), f32 accumulation. Rows are the mma tiers' (attention_mma.cuh):
// a CTA takes 128 consecutive rows ρ of one (batch, kv head), so every K/V tile serves all the
// query heads that share it.
//
// CTA: two warpgroups of 64 rows each, 128-key steps. Per step and warpgroup:
//   S = Q Kᵀ   eight wgmma m64n128k16, both operands from shared memory (K-major: Q's rows and
//              K's rows run along the head dim)
//   softmax    online, on S's accumulators (a row lives in one lane quad, as with mma.sync)
//   O += P V   eight wgmma m64n128k16 with P from registers (S's accumulators rounded in place:
//              their layout is the A operand's) and V from shared memory, MN-major (V's rows
//              run along the keys, so no transpose is ever stored)
// The warpgroups share each K/V stage but run their MMAs and softmax independently between the
// step's one barrier, so one's softmax overlaps the other's MMAs.
// Shared memory: Q, then Stages x (K, V), each a 128 x 128 tile in wgmma's 128-byte swizzle:
// two 64-column halves, each 128 rows of 128 bytes; the 16-byte chunk c of row r sits at chunk
// c ^ (r % 8) of its row (wgmma_tile_offset), so the 8 rows of a core matrix hit distinct banks
// and every tile starts 1024-byte aligned, as the swizzle requires.
// Loads: cp.async by all 256 threads, 16 bytes each, Stages - 1 steps ahead (one commit group a
// step), then fence.proxy.async so wgmma's async proxy sees what the generic proxy wrote.
// Epilogue: out's rows through the drained stages (16-byte stores), or split-KV partials to the
// workspace for attention_merge, as the mma rows tier does.
// Built only where TILEFOUNDRY_FLASH_WGMMA is set (the code generator sets it for sm_90a modules);
// the kernel traps if some other arch's code reaches it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <type_traits>

#include <cuda_runtime_api.h>

#include <tilefoundry/runtime/cuda/atoms/attention_args.cuh>
#include <tilefoundry/runtime/cuda/atoms/attention_mma.cuh>
#include <tilefoundry/runtime/cuda/atoms/gemm_sm80.cuh>
#include <tilefoundry/runtime/cuda/atoms/launch.cuh>
#include <tilefoundry/runtime/cuda/atoms/scalar.cuh>

// 1: this module's code is sm_90a and may run the wgmma tier (set by the code generator).
#ifndef TILEFOUNDRY_FLASH_WGMMA
#define TILEFOUNDRY_FLASH_WGMMA 0
#endif

namespace tilefoundry::atoms::detail {

/// The wgmma tier's shape: 128 rows (two warpgroups), 128-key steps, head dim 128.
template <int Stages>
struct FlashWgmmaConfig {
  static_assert(Stages >= 2, "attention wgmma tier: two stages or more");
  static constexpr int kD = 128;
  static constexpr int kRows = 128;
  static constexpr int kStepKeys = 128;
  static constexpr int kStages = Stages;
  static constexpr int kThreads = 256;
  static constexpr int kMinBlocks = 1;
  static constexpr uint32_t kTileBytes = 128 * 128 * 2;  // Q, or one step's K or V
  // the tiles, 1024 bytes to align them, and the warps' visible-key bounds
  static constexpr size_t kSmemBytes = kTileBytes * (1 + 2 * Stages) + 1024 + 8 * 2 * sizeof(int);
};

/// The wgmma tier as the plan runs it: three stages (two steps in flight), 225 KB of shared memory.
using FlashWgmmaRowsConfig = FlashWgmmaConfig<3>;

/// Byte offset of 16-byte chunk `chunk` (0..15) of row `row` in a 128 x 128 16-bit tile laid out
/// for wgmma's 128-byte swizzle (the header's note).
__host__ __device__ constexpr uint32_t wgmma_tile_offset(int row, int chunk) {
  return static_cast<uint32_t>((chunk / 8) * 128 * 128 + row * 128 + (((chunk % 8) ^ (row % 8)) * 16));
}

/// A wgmma shared-memory matrix descriptor (PTX ISA, "Matrix Descriptor Format"): start address,
/// leading and stride byte offsets (each >> 4), 128-byte swizzle.
__host__ __device__ constexpr uint64_t wgmma_desc(uint32_t addr, uint32_t lbo, uint32_t sbo) {
  return static_cast<uint64_t>((addr & 0x3FFFFu) >> 4) | (static_cast<uint64_t>((lbo >> 4) & 0x3FFFu) << 16) |
         (static_cast<uint64_t>((sbo >> 4) & 0x3FFFu) << 32) | (1ull << 62);
}

// A K-major operand (Q as A, K as B of S = Q Kᵀ): k-step kk (16 columns) starts 32 bytes into the
// swizzled row of its 64-column half; rows step by 8 (a core matrix) every 1024 bytes.
__host__ __device__ constexpr uint64_t wgmma_desc_k_major(uint32_t tile, int row0, int kk) {
  return wgmma_desc(tile + (kk / 4) * 128 * 128 + row0 * 128 + (kk % 4) * 32, 16, 1024);
}
// V as the MN-major B of O = P V: k-step kk (16 keys) starts at row 16 kk; the two 64-column
// halves of N lie 16 KB apart (the leading offset), groups of 8 keys 1024 bytes (the stride offset).
__host__ __device__ constexpr uint64_t wgmma_desc_mn_major(uint32_t tile, int kk) {
  return wgmma_desc(tile + kk * 16 * 128, 128 * 128, 1024);
}

#define TILEFOUNDRY_WGMMA_D8(i)                                                                    \
  "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3]), "+f"(d[i + 4]), "+f"(d[i + 5]), \
      "+f"(d[i + 6]), "+f"(d[i + 7])
#define TILEFOUNDRY_WGMMA_D64                                                                          \
  TILEFOUNDRY_WGMMA_D8(0), TILEFOUNDRY_WGMMA_D8(8), TILEFOUNDRY_WGMMA_D8(16), TILEFOUNDRY_WGMMA_D8(24), \
      TILEFOUNDRY_WGMMA_D8(32), TILEFOUNDRY_WGMMA_D8(40), TILEFOUNDRY_WGMMA_D8(48), TILEFOUNDRY_WGMMA_D8(56)
#define TILEFOUNDRY_WGMMA_REGS                                                          \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "             \
  "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "    \
  "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "    \
  "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}"
// d (64 x 128, f32) = A (desc) · Bᵀ (desc) + (accumulate ? d : 0), both K-major.
#define TILEFOUNDRY_WGMMA_SS(TYPE)                                                                  \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"                                         \
               "wgmma.mma_async.sync.aligned.m64n128k16.f32." TYPE "." TYPE " " TILEFOUNDRY_WGMMA_REGS \
               ", %64, %65, p, 1, 1, 0, 0;\n}\n"                                                    \
               : TILEFOUNDRY_WGMMA_D64                                                              \
               : "l"(a), "l"(b), "r"(accumulate))
// d (64 x 128, f32) += A (registers) · B (desc, MN-major).
#define TILEFOUNDRY_WGMMA_RS(TYPE)                                                                  \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"                                           \
               "wgmma.mma_async.sync.aligned.m64n128k16.f32." TYPE "." TYPE " " TILEFOUNDRY_WGMMA_REGS \
               ", {%64, %65, %66, %67}, %68, p, 1, 1, 1;\n}\n"                                     \
               : TILEFOUNDRY_WGMMA_D64                                                              \
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b))

template <class T>
__device__ __forceinline__ void wgmma_ss(float (&d)[64], uint64_t a, uint64_t b, int accumulate) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  if constexpr (std::is_same_v<T, bf16>) {
    TILEFOUNDRY_WGMMA_SS("bf16");
  } else {
    TILEFOUNDRY_WGMMA_SS("f16");
  }
#endif
}

template <class T>
__device__ __forceinline__ void wgmma_rs(float (&d)[64], uint32_t const (&a)[4], uint64_t b) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  if constexpr (std::is_same_v<T, bf16>) {
    TILEFOUNDRY_WGMMA_RS("bf16");
  } else {
    TILEFOUNDRY_WGMMA_RS("f16");
  }
#endif
}

#undef TILEFOUNDRY_WGMMA_RS
#undef TILEFOUNDRY_WGMMA_SS
#undef TILEFOUNDRY_WGMMA_REGS
#undef TILEFOUNDRY_WGMMA_D64
#undef TILEFOUNDRY_WGMMA_D8

/// wgmma.fence: register and shared-memory accesses before it are ordered before the wgmmas after.
__device__ __forceinline__ void wgmma_fence() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#endif
}

/// Commits the wgmmas issued so far as one group and waits for every group to complete.
__device__ __forceinline__ void wgmma_commit_wait() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
  asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
#endif
}

/// Pins accumulators at this point of the program: the compiler may not move their reads or
/// writes across it, and so not across the asynchronous wgmma that owns them meanwhile.
__device__ __forceinline__ void wgmma_pin(float (&d)[64]) {
#pragma unroll
  for (int i = 0; i < 64; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

/// 16 bytes gmem -> smem at shared address `dst`, asynchronously; `valid` false zero-fills it.
__device__ __forceinline__ void cp_async_16_to(uint32_t dst, void const* src, bool valid) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(valid ? 16 : 0));
#endif
}

/// Shared-memory writes of the generic proxy (cp.async, stores) become visible to wgmma's reads.
__device__ __forceinline__ void fence_proxy_async() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
#endif
}

template <class T, class LenT, class Cfg>
__global__ void __launch_bounds__(Cfg::kThreads, Cfg::kMinBlocks)
flash_wgmma_kernel(AttentionArgs<T, LenT> a, AttnPartials part, int chunk) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  pdl_begin();
  constexpr int D = Cfg::kD, Rows = Cfg::kRows, Step = Cfg::kStepKeys, Stages = Cfg::kStages;
  constexpr uint32_t kTile = Cfg::kTileBytes;
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  extern __shared__ __align__(1024) unsigned char wgmma_smem_raw[];
  // the tiles start at the first 1024-byte boundary (the swizzle's period)
  uint32_t const raw = smem_addr(wgmma_smem_raw);
  unsigned char* const smem = wgmma_smem_raw + ((1024 - raw % 1024) % 1024);
  uint32_t const q_tile = smem_addr(smem);
  auto k_tile = [&](int stage) { return q_tile + kTile * (1 + 2 * stage); };
  int* const bounds = reinterpret_cast<int*>(smem + kTile * (1 + 2 * Stages));  // (8 warps, 2)

  int const tid = threadIdx.x, lane = tid % 32, warp = tid / 32, wg = warp / 4;
  int const g = lane / 4, t = lane % 4;
  FlashRange const cr = flash_range(a, Rows, Step, chunk, 0, kv_clamp(flash_entry(a), a.skv));
  int const k_begin = cr.k_begin, k_end = cr.k_end;
  int const n_steps = (k_end - k_begin + Step - 1) / Step;

  // 16 threads a 256-byte row, rows r0 + 16 i: each thread's chunk of a tile is one swizzled
  // offset plus 2048 bytes a row step (r % 8 stays r0 % 8).
  int const r0 = tid / 16, c0 = tid % 16;
  uint32_t const my_off = wgmma_tile_offset(r0, c0);
  T const* const kg = a.k + cr.bk * a.skv * D;
  T const* const vg = a.v + cr.bk * a.skv * D;
  auto load_step = [&](int stage, int key0) {
    uint32_t const kd = k_tile(stage) + my_off, vd = kd + kTile;
#pragma unroll
    for (int i = 0; i < Step / 16; ++i) {
      int const key = key0 + r0 + 16 * i;
      bool const ok = key < k_end;  // keys past the range read as 0 (and are masked)
      int64_t const at = ok ? static_cast<int64_t>(key) * D + c0 * 8 : 0;
      cp_async_16_to(kd + i * 2048, kg + at, ok);
      cp_async_16_to(vd + i * 2048, vg + at, ok);
    }
  };

  if (n_steps > 0) {
    T const* const qg = a.q + (cr.row_base + cr.rho0) * D + c0 * 8;
#pragma unroll
    for (int i = 0; i < Rows / 16; ++i) {
      bool const ok = cr.rho0 + r0 + 16 * i < cr.rows_kv;
      cp_async_16_to(q_tile + my_off + i * 2048, ok ? qg + static_cast<int64_t>(r0 + 16 * i) * D : a.q, ok);
    }
#pragma unroll
    for (int s = 0; s < Stages - 1; ++s) {
      if (s < n_steps) load_step(s, k_begin + s * Step);
      cp_async_commit();  // step s's group; Q rides in step 0's
    }
    if (a.scale < 0.0f) {  // scores scale by |scale|: a negative scale negates Q, exact in 16 bits
      cp_async_wait<Stages - 2>();
#pragma unroll
      for (int i = 0; i < Rows / 16; ++i) {
        uint4* const p = reinterpret_cast<uint4*>(smem + my_off + i * 2048);
        uint4 x = *p;
        x.x ^= 0x80008000u;
        x.y ^= 0x80008000u;
        x.z ^= 0x80008000u;
        x.w ^= 0x80008000u;
        *p = x;
      }
    }
  }
  // This thread's two rows (g, g + 8 of its warp's 16) see keys below vis[h]; its warpgroup's
  // rows all see keys below wmin, and none at or past wmax. Worked out while the first copies
  // are in flight, not between the PDL wait and them.
  int vis[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) vis[h] = flash_visible(a, cr, cr.rho0 + warp * 16 + g + 8 * h);
  int wmin = min(vis[0], vis[1]), wmax = max(vis[0], vis[1]);
#pragma unroll
  for (int o = 16; o > 0; o /= 2) {
    wmin = min(wmin, __shfl_xor_sync(0xffffffffu, wmin, o));
    wmax = max(wmax, __shfl_xor_sync(0xffffffffu, wmax, o));
  }
  if (lane == 0) {
    bounds[warp * 2] = wmin;
    bounds[warp * 2 + 1] = wmax;
  }

  __syncthreads();  // the bounds
  wmin = min(min(bounds[wg * 8], bounds[wg * 8 + 2]), min(bounds[wg * 8 + 4], bounds[wg * 8 + 6]));
  wmax = max(max(bounds[wg * 8 + 1], bounds[wg * 8 + 3]), max(bounds[wg * 8 + 5], bounds[wg * 8 + 7]));

  float const sl2 = fmaxf(fabsf(a.scale) * kLog2e, 1e-30f);
  float o[64];
#pragma unroll
  for (int i = 0; i < 64; ++i) o[i] = 0.0f;
  float m[2] = {kNegInf, kNegInf}, l[2] = {0.0f, 0.0f};

  int stage = 0;  // step s reads stage s % Stages; step s + Stages - 1 refills the one before it
  for (int s = 0; s < n_steps; ++s) {
    cp_async_wait<Stages - 2>();  // step s has landed (this thread's copies) ...
    fence_proxy_async();          // ... visible to wgmma ...
    __syncthreads();              // ... everyone's, and step s - 1's stage is free
    if (s + Stages - 1 < n_steps) load_step(stage == 0 ? Stages - 1 : stage - 1, k_begin + (s + Stages - 1) * Step);
    cp_async_commit();
    uint32_t const kt = k_tile(stage), vt = kt + kTile;
    stage = stage + 1 == Stages ? 0 : stage + 1;
    int const t0 = k_begin + s * Step;
    if (t0 >= wmax) continue;  // no row of the warpgroup sees any of these keys

    float sc[64];
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
      wgmma_ss<T>(sc, wgmma_desc_k_major(q_tile, wg * 64, kk), wgmma_desc_k_major(kt, 0, kk), kk > 0);
    }
    wgmma_commit_wait();
    wgmma_pin(sc);

    // element i = 4j + e of S: row g + 8 (e / 2) of the warp's 16, key t0 + 8j + 2t + e % 2
    if (t0 + Step > wmin) {
#pragma unroll
      for (int i = 0; i < 64; ++i) {
        if (t0 + 8 * (i / 4) + 2 * t + i % 2 >= vis[(i % 4) / 2]) sc[i] = kNegInf;
      }
    }
    float mx[2] = {kNegInf, kNegInf};
#pragma unroll
    for (int i = 0; i < 64; i += 2) mx[(i % 4) / 2] = fmaxf(mx[(i % 4) / 2], fmaxf(sc[i], sc[i + 1]));
    float base[2], c[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {  // a row's scores sit in the 4 lanes of one quad
      mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 1));
      mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 2));
      float const mn = fmaxf(m[h], mx[h] * sl2);
      base[h] = mn == kNegInf ? 0.0f : mn;  // a row that sees nothing yet keeps p = 0, no NaN
      c[h] = m[h] == mn ? 1.0f : fast_exp2(m[h] - base[h]);
      m[h] = mn;
    }
    float rs[2] = {0.0f, 0.0f};
#pragma unroll
    for (int i = 0; i < 64; ++i) {
      sc[i] = fast_exp2(fmaf(sc[i], sl2, -base[(i % 4) / 2]));
      rs[(i % 4) / 2] += sc[i];
    }
    l[0] = l[0] * c[0] + rs[0];
    l[1] = l[1] * c[1] + rs[1];
#pragma unroll
    for (int i = 0; i < 64; ++i) o[i] *= c[(i % 4) / 2];
    // P as the A operand: k-step kk's four registers are S's elements 8 kk .. 8 kk + 7 in pairs
    uint32_t p[32];
#pragma unroll
    for (int i = 0; i < 32; ++i) p[i] = pack_half2<T>(sc[2 * i], sc[2 * i + 1]);
    wgmma_pin(o);
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < Step / 16; ++kk) {
      uint32_t const pa[4] = {p[4 * kk], p[4 * kk + 1], p[4 * kk + 2], p[4 * kk + 3]};
      wgmma_rs<T>(o, pa, wgmma_desc_mn_major(vt, kk));
    }
    wgmma_commit_wait();
    wgmma_pin(o);
  }

  cp_async_wait<0>();
  __syncthreads();  // every warpgroup is done with the stages
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    l[h] += __shfl_xor_sync(0xffffffffu, l[h], 1);
    l[h] += __shfl_xor_sync(0xffffffffu, l[h], 2);
  }
  int const row_w = warp * 16 + g;  // this thread's first row of the block; the second is row_w + 8
  if (gridDim.z == 1) {
    // out's rows through shared memory (rows of D + 8 elements: a quad's pairs land in distinct
    // banks), then 16-byte stores
    constexpr int OP = D + 8;
    T* const ob = reinterpret_cast<T*>(smem + kTile);
    float const inv[2] = {l[0] > 0.0f ? 1.0f / l[0] : 0.0f, l[1] > 0.0f ? 1.0f / l[1] : 0.0f};
#pragma unroll
    for (int i = 0; i < 64; i += 2) {
      int const h = (i % 4) / 2, col = 8 * (i / 4) + 2 * t;
      *reinterpret_cast<uint32_t*>(ob + (row_w + 8 * h) * OP + col) = pack_half2<T>(o[i] * inv[h], o[i + 1] * inv[h]);
    }
    __syncthreads();
    AttnBlockRows<T> const out = a.out_rows().block(cr.b, cr.h0);
#pragma unroll
    for (int i = 0; i < Rows * D / 8 / Cfg::kThreads; ++i) {
      int const idx = tid + i * Cfg::kThreads, r = idx / (D / 8), c8 = (idx % (D / 8)) * 8;
      if (cr.rho0 + r >= cr.rows_kv) continue;
      *reinterpret_cast<uint4*>(out.row(cr.rho0 + r, D) + c8) =
          *reinterpret_cast<uint4 const*>(ob + r * OP + c8);
    }
  } else {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      int64_t const rho = cr.rho0 + row_w + 8 * h;
      if (rho >= cr.rows_kv) continue;
      int64_t const slot = static_cast<int64_t>(blockIdx.z) * part.rows + cr.row_base + rho;
#pragma unroll
      for (int i = 2 * h; i < 64; i += 4) {
        *reinterpret_cast<float2*>(part.acc + slot * D + 8 * (i / 4) + 2 * t) = make_float2(o[i], o[i + 1]);
      }
      if (t == 0) {
        part.ml[slot * 2] = m[h];
        part.ml[slot * 2 + 1] = l[h];
      }
    }
  }
#elif defined(__CUDA_ARCH__)
  __trap();  // not sm_90a code: the plan picks this tier only where TILEFOUNDRY_FLASH_WGMMA says it is
#endif
}

}  // namespace tilefoundry::atoms::detail
