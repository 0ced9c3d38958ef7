// ops::reduce internals: combine rules per kind, the reduced/kept mode split, and the tier plan
// derived from the operands' shard layouts.
#pragma once

#include <limits>
#include <type_traits>
#include <utility>

#include <cute/tensor.hpp>

#include <tilefoundry/local.h>
#include <tilefoundry/mesh.h>
#include <tilefoundry/reduction.h>
#include <tilefoundry/shard_tensor.h>

namespace tilefoundry::detail {

// ---------------------------------------------------------------- combine rules

/// init / map / join / finish of a reduction kind over accumulator type A. max and min propagate
/// NaN as torch does.
template <class Op>
struct combine;

template <>
struct combine<ops::sum_op> {
  template <class A> __device__ static A init() { return A(0); }
  template <class A> __device__ static A map(A x) { return x; }
  template <class A> __device__ static A join(A a, A b) { return a + b; }
  template <class A> __device__ static A finish(A a, int) { return a; }
};

template <>
struct combine<ops::mean_op> : combine<ops::sum_op> {
  template <class A> __device__ static A finish(A a, int count) { return a / static_cast<A>(count); }
};

template <>
struct combine<ops::max_op> {
  template <class A> __device__ static A init() {
    if constexpr (std::numeric_limits<A>::has_infinity) return -std::numeric_limits<A>::infinity();
    else return std::numeric_limits<A>::lowest();
  }
  template <class A> __device__ static A map(A x) { return x; }
  template <class A> __device__ static A join(A a, A b) { return (a > b || a != a) ? a : b; }
  template <class A> __device__ static A finish(A a, int) { return a; }
};

template <>
struct combine<ops::min_op> {
  template <class A> __device__ static A init() {
    if constexpr (std::numeric_limits<A>::has_infinity) return std::numeric_limits<A>::infinity();
    else return std::numeric_limits<A>::max();
  }
  template <class A> __device__ static A map(A x) { return x; }
  template <class A> __device__ static A join(A a, A b) { return (a < b || a != a) ? a : b; }
  template <class A> __device__ static A finish(A a, int) { return a; }
};

template <>
struct combine<ops::absmax_op> : combine<ops::max_op> {
  template <class A> __device__ static A init() { return A(0); }
  template <class A> __device__ static A map(A x) { return x < A(0) ? -x : x; }
};

// ---------------------------------------------------------------- reduced axes

/// The reduced modes named by Axes: cute::Int<k>, a cute::tuple of them, or cute::seq<k...>.
template <class Axes>
struct axes_list;
template <auto K>
struct axes_list<cute::C<K>> {
  static constexpr int count = 1;
  static constexpr int value[1] = {static_cast<int>(K)};
};
template <auto... K>
struct axes_list<cute::tuple<cute::C<K>...>> {
  static constexpr int count = sizeof...(K);
  static constexpr int value[sizeof...(K) > 0 ? sizeof...(K) : 1] = {static_cast<int>(K)...};
};
template <int... K>
struct axes_list<cute::int_sequence<K...>> {
  static constexpr int count = sizeof...(K);
  static constexpr int value[sizeof...(K) > 0 ? sizeof...(K) : 1] = {K...};
};

template <class Axes>
constexpr bool axes_contains(int mode) {
  for (int i = 0; i < axes_list<Axes>::count; ++i) {
    if (axes_list<Axes>::value[i] == mode) return true;
  }
  return false;
}

/// Kept and reduced modes of a rank-Rank operand, each in increasing order.
template <class Axes, int Rank>
struct mode_split {
  struct Lists {
    int kept[Rank + 1];
    int reduced[Rank + 1];
    int kept_count;
    int reduced_count;
  };
  static constexpr Lists lists = [] {
    Lists l{};
    for (int m = 0; m < Rank; ++m) {
      if (axes_contains<Axes>(m)) l.reduced[l.reduced_count++] = m;
      else l.kept[l.kept_count++] = m;
    }
    return l;
  }();
  static constexpr bool axes_in_range = [] {
    for (int i = 0; i < axes_list<Axes>::count; ++i) {
      if (axes_list<Axes>::value[i] < 0 || axes_list<Axes>::value[i] >= Rank) return false;
    }
    return true;
  }();
  template <std::size_t... I>
  static auto kept_seq(std::index_sequence<I...>) -> cute::seq<lists.kept[I]...>;
  template <std::size_t... I>
  static auto reduced_seq(std::index_sequence<I...>) -> cute::seq<lists.reduced[I]...>;
  using kept = decltype(kept_seq(std::make_index_sequence<lists.kept_count>{}));
  using reduced = decltype(reduced_seq(std::make_index_sequence<lists.reduced_count>{}));
};

/// Modes I... of a layout as one mode; an empty selection is the unit layout _1:_0.
template <int... I, class Layout>
CUTE_HOST_DEVICE auto select_modes(Layout const& layout, cute::seq<I...>) {
  if constexpr (sizeof...(I) == 0) return cute::Layout<cute::_1, cute::_0>{};
  else return cute::select<I...>(layout);
}

/// The layout regrouped as ((kept modes), (reduced modes)): element (j, r) is output j's r-th input.
template <class Layout, class Kept, class Reduced>
CUTE_HOST_DEVICE auto group_kept_reduced(Layout const& layout, Kept kept, Reduced reduced) {
  return cute::make_layout(select_modes(layout, kept), select_modes(layout, reduced));
}

// ---------------------------------------------------------------- operands

/// The per-thread view of an operand: local() of a shard tensor, a plain tensor as it is.
template <class T>
CUTE_HOST_DEVICE auto local_view(T&& t) {
  if constexpr (is_shard_tensor_v<cute::remove_cvref_t<T>>) return local(t);
  else return t;
}

// ---------------------------------------------------------------- tier plan

enum class ReduceTier { thread, warp, cta, cross_cta };

/// Mesh axes a reduce combines over, at most kMaxMeshRank of them: each with its lane stride
/// (its mesh stride: thread-level axes number program_id<thread>) and extent.
inline constexpr int kMaxMeshRank = 8;

struct ReduceGeometry {
  int count = 0;
  int lane_stride[kMaxMeshRank] = {};
  int extent[kMaxMeshRank] = {};
  bool crosses_cta = false;      ///< a combined axis belongs to a level other than thread
  bool static_geometry = true;   ///< every stride and extent is static
};

/// The mesh axes a sharded src combines over: every m with attrs[m] = S<k>, leaf k inside a
/// reduced mode. Plain
/// operands combine over none. NOTE: device code copies geometry() into a local constexpr
/// (static data members are host memory).
template <class Axes, class Src, class = void>
struct reduce_participants {
  static constexpr ReduceGeometry geometry() { return {}; }
};

template <class Axes, class E, class GL, class SL>
struct reduce_participants<Axes, ShardTensor<E, GL, SL>> {
  using Attrs = decltype(SL::attrs);
  using MeshT = decltype(SL::mesh);
  using Layout = decltype(SL::layout);
  static_assert(MeshT::rank <= kMaxMeshRank, "ops::reduce: meshes of rank above 8 are not supported");

  template <int M>
  static constexpr bool participates() {
    using A = attr_t<Attrs, M>;
    if constexpr (is_split_v<A>) return axes_contains<Axes>(mode_of_leaf<Layout>(split_mode_v<A>));
    else return false;
  }

  template <int M>
  static constexpr void add(ReduceGeometry& g) {
    if (!participates<M>()) return;
    constexpr int stride = static_leaf<typename MeshT::stride_type, M>();
    constexpr int extent = static_leaf<typename MeshT::shape_type, M>();
    if (MeshT::template level<MeshT::grouping.owner[M]> != TopologyScope::thread) g.crosses_cta = true;
    if (stride <= 0 || extent <= 0) g.static_geometry = false;
    g.lane_stride[g.count] = stride;
    g.extent[g.count] = extent;
    ++g.count;
  }

  template <int... M>
  static constexpr ReduceGeometry collect(cute::seq<M...>) {
    ReduceGeometry g{};
    (add<M>(g), ...);
    return g;
  }

  static constexpr ReduceGeometry geometry() { return collect(cute::make_seq<MeshT::rank>{}); }
};

constexpr bool is_pow2(int x) { return x > 0 && (x & (x - 1)) == 0; }

/// The tier a reduce runs at: thread-local when no mesh axis is combined over; warp shuffles
/// when every combined axis spans a power-of-two lane group inside one warp; the CTA (through
/// the shared-memory workspace) otherwise; cross_cta when a combined axis belongs to the cta level.
template <class Axes, class Src>
constexpr ReduceTier reduce_tier() {
  constexpr ReduceGeometry g = reduce_participants<Axes, Src>::geometry();
  if (g.count == 0) return ReduceTier::thread;
  if (g.crosses_cta) return ReduceTier::cross_cta;
  for (int i = 0; i < g.count; ++i) {
    if (!is_pow2(g.lane_stride[i]) || !is_pow2(g.extent[i]) || g.lane_stride[i] * g.extent[i] > 32) {
      return ReduceTier::cta;
    }
  }
  return ReduceTier::warp;
}

template <class Axes, class Src>
inline constexpr ReduceTier reduce_tier_v = reduce_tier<Axes, cute::remove_cvref_t<Src>>();

/// True when dst's shard layout splits a mesh axis that the reduction combines over.
template <class Axes, class Src, class Dst>
struct dst_split_on_participant : std::false_type {};

template <class Axes, class E, class GL, class SL, class E2, class GL2, class SL2>
struct dst_split_on_participant<Axes, ShardTensor<E, GL, SL>, ShardTensor<E2, GL2, SL2>> {
  using SrcAttrs = decltype(SL::attrs);
  using DstAttrs = decltype(SL2::attrs);
  template <int... M>
  static constexpr bool any(cute::seq<M...>) {
    return ((reduce_participants<Axes, ShardTensor<E, GL, SL>>::template participates<M>() &&
             is_split_v<attr_t<DstAttrs, M>>) ||
            ...);
  }
  static constexpr bool check() {
    if constexpr (cute::tuple_size<SrcAttrs>::value != cute::tuple_size<DstAttrs>::value) return false;
    else return any(cute::make_seq<cute::tuple_size<SrcAttrs>::value>{});
  }
  static constexpr bool value = check();
};

}  // namespace tilefoundry::detail
