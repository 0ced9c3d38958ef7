// Tensor-core tier of the attention atom (attention.cuh): 16-bit q, k, v with head dim 64 or 128,
// FlashAttention-2's schedule on mma.sync m16n8k16 with f32 accumulation.
//
// Rows. The g = Hq / Hkv query heads sharing kv head hk own g · Sq consecutive rows of q and out
// (row ρ is head hk · g + ρ / Sq, position ρ % Sq), so a CTA takes a block of ρ rows and one
// (batch, kv head): every K/V tile it loads serves all of them (grouped-query reuse).
// Warps. Each warp owns 16 · MTiles rows (MTiles m16 tiles) and a 16·n-key slice of each K/V step:
//   rows config  (prefill): 8 row warps x 1 key warp,  128 rows, 64-key steps
//   paired rows  (prefill): 4 row warps of two m16 tiles, 128 rows, 32-key steps
//   keys config  (decode):  1 row warp  x 4 key warps,  16 rows, 4 x 16 = 64-key steps
// The keys config serves g · Sq <= 16 (one token per head); its key warps keep separate online
// softmax states that the epilogue combines. With two row tiles a warp, each K and V fragment a
// warp loads feeds two MMAs per tile pair instead of one (half the ldmatrix traffic per MMA, as
// FlashAttention-2 runs head dim 128), and Q is reloaded from shared memory each step, since its
// fragments and two tiles' O accumulators would not fit in registers together.
// Per step and warp: S = Q Kᵀ (one tile's Q fragments loaded once into registers, K by ldmatrix.x4
// from rows padded by 16 bytes, so the 8 row addresses of each 8x8 matrix hit distinct bank groups);
// scores scaled by scale · log2(e) and masked only on tiles that cross a row's visible end; the
// online softmax on the accumulator fragments (a row lives in one lane quad: two shuffles); P
// rounded to the input type in registers and used directly as the A operand of O += P V
// (V by ldmatrix.x4.trans). Tiles no row of the warp can see are skipped.
// Pipeline: K/V steps stream through Stages shared-memory stages with cp.async, Stages - 1 steps
// ahead; one barrier per step (the stage refilled at step s was consumed at step s - 1).
// Epilogue: each warp parks (O, m, l) in shared memory (over Q and the drained stages); the CTA
// combines its key warps and writes out's rows where out_rows() places them (16-bit, 8-byte
// stores; D = 64 / 128 keeps every row 16-byte aligned in either order), or split-KV partials: to the
// workspace for attention_merge, or (Cluster, sm_90) beside the combine buffer in its own shared
// memory, where cluster_merge (attention_merge.cuh) reads them across the cluster.
// Grid: (row blocks, batch · Hkv, splits), Cluster: one cluster of `splits` CTAs along z (rank =
// split); causal launches each head's last (heaviest) row block first.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <type_traits>

#include <cuda_runtime_api.h>

#include <tilefoundry/runtime/cuda/atoms/attention_args.cuh>
#include <tilefoundry/runtime/cuda/atoms/attention_merge.cuh>
#include <tilefoundry/runtime/cuda/atoms/gemm_sm80.cuh>
#include <tilefoundry/runtime/cuda/atoms/launch.cuh>
#include <tilefoundry/runtime/cuda/atoms/scalar.cuh>

namespace tilefoundry::atoms::detail {

// ---------------------------------------------------------------- fragment layouts
//
// mma.sync.m16n8k16 (PTX ISA, "Matrix Fragments for mma.m16n8k16 with floating point type"),
// lane L, group g = L / 4, thread-in-group t = L % 4; a .b32 register holds two 16-bit values,
// the lower-indexed one in the low half:
//   A (16 x 16, row)  reg j (0..3), half h: A[g + 8 (j % 2)][2t + h + 8 (j / 2)]
//   B (16 x 8, col)   reg j (0..1), half h: B[2t + h + 8 j][g]
//   C (16 x 8, f32)   elem e (0..3):        C[g + 8 (e / 2)][2t + e % 2]
// ldmatrix.sync.m8n8.x4.b16: lanes 8i .. 8i+7 give the addresses of rows 0..7 of matrix i, and
// register i of lane L receives from matrix i
//   plain:  row L / 4, columns 2t, 2t + 1
//   .trans: rows 2t, 2t + 1 of column L / 4   (the transposed matrix's row L / 4)
// So lane L addresses row L % 8 of matrix L / 8, and each operand below is four 8x8 matrices:
//
// Q as A (rows x d, row-major in smem), k-step kk: matrix i = rows 8 (i % 2) .., d 16 kk + 8 (i / 2)
//   -> reg i is A's reg j = i (row g + 8 (i % 2), col 2t + 8 (i / 2)).
//   lane L: row 8 ((L / 8) % 2) + L % 8 = L % 16, col 8 (L / 16).
// K as B of S = Q Kᵀ (B[d][key] = K[key][d], K row-major keys x d), two n-tiles 2jp, 2jp + 1
// (keys 16 jp ..) and k-step kk: matrix i = keys 16 jp + 8 (i / 2) .., d 16 kk + 8 (i % 2).
//   plain ldmatrix gives lane L K[key0 + g][d0 + 2t, +1] = B[d0 + 2t, +1][g]: B's reg (i % 2) of
//   n-tile 2jp + i / 2.  lane L: key 8 (L / 16) + L % 8, d 8 ((L / 8) % 2).
// V as B of O = P V (B[key][d] = V[key][d], V row-major keys x d), k-step kk (keys 16 kk ..) and
// two n-tiles 2np, 2np + 1 (d 16 np ..): matrix i = keys 16 kk + 8 (i % 2) .., d 16 np + 8 (i / 2).
//   .trans gives lane L V[key0 + 2t, +1][d0 + g] = B[2t, +1][g]: B's reg (i % 2) of n-tile
//   2np + i / 2.  lane L: key 8 ((L / 8) % 2) + L % 8 = L % 16, d 8 (L / 16).
// P as A of O = P V, k-step kk (keys 16 kk .. of the warp's slice) from S's C tiles 2kk, 2kk + 1:
//   A reg 0 = (g, 2t..)       = C tile 2kk     elems 0, 1
//   A reg 1 = (g + 8, 2t..)   = C tile 2kk     elems 2, 3
//   A reg 2 = (g, 8 + 2t..)   = C tile 2kk + 1 elems 0, 1
//   A reg 3 = (g + 8, 8 + 2t..) = C tile 2kk + 1 elems 2, 3

/// Element offset (pitch = row stride) of the row lane L addresses for Q's A fragment.
__host__ __device__ constexpr int ldm_q_offset(int lane, int pitch) { return (lane % 16) * pitch + (lane / 16) * 8; }

/// Element offset of the row lane L addresses for K's B fragments (two n-tiles, one k-step).
__host__ __device__ constexpr int ldm_k_offset(int lane, int pitch) {
  return ((lane / 16) * 8 + lane % 8) * pitch + ((lane / 8) % 2) * 8;
}

/// Element offset of the row lane L addresses for V's B fragments (.trans; one k-step, two n-tiles).
__host__ __device__ constexpr int ldm_v_offset(int lane, int pitch) { return (lane % 16) * pitch + (lane / 16) * 8; }

/// Row (within the 16) and column (within the 8) of accumulator element e of lane L.
__host__ __device__ constexpr int acc_row(int lane, int e) { return lane / 4 + 8 * (e / 2); }
__host__ __device__ constexpr int acc_col(int lane, int e) { return 2 * (lane % 4) + e % 2; }

/// Two floats rounded to one register of two 16-bit values, `lo` in the low half.
template <class T>
__host__ __device__ inline uint32_t pack_half2(float lo, float hi) {
#if defined(__CUDA_ARCH__)
  uint32_t r;
  // cvt.rn.{bf16x2,f16x2}.f32 d, a, b puts a in the upper half and b in the lower.
  if constexpr (std::is_same_v<T, bf16>) {
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
  } else {
    asm("cvt.rn.f16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
  }
  return r;
#else
  return static_cast<uint32_t>(T(lo).raw()) | (static_cast<uint32_t>(T(hi).raw()) << 16);
#endif
}

/// P's A fragment for one k-step from the score accumulators of its two key n-tiles.
template <class T>
__host__ __device__ inline void p_operand(uint32_t (&a)[4], float const (&lo)[4], float const (&hi)[4]) {
  a[0] = pack_half2<T>(lo[0], lo[1]);
  a[1] = pack_half2<T>(lo[2], lo[3]);
  a[2] = pack_half2<T>(hi[0], hi[1]);
  a[3] = pack_half2<T>(hi[2], hi[3]);
}

/// Four 8x8 b16 matrices, transposed (B fragments from N-major smem).
__device__ inline void ldmatrix_x4_trans(uint32_t (&r)[4], void const* row_addr) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(row_addr)));
#endif
}

/// d += a · (b0, b1) for one m16n8k16 atom.
template <class T>
__device__ inline void mma_pair(float (&d)[4], uint32_t const (&a)[4], uint32_t b0, uint32_t b1) {
  uint32_t const b[2] = {b0, b1};
  mma_16816<T>(d, a, b);
}

// ---------------------------------------------------------------- configuration

/**
 * @brief One tensor-core attention kernel's shape.
 * @tparam RowWarps warps along rows (16 rows each); @tparam KeyWarps warps along keys
 * @tparam Keys keys per warp and step (a multiple of 16); @tparam Stages K/V stages in smem
 * @tparam MTiles m16 row tiles per warp (1 or 2); with 2, Q is reloaded from smem every step
 */
template <int D, int RowWarps, int KeyWarps, int Keys, int Stages, int MinBlocks, int MTiles = 1>
struct FlashConfig {
  static_assert(D == 64 || D == 128, "attention tensor-core tier: head dim 64 or 128");
  static_assert(Keys % 16 == 0 && Stages >= 2, "attention tensor-core tier: 16-key slices, two stages or more");
  static_assert(MTiles == 1 || (MTiles == 2 && KeyWarps == 1),
                "attention tensor-core tier: two row tiles a warp only without key warps");
  static constexpr int kD = D;
  static constexpr int kRowWarps = RowWarps;
  static constexpr int kKeyWarps = KeyWarps;
  static constexpr int kKeys = Keys;
  static constexpr int kStages = Stages;
  static constexpr int kMinBlocks = MinBlocks;
  static constexpr int kMTiles = MTiles;
  static constexpr int kWarpRows = 16 * MTiles;
  static constexpr bool kQInRegs = MTiles == 1;
  static constexpr int kWarps = RowWarps * KeyWarps;
  static constexpr int kThreads = 32 * kWarps;
  static constexpr int kRows = kWarpRows * RowWarps;
  static constexpr int kStepKeys = Keys * KeyWarps;
  static constexpr int kPitch = D + 8;    // 16-bit elements per smem row: 16-byte pad
  static constexpr int kCPitch = D + 8;   // floats per combine row: float2 stores of a quad row land apart
  static constexpr size_t kQBytes = static_cast<size_t>(kRows) * kPitch * 2;
  static constexpr size_t kStageBytes = static_cast<size_t>(2) * kStepKeys * kPitch * 2;
  static constexpr size_t kSmemBytes = kQBytes + Stages * kStageBytes;
  static_assert(static_cast<size_t>(kWarps) * kWarpRows * (kCPitch + 2) * 4 <= kSmemBytes,
                "attention tensor-core tier: the epilogue's combine buffer must fit in shared memory");
  static_assert((kRows * D / 4) % kThreads == 0, "attention tensor-core tier: the epilogue divides evenly over the threads");
};

// Rows a warp of the prefill tier (cuda option attention_warp_rows): 16 (the rows config), 32 (the
// paired rows config), or 0, the default: per call (attention.cuh's flash_rows_tier).
#ifndef TILEFOUNDRY_FLASH_WARP_ROWS
#define TILEFOUNDRY_FLASH_WARP_ROWS 0
#endif
static_assert(TILEFOUNDRY_FLASH_WARP_ROWS == 0 || TILEFOUNDRY_FLASH_WARP_ROWS == 16 ||
                  TILEFOUNDRY_FLASH_WARP_ROWS == 32,
              "attention tensor-core tier: TILEFOUNDRY_FLASH_WARP_ROWS is 0 (per call), 16 or 32");

/// Prefill, 16 rows a warp: 8 warps, Q in registers, 64-key steps, three stages (two steps in
/// flight), one CTA an SM.
template <int D>
using FlashRowsConfig = FlashConfig<D, 8, 1, 64, 3, 1>;
/// Prefill, 32 rows a warp: 4 warps of two m16 tiles sharing each K and V fragment, Q reloaded,
/// 32-key steps, three stages, two CTAs an SM: 253 registers and no stack, where 64-key steps of two
/// stages took 255 and an 88-byte stack, and ran 4% slower (bench/gpu/kernels/attention_sweep.cu).
template <int D>
using FlashPairedRowsConfig = FlashConfig<D, 4, 1, 32, 3, 2, 2>;
static_assert(FlashRowsConfig<128>::kRows == FlashPairedRowsConfig<128>::kRows,
              "attention tensor-core tier: both prefill configs take the same row blocks");
/// Decode (g · Sq <= 16): 16 rows, 4 key warps of 16 keys; two CTAs per SM stream K/V.
template <int D>
using FlashKeysConfig = FlashConfig<D, 1, 4, 16, D == 64 ? 4 : 3, 2>;

// ---------------------------------------------------------------- one warp's key slice

/// One warp's running state: its Q fragments (one row tile: kept in registers; two: unused, Q is
/// reloaded), and per row tile the O accumulators and the online softmax of the lane's two rows
/// (g, g + 8).
template <int D, int MT>
struct FlashWarpState {
  uint32_t qf[D / 16][4];
  float o[MT][D / 8][4];
  float m[MT][2];  ///< running max of scale · log2(e) · score
  float l[MT][2];  ///< this lane's share of the running sum (quad-reduced at the end)
};

/**
 * @brief Folds one slice of Keys keys into a warp's state: S = Q Kᵀ, online softmax, O += P V.
 * @param qt QInRegs false: this lane's ldmatrix address of Q's first row tile in smem (tile mt at
 *        qt + 16 mt P); @param flip Q's sign bits to flip on a reload (a negative scale)
 * @param kt, vt the slice's first K / V row in smem (pitch P); k_off, v_off this lane's ldmatrix offsets
 * @param sl2 |scale| · log2(e) (Q was negated for a negative scale)
 * @param lim tile mt's element (j, e) is masked when 8j + e % 2 >= lim[mt][e / 2] (Masked only)
 */
template <bool Masked, bool QInRegs, class T, int D, int Keys, int P, int MT>
__device__ __forceinline__ void flash_slice(FlashWarpState<D, MT>& w, T const* qt, uint32_t flip, T const* kt,
                                            T const* vt, int k_off, int v_off, float sl2, int const (&lim)[MT][2]) {
  static_assert(!QInRegs || MT == 1, "attention tensor-core tier: Q stays in registers for one row tile");
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  float sc[MT][Keys / 8][4] = {};
#pragma unroll
  for (int kk = 0; kk < D / 16; ++kk) {
    uint32_t qa[MT][4];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
      if constexpr (QInRegs) {
#pragma unroll
        for (int r = 0; r < 4; ++r) qa[mt][r] = w.qf[kk][r];
      } else {
        ldmatrix_x4(qa[mt], qt + mt * 16 * P + kk * 16);
#pragma unroll
        for (int r = 0; r < 4; ++r) qa[mt][r] ^= flip;
      }
    }
#pragma unroll
    for (int jp = 0; jp < Keys / 16; ++jp) {
      uint32_t kf[4];
      ldmatrix_x4(kf, kt + k_off + jp * 16 * P + kk * 16);
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
        mma_pair<T>(sc[mt][2 * jp], qa[mt], kf[0], kf[1]);
        mma_pair<T>(sc[mt][2 * jp + 1], qa[mt], kf[2], kf[3]);
      }
    }
  }
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) {
    if constexpr (Masked) {
#pragma unroll
      for (int j = 0; j < Keys / 8; ++j) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          if (8 * j + e % 2 >= lim[mt][e / 2]) sc[mt][j][e] = kNegInf;
        }
      }
    }
    // sl2 > 0, so the row max of raw scores scales to the row max of scaled ones.
    float mx[2] = {kNegInf, kNegInf};
#pragma unroll
    for (int j = 0; j < Keys / 8; ++j) {
      mx[0] = fmaxf(mx[0], fmaxf(sc[mt][j][0], sc[mt][j][1]));
      mx[1] = fmaxf(mx[1], fmaxf(sc[mt][j][2], sc[mt][j][3]));
    }
    float base[2], c[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {  // a row's scores sit in the 4 lanes of one quad
      mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 1));
      mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 2));
      float const mn = fmaxf(w.m[mt][h], mx[h] * sl2);
      base[h] = mn == kNegInf ? 0.0f : mn;  // a row that sees nothing yet keeps p = 0, no NaN
      c[h] = w.m[mt][h] == mn ? 1.0f : fast_exp2(w.m[mt][h] - base[h]);
      w.m[mt][h] = mn;
    }
    float rs[2] = {0.0f, 0.0f};
#pragma unroll
    for (int j = 0; j < Keys / 8; ++j) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        sc[mt][j][e] = fast_exp2(fmaf(sc[mt][j][e], sl2, -base[e / 2]));
        rs[e / 2] += sc[mt][j][e];
      }
    }
    w.l[mt][0] = w.l[mt][0] * c[0] + rs[0];
    w.l[mt][1] = w.l[mt][1] * c[1] + rs[1];
    if (!__all_sync(0xffffffffu, c[0] == 1.0f && c[1] == 1.0f)) {  // some row's max moved
#pragma unroll
      for (int n = 0; n < D / 8; ++n) {
        w.o[mt][n][0] *= c[0];
        w.o[mt][n][1] *= c[0];
        w.o[mt][n][2] *= c[1];
        w.o[mt][n][3] *= c[1];
      }
    }
  }
#pragma unroll
  for (int kk = 0; kk < Keys / 16; ++kk) {
    uint32_t pa[MT][4];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) p_operand<T>(pa[mt], sc[mt][2 * kk], sc[mt][2 * kk + 1]);
#pragma unroll
    for (int np = 0; np < D / 16; ++np) {
      uint32_t vf[4];
      ldmatrix_x4_trans(vf, vt + v_off + kk * 16 * P + np * 16);
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
        mma_pair<T>(w.o[mt][2 * np], pa[mt], vf[0], vf[1]);
        mma_pair<T>(w.o[mt][2 * np + 1], pa[mt], vf[2], vf[3]);
      }
    }
  }
}

// ---------------------------------------------------------------- a CTA's rows and keys

/// What a prefill or decode CTA of the tensor-core tiers (this file's and attention_wgmma.cuh's)
/// works on: its block of rows ρ of one (batch, kv head) and its split's share of the keys.
struct FlashRange {
  int64_t bk;        ///< b · Hkv + hk (blockIdx.y)
  int64_t b, h0;     ///< the batch, and the first q head of kv head hk: hk · g
  int64_t rows_kv;   ///< rows ρ sharing the kv head: g · Sq
  int64_t rho0;      ///< the block's first ρ
  int64_t row_base;  ///< q / out row of ρ = 0
  int64_t len;       ///< the batch's valid keys
  int k_begin, k_end;
  bool alone;  ///< solo: split 0 takes every key alone, and the other splits leave
};

/// This CTA's batch's kv_len entry as stored (kv_entry); kv_clamp gives its valid keys.
template <class T, class LenT>
__device__ inline int64_t flash_entry(AttentionArgs<T, LenT> const& a) {
  uint32_t const b = blockIdx.y / static_cast<uint32_t>(a.kv_heads);  // batch · Hkv is a grid dimension
  return kv_entry(a.kv_len, a.kv_len_per_batch, b, a.skv);
}

/**
 * @brief The row block and key range of this CTA (grid: row blocks, batch · Hkv, splits; causal
 *        launches each head's last, heaviest, row block first).
 * The splits share the keys the row block sees at run time (the same for every split of it): an
 * even share each, in whole steps of `step`, never more than the capacity's `chunk` the plan
 * passed. At a short kv_len each split with keys takes one step and the rest none, or, while the
 * block sees at most `solo` keys (solo > 0), split 0 all of them. `len`: the batch's valid keys.
 */
template <class T, class LenT>
__device__ inline FlashRange flash_range(AttentionArgs<T, LenT> const& a, int rows, int step, int chunk, int solo,
                                         int64_t len) {
  // Every index divided here fits 32 bits (flash_mma_fits: g · Sq below 2^31, Skv below 2^30,
  // batch · Hkv a grid dimension), so each division by a run-time extent is one 32-bit sequence.
  // A 64-bit one is a range test and, where an operand does not fit 32 bits, a subroutine call,
  // and they all lie between the PDL wait and the first load.
  FlashRange r;
  uint32_t const kv_heads = static_cast<uint32_t>(a.kv_heads), sq = static_cast<uint32_t>(a.sq);
  uint32_t const group = static_cast<uint32_t>(a.heads) / kv_heads;
  uint32_t const bk = blockIdx.y, b = bk / kv_heads, hk = bk - b * kv_heads;
  r.rows_kv = static_cast<int64_t>(group) * sq;
  uint32_t const rb = a.causal ? gridDim.x - 1 - blockIdx.x : blockIdx.x;
  r.bk = bk;
  r.b = b;
  r.h0 = static_cast<int64_t>(hk) * group;
  r.rho0 = static_cast<int64_t>(rb) * rows;
  r.row_base = (r.b * a.heads + r.h0) * a.sq;
  r.len = len;
  // Row i sees keys [0, min(len, i + len - Sq + 1)) when causal (the last query sees the last key).
  int64_t cta_end = r.len;
  if (a.causal) {
    uint32_t const first = static_cast<uint32_t>(r.rho0);
    uint32_t const last = static_cast<uint32_t>(r.rho0 + rows < r.rows_kv ? r.rho0 + rows : r.rows_kv) - 1;
    int64_t const i_max = first / sq == last / sq ? last % sq : sq - 1;
    cta_end = r.len < i_max + r.len - a.sq + 1 ? r.len : i_max + r.len - a.sq + 1;
  }
  r.alone = solo > 0 && cta_end <= solo;
  if (r.alone) {
    chunk = static_cast<int>(cta_end > step ? (cta_end + step - 1) / step * step : step);
  } else if (cta_end > 0) {
    uint32_t const share = (static_cast<uint32_t>(cta_end) + gridDim.z - 1) / gridDim.z;
    int64_t const even = (share + step - 1) / step * step;
    chunk = even < chunk ? static_cast<int>(even) : chunk;
  }
  r.k_begin = static_cast<int>(blockIdx.z) * chunk;
  r.k_end = static_cast<int>(cta_end < r.k_begin + chunk ? (cta_end > r.k_begin ? cta_end : r.k_begin)
                                                          : r.k_begin + chunk);
  return r;
}

/// The keys below which row ρ sees in this CTA's range; rows past the block's end (zero q, output
/// dropped) see every loaded key, so they never force masking.
template <class T, class LenT>
__device__ inline int flash_visible(AttentionArgs<T, LenT> const& a, FlashRange const& r, int64_t rho) {
  int64_t v = r.k_end;
  if (rho < r.rows_kv) {
    int64_t const i = static_cast<uint32_t>(rho) % static_cast<uint32_t>(a.sq);  // ρ < g · Sq < 2^31
    v = a.causal && i + r.len - a.sq + 1 < r.len ? i + r.len - a.sq + 1 : r.len;
    v = v < r.k_end ? v : r.k_end;
  }
  return static_cast<int>(v > 0 ? v : 0);
}

// ---------------------------------------------------------------- the kernel

/// Cluster: the CTAs of blockIdx.z are one cluster whose cluster_merge writes out (`part` unused).
/// solo: when the row block sees at most `solo` keys at run time, split 0 takes them all and
/// writes out itself, and the other splits leave at once: no partial, no cluster barrier (every
/// split reads the same kv_len, so all agree), and attention_merge skips the row (SoloRows).
/// 0: never.
template <class T, class LenT, class Cfg, bool Cluster>
__global__ void __launch_bounds__(Cfg::kThreads, Cfg::kMinBlocks)
flash_mma_kernel(AttentionArgs<T, LenT> a, AttnPartials part, int chunk, int solo) {
  // The keys configs (decode, whose start is its latency) read kv_len before the PDL wait, as a
  // guess the key range and the first copies start from, and again after it (a kernel still
  // running may be writing it): the second read is checked only once the copies are out, so no
  // load stands between the wait and them. A stale guess drops its copies and starts again from
  // the value after the wait. The rows configs (prefill) wait first and read kv_len once.
  constexpr bool kGuess = Cfg::kKeyWarps > 1;
  pdl_trigger();
  if constexpr (!kGuess) pdl_wait();
  int64_t const guess = kv_clamp(flash_entry(a), a.skv);
  constexpr int D = Cfg::kD, P = Cfg::kPitch, CP = Cfg::kCPitch, Keys = Cfg::kKeys, Step = Cfg::kStepKeys;
  constexpr int MT = Cfg::kMTiles, WR = Cfg::kWarpRows;
  constexpr int Stages = Cfg::kStages, kChunks = D / 8;  // 16-byte chunks per row
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  extern __shared__ __align__(16) unsigned char flash_smem[];
  T* const qs = reinterpret_cast<T*>(flash_smem);  // (kRows, P)
  T* const kv = qs + Cfg::kRows * P;                // stage s: K (Step, P) then V (Step, P)

  int const lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  int const rg = warp % Cfg::kRowWarps, kw = warp / Cfg::kRowWarps;
  int const g = lane / 4, t = lane % 4;

  FlashRange cr = flash_range(a, Cfg::kRows, Step, chunk, solo, guess);
  [[maybe_unused]] int64_t len = guess;
  if constexpr (kGuess) {
    pdl_wait();
    len = flash_entry(a);
  }
  int64_t const rows_kv = cr.rows_kv, rho0 = cr.rho0, row_base = cr.row_base, bk = cr.bk;  // whatever the length
  int k_begin = cr.k_begin, k_end = cr.k_end;
  bool alone = cr.alone;
  int n_steps = (k_end - k_begin + Step - 1) / Step;

  // This thread's 16-byte chunks of a K (or V) step: rows r0 + i · kRowStride, column col0.
  constexpr int kRowStride = Cfg::kThreads / kChunks;
  static_assert(Cfg::kThreads % kChunks == 0 && Step % kRowStride == 0 && Cfg::kRows % kRowStride == 0,
                "attention tensor-core tier: each thread loads whole columns of rows");
  int const r0 = threadIdx.x / kChunks, col0 = (threadIdx.x % kChunks) * 8;
  T const* const kg = a.k + bk * a.skv * D;
  T const* const vg = a.v + bk * a.skv * D;
  auto load_step = [&](int stage, int key0) {
    T* const ks = kv + stage * 2 * Step * P + r0 * P + col0;
    T const* const kp = kg + static_cast<int64_t>(key0 + r0) * D + col0;
    T const* const vp = vg + static_cast<int64_t>(key0 + r0) * D + col0;
    if (key0 + Step <= k_end) {  // every step but a range's last: no predicates
#pragma unroll
      for (int i = 0; i < Step / kRowStride; ++i) {
        cp_async_16(ks + i * kRowStride * P, kp + i * kRowStride * D, true);
        cp_async_16(ks + (Step + i * kRowStride) * P, vp + i * kRowStride * D, true);
      }
      return;
    }
    int const valid = k_end - key0 - r0;  // keys past the range read as 0 (and are masked)
#pragma unroll
    for (int i = 0; i < Step / kRowStride; ++i) {
      bool const ok = i * kRowStride < valid;
      cp_async_16(ks + i * kRowStride * P, ok ? kp + i * kRowStride * D : kg, ok);
      cp_async_16(ks + (Step + i * kRowStride) * P, ok ? vp + i * kRowStride * D : vg, ok);
    }
  };

  int const k_off = ldm_k_offset(lane, P);
  int const v_off = ldm_v_offset(lane, P);
  // Scores scale by |scale| · log2(e) > 0 (so row maxima commute with it); a negative scale
  // negates Q instead, which is exact in 16 bits.
  float const sl2 = fmaxf(fabsf(a.scale) * kLog2e, 1e-30f);
  FlashWarpState<D, MT> w;
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
    for (int n = 0; n < D / 8; ++n) w.o[mt][n][0] = w.o[mt][n][1] = w.o[mt][n][2] = w.o[mt][n][3] = 0.0f;
    w.m[mt][0] = w.m[mt][1] = kNegInf;
    w.l[mt][0] = w.l[mt][1] = 0.0f;
  }
  uint32_t const flip = a.scale < 0.0f ? 0x80008000u : 0u;  // both halves' sign bits
  T const* const qt = qs + rg * WR * P + ldm_q_offset(lane, P);  // this lane's Q rows (first tile)

  auto first_copies = [&] {  // Q, then the first Stages - 1 steps, each a commit group
    if (n_steps == 0 || (alone && blockIdx.z != 0)) return;
    T const* const qg = a.q + (row_base + rho0 + r0) * D + col0;
#pragma unroll
    for (int i = 0; i < Cfg::kRows / kRowStride; ++i) {
      bool const ok = rho0 + r0 + i * kRowStride < rows_kv;
      cp_async_16(qs + (r0 + i * kRowStride) * P + col0, ok ? qg + i * kRowStride * D : a.q, ok);
    }
    cp_async_commit();
#pragma unroll
    for (int s = 0; s < Stages - 1; ++s) {
      if (s < n_steps) load_step(s, k_begin + s * Step);
      cp_async_commit();
    }
  };
  first_copies();
  if constexpr (kGuess) {
    // An empty statement that may change len: its load is taken up here, once the first copies
    // are out, and not by the clamp, which nvcc would otherwise hoist above them.
    asm volatile("" : "+l"(len));
    len = kv_clamp(len, a.skv);
    if (len != guess) {  // each thread's copies land in its own chunks: drain them, then copy again
      cp_async_wait<0>();
      cr = flash_range(a, Cfg::kRows, Step, chunk, solo, len);
      k_begin = cr.k_begin;
      k_end = cr.k_end;
      alone = cr.alone;
      n_steps = (k_end - k_begin + Step - 1) / Step;
      first_copies();
    }
  }
  if (alone && blockIdx.z != 0) return;  // solo: split 0 takes the block's keys
  // Each lane's two rows (g, g + 8) of row tile mt see keys below vis[mt][h]: worked out while the
  // first copies are in flight, not between the PDL wait and them.
  int vis[MT][2];
  int wmin = k_end, wmax = 0;
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      vis[mt][h] = flash_visible(a, cr, rho0 + rg * WR + mt * 16 + g + 8 * h);
      wmin = min(wmin, vis[mt][h]);
      wmax = max(wmax, vis[mt][h]);
    }
  }
#pragma unroll
  for (int o = 16; o > 0; o /= 2) {
    wmin = min(wmin, __shfl_xor_sync(0xffffffffu, wmin, o));
    wmax = max(wmax, __shfl_xor_sync(0xffffffffu, wmax, o));
  }

  if (n_steps > 0) {
    cp_async_wait<Stages - 1>();  // the Q group has landed
    __syncthreads();
    if constexpr (Cfg::kQInRegs) {
#pragma unroll
      for (int kk = 0; kk < D / 16; ++kk) {
        ldmatrix_x4(w.qf[kk], qt + kk * 16);
#pragma unroll
        for (int r = 0; r < 4; ++r) w.qf[kk][r] ^= flip;
      }
    }
  }

  int stage = 0;  // step s reads stage s % Stages; step s + Stages - 1 refills the one before it
  for (int s = 0; s < n_steps; ++s) {
    cp_async_wait<Stages - 2>();  // step s has landed (this thread's copies) ...
    __syncthreads();              // ... everyone's, and step s - 1's stage is free
    if (s + Stages - 1 < n_steps) load_step(stage == 0 ? Stages - 1 : stage - 1, k_begin + (s + Stages - 1) * Step);
    cp_async_commit();
    T const* const kt = kv + stage * 2 * Step * P + kw * Keys * P;
    T const* const vt = kt + Step * P;
    stage = stage + 1 == Stages ? 0 : stage + 1;
    int const t0 = k_begin + s * Step + kw * Keys;  // this warp's first key
    if (t0 >= wmax) continue;                      // no row of the warp sees any of its keys
    if (t0 + Keys > wmin) {  // some row of the warp stops inside this slice
      // tile mt's element (j, e) is key t0 + 8j + 2t + e % 2 of row 16 mt + g + 8 (e / 2)
      int lim[MT][2];
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
        lim[mt][0] = vis[mt][0] - t0 - 2 * t;
        lim[mt][1] = vis[mt][1] - t0 - 2 * t;
      }
      flash_slice<true, Cfg::kQInRegs, T, D, Keys, P, MT>(w, qt, flip, kt, vt, k_off, v_off, sl2, lim);
    } else {
      int const none[MT][2] = {};
      flash_slice<false, Cfg::kQInRegs, T, D, Keys, P, MT>(w, qt, flip, kt, vt, k_off, v_off, sl2, none);
    }
  }

  // Epilogue: park each warp's (O, m, l) in shared memory (Q went to registers, the stages are
  // drained), then combine the key warps.
  cp_async_wait<0>();
  __syncthreads();
  float* const cmb = reinterpret_cast<float*>(flash_smem);  // (warps, WR, CP)
  float* const st = cmb + Cfg::kWarps * WR * CP;        // (warps, WR, 2): m, l
  float* const park_acc = st + Cfg::kWarps * WR * 2;    // Cluster: the CTA's partial (kRows, D) ...
  float* const park_ml = park_acc + Cfg::kRows * D;     // ... and its (kRows, 2): m, l
  static_assert(!Cluster || (static_cast<size_t>(Cfg::kWarps) * WR * (CP + 2) + Cfg::kRows * (D + 2)) * 4 <=
                                Cfg::kSmemBytes,
                "attention tensor-core tier: the parked cluster partial must fit beside the combine buffer");
  static_assert((Cfg::kWarps * WR * (CP + 2)) % 4 == 0, "attention tensor-core tier: parked rows 16-byte aligned");
  float* const mine = cmb + warp * WR * CP;
  AttnBlockRows<T> const out = a.out_rows().block(cr.b, cr.h0);
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      w.l[mt][h] += __shfl_xor_sync(0xffffffffu, w.l[mt][h], 1);
      w.l[mt][h] += __shfl_xor_sync(0xffffffffu, w.l[mt][h], 2);
    }
#pragma unroll
    for (int n = 0; n < D / 8; ++n) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        *reinterpret_cast<float2*>(mine + (mt * 16 + g + 8 * h) * CP + 8 * n + 2 * t) =
            make_float2(w.o[mt][n][2 * h], w.o[mt][n][2 * h + 1]);
      }
    }
    if (t == 0) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        st[(warp * WR + mt * 16 + g + 8 * h) * 2] = w.m[mt][h];
        st[(warp * WR + mt * 16 + g + 8 * h) * 2 + 1] = w.l[mt][h];
      }
    }
  }
  __syncthreads();
#pragma unroll
  for (int it = 0; it < Cfg::kRows * D / 4 / Cfg::kThreads; ++it) {
    int const idx = threadIdx.x + it * Cfg::kThreads;
    int const r = idx / (D / 4), c4 = (idx % (D / 4)) * 4;  // row of the block, 4 columns
    if (rho0 + r >= rows_kv) continue;
    int const rgi = r / WR, rr = r % WR;
    float mm = kNegInf;
#pragma unroll
    for (int w = 0; w < Cfg::kKeyWarps; ++w) mm = fmaxf(mm, st[((w * Cfg::kRowWarps + rgi) * WR + rr) * 2]);
    float ll = 0.0f;
    float4 acc = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#pragma unroll
    for (int w = 0; w < Cfg::kKeyWarps; ++w) {  // key warps in key order
      int const slot = (w * Cfg::kRowWarps + rgi) * WR + rr;
      float const mw = st[slot * 2];
      float const wt = mw == kNegInf ? 0.0f : fast_exp2(mw - mm);
      ll += wt * st[slot * 2 + 1];
      float4 const x = *reinterpret_cast<float4 const*>(cmb + slot * CP + c4);
      acc.x += wt * x.x;
      acc.y += wt * x.y;
      acc.z += wt * x.z;
      acc.w += wt * x.w;
    }
    int64_t const orow = row_base + rho0 + r;
    if (alone || (!Cluster && gridDim.z == 1)) {
      float const inv = ll > 0.0f ? 1.0f / ll : 0.0f;
      uint2 const packed = make_uint2(pack_half2<T>(acc.x * inv, acc.y * inv), pack_half2<T>(acc.z * inv, acc.w * inv));
      *reinterpret_cast<uint2*>(out.row(rho0 + r, D) + c4) = packed;
    } else if (Cluster) {
      *reinterpret_cast<float4*>(park_acc + r * D + c4) = acc;
      if (c4 == 0) {
        park_ml[r * 2] = mm;
        park_ml[r * 2 + 1] = ll;
      }
    } else {
      int64_t const slot = static_cast<int64_t>(blockIdx.z) * part.rows + orow;
      *reinterpret_cast<float4*>(part.acc + slot * D + c4) = acc;
      if (c4 == 0) {
        part.ml[slot * 2] = mm;
        part.ml[slot * 2 + 1] = ll;
      }
    }
  }
  if constexpr (Cluster) {  // every CTA but a solo cluster's gets here, an empty chunk's with m = -inf, l = 0
    int const rows = static_cast<int>(rows_kv - rho0 < Cfg::kRows ? rows_kv - rho0 : Cfg::kRows);
    if (!alone) cluster_merge<T, D, Cfg::kThreads>(park_acc, park_ml, rows, out, rho0);
  }
}

}  // namespace tilefoundry::atoms::detail
