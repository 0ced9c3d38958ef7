// Mesh internals: flattened axes and the axes-to-topology grouping rule, computed at compile time.
#pragma once

#include <cute/layout.hpp>

#include <tilefoundry/topology.h>

namespace tilefoundry::detail {

/// The leaves of an IntTuple as a flat tuple; a single integer becomes a rank-1 tuple.
template <class IntTuple>
CUTE_HOST_DEVICE constexpr auto flat_leaves(IntTuple const& t) {
  if constexpr (cute::is_tuple<IntTuple>::value) {
    return cute::flatten(t);
  } else {
    return cute::make_tuple(t);
  }
}

template <class IntTuple>
using flat_leaves_t = decltype(flat_leaves(cute::declval<IntTuple>()));

/// Why a mesh's axes cannot be grouped onto its topology levels (none when they can).
enum class MeshGroupingError {
  none,
  dynamic_inner_level,  ///< a launch-provided level that is not the first (outermost) one
  dynamic_axis,         ///< a static level would take an axis whose extent is run-time
  product_mismatch,     ///< a static level's axes do not multiply to its size
  unassigned_axes,      ///< leading axes left over after every level took its group
};

/// Level `owner[a]` takes mesh axis a; level t takes axes [begin[t], end[t]).
template <int Rank, int Levels>
struct MeshGrouping {
  int owner[Rank > 0 ? Rank : 1] = {};
  int begin[Levels] = {};
  int end[Levels] = {};
  MeshGroupingError error = MeshGroupingError::none;
};

/// Seed 000 §2.3: axes are matched from the end of the shape backwards, in reverse level order;
/// a static level greedily takes trailing axes until their product equals its size. A
/// launch-provided level (size 0) must be the outermost one and takes every remaining axis.
/// `extents[a]` is 0 for a run-time extent.
template <int Rank, int Levels>
constexpr MeshGrouping<Rank, Levels> group_mesh_axes(int const (&extents)[Rank > 0 ? Rank : 1],
                                                     int const (&sizes)[Levels]) {
  MeshGrouping<Rank, Levels> g{};
  int next = Rank;  // axes [0, next) are still unassigned
  for (int t = Levels - 1; t >= 0; --t) {
    g.end[t] = next;
    if (sizes[t] == 0) {
      if (t != 0) {
        g.error = MeshGroupingError::dynamic_inner_level;
        return g;
      }
      next = 0;
    } else {
      long long product = 1;
      while (product < sizes[t] && next > 0) {
        if (extents[next - 1] == 0) {
          g.error = MeshGroupingError::dynamic_axis;
          return g;
        }
        product *= extents[--next];
      }
      if (product != sizes[t]) {
        g.error = MeshGroupingError::product_mismatch;
        return g;
      }
    }
    g.begin[t] = next;
    for (int a = g.begin[t]; a < g.end[t]; ++a) g.owner[a] = t;
  }
  if (next != 0) g.error = MeshGroupingError::unassigned_axes;
  return g;
}

/// True when every static level's axes [begin, end), as extents:strides, map [0, size) one to
/// one onto [0, size) (a compact sub-layout), so idx2crd recovers the coordinates. Levels with
/// a run-time size, extent or stride are not checked here.
template <int Rank, int Levels>
constexpr bool groups_number_ids_once(MeshGrouping<Rank, Levels> const& g, int const (&extents)[Rank > 0 ? Rank : 1],
                                      int const (&strides)[Rank > 0 ? Rank : 1], int const (&sizes)[Levels]) {
  for (int t = 0; t < Levels; ++t) {
    bool known = sizes[t] > 0;
    for (int a = g.begin[t]; a < g.end[t]; ++a) known = known && extents[a] > 0 && (extents[a] == 1 || strides[a] > 0);
    if (!known) continue;
    long long covered = 1;
    for (int step = g.begin[t]; step < g.end[t]; ++step) {
      int next = -1;  // the axis whose stride continues the covered range
      for (int a = g.begin[t]; a < g.end[t]; ++a) {
        if (extents[a] > 1 && strides[a] == covered) next = a;
      }
      if (next < 0) break;
      covered *= extents[next];
    }
    if (covered != sizes[t]) return false;
  }
  return true;
}

/// Compile-time value of leaf I of a flat IntTuple: N for Int<N>, 0 for a run-time int.
template <class Flat, int I>
constexpr int static_leaf() {
  using Leaf = cute::remove_cvref_t<decltype(cute::get<I>(cute::declval<Flat>()))>;
  if constexpr (cute::is_static<Leaf>::value) {
    return static_cast<int>(Leaf::value);
  } else {
    return 0;
  }
}

template <class Flat, int... I>
constexpr auto static_leaves(cute::seq<I...>) {
  struct Leaves {
    int v[sizeof...(I) > 0 ? sizeof...(I) : 1];
  };
  return Leaves{{static_leaf<Flat, I>()...}};
}

/// The level at position I of a TopologyScope pack.
template <int I, TopologyScope... Topos>
constexpr TopologyScope topology_at() {
  constexpr TopologyScope all[] = {Topos...};
  return all[I];
}

}  // namespace tilefoundry::detail
