// Combining the partial carries of a distributed reduction across one cooperating group: a warp
// (warp-per-row kernels) or the whole CTA (CTA-per-row kernels). One public entry; the tier is
// chosen at compile time from the group size.
//
//   float part = identity_add<float>();                  // each lane folds a strided share
//   for (int64_t r = lane; r < n; r += Group) part = part + x[r];
//   part = group_reduce<Group>(add_combine{}, part, ws); // every lane now holds the row total
//
// The combination order is fixed by the group shape (butterfly within warps, then warps in
// index order), so every lane holds bitwise the same result and reruns reproduce it.
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>

#include <tilefoundry/runtime/cuda/atoms/scalar.cuh>

namespace tilefoundry::atoms {

struct add_combine {
  template <class T> __device__ T operator()(T a, T b) const { return a + b; }
};
struct max_combine {
  template <class T> __device__ T operator()(T a, T b) const { return max_nan(a, b); }
};
struct min_combine {
  template <class T> __device__ T operator()(T a, T b) const { return min_nan(a, b); }
};

/// A candidate of an argmax: a value and the index it was read at.
template <class T>
struct IndexedValue {
  T value;
  int64_t index;
};

/// The better of two argmax candidates: the larger value, NaN above every number, and on a tie
/// (two NaNs included) the smaller index, so the first maximum wins as in a scan in index order.
/// Exact in any combination order: with distinct indices the order it defines is total.
struct argmax_combine {
  template <class T>
  __device__ IndexedValue<T> operator()(IndexedValue<T> a, IndexedValue<T> b) const {
    bool const a_nan = a.value != a.value, b_nan = b.value != b.value;
    bool const b_wins = b_nan ? (!a_nan || b.index < a.index)
                              : (!a_nan && (b.value > a.value || (b.value == a.value && b.index < a.index)));
    return b_wins ? b : a;
  }
};

/// Which lanes of a warp make a lane-group call together. `groups`: whole groups, not necessarily
/// every group of the warp (a grid-stride loop whose trip count is uniform per group), so each
/// group shuffles under its own runtime mask, which ptxas guards with a convergence test (MATCH,
/// REDUX, VOTE and a divergent path) at every call. `warp`: all 32 lanes in step (a loop whose trip
/// count is uniform per warp), so the shuffles take the constant full mask and none of that.
enum class Callers { groups, warp };

namespace detail {

/// `v` of the lane `offset` away by xor: arithmetic values in one shuffle, a struct (an argmax
/// candidate) a 32-bit word at a time.
template <class T>
__device__ T shuffle_xor(unsigned mask, T v, int offset, int width = 32) {
  if constexpr (std::is_arithmetic_v<T> || sizeof(T) == 2) {  // 16-bit floats have their own shuffles
    return __shfl_xor_sync(mask, v, offset, width);
  } else {
    static_assert(sizeof(T) % 4 == 0, "shuffle_xor: whole 32-bit words");
    unsigned w[sizeof(T) / 4];
    memcpy(w, &v, sizeof(T));
#pragma unroll
    for (int i = 0; i < static_cast<int>(sizeof(T) / 4); ++i) w[i] = __shfl_xor_sync(mask, w[i], offset, width);
    memcpy(&v, w, sizeof(T));
    return v;
  }
}

/// Butterfly over the 32 lanes of a warp: lane l combines with l ^ 16, l ^ 8, ... l ^ 1.
/// NOTE: a ⊕ b and b ⊕ a are bitwise equal for + (and for NaN-propagating max/min, and argmax
/// candidates of distinct indices), so all lanes agree.
template <class Combine, class T>
__device__ T warp_butterfly(Combine op, T v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) v = op(v, shuffle_xor(0xffffffffu, v, offset));
  return v;
}

/// The shuffle mask of a lane-group call: the whole warp when it calls in step, else this lane's
/// group of `Lanes` consecutive lanes (groups aligned to `Lanes`).
template <int Lanes, Callers Who>
__device__ inline unsigned lane_group_mask() {
  if constexpr (Lanes == 32 || Who == Callers::warp) {
    return 0xffffffffu;
  } else {
    unsigned const first = threadIdx.x % 32 / Lanes * Lanes;
    return ((1u << Lanes) - 1u) << first;
  }
}

}  // namespace detail

/**
 * @brief Combine `v` over the Group lanes that cooperate on one row; every lane gets the result.
 * @tparam Group 32 (one warp; `ws` unused) or the CTA size, a multiple of 32 up to 1024
 * @param ws shared-memory workspace of at least Group / 32 values of T (CTA groups only)
 *
 * With argmax_combine, T is an IndexedValue (every lane's candidate, read from its share).
 */
template <int Group, class Combine, class T>
__device__ T group_reduce(Combine op, T v, T* ws) {
  static_assert(Group % 32 == 0 && Group >= 32 && Group <= 1024,
                "group_reduce: Group must be a multiple of 32 in [32, 1024]");
  v = detail::warp_butterfly(op, v);
  if constexpr (Group > 32) {
    constexpr int warps = Group / 32;
    int const warp = threadIdx.x / 32;
    if (threadIdx.x % 32 == 0) ws[warp] = v;
    __syncthreads();
    T total = ws[0];
#pragma unroll
    for (int w = 1; w < warps; ++w) total = op(total, ws[w]);
    __syncthreads();  // ws may be reused by the next reduction
    return total;
  } else {
    (void)ws;
    return v;
  }
}

/**
 * @brief Combine `v` over the `Lanes` consecutive lanes of a warp (a power of two, groups aligned
 *        to `Lanes`) that share one value, such as the packs of one short row; each gets the result.
 *
 * Every lane of the group must call it; with `Callers::groups` other groups of the warp need not
 * (each shuffles under its own mask), so a grid-stride loop whose trip count is uniform per group
 * may call it; with `Callers::warp` every lane of the warp must.
 */
template <int Lanes, Callers Who = Callers::groups, class Combine, class T>
__device__ T lane_group_reduce(Combine op, T v) {
  static_assert(Lanes >= 1 && Lanes <= 32 && (Lanes & (Lanes - 1)) == 0,
                "lane_group_reduce: Lanes must be a power of two in [1, 32]");
  if constexpr (Lanes > 1) {
    unsigned const mask = detail::lane_group_mask<Lanes, Who>();
#pragma unroll
    for (int offset = Lanes / 2; offset > 0; offset /= 2) v = op(v, detail::shuffle_xor(mask, v, offset, Lanes));
  }
  return v;
}

/**
 * @brief `out` <- the lane array `own` of the lane `Offset` away by xor in the same group of
 *        `Lanes` consecutive lanes: a pack of a short row that the row's partner thread loaded
 *        (rotate-half's other half), passed by shuffles instead of loaded again.
 *
 * Every lane of the group (`Callers::warp`: of the warp) must call it, as for lane_group_reduce.
 */
template <int Lanes, int Offset, Callers Who = Callers::groups, int N, class T>
__device__ void lane_group_exchange(T const (&own)[N], T (&out)[N]) {
  static_assert(Lanes >= 2 && Lanes <= 32 && (Lanes & (Lanes - 1)) == 0 && Offset > 0 && Offset < Lanes &&
                    (Offset & (Offset - 1)) == 0,
                "lane_group_exchange: Lanes a power of two in [2, 32], Offset a smaller power of two");
  static_assert(N * sizeof(T) % 4 == 0, "lane_group_exchange: whole 32-bit words");
  constexpr int words = N * sizeof(T) / 4;
  unsigned const mask = detail::lane_group_mask<Lanes, Who>();
  unsigned w[words];
  memcpy(w, own, sizeof(w));
#pragma unroll
  for (int i = 0; i < words; ++i) w[i] = __shfl_xor_sync(mask, w[i], Offset, Lanes);
  memcpy(out, w, sizeof(w));
}

/// Barrier over the lanes of one group: __syncwarp for a warp, __syncthreads for the CTA.
template <int Group>
__device__ inline void group_sync() {
  if constexpr (Group == 32) __syncwarp();
  else __syncthreads();
}

}  // namespace tilefoundry::atoms
