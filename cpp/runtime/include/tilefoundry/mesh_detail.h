// Mesh internals: the axes-to-topology grouping rule, computed at compile time.
#pragma once

#include <cute/layout.hpp>

#include <tilefoundry/topology.h>

namespace tilefoundry::detail {

/// Why a mesh's axes cannot be grouped onto its topology levels (none when they can).
enum class MeshGroupingError {
  none,
  not_flat,             ///< a mesh_layout mode is itself a tuple
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
/// `extents[a]` is 0 for a run-time extent, -1 for a nested mode.
template <int Rank, int Levels>
constexpr MeshGrouping<Rank, Levels> group_mesh_axes(int const (&extents)[Rank > 0 ? Rank : 1],
                                                     int const (&sizes)[Levels]) {
  MeshGrouping<Rank, Levels> g{};
  for (int a = 0; a < Rank; ++a) {
    if (extents[a] < 0) {
      g.error = MeshGroupingError::not_flat;
      return g;
    }
  }
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

/// Compile-time extent of mode I of a flat shape: N for Int<N>, 0 for a run-time int, -1 nested.
template <class Shape, int I>
constexpr int static_mode_extent() {
  using Mode = cute::remove_cvref_t<decltype(cute::get<I>(cute::declval<Shape>()))>;
  if constexpr (cute::is_tuple<Mode>::value) {
    return -1;
  } else if constexpr (cute::is_static<Mode>::value) {
    return static_cast<int>(Mode::value);
  } else {
    return 0;
  }
}

template <class Shape, int... I>
constexpr auto static_mode_extents(cute::seq<I...>) {
  struct Extents {
    int v[sizeof...(I) > 0 ? sizeof...(I) : 1];
  };
  return Extents{{static_mode_extent<Shape, I>()...}};
}

/// The level at position I of a TopologyScope pack.
template <int I, TopologyScope... Topos>
constexpr TopologyScope topology_at() {
  constexpr TopologyScope all[] = {Topos...};
  return all[I];
}

/// Product of the static extents of the levels after position I; 0 when one is launch-provided.
template <int I, TopologyScope... Topos>
constexpr int inner_static_extent() {
  constexpr int extents[] = {topology_extent<Topos>::value...};
  int product = 1;
  for (int t = I + 1; t < static_cast<int>(sizeof...(Topos)); ++t) product *= extents[t];
  return product;
}

/// Product of program_dim over the levels at positions I and after: called with level + 1, the
/// linear stride of that level in the combined instance id (first level outermost).
template <int I, TopologyScope... Topos>
CUTE_HOST_DEVICE auto inner_program_extent() {
  if constexpr (I >= static_cast<int>(sizeof...(Topos))) {
    return cute::Int<1>{};
  } else {
    return program_dim<topology_at<I, Topos...>()>() * inner_program_extent<I + 1, Topos...>();
  }
}

}  // namespace tilefoundry::detail
