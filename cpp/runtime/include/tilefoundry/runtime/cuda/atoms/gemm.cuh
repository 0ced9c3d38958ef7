// The whole-GEMM atom: C = A · B over compact A (M, K) and C (M, N) row-major, B in the storage
// the layout names, `batch` of them back to back. One public entry; the tier is chosen from
// facts known at the call:
//
//   GemmLayout::rrr  B (K, N) row-major (N-major)
//   GemmLayout::rcr  B stored (N, K) (K-major): x @ w.T reading w in place, the canonical TN GEMM
//
//   sm90       Hopper device, module built with the sm90 collective, 16-bit dtype, the collective
//              can implement the problem (K, N multiples of 8, aligned bases), not skinny
//   skinny     16-bit dtype, M <= 8 (decode): B streamed once in 16-byte packs, K splits
//              combined in order (rrr: N a multiple of 8; rcr: K a multiple of 8; gemm_skinny.cuh);
//              rcr also 8 < M <= 16 with K a multiple of 32, N of 16 and N / 16 CTAs in one
//              wave, on tensor cores. A TN call (rcr) that sm90_swapped_pays leaves it for the
//              sm90 collective swapped where the module has that (TILEFOUNDRY_SM90_SWAPPED): B
//              of 2Mi elements or more at 1 < M <= 8, of 4Mi past 8; at M = 1 a large B of a
//              lone call whose B is not settled (the decode step's calls keep the skinny tier)
//   mma        16-bit dtype, K, N multiples of 8, 16-byte aligned bases: mma.sync tensor cores
//   simt       anything else (f32 always: no TF32 unless opted in): ordered FFMA K sums
//
//   size_t ws = gemm_workspace_bytes<GemmLayout::rcr>(A, B, C, batch, M, N, K);  // same tier as gemm()
//   cudaError_t err = gemm<GemmLayout::rcr>(A, B, C, batch, M, N, K, workspace, stream);
// The layout defaults to rrr. K == 0 writes zeros; M, N or batch 0 launches nothing.
// `settled` (gemm's last argument, GemmGroup::b_settled): the caller vouches that no kernel that
// may still be running when the call starts writes B (a weight, and the launch before this one is
// the caller's own, which writes none); the skinny (N, K) tier then reads its first packs of B
// before the programmatic-launch wait, overlapping the kernel before it, so at M = 1 such a call
// keeps that tier (gemm_workspace_bytes takes the same argument, to agree with gemm()).
//
// A group of GEMMs sharing A (C_s = A · B_s, same M and K; the q, k, v projections):
//   GemmGroup<bf16> g{{Bq, Bk, Bv}, {Cq, Ck, Cv}, {Nq, Nk, Nv}, 3};
//   gemm_group<GemmLayout::rcr>(A, g, M, K, workspace, stream);   // workspace: gemm_group_workspace_bytes
// runs as one skinny launch when every member takes the skinny tier with B (N, K), else as one
// gemm() per member in order. With an element-wise epilogue over the members' results (G
// members of equal N; `epi(m, n, c)` with c[g] = C_g[m, n] as stored):
//   bool applied = false;
//   gemm_epilogue<GemmLayout::rcr, 2>(A, g, M, K, epi, workspace, stream, &applied);
//   if (!applied) { ...launch the epilogue kernel, which reads the C_g gemm_group wrote... }
// The skinny tier applies it in its own launch and writes no C; every other tier writes C.
//
// With a prologue (`pro(m, row)`: a row kernel computing A's row m, a warp's lanes together;
// the RMS norm before a projection), the caller asks first whether the skinny launch will stage A
// itself, launches the row kernel only if not, then passes the answer on:
//   const bool staged = gemm_stages_prologue<GemmLayout::rcr, 0>(A, g, M, K);  // 0: no epilogue
//   if (!staged) { ...launch the row kernel, which writes A... }
//   gemm_group<GemmLayout::rcr>(A, g, M, K, workspace, stream, pro, staged);
#pragma once

#include <cstdint>

#include <cuda_runtime_api.h>

#include <tilefoundry/runtime/cuda/atoms/device_facts.cuh>
#include <tilefoundry/runtime/cuda/atoms/gemm_simt.cuh>
#include <tilefoundry/runtime/cuda/atoms/gemm_skinny.cuh>
#include <tilefoundry/runtime/cuda/atoms/gemm_sm80.cuh>
#if defined(TILEFOUNDRY_CUDA_GEMM_SM90)
#include <tilefoundry/runtime/cuda/atoms/gemm_sm90.cuh>
#endif

namespace tilefoundry::atoms {

/// Storage of A, B and C in turn: r row-major, c column-major (the catalog atom name's suffix).
enum class GemmLayout { rrr, rcr };

enum class GemmTier { none, zero, sm90, skinny, mma, simt };

namespace detail {

inline bool aligned_16(void const* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; }

}  // namespace detail

/// `skinny_first`: at M = 1 the skinny tier serves more than the streaming of B (B settled, or a
/// group, epilogue or prologue riding on its launch), so the swapped collective does not take it.
template <GemmLayout L = GemmLayout::rrr, class T>
inline GemmTier gemm_tier(T const* A, T const* B, T* C, int64_t batch, int64_t M, int64_t N, int64_t K,
                          bool skinny_first = false) {
  constexpr bool kBKMajor = L == GemmLayout::rcr;
  if (batch <= 0 || M <= 0 || N <= 0) return GemmTier::none;
  if (K <= 0) return GemmTier::zero;
  if constexpr (is_half_v<T>) {
    bool const aligned = detail::aligned_16(A) && detail::aligned_16(B) && detail::aligned_16(C);
    bool const skinny_m = M <= detail::kSkinnyMaxM || (kBKMajor && detail::skinny_tc_fits(M, N, K));
#if defined(TILEFOUNDRY_CUDA_GEMM_SM90)
#if defined(TILEFOUNDRY_SM90_SWAPPED)
    bool const swapped = kBKMajor && detail::sm90_swapped_pays(M, N, K, skinny_first);
#else
    bool const swapped = false;
#endif
    // TMA boxes start at 16-byte aligned addresses only: a base off that (a view into a flat
    // buffer) leaves the collective, as it leaves the skinny and mma.sync tiers.
    if ((!skinny_m || swapped) && aligned && detail::device_facts().major == 9 &&
        detail::sm90_gemm_fits<T, kBKMajor>(A, B, C, batch, M, N, K)) {
      return GemmTier::sm90;
    }
#endif
    // B is streamed in 16-byte packs along its contiguous mode: N when N-major, K when K-major.
    if (skinny_m && (kBKMajor ? K : N) % 8 == 0 && aligned) return GemmTier::skinny;
    if (K % 8 == 0 && N % 8 == 0 && aligned) return GemmTier::mma;
  }
  return GemmTier::simt;
}

/// Device workspace the chosen tier needs, in bytes.
template <GemmLayout L = GemmLayout::rrr, class T>
inline size_t gemm_workspace_bytes(T const* A, T const* B, T* C, int64_t batch, int64_t M, int64_t N, int64_t K,
                                   bool settled = false) {
  constexpr bool kBKMajor = L == GemmLayout::rcr;
  switch (gemm_tier<L>(A, B, C, batch, M, N, K, settled)) {
#if defined(TILEFOUNDRY_CUDA_GEMM_SM90)
    case GemmTier::sm90:
      // NOTE: only 16-bit dtypes reach this tier; the guard keeps CUTLASS from building an f32 (TF32) kernel.
      if constexpr (is_half_v<T>) return detail::sm90_gemm_workspace_bytes<T, kBKMajor>(A, B, C, batch, M, N, K);
      return 0;
#endif
    case GemmTier::skinny:
      if constexpr (kBKMajor) return 0;  // a warp per output column: no K split
      return detail::skinny_workspace_bytes(batch, M, N, K);
    default: return 0;
  }
}

template <GemmLayout L = GemmLayout::rrr, class T>
inline cudaError_t gemm(T const* A, T const* B, T* C, int64_t batch, int64_t M, int64_t N, int64_t K, void* workspace,
                        cudaStream_t stream, bool settled = false) {
  constexpr bool kBKMajor = L == GemmLayout::rcr;
  switch (gemm_tier<L>(A, B, C, batch, M, N, K, settled)) {
    case GemmTier::none: return cudaSuccess;
    case GemmTier::zero: return cudaMemsetAsync(C, 0, static_cast<size_t>(batch * M * N) * sizeof(T), stream);
#if defined(TILEFOUNDRY_CUDA_GEMM_SM90)
    case GemmTier::sm90:
      if constexpr (is_half_v<T>) return detail::gemm_sm90<T, kBKMajor>(A, B, C, batch, M, N, K, workspace, stream);
      break;
#endif
    case GemmTier::skinny:
      if constexpr (is_half_v<T> && kBKMajor) {
        return detail::gemm_skinny_bt(A, B, C, batch, M, N, K, stream, settled);
      } else if constexpr (is_half_v<T>) {
        return detail::gemm_skinny(A, B, C, batch, M, N, K, static_cast<float*>(workspace), stream);
      }
      break;
    case GemmTier::mma:
      if constexpr (is_half_v<T>) return detail::gemm_mma<T, kBKMajor>(A, B, C, batch, M, N, K, stream);
      break;
    default: break;
  }
  return detail::gemm_simt<T, kBKMajor>(A, B, C, batch, M, N, K, stream);
}

/// GEMMs sharing A: member s computes C[s] = A · B[s] with N[s] columns (B[s]'s storage per L).
template <class T>
struct GemmGroup {
  T const* B[detail::kSkinnyBtMembers];
  T* C[detail::kSkinnyBtMembers];
  int64_t N[detail::kSkinnyBtMembers];
  int count;
  bool b_settled = false;  ///< no kernel that may still run when the call starts writes any B
};

namespace detail {

/// Whether every member of `g` takes the skinny tier with B (N, K): then one launch runs them all.
/// Past kSkinnyMaxM (tensor cores) the members' rows together must also fit one wave. `fused`: an
/// epilogue or prologue would ride on that launch, which (like B settled or several members) keeps
/// M = 1 on the skinny tier (gemm_tier's skinny_first).
template <GemmLayout L, class T>
inline bool group_is_skinny_bt(T const* A, GemmGroup<T> const& g, int64_t M, int64_t K, bool fused) {
  if (L != GemmLayout::rcr) return false;
  bool const skinny_first = fused || g.b_settled || g.count > 1;
  int64_t rows = 0;
  for (int s = 0; s < g.count; ++s) {
    if (gemm_tier<L>(A, g.B[s], g.C[s], 1, M, g.N[s], K, skinny_first) != GemmTier::skinny) return false;
    rows += g.N[s];
  }
  return M <= kSkinnyMaxM || skinny_tc_fits(M, rows, K);
}

/// The group's members as one skinny launch's rows: end to end (G = 0, no epilogue), or the G
/// members of an epilogue side by side (every member's N is N[0]).
template <int G, class T>
inline SkinnyBtRows<T> group_rows(GemmGroup<T> const& g) {
  SkinnyBtRows<T> rows{};
  int64_t end = 0;
  for (int s = 0; s < (G == 0 ? g.count : G); ++s) {
    rows.B[s] = g.B[s];
    if constexpr (G == 0) {
      rows.C[s] = g.C[s];
      rows.end[s] = end += g.N[s];
    }
  }
  if constexpr (G > 0) rows.end[0] = g.N[0];
  rows.count = G == 0 ? g.count : G;
  rows.settled = g.b_settled;
  return rows;
}

/// Whether the group's skinny launch streams B by bulk copies when no prologue rides on it (M = 1
/// where sm_90 code runs and skinny_bulk_plan cuts it: an LM head's 622 MB). A prologue would put
/// it on the register kernel, which streams such a B ~15% slower than a norm kernel costs.
template <int G, class T>
inline bool group_streams_bulk(GemmGroup<T> const& g, int64_t M, int64_t K) {
  if (M != 1 || !device_facts().sm90_code) return false;
  return skinny_bulk_plan<T, G == 0 ? 1 : G>(group_rows<G>(g), K).ru > 0;
}

}  // namespace detail

/// Whether a group (with an epilogue over G members, or none: G = 0) runs as one skinny launch
/// whose CTAs can stage A's M rows in shared memory: then that launch applies a prologue. Not
/// where that launch would stream B by bulk copies without one (group_streams_bulk).
template <GemmLayout L, int G, class T>
inline bool gemm_stages_prologue(T const* A, GemmGroup<T> const& g, int64_t M, int64_t K) {
  if constexpr (!is_half_v<T>) {
    return false;
  } else {
    bool same_n = G == 0 || g.count == G;
    for (int s = 1; G > 0 && s < g.count; ++s) same_n = same_n && g.N[s] == g.N[0];
    return same_n && M <= detail::kSkinnyMaxM &&
           static_cast<size_t>(M * K) * sizeof(T) <= detail::kSkinnyStagedBytes &&
           detail::group_is_skinny_bt<L>(A, g, M, K, true) && !detail::group_streams_bulk<G>(g, M, K);
  }
}

/// Device workspace gemm_group needs: the largest any member's gemm() needs.
template <GemmLayout L = GemmLayout::rrr, class T>
inline size_t gemm_group_workspace_bytes(T const* A, GemmGroup<T> const& g, int64_t M, int64_t K) {
  size_t most = 0;
  for (int s = 0; s < g.count; ++s) {
    size_t const ws = gemm_workspace_bytes<L>(A, g.B[s], g.C[s], 1, M, g.N[s], K, g.b_settled);
    most = ws > most ? ws : most;
  }
  return most;
}

/// `staged` (gemm_stages_prologue's answer): the skinny launch computes A through `pro` itself.
template <GemmLayout L = GemmLayout::rrr, class T, class Pro = detail::NoPrologue>
inline cudaError_t gemm_group(T const* A, GemmGroup<T> const& g, int64_t M, int64_t K, void* workspace,
                              cudaStream_t stream, Pro const& pro = {}, bool staged = false) {
  if constexpr (is_half_v<T>) {
    if (staged || detail::group_is_skinny_bt<L>(A, g, M, K, false)) {
      detail::SkinnyBtRows<T> const rows = detail::group_rows<0>(g);
      if (staged) return detail::gemm_skinny_bt_rows(A, rows, M, K, stream, pro);
      return detail::gemm_skinny_bt_rows(A, rows, M, K, stream);
    }
  }
  for (int s = 0; s < g.count; ++s) {
    cudaError_t const err = gemm<L>(A, g.B[s], g.C[s], 1, M, g.N[s], K, workspace, stream, g.b_settled);
    if (err != cudaSuccess) return err;
  }
  return cudaSuccess;
}

/// The members' results through `epi` in one skinny launch when every member takes the skinny
/// tier with B (N, K) (`*applied` = true, no C written); else gemm_group writes every C_g
/// (`*applied` = false) and the caller runs the epilogue. G is the member count, N equal for all.
template <GemmLayout L, int G, class T, class Epi, class Pro = detail::NoPrologue>
inline cudaError_t gemm_epilogue(T const* A, GemmGroup<T> const& g, int64_t M, int64_t K, Epi const& epi,
                                 void* workspace, cudaStream_t stream, bool* applied, Pro const& pro = {},
                                 bool staged = false) {
  static_assert(G >= 1 && G <= detail::kSkinnyBtMembers, "gemm_epilogue: 1 to kSkinnyBtMembers members");
  *applied = false;
  if constexpr (is_half_v<T>) {
    bool same_n = g.count == G;
    for (int s = 1; s < g.count; ++s) same_n = same_n && g.N[s] == g.N[0];
    if (staged || (same_n && detail::group_is_skinny_bt<L>(A, g, M, K, true))) {
      detail::SkinnyBtRows<T> const rows = detail::group_rows<G>(g);
      *applied = true;
      if (staged) return detail::gemm_skinny_bt_epilogue<T, G>(A, rows, M, K, epi, stream, pro);
      return detail::gemm_skinny_bt_epilogue<T, G>(A, rows, M, K, epi, stream);
    }
  }
  return gemm_group<L>(A, g, M, K, workspace, stream);
}

}  // namespace tilefoundry::atoms
