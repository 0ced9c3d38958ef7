// Host-run checks of the attention tensor-core tier's fragment bookkeeping (attention_mma.cuh),
// built with nvcc and run without a GPU. ldmatrix and mma.sync m16n8k16 are emulated from the
// PTX ISA's tables, written out independently below; the kernel's own helpers (lane address
// offsets, accumulator coordinates, P's A operand, the mask limits) drive them through the
// kernel's loop structure, and the results must equal plain matrix products exactly (small
// integers: every product and sum is exact in f32 and bf16). The split-KV merge arithmetic
// (attention_merge.cuh) runs here too: the in-cluster merge's unrolled fold against the merge
// kernel's runs, bit for bit, and both against a float64 softmax.
#include <tilefoundry/runtime/cuda/atoms/attention.cuh>

#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "check.h"

using namespace tilefoundry::atoms;
using namespace tilefoundry::atoms::detail;

namespace {

using Regs4 = uint32_t[32][4];

uint16_t bits(bf16 x) { return x.raw(); }
float value(uint16_t b) {
  uint32_t const w = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &w, 4);
  return f;
}
float half_of(uint32_t reg, int h) { return value(static_cast<uint16_t>(h ? reg >> 16 : reg & 0xffffu)); }

/// A row-major 16-bit tile with `pitch` elements per row, as the kernel keeps it in smem.
struct Tile {
  int rows, cols, pitch;
  std::vector<uint16_t> data;
  Tile(int r, int c, int p, int seed) : rows(r), cols(c), pitch(p), data(static_cast<size_t>(r) * p, 0xffffu) {
    for (int i = 0; i < r; ++i) {
      for (int j = 0; j < c; ++j) data[i * p + j] = bits(bf16(static_cast<float>((i * 7 + j * 3 + seed) % 9 - 4)));
    }
  }
  float at(int i, int j) const { return value(data[i * pitch + j]); }
};

/// ldmatrix.sync.m8n8.x4.b16 (PTX ISA): lane 8i + r gives the address of row r of matrix i;
/// register i of lane L holds, plain, row L / 4 columns 2 (L % 4), +1 of matrix i; .trans,
/// rows 2 (L % 4), +1 of column L / 4. Addresses are element offsets into `smem`.
void ldmatrix(Regs4 out, std::vector<uint16_t> const& smem, int const (&addr)[32], bool trans) {
  for (int lane = 0; lane < 32; ++lane) {
    for (int i = 0; i < 4; ++i) {
      uint16_t lo, hi;
      if (!trans) {
        int const row = addr[8 * i + lane / 4];
        lo = smem[row + 2 * (lane % 4)];
        hi = smem[row + 2 * (lane % 4) + 1];
      } else {
        lo = smem[addr[8 * i + 2 * (lane % 4)] + lane / 4];
        hi = smem[addr[8 * i + 2 * (lane % 4) + 1] + lane / 4];
      }
      out[lane][i] = static_cast<uint32_t>(lo) | (static_cast<uint32_t>(hi) << 16);
    }
  }
}

/// mma.sync.m16n8k16.row.col (PTX ISA fragment tables), lane L, g = L / 4, t = L % 4:
/// A reg j half h = A[g + 8 (j % 2)][2t + h + 8 (j / 2)]; B reg j half h = B[2t + h + 8j][g];
/// C elem e = C[g + 8 (e / 2)][2t + e % 2].
void mma(float (&c)[32][4], uint32_t const (&a)[32][4], uint32_t const (&b)[32][2]) {
  float A[16][16], B[16][8];
  for (int lane = 0; lane < 32; ++lane) {
    int const g = lane / 4, t = lane % 4;
    for (int j = 0; j < 4; ++j) {
      for (int h = 0; h < 2; ++h) A[g + 8 * (j % 2)][2 * t + h + 8 * (j / 2)] = half_of(a[lane][j], h);
    }
    for (int j = 0; j < 2; ++j) {
      for (int h = 0; h < 2; ++h) B[2 * t + h + 8 * j][g] = half_of(b[lane][j], h);
    }
  }
  for (int lane = 0; lane < 32; ++lane) {
    int const g = lane / 4, t = lane % 4;
    for (int e = 0; e < 4; ++e) {
      int const row = g + 8 * (e / 2), col = 2 * t + e % 2;
      float sum = 0.0f;
      for (int k = 0; k < 16; ++k) sum += A[row][k] * B[k][col];
      c[lane][e] += sum;
    }
  }
}

void pick(uint32_t (&b)[32][2], Regs4 const& r, int first) {
  for (int lane = 0; lane < 32; ++lane) {
    b[lane][0] = r[lane][first];
    b[lane][1] = r[lane][first + 1];
  }
}

/// S = Q Kᵀ for one warp (rows rg · 16 ..) over a Keys-key slice, the kernel's loops and offsets.
template <int D, int Keys>
void check_scores(int rg) {
  constexpr int P = D + 8;
  Tile const q(16 * (rg + 1), D, P, 1), k(Keys, D, P, 2);
  static Regs4 qf[D / 16];
  for (int kk = 0; kk < D / 16; ++kk) {
    int addr[32];
    for (int lane = 0; lane < 32; ++lane) addr[lane] = rg * 16 * P + ldm_q_offset(lane, P) + kk * 16;
    ldmatrix(qf[kk], q.data, addr, false);
  }
  static float sc[Keys / 8][32][4];
  std::memset(sc, 0, sizeof(sc));
  for (int kk = 0; kk < D / 16; ++kk) {
    for (int jp = 0; jp < Keys / 16; ++jp) {
      Regs4 kf;
      int addr[32];
      for (int lane = 0; lane < 32; ++lane) addr[lane] = ldm_k_offset(lane, P) + jp * 16 * P + kk * 16;
      ldmatrix(kf, k.data, addr, false);
      uint32_t b0[32][2], b1[32][2];
      pick(b0, kf, 0);
      pick(b1, kf, 2);
      mma(sc[2 * jp], qf[kk], b0);
      mma(sc[2 * jp + 1], qf[kk], b1);
    }
  }
  for (int lane = 0; lane < 32; ++lane) {
    for (int j = 0; j < Keys / 8; ++j) {
      for (int e = 0; e < 4; ++e) {
        int const row = rg * 16 + acc_row(lane, e), key = 8 * j + acc_col(lane, e);
        float ref = 0.0f;
        for (int d = 0; d < D; ++d) ref += q.at(row, d) * k.at(key, d);
        CHECK(sc[j][lane][e] == ref);
      }
    }
  }
}

/// O = P V for one warp: P from score accumulators (p_operand), V through ldmatrix.trans.
template <int D, int Keys>
void check_values() {
  constexpr int P = D + 8;
  Tile const v(Keys, D, P, 3);
  static float pt[16][Keys];
  for (int r = 0; r < 16; ++r) {
    for (int j = 0; j < Keys; ++j) pt[r][j] = static_cast<float>((r * 5 + j) % 7 - 3);
  }
  float sc[Keys / 8][32][4];
  for (int j = 0; j < Keys / 8; ++j) {
    for (int lane = 0; lane < 32; ++lane) {
      for (int e = 0; e < 4; ++e) sc[j][lane][e] = pt[acc_row(lane, e)][8 * j + acc_col(lane, e)];
    }
  }
  static float o[D / 8][32][4];
  std::memset(o, 0, sizeof(o));
  for (int kk = 0; kk < Keys / 16; ++kk) {
    uint32_t pa[32][4];
    for (int lane = 0; lane < 32; ++lane) {
      float lo[4], hi[4];
      for (int e = 0; e < 4; ++e) {
        lo[e] = sc[2 * kk][lane][e];
        hi[e] = sc[2 * kk + 1][lane][e];
      }
      p_operand<bf16>(pa[lane], lo, hi);
    }
    for (int np = 0; np < D / 16; ++np) {
      Regs4 vf;
      int addr[32];
      for (int lane = 0; lane < 32; ++lane) addr[lane] = ldm_v_offset(lane, P) + kk * 16 * P + np * 16;
      ldmatrix(vf, v.data, addr, true);
      uint32_t b0[32][2], b1[32][2];
      pick(b0, vf, 0);
      pick(b1, vf, 2);
      mma(o[2 * np], pa, b0);
      mma(o[2 * np + 1], pa, b1);
    }
  }
  for (int lane = 0; lane < 32; ++lane) {
    for (int n = 0; n < D / 8; ++n) {
      for (int e = 0; e < 4; ++e) {
        int const row = acc_row(lane, e), col = 8 * n + acc_col(lane, e);
        float ref = 0.0f;
        for (int j = 0; j < Keys; ++j) ref += pt[row][j] * v.at(j, col);
        CHECK(o[n][lane][e] == ref);
      }
    }
  }
}

void test_scores() {
  check_scores<64, 64>(0);
  check_scores<128, 64>(3);
  check_scores<128, 16>(0);
  check_scores<64, 16>(1);
}

void test_values() {
  check_values<64, 64>();
  check_values<128, 64>();
  check_values<128, 16>();
  check_values<64, 16>();
}

/// The mask keeps element (j, e) of lane L iff its key t0 + 8j + acc_col is below its row's
/// limit; the kernel tests 8j + e % 2 >= vis - t0 - 2t.
void test_mask_limits() {
  for (int lane = 0; lane < 32; ++lane) {
    int const t = lane % 4;
    for (int t0 : {0, 64, 1000}) {
      for (int vis : {0, 1, 63, 64, 65, 100, 1007, 1070}) {
        int const lim = vis - t0 - 2 * t;
        for (int j = 0; j < 8; ++j) {
          for (int e = 0; e < 4; ++e) {
            int const key = t0 + 8 * j + acc_col(lane, e);
            CHECK((8 * j + e % 2 >= lim) == (key >= vis));
          }
        }
      }
    }
  }
  // The epilogue stores (o[n][2h], o[n][2h + 1]) as one float2 at row g + 8h, column 8n + 2t.
  for (int lane = 0; lane < 32; ++lane) {
    for (int h = 0; h < 2; ++h) {
      CHECK(acc_row(lane, 2 * h) == lane / 4 + 8 * h && acc_row(lane, 2 * h + 1) == lane / 4 + 8 * h);
      CHECK(acc_col(lane, 2 * h) == 2 * (lane % 4) && acc_col(lane, 2 * h + 1) == 2 * (lane % 4) + 1);
    }
  }
}

/// Every 8-lane phase of an ldmatrix reads 8 rows of 16 bytes on 8 distinct 16-byte bank groups.
template <int D>
void check_banks() {
  constexpr int P = D + 8;
  for (int kind = 0; kind < 3; ++kind) {
    for (int i = 0; i < 4; ++i) {
      bool used[8] = {};
      for (int r = 0; r < 8; ++r) {
        int const lane = 8 * i + r;
        int const off = kind == 0 ? ldm_q_offset(lane, P) : kind == 1 ? ldm_k_offset(lane, P) : ldm_v_offset(lane, P);
        int const group = (off * 2 / 16) % 8;
        CHECK(!used[group]);
        used[group] = true;
      }
    }
  }
}

/// The emulator against the layouts the previous kernels ran on a GPU (ldmatrix.x2: lanes 0-15):
/// K as B via (8j + L % 8, 8 ((L / 8) % 2)), V as B via .trans (L % 16, 8n), as in gemm_sm80.cuh.
void test_emulator_matches_gpu_tested_x2() {
  constexpr int D = 64, P = D + 8;
  Tile const q(16, D, P, 4), k(16, D, P, 5), v(16, D, P, 6);
  for (int kk = 0; kk < D / 16; ++kk) {
    Regs4 qf, kf, vf;
    int qa[32], ka[32], va[32];
    for (int lane = 0; lane < 32; ++lane) {
      qa[lane] = ldm_q_offset(lane, P) + kk * 16;
      ka[lane] = (lane % 8) * P + kk * 16 + ((lane / 8) % 2) * 8;  // n-tile 0, x2
      va[lane] = (lane % 16) * P + kk * 8;                        // keys 0-15, n-tile kk, x2 .trans
    }
    ldmatrix(qf, q.data, qa, false);
    ldmatrix(kf, k.data, ka, false);
    ldmatrix(vf, v.data, va, true);
    uint32_t kb[32][2], vb[32][2];
    pick(kb, kf, 0);
    pick(vb, vf, 0);
    float s[32][4] = {}, o[32][4] = {};
    mma(s, qf, kb);
    mma(o, qf, vb);  // Q's 16 x 16 slice kk as the A of a product with V
    for (int lane = 0; lane < 32; ++lane) {
      for (int e = 0; e < 4; ++e) {
        int const row = acc_row(lane, e), col = acc_col(lane, e);
        float rs = 0.0f, ro = 0.0f;
        for (int d = 0; d < 16; ++d) {
          rs += q.at(row, kk * 16 + d) * k.at(col, kk * 16 + d);
          ro += q.at(row, kk * 16 + d) * v.at(d, kk * 8 + col);
        }
        CHECK(s[lane][e] == rs);
        CHECK(o[lane][e] == ro);
      }
    }
  }
}

void test_bank_groups() {
  check_banks<64>();
  check_banks<128>();
}

/// Split-KV planning: enough chunks for the target CTAs, each a multiple of the step, none empty.
void test_split_keys() {
  // The decode benchmark: 8 (batch, kv head) CTAs, 264 wanted, 8192 keys in 64-key steps.
  AttnPlan const p = split_keys(AttnTier::mma_keys, 8, 264, 8192, 64, 128, 1);
  CHECK(p.splits == 32 && p.chunk == 256);
  // Enough CTAs already, or too few keys: one split covering every key.
  AttnPlan const full = split_keys(AttnTier::mma_rows, 4096, 132, 4096, 64, 128, 32);
  CHECK(full.splits == 1 && full.chunk == 4096);
  AttnPlan const short_ctx = split_keys(AttnTier::mma_keys, 8, 264, 200, 64, 128, 1);
  CHECK(short_ctx.splits == 1 && short_ctx.chunk == 256);
  for (int64_t skv : {300, 1000, 4097, 32768}) {
    AttnPlan const q = split_keys(AttnTier::simt, 3, 264, skv, 32, 256, 1);
    CHECK(q.chunk % 32 == 0 && q.chunk >= 256);
    CHECK((q.splits - 1) * q.chunk < skv && q.splits * q.chunk >= skv);
  }
  CHECK(attention_partial_bytes(1, 100, 128) == 0);
  CHECK(attention_partial_bytes(3, 5, 64) == 128 + 3 * 5 * 64 * 4);  // m, l block padded to 16 bytes
}

/// The prefill config per call (TILEFOUNDRY_FLASH_WARP_ROWS left at 0, no TILEFOUNDRY_FLASH_WGMMA:
/// the wgmma tier is not built here, even on an sm_90 device): the paired rows from
/// kFlashPairedMinCtasPerSm CTAs an SM, the rows config below; the facts each plan splits by.
void test_rows_tier() {
  DeviceFacts dev;
  dev.sms = 132;
  dev.sm90_code = true;
  for (int d : {64, 128}) {
    CHECK(flash_rows_tier(4 * 32 * 32, d, dev) == AttnTier::mma_rows_paired);  // B4 H32 S4096
    CHECK(flash_rows_tier(32 * 8, d, dev) == AttnTier::mma_rows);              // B1 H32 S1024
    CHECK(flash_rows_tier(kFlashPairedMinCtasPerSm * 132, d, dev) == AttnTier::mma_rows_paired);
    CHECK(flash_rows_tier(kFlashPairedMinCtasPerSm * 132 - 1, d, dev) == AttnTier::mma_rows);
  }
  FlashFacts const rows = flash_facts(128, AttnTier::mma_rows);
  FlashFacts const paired = flash_facts(128, AttnTier::mma_rows_paired);
  FlashFacts const wgmma = flash_facts(128, AttnTier::wgmma_rows);
  CHECK(rows.rows == 128 && paired.rows == 128 && wgmma.rows == 128);
  CHECK(rows.per_sm == 1 && paired.per_sm == 2 && rows.step == 64 && paired.step == 32);
  CHECK(wgmma.per_sm == 1 && wgmma.step == 128 && wgmma.smem <= 227 * 1024);
  CHECK(flash_facts(64, AttnTier::mma_keys).rows == 16);
}

/// The wgmma tier's shared-memory tiles (attention_wgmma.cuh): wgmma_tile_offset places the 128 x 16
/// chunks of a tile on distinct 16-byte slots of its 32 KB, each row's half-row in that row's own
/// 128 bytes, and the 8 rows of a core matrix on 8 distinct slots of a 128-byte line (the 128-byte
/// swizzle: conflict-free rows for wgmma and for the cp.async writes); the descriptors carry the
/// offsets and the swizzle mode in the PTX ISA's bit fields.
void test_wgmma_layout() {
  std::vector<bool> used(128 * 128 * 2 / 16, false);
  for (int r = 0; r < 128; ++r) {
    for (int c = 0; c < 16; ++c) {
      uint32_t const off = wgmma_tile_offset(r, c);
      CHECK(off % 16 == 0 && off < 128 * 128 * 2 && !used[off / 16]);
      used[off / 16] = true;
      CHECK(off / 128 == static_cast<uint32_t>((c / 8) * 128 + r));  // its half, its row
    }
  }
  for (int c = 0; c < 16; ++c) {
    for (int r0 = 0; r0 < 128; r0 += 8) {
      int slots = 0;
      for (int r = r0; r < r0 + 8; ++r) slots |= 1 << (wgmma_tile_offset(r, c) % 128 / 16);
      CHECK(slots == 0xff);
    }
  }
  uint64_t const k = wgmma_desc_k_major(0x10000, 64, 5);  // Q's second warpgroup, k-step 5
  CHECK((k & 0x3fff) == (0x10000u + 128 * 128 + 64 * 128 + 32) >> 4);
  CHECK(((k >> 16) & 0x3fff) == 1 && ((k >> 32) & 0x3fff) == 1024 / 16 && (k >> 62) == 1);
  CHECK(((k >> 49) & 0x7) == 0);  // base offset 0: every tile starts 1024-byte aligned
  uint64_t const v = wgmma_desc_mn_major(0x20000, 3);  // V, keys 48..63
  CHECK((v & 0x3fff) == (0x20000u + 3 * 16 * 128) >> 4);
  CHECK(((v >> 16) & 0x3fff) == 128 * 128 / 16 && ((v >> 32) & 0x3fff) == 1024 / 16 && (v >> 62) == 1);
}

/// Split-KV planning for the cluster path: at most the cluster size, the same chunk rules.
void test_cluster_split_keys() {
  // The decode benchmark again, capped at 16 and at 8 splits: one cluster per (row block, kv head).
  AttnPlan const p16 = split_keys(AttnTier::mma_keys, 8, 264, 8192, 64, 128, 1, kClusterNonPortable);
  CHECK(p16.splits == 16 && p16.chunk == 512 && !p16.cluster);
  AttnPlan const p8 = split_keys(AttnTier::mma_keys, 8, 264, 8192, 64, 128, 1, kClusterPortable);
  CHECK(p8.splits == 8 && p8.chunk == 1024);
  CHECK(split_keys(AttnTier::mma_keys, 8, 264, 200, 64, 128, 1, kClusterNonPortable).splits == 1);
  for (int cap : {kClusterPortable, kClusterNonPortable}) {
    for (int64_t ctas : {1, 2, 8, 33, 132}) {
      for (int64_t skv : {256, 300, 1000, 2048, 3001, 4097, 32768, 131072}) {
        AttnPlan const q = split_keys(AttnTier::mma_keys, ctas, 264, skv, 64, 128, 1, cap);
        CHECK(q.splits >= 1 && q.splits <= cap && q.splits <= kClusterMaxSplits);
        CHECK(q.chunk % 64 == 0 && (q.splits == 1 || q.chunk >= 128));
        CHECK((q.splits - 1) * q.chunk < skv && q.splits * q.chunk >= skv);
      }
    }
  }
}

/// Random split-KV partials of one row and 4 columns, and the float64 softmax they stand for.
struct RowPartials {
  int splits = 0;
  std::vector<float> m, l;                ///< per split; m in log2 units, -inf for an empty split
  std::vector<std::array<float, 4>> acc;  ///< per split, unnormalized
  std::array<double, 4> ref{};            ///< softmax over every split's keys, float64
  bool seen = false;                      ///< some split saw a key
};

/// Split s sees 0..6 keys (a third of the splits empty) with log2-unit scores in [-20, 20].
RowPartials random_partials(int splits, std::mt19937& rng) {
  std::uniform_real_distribution<float> score(-20.0f, 20.0f), value(-1.0f, 1.0f);
  std::uniform_int_distribution<int> keys(-3, 6);
  RowPartials p;
  p.splits = splits;
  double num[4] = {}, den = 0.0;
  for (int s = 0; s < splits; ++s) {
    int const n = std::max(keys(rng), 0);
    std::vector<float> u(n);
    std::vector<std::array<float, 4>> v(n);
    float m = -std::numeric_limits<float>::infinity();
    for (int k = 0; k < n; ++k) {
      u[k] = score(rng);
      for (float& e : v[k]) e = value(rng);
      m = std::max(m, u[k]);
    }
    float l = 0.0f;
    std::array<float, 4> a{};
    for (int k = 0; k < n; ++k) {
      float const w = std::exp2(u[k] - m);
      l += w;
      for (int i = 0; i < 4; ++i) a[i] += w * v[k][i];
      double const wd = std::exp2(static_cast<double>(u[k]));
      den += wd;
      for (int i = 0; i < 4; ++i) num[i] += wd * v[k][i];
    }
    p.m.push_back(m);
    p.l.push_back(l);
    p.acc.push_back(a);
    p.seen = p.seen || n > 0;
  }
  for (int i = 0; i < 4; ++i) p.ref[i] = den > 0.0 ? num[i] / den : 0.0;
  return p;
}

/// attention_merge's order: warp w folds run w with merge_run, the runs' sums added in order.
float kernel_merge(RowPartials const& p, float (&acc)[4]) {
  float mx = -std::numeric_limits<float>::infinity();
  for (float m : p.m) mx = std::fmax(mx, m);
  float sums[kMergeRuns], accs[kMergeRuns][4];
  for (int w = 0; w < kMergeRuns; ++w) {
    int first, last;
    merge_run_bounds(p.splits, w, first, last);
    sums[w] = 0.0f;
    float a[4] = {};
    merge_run<4>(mx, first, last, sums[w], a, [&](int s, float& m, float& l, float (&x)[4]) {
      m = p.m[s];
      l = p.l[s];
      for (int i = 0; i < 4; ++i) x[i] = p.acc[s][i];
    });
    std::memcpy(accs[w], a, sizeof(a));
  }
  float total = 0.0f;
  for (float part : sums) total += part;
  for (int i = 0; i < 4; ++i) {
    acc[i] = 0.0f;
    for (int w = 0; w < kMergeRuns; ++w) acc[i] += accs[w][i];
  }
  return total;
}

/// cluster_merge's order: the registers of up to kClusterMaxSplits splits through merge_unrolled.
float cluster_merge_order(RowPartials const& p, float (&acc)[4]) {
  float m[kClusterMaxSplits], l[kClusterMaxSplits], x[kClusterMaxSplits][4];
  for (int s = 0; s < kClusterMaxSplits; ++s) {  // slots past the splits hold junk, as on the GPU
    m[s] = s < p.splits ? p.m[s] : 1e30f;
    l[s] = s < p.splits ? p.l[s] : 1e30f;
    for (int i = 0; i < 4; ++i) x[s][i] = s < p.splits ? p.acc[s][i] : 1e30f;
  }
  return merge_unrolled<kClusterMaxSplits, 4>(p.splits, m, l, x, acc);
}

uint32_t bits_of(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  return b;
}

/// Both merges give the same bits for 1..16 splits, and the float64 softmax within f32 rounding.
void test_merge_orders_agree() {
  std::mt19937 rng(20240611);
  for (int splits = 1; splits <= kClusterMaxSplits; ++splits) {
    for (int trial = 0; trial < 40; ++trial) {
      RowPartials const p = random_partials(splits, rng);
      float ka[4], ca[4];
      float const kt = kernel_merge(p, ka);
      float const ct = cluster_merge_order(p, ca);
      CHECK(bits_of(kt) == bits_of(ct));
      for (int i = 0; i < 4; ++i) {
        CHECK(bits_of(ka[i]) == bits_of(ca[i]));
        float const out = merge_output(ca[i], ct);
        CHECK(std::fabs(out - p.ref[i]) <= 1e-5);
        CHECK(p.seen || bits_of(out) == 0u);  // a row no split saw is exactly +0
      }
    }
  }
  // Past the cluster's 16, the merge kernel's runs alone.
  for (int splits : {17, 33, 64, 257}) {
    RowPartials const p = random_partials(splits, rng);
    float ka[4];
    float const kt = kernel_merge(p, ka);
    for (int i = 0; i < 4; ++i) CHECK(std::fabs(merge_output(ka[i], kt) - p.ref[i]) <= 1e-5);
  }
}

/// Empty splits (m = -inf, l = 0, acc = 0, a CTA whose chunk held no valid key) change nothing.
void test_merge_empty_splits() {
  float const inf = std::numeric_limits<float>::infinity();
  for (int splits = 1; splits <= kClusterMaxSplits; ++splits) {
    for (int live = -1; live < splits; ++live) {  // -1: every split empty (kv_len = 0)
      RowPartials p;
      p.splits = splits;
      for (int s = 0; s < splits; ++s) {
        bool const on = s == live;
        p.m.push_back(on ? 3.25f : -inf);
        p.l.push_back(on ? 1.75f : 0.0f);
        p.acc.push_back(on ? std::array<float, 4>{0.5f, -1.25f, 0.0f, 2.0f} : std::array<float, 4>{});
      }
      float ka[4], ca[4];
      float const kt = kernel_merge(p, ka);
      float const ct = cluster_merge_order(p, ca);
      for (int i = 0; i < 4; ++i) {
        float const want = live < 0 ? 0.0f : p.acc[live][i] / 1.75f;
        CHECK(bits_of(merge_output(ka[i], kt)) == bits_of(want));
        CHECK(bits_of(merge_output(ca[i], ct)) == bits_of(want));
      }
    }
  }
}

}  // namespace

/// AttnBlockRows places row ρ of (batch b, q heads from h0) where AttnOutRows places its whole-call
/// row (b · Hq + h0) · Sq + ρ, in both orders, on random shapes up to the bound the tensor-core tiers
/// keep (g · Sq below 2^31), with batch offsets past 2^32 rows.
void test_block_rows() {
  std::mt19937_64 rng(20261207);
  std::uniform_int_distribution<int> pick(0, 1 << 20);
  bf16* const base = nullptr;
  for (int n = 0; n < 4000; ++n) {
    int64_t const kv_heads = 1 + pick(rng) % 8, g = 1 + pick(rng) % 8, heads = kv_heads * g;
    int64_t const sq = n % 4 == 0 ? 1 : 1 + (static_cast<int64_t>(pick(rng)) << 6) % ((int64_t{1} << 31) / g);
    int64_t const batch = 1 + pick(rng) % 64, b = pick(rng) % batch, h0 = (pick(rng) % kv_heads) * g;
    int64_t const rho = (static_cast<int64_t>(pick(rng)) << 11 | pick(rng)) % (g * sq);
    for (bool bshd : {false, true}) {
      AttnOutRows<bf16> const rows{base, heads, sq, bshd};
      CHECK(rows.block(b, h0).row(rho, 128) == rows.row((b * heads + h0) * sq + rho, 128));
    }
  }
}

int main() {
  tf_test::run_group("attention_emulator", test_emulator_matches_gpu_tested_x2);
  tf_test::run_group("attention_scores", test_scores);
  tf_test::run_group("attention_values", test_values);
  tf_test::run_group("attention_mask_limits", test_mask_limits);
  tf_test::run_group("attention_bank_groups", test_bank_groups);
  tf_test::run_group("attention_split_keys", test_split_keys);
  tf_test::run_group("attention_cluster_split_keys", test_cluster_split_keys);
  tf_test::run_group("attention_rows_tier", test_rows_tier);
  tf_test::run_group("attention_wgmma_layout", test_wgmma_layout);
  tf_test::run_group("attention_merge_orders_agree", test_merge_orders_agree);
  tf_test::run_group("attention_merge_empty_splits", test_merge_empty_splits);
  tf_test::run_group("attention_block_rows", test_block_rows);
  return tf_test::check_summary();
}
