// The attention atom: out = softmax(scale · q kᵀ, masked) v for torch-layout q (B, Hq, Sq, D),
// k and v (B, Hkv, Skv, D), out (B, Hq, Sq, D) or (B, Sq, Hq, D) (out_bshd: the layout an output
// projection reads, attention_args.cuh), grouped-query (Hq = g · Hkv), causal aligning the last
// query with the last key, kv_len masking each batch's cache to its valid prefix. Every path that
// writes out (each tier, both merges) places row r through AttentionArgs::out_rows().
// Flash-style: keys stream through shared memory in tiles, each row keeps an online softmax
// (running max m, sum l, accumulator acc), so no score matrix is ever stored.
//
// Design. The g query heads sharing a kv head own g · Sq consecutive rows of q and out; every
// tier gives a CTA rows of one (batch, kv head), so each K/V tile it loads serves all of them.
// Four tiers, chosen per call by attention_plan (the workspace size follows the same plan):
//   wgmma rows (attention_wgmma.cuh) 16-bit, head dim 128, g · Sq > 16 (prefill), sm_90a modules
//             (TILEFOUNDRY_FLASH_WGMMA): 128 rows on two warpgroups x 128-key steps, wgmma.
//   mma rows  (attention_mma.cuh)  16-bit, head dim 64/128, g · Sq > 16 (prefill): 128 rows x
//             64-key steps on mma.sync tensor cores, FlashAttention-2's schedule, 3-stage cp.async.
//   mma keys  (attention_mma.cuh)  16-bit, head dim 64/128, g · Sq <= 16 (decode): 16 rows, four
//             warps splitting each 64-key step, split-KV across ~2 CTAs per SM, 16 splits at most
//             (on the H200 16 beat 32 and 64 at 4k-32k keys, `skinny_sweep depth`).
//   simt      (below)              f32 (exact: no TF32), other head dims, unaligned operands:
//             4 rows per CTA on CUDA cores, 32-key tiles, lane j scores key j.
// Split-KV: when the rows leave the device idle, blockIdx.z (simt: .y) takes one chunk of keys (the
// tensor-core tiers share the keys the row block sees at run time evenly, in whole steps, at most
// the plan's chunk a split) and each split's partial (m, l, acc) is merged in split order with one
// fixed association (attention_merge.cuh), in one of two ways:
//   cluster   mma keys over at most kClusterMaxKeys (4096) keys of capacity where this module's
//             sm_90 code runs (device_facts().sm90_code): the splits of a (row block, batch · kv
//             head) are ONE thread-block cluster along z (at most 16 splits when every cluster of
//             16 of the call fits on the device at once, else 8).
//             Each CTA parks its partial in its own shared memory (over the drained K/V stages),
//             cluster.sync(), the cluster's threads merge the block's rows reading every rank's
//             partial through distributed shared memory, cluster.sync() again before any exits.
//             A CTA whose chunk is empty (kv_len is a device value) still takes both barriers and
//             parks m = -inf, l = 0. One launch, no workspace. Past 4096 keys the same splits
//             without clusters stream faster (H200: 3.5 against 2.4 TB/s at 32k keys, 3.0 against
//             2.2 at 16k, merge kernel included), so the plan stops there.
//   workspace everywhere else (sm_80 code, longer caches, the rows tier, simt): each split writes
//             its partial to the workspace (attention_args.cuh) and attention_merge, a second
//             kernel, combines them.
// Solo (mma keys, either way): while the row block sees at most kFlashSoloKeys keys at run time,
// split 0 takes them all and writes out, and the other splits leave at once: no cluster barrier,
// and the merge kernel skips those rows (decode's first tokens; 3.0 against 5.6 us at 16-64 keys
// behind a 1-CTA kernel in the cluster form, H200, `skinny_sweep attention`).
// The plan (attention_plan) decides the tier, the splits and the way; attention_workspace_bytes
// and attention() read the same plan. Every kernel here opens with pdl_begin() and launches with
// programmatic dependent launch (launch_kernel, launch.cuh; the cluster launch sets the same
// attribute), so on sm_90 its launch overlaps the tail of the kernel before it. The mma kernel
// reads kv_len before its wait too, as a guess it checks after the wait once its first copies
// are out, so its key range is ready when the kernel before ends.
//
// SIMT kernel. CTA: 4 warps = 4 query rows. Per 32-key tile, lane j scores key j (16-byte reads
// of a padded K row), the warp updates its row's (m, l) with shuffles, and lanes own D / 32
// accumulator columns each.
//   Ks[stage]  (32, D + 16 B pad) smem   Vs[stage]  (32, D) smem   qs  (4, D) f32 smem
// Two-window software prefetch when Stages == 2: tile t + 1 is in flight (cp.async) while tile t
// is consumed; slot(t) = t % 2. Stages == 1 keeps the ordered load-then-compute loop.
#pragma once

#include <atomic>
#include <cstdint>
#include <limits>

#include <cuda_runtime.h>

#include <tilefoundry/runtime/cuda/atoms/attention_args.cuh>
#include <tilefoundry/runtime/cuda/atoms/attention_merge.cuh>
#include <tilefoundry/runtime/cuda/atoms/attention_mma.cuh>
#include <tilefoundry/runtime/cuda/atoms/attention_wgmma.cuh>
#include <tilefoundry/runtime/cuda/atoms/device_facts.cuh>
#include <tilefoundry/runtime/cuda/atoms/gemm_sm80.cuh>
#include <tilefoundry/runtime/cuda/atoms/launch.cuh>
#include <tilefoundry/runtime/cuda/atoms/scalar.cuh>

namespace tilefoundry::atoms {

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
attention_kernel(AttentionArgs<T, LenT> a, AttnPartials part, int64_t chunk, int aligned) {
  pdl_begin();
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
    T* const dst = a.out_rows().row(out_row, D);
#pragma unroll
    for (int q = 0; q < D / 32; ++q) dst[lane + 32 * q] = cast<T>(l > 0.0f ? acc[q] / l : 0.0f);
  } else {
    int64_t const slot = static_cast<int64_t>(blockIdx.y) * part.rows + out_row;
    if (lane == 0) {
      part.ml[slot * 2] = m * kLog2e;  // partials keep m in log2 units, as the tensor-core tier does
      part.ml[slot * 2 + 1] = l;
    }
#pragma unroll
    for (int q = 0; q < D / 32; ++q) part.acc[slot * D + lane + 32 * q] = acc[q];
  }
}

// ---------------------------------------------------------------- the plan

inline constexpr int64_t kAttnMinChunk = 256;       // simt: keys per split at least
inline constexpr int64_t kFlashMinChunk = 128;      // tensor cores: keys per split at least
inline constexpr int kFlashSoloKeys = 128;          // keys tier: this many keys or fewer, split 0 alone
inline constexpr int kKeysMaxSplits = 16;           // keys tier: splits a row block at most
inline constexpr int64_t kClusterMaxKeys = 4096;    // keys tier: the cluster form up to this capacity
inline constexpr int64_t kFlashMaxExtent = 1 << 30; // Sq, Skv: key and row indices stay int

enum class AttnTier { simt, mma_rows, mma_rows_paired, mma_keys, wgmma_rows };

// Prefill calls with at least this many 128-row CTAs an SM take the paired rows config (32 rows a
// warp) where TILEFOUNDRY_FLASH_WARP_ROWS leaves the choice per call. On the H200 (bench/gpu/
// kernels/attention_sweep.cu, 2026-12-02) it ran B4 H32 S4096 D128 (31 CTAs an SM) 6% faster
// causal and 8% full than the rows config, and B1 H32 S1024 (2 an SM) 1.6x slower: with half the
// warps a CTA, a short grid waits on its longest CTA, and 2 CTAs an SM split the keys of a grid
// the rows config runs whole. Grids between were not measured.
inline constexpr int64_t kFlashPairedMinCtasPerSm = 8;

inline constexpr int kClusterPortable = 8;     // the cluster size every sm_90 device launches
inline constexpr int kClusterNonPortable = 16;  // the largest, where the device has room for it
static_assert(kClusterNonPortable <= kClusterMaxSplits, "attention: cluster_merge holds every split of a cluster");

/// How one call runs: the tier, its key chunks (splits > 1: split-KV) and its row blocks.
struct AttnPlan {
  AttnTier tier;
  int splits;
  int64_t chunk;         ///< keys per split (tensor-core tiers: the most; attention_mma.cuh)
  int64_t row_blocks;    ///< tensor-core tiers: CTAs along the g · Sq rows of a kv head
  bool cluster = false;  ///< the splits merge inside one cluster each: one launch, no workspace
  int solo = 0;          ///< keys tier: up to this many keys at run time, rank 0 takes them alone
};

/// Splits that bring `ctas` CTAs up to `target` (at most `max_splits` of them), each at least
/// `min_chunk` keys, chunks a multiple of `step`.
inline AttnPlan split_keys(AttnTier tier, int64_t ctas, int64_t target, int64_t skv, int64_t step,
                           int64_t min_chunk, int64_t row_blocks,
                           int64_t max_splits = std::numeric_limits<int>::max()) {
  int64_t chunk = (skv + step - 1) / step * step;
  chunk = chunk > step ? chunk : step;
  if (ctas >= target || skv < 2 * min_chunk) return {tier, 1, chunk, row_blocks};
  int64_t want = (target + ctas - 1) / ctas;
  want = want < max_splits ? want : max_splits;
  chunk = ((skv + want - 1) / want + step - 1) / step * step;
  chunk = chunk > min_chunk ? chunk : min_chunk;
  return {tier, static_cast<int>((skv + chunk - 1) / chunk), chunk, row_blocks};
}

template <class T, class LenT>
inline bool flash_mma_fits(AttentionArgs<T, LenT> const& a, int head_dim, DeviceFacts const& dev) {
  auto is16 = [](void const* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; };
  if constexpr (is_half_v<T>) {
    return (head_dim == 64 || head_dim == 128) && dev.major >= 8 && is16(a.q) && is16(a.k) && is16(a.v) &&
           is16(a.out) && a.sq < kFlashMaxExtent && a.skv < kFlashMaxExtent && a.batch * a.kv_heads <= 65535 &&
           a.heads / a.kv_heads * a.sq <= std::numeric_limits<int32_t>::max();
  } else {
    return false;
  }
}

/// A tensor-core config's facts the plan needs: shared memory, CTAs per SM, rows per CTA, keys per step.
struct FlashFacts {
  size_t smem;
  int per_sm;
  int rows;
  int step;
};

template <class Cfg>
inline constexpr FlashFacts flash_facts_of = {Cfg::kSmemBytes, Cfg::kMinBlocks, Cfg::kRows, Cfg::kStepKeys};

template <int D>
inline FlashFacts flash_facts_at(AttnTier tier) {
  if (tier == AttnTier::wgmma_rows) return flash_facts_of<FlashWgmmaRowsConfig>;
  if (tier == AttnTier::mma_keys) return flash_facts_of<FlashKeysConfig<D>>;
  if (tier == AttnTier::mma_rows_paired) return flash_facts_of<FlashPairedRowsConfig<D>>;
  return flash_facts_of<FlashRowsConfig<D>>;
}

/// The facts of a tensor-core tier's config at head dim 64 or 128.
inline FlashFacts flash_facts(int head_dim, AttnTier tier) {
  return head_dim == 64 ? flash_facts_at<64>(tier) : flash_facts_at<128>(tier);
}

/// The prefill tier of a call with `ctas` CTAs of 128 rows: at head dim 128 the wgmma tier where
/// TILEFOUNDRY_FLASH_WGMMA built it, this module's sm_90 code runs and its shared memory fits; else
/// TILEFOUNDRY_FLASH_WARP_ROWS's config, or where it is 0 the paired rows config from
/// kFlashPairedMinCtasPerSm CTAs an SM.
inline AttnTier flash_rows_tier(int64_t ctas, int head_dim, DeviceFacts const& dev) {
  if constexpr (TILEFOUNDRY_FLASH_WGMMA == 1 && TILEFOUNDRY_FLASH_WARP_ROWS == 0) {
    bool const fits = FlashWgmmaRowsConfig::kSmemBytes <= static_cast<size_t>(dev.smem_optin);
    if (head_dim == 128 && dev.sm90_code && fits) return AttnTier::wgmma_rows;
  }
  if constexpr (TILEFOUNDRY_FLASH_WARP_ROWS == 16) {
    return AttnTier::mma_rows;
  } else if constexpr (TILEFOUNDRY_FLASH_WARP_ROWS == 32) {
    return AttnTier::mma_rows_paired;
  } else {
    return ctas >= kFlashPairedMinCtasPerSm * dev.sms ? AttnTier::mma_rows_paired : AttnTier::mma_rows;
  }
}

/// How many clusters of the keys config's cluster kernel fit on the device at once, per size.
struct ClusterRoom {
  int of8;   ///< clusters of 8 CTAs (0: none, or the queries failed)
  int of16;  ///< clusters of 16 CTAs (non-portable)
};

/// Readies Cfg's cluster kernel on the current device once (its dynamic shared memory, non-portable
/// cluster sizes) and reads its ClusterRoom; the plan's choice and the launch both rest on it.
template <class T, class LenT, class Cfg>
inline ClusterRoom flash_cluster_room() {
  static std::atomic<int> cache[kMaxDevices][2];  // 1 + clusters of 8, of 16 (0: not read yet)
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess || dev < 0 || dev >= kMaxDevices) return {0, 0};
  if (cache[dev][0].load() == 0) {
    auto kernel = flash_mma_kernel<T, LenT, Cfg, true>;
    bool ok = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                   static_cast<int>(Cfg::kSmemBytes)) == cudaSuccess &&
              cudaFuncSetAttribute(kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1) == cudaSuccess;
    auto room = [&](unsigned size) {
      cudaLaunchConfig_t config{};
      config.gridDim = dim3(1, 1, size);
      config.blockDim = dim3(Cfg::kThreads);
      config.dynamicSmemBytes = Cfg::kSmemBytes;
      cudaLaunchAttribute attr[1];
      attr[0].id = cudaLaunchAttributeClusterDimension;
      attr[0].val.clusterDim.x = 1;
      attr[0].val.clusterDim.y = 1;
      attr[0].val.clusterDim.z = size;
      config.attrs = attr;
      config.numAttrs = 1;
      int clusters = 0;
      ok = ok && cudaOccupancyMaxActiveClusters(&clusters, kernel, &config) == cudaSuccess;
      return ok ? clusters : 0;
    };
    int const of8 = room(kClusterPortable);
    int const of16 = room(kClusterNonPortable);
    if (!ok) (void)cudaGetLastError();  // a refused query must not read as a later launch's error
    cache[dev][1].store(of16 + 1);
    cache[dev][0].store(of8 + 1);
  }
  return {cache[dev][0].load() - 1, cache[dev][1].load() - 1};
}

template <class T, class LenT>
inline ClusterRoom keys_cluster_room(int head_dim) {
  if constexpr (is_half_v<T>) {
    return head_dim == 64 ? flash_cluster_room<T, LenT, FlashKeysConfig<64>>()
                          : flash_cluster_room<T, LenT, FlashKeysConfig<128>>();
  } else {
    return {0, 0};
  }
}

/// CTAs along the g · Sq rows of a kv head, for a config of `rows` rows a CTA.
template <class T, class LenT>
inline int64_t flash_row_blocks(AttentionArgs<T, LenT> const& a, int64_t rows) {
  return (a.heads / a.kv_heads * a.sq + rows - 1) / rows;
}

/// A tensor-core call's row blocks and splits for a config with facts `f` (at most `most` splits):
/// enough CTAs for `f.per_sm` an SM.
template <class T, class LenT>
inline AttnPlan flash_split(AttentionArgs<T, LenT> const& a, FlashFacts const& f, AttnTier tier, DeviceFacts const& dev,
                            int64_t most = std::numeric_limits<int>::max()) {
  int64_t const row_blocks = flash_row_blocks(a, f.rows);
  int64_t const ctas = row_blocks * a.batch * a.kv_heads;
  int64_t const target = static_cast<int64_t>(dev.sms) * f.per_sm;
  return split_keys(tier, ctas, target, a.skv, f.step, kFlashMinChunk, row_blocks, most);
}

/// The tier and split of a call on the current device; attention() and the workspace size agree.
/// Where this module's sm_90 code runs, the keys config's splits of a (row block, batch · kv head)
/// form one cluster: at most 16 of them when every cluster of 16 the call launches fits at once,
/// else at most the portable 8.
template <class T, class LenT>
inline AttnPlan attention_plan(AttentionArgs<T, LenT> const& a, int head_dim) {
  DeviceFacts const dev = device_facts();
  int64_t const g = a.heads / a.kv_heads;
  if (flash_mma_fits(a, head_dim, dev)) {
    // decode: one row tile of the keys config holds every row of a kv head
    bool const keys = g * a.sq <= flash_facts(head_dim, AttnTier::mma_keys).rows;
    int64_t const rows = flash_facts(head_dim, AttnTier::mma_rows).rows;
    AttnTier const tier =
        keys ? AttnTier::mma_keys : flash_rows_tier(flash_row_blocks(a, rows) * a.batch * a.kv_heads, head_dim, dev);
    FlashFacts const f = flash_facts(head_dim, tier);
    if (f.smem <= static_cast<size_t>(dev.smem_optin)) {
      int64_t const most = keys ? kKeysMaxSplits : std::numeric_limits<int>::max();
      AttnPlan plan = flash_split(a, f, tier, dev, most);
      if (keys && plan.splits > 1 && dev.sm90_code && a.skv <= kClusterMaxKeys) {
        ClusterRoom const room = keys_cluster_room<T, LenT>(head_dim);
        int64_t const ctas = plan.row_blocks * a.batch * a.kv_heads;
        int const cap = room.of16 >= ctas ? kClusterNonPortable : room.of8 > 0 ? kClusterPortable : 0;
        if (cap > 0) {
          plan = flash_split(a, f, tier, dev, cap);
          plan.cluster = plan.splits > 1;
        }
      }
      plan.solo = keys && plan.splits > 1 ? kFlashSoloKeys : 0;
      return plan;
    }
  }
  int64_t const blocks = (g * a.sq + kAttnWarps - 1) / kAttnWarps;
  return split_keys(AttnTier::simt, a.batch * a.kv_heads * blocks, 2 * static_cast<int64_t>(dev.sms), a.skv,
                    kAttnKeys, kAttnMinChunk, blocks);
}

/// Raises a kernel's dynamic shared-memory limit once per device (not again inside a capture).
template <class Kernel>
inline cudaError_t allow_smem(Kernel kernel, size_t smem, std::atomic<unsigned long long>& raised) {
  if (smem <= 48 * 1024) return cudaSuccess;
  int device = 0;
  cudaError_t err = cudaGetDevice(&device);
  if (err != cudaSuccess) return err;
  unsigned long long const bit = 1ull << (device % 64);
  if (!(raised.load() & bit)) {
    err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem));
    if (err != cudaSuccess) return err;
    raised.fetch_or(bit);
  }
  return cudaSuccess;
}

template <class T, class LenT, class Cfg>
inline cudaError_t flash_mma(AttentionArgs<T, LenT> const& a, AttnPartials part, AttnPlan const& plan,
                             cudaStream_t stream) {
  auto kernel = flash_mma_kernel<T, LenT, Cfg, false>;
  static std::atomic<unsigned long long> raised{0};
  cudaError_t const err = allow_smem(kernel, Cfg::kSmemBytes, raised);
  if (err != cudaSuccess) return err;
  dim3 const grid(static_cast<unsigned>(plan.row_blocks), static_cast<unsigned>(a.batch * a.kv_heads),
                  static_cast<unsigned>(plan.splits));
  return launch_kernel(kernel, grid, dim3(Cfg::kThreads), Cfg::kSmemBytes, stream, a, part,
                       static_cast<int>(plan.chunk), plan.solo);
}

/// The wgmma tier (attention_wgmma.cuh) at head dim 128, in config Cfg.
template <class T, class LenT, class Cfg = FlashWgmmaRowsConfig>
inline cudaError_t flash_wgmma(AttentionArgs<T, LenT> const& a, AttnPartials part, AttnPlan const& plan,
                               cudaStream_t stream) {
  auto kernel = flash_wgmma_kernel<T, LenT, Cfg>;
  static std::atomic<unsigned long long> raised{0};
  cudaError_t const err = allow_smem(kernel, Cfg::kSmemBytes, raised);
  if (err != cudaSuccess) return err;
  dim3 const grid(static_cast<unsigned>(plan.row_blocks), static_cast<unsigned>(a.batch * a.kv_heads),
                  static_cast<unsigned>(plan.splits));
  return launch_kernel(kernel, grid, dim3(Cfg::kThreads), Cfg::kSmemBytes, stream, a, part, static_cast<int>(plan.chunk));
}

/// The prefill tier the plan chose; TILEFOUNDRY_FLASH_WARP_ROWS of 16 or 32 builds only its config,
/// and the wgmma tier is built only where TILEFOUNDRY_FLASH_WGMMA is set (and D = 128).
template <int D, class T, class LenT>
inline cudaError_t flash_rows(AttentionArgs<T, LenT> const& a, AttnPartials part, AttnPlan const& plan,
                              cudaStream_t stream) {
  if constexpr (TILEFOUNDRY_FLASH_WGMMA == 1 && TILEFOUNDRY_FLASH_WARP_ROWS == 0 && D == 128) {
    if (plan.tier == AttnTier::wgmma_rows) return flash_wgmma(a, part, plan, stream);
  }
  if constexpr (TILEFOUNDRY_FLASH_WARP_ROWS != 32) {
    if (plan.tier == AttnTier::mma_rows) return flash_mma<T, LenT, FlashRowsConfig<D>>(a, part, plan, stream);
  }
  if constexpr (TILEFOUNDRY_FLASH_WARP_ROWS != 16) {
    if (plan.tier == AttnTier::mma_rows_paired) {
      return flash_mma<T, LenT, FlashPairedRowsConfig<D>>(a, part, plan, stream);
    }
  }
  return cudaErrorInvalidValue;  // flash_rows_tier never picks a config this build leaves out
}

/// The keys config with one cluster of plan.splits CTAs per (row block, batch · kv head), merged
/// inside it: one launch, with PDL (the plan picks this only where sm_90 code runs, as
/// launch_kernel's PDL does; flash_cluster_room readied the kernel).
template <class T, class LenT, class Cfg>
inline cudaError_t flash_mma_cluster(AttentionArgs<T, LenT> const& a, AttnPlan const& plan, cudaStream_t stream) {
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(static_cast<unsigned>(plan.row_blocks), static_cast<unsigned>(a.batch * a.kv_heads),
                        static_cast<unsigned>(plan.splits));
  config.blockDim = dim3(Cfg::kThreads);
  config.dynamicSmemBytes = Cfg::kSmemBytes;
  config.stream = stream;
  cudaLaunchAttribute attr[2];
  attr[0].id = cudaLaunchAttributeClusterDimension;
  attr[0].val.clusterDim.x = 1;
  attr[0].val.clusterDim.y = 1;
  attr[0].val.clusterDim.z = static_cast<unsigned>(plan.splits);
  attr[1].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[1].val.programmaticStreamSerializationAllowed = 1;
  config.attrs = attr;
  config.numAttrs = device_facts().pdl ? 2 : 1;
  return cudaLaunchKernelEx(&config, flash_mma_kernel<T, LenT, Cfg, true>, a, AttnPartials{nullptr, nullptr, 0},
                            static_cast<int>(plan.chunk), plan.solo);
}

}  // namespace detail

namespace detail {

/// The merge of a split launch's partials in the workspace into out. It launches while the split
/// kernel runs and waits in pdl_begin() for its partials.
template <int D, class T, class LenT>
inline cudaError_t launch_attention_merge(AttentionArgs<T, LenT> const& a, AttnPartials part, AttnPlan const& plan,
                                          cudaStream_t stream) {
  int64_t const rows = a.batch * a.heads * a.sq;
  SoloRows<LenT> const solo{a.kv_len, a.kv_len_per_batch, a.skv, a.heads * a.sq, plan.solo};
  return launch_kernel(attention_merge<T, D, LenT>, dim3(static_cast<unsigned>(rows)), dim3(kMergeRuns * 32), 0,
                       stream, part, a.out_rows(), plan.splits, solo);
}

}  // namespace detail

template <class T, class LenT>
inline size_t attention_workspace_bytes(AttentionArgs<T, LenT> const& a, int head_dim) {
  int64_t const rows = a.batch * a.heads * a.sq;
  if (rows == 0) return 0;
  detail::AttnPlan const plan = detail::attention_plan(a, head_dim);
  return plan.cluster ? 0 : detail::attention_partial_bytes(plan.splits, rows, head_dim);
}

/**
 * @brief Run the attention atom on `stream`; `workspace` holds attention_workspace_bytes(a, D).
 * @tparam D head dim (q, k and v share it), a multiple of 32 up to 256
 * @tparam Stages simt tier: 2 two-window K/V prefetch; 1 ordered loads (when two stages exceed shared memory)
 */
template <int D, int Stages, class T, class LenT>
inline cudaError_t attention(AttentionArgs<T, LenT> const& a, void* workspace, cudaStream_t stream) {
  using S = detail::AttnShape<T, D>;
  int64_t const rows = a.batch * a.heads * a.sq;
  if (rows == 0) return cudaSuccess;
  detail::AttnPlan const plan = detail::attention_plan(a, D);
  bool const merged = plan.splits > 1 && !plan.cluster;  // partials in the workspace, a merge kernel
  detail::AttnPartials const part = merged ? detail::AttnPartials::in(workspace, plan.splits, rows)
                                           : detail::AttnPartials{nullptr, nullptr, rows};
  cudaError_t err = cudaSuccess;
  if (plan.tier != detail::AttnTier::simt) {
    if constexpr (is_half_v<T> && (D == 64 || D == 128)) {
      if (plan.tier != detail::AttnTier::mma_keys) {
        err = detail::flash_rows<D>(a, part, plan, stream);
      } else if (plan.cluster) {
        err = detail::flash_mma_cluster<T, LenT, detail::FlashKeysConfig<D>>(a, plan, stream);
      } else {
        err = detail::flash_mma<T, LenT, detail::FlashKeysConfig<D>>(a, part, plan, stream);
      }
    } else {
      return cudaErrorInvalidValue;  // the plan never picks tensor cores for these
    }
  } else {
    auto kernel = detail::attention_kernel<T, LenT, D, Stages>;
    constexpr size_t smem = S::template smem_bytes<Stages>();
    static std::atomic<unsigned long long> raised{0};
    err = detail::allow_smem(kernel, smem, raised);
    if (err != cudaSuccess) return err;
    auto is16 = [](void const* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; };
    int const aligned = is16(a.q) && is16(a.k) && is16(a.v) ? 1 : 0;
    dim3 const grid(static_cast<unsigned>(a.batch * a.kv_heads * plan.row_blocks), static_cast<unsigned>(plan.splits));
    err = launch_kernel(kernel, grid, dim3(detail::kAttnWarps * 32), smem, stream, a, part, plan.chunk, aligned);
  }
  if (err != cudaSuccess || !merged) return err;
  return detail::launch_attention_merge<D>(a, part, plan, stream);
}

}  // namespace tilefoundry::atoms
