// tilefoundry::Mesh: a CuTe layout whose axes map to program topology levels (seed 000 §2.3).
//
// mesh_layout maps a mesh coordinate to the linear instance id over the mesh's levels, the
// first level outermost: for Mesh<L, cta, thread>, id = program_id<cta>() * program_dim<thread>()
// + program_id<thread>(). Axes group onto levels by the trailing-greedy rule (mesh_detail.h).
//
// Example: (2,4):(4,1) over (cta, thread) with 4 static threads: axis 1 -> thread, axis 0 -> cta;
// the instance with cta 1, thread 2 has local_index() == (1, 2).
#pragma once

#include <cute/layout.hpp>

#include <tilefoundry/mesh_detail.h>
#include <tilefoundry/topology.h>

namespace tilefoundry {

/**
 * @brief A device mesh: a CuTe layout whose axes map to program topology levels.
 */
template <class MeshLayout, TopologyScope... Topos>
struct Mesh {
  static_assert(cute::is_layout<MeshLayout>::value, "Mesh: MeshLayout must be a cute::Layout");
  static_assert(sizeof...(Topos) > 0, "Mesh: needs at least one topology level");

  static constexpr int rank = cute::rank_v<MeshLayout>;
  static constexpr int levels = static_cast<int>(sizeof...(Topos));
  using shape_type = decltype(cute::declval<MeshLayout>().shape());
  using stride_type = decltype(cute::declval<MeshLayout>().stride());

  static constexpr auto grouping = detail::group_mesh_axes<rank, levels>(
      detail::static_mode_extents<shape_type>(cute::make_seq<rank>{}).v,
      {topology_extent<Topos>::value...});
  static_assert(grouping.error != detail::MeshGroupingError::not_flat,
                "Mesh: mesh_layout must be flat (one integer extent per mesh axis)");
  static_assert(grouping.error != detail::MeshGroupingError::dynamic_inner_level,
                "Mesh: only the first (outermost) topology level may be launch-provided; "
                "give the inner levels static extents (TILEFOUNDRY_THREAD_EXTENT)");
  static_assert(grouping.error != detail::MeshGroupingError::dynamic_axis,
                "Mesh: a static topology level was assigned a mesh axis with a run-time extent");
  static_assert(grouping.error != detail::MeshGroupingError::product_mismatch,
                "Mesh: the mesh axes assigned to a topology level must multiply to its size "
                "(trailing axes are taken greedily, last level first)");
  static_assert(grouping.error != detail::MeshGroupingError::unassigned_axes,
                "Mesh: leading mesh axes are left over after every topology level took its axes");

  /// The level at position I of the topologies list.
  template <int I>
  static constexpr TopologyScope level = detail::topology_at<I, Topos...>();
  /// Static instance count of the levels after position I; 0 when one is launch-provided.
  template <int I>
  static constexpr int inner_static_extent = detail::inner_static_extent<I, Topos...>();

  MeshLayout mesh_layout;                                         ///< a CuTe-compatible layout
  static constexpr auto topologies = cute::make_tuple(Topos...);  ///< sparse level list (type-level)

  /// Full mesh coordinate of this execution instance: per level, its program_id converted by
  /// idx2crd over the level's axes, strides taken relative to the level.
  CUTE_HOST_DEVICE auto local_index() const noexcept { return axis_coords(cute::make_seq<rank>{}); }

 private:
  template <int... A>
  CUTE_HOST_DEVICE auto axis_coords(cute::seq<A...>) const noexcept {
    return cute::make_tuple(axis_coord<A>()...);
  }

  template <int A>
  CUTE_HOST_DEVICE auto axis_coord() const noexcept {
    constexpr int level = grouping.owner[A];
    auto const extent = cute::get<A>(mesh_layout.shape());
    if constexpr (detail::static_mode_extent<shape_type, A>() == 1) {
      return cute::Int<0>{};
    } else {
      auto const inner = detail::inner_program_extent<level + 1, Topos...>();
      auto const stride = cute::get<A>(mesh_layout.stride());
      using Stride = cute::remove_cvref_t<decltype(stride)>;
      using Inner = cute::remove_cvref_t<decltype(inner)>;
      if constexpr (cute::is_static<Stride>::value && cute::is_static<Inner>::value) {
        static_assert(Stride::value % Inner::value == 0 && Stride::value != 0,
                      "Mesh: a mesh axis stride must be a nonzero multiple of the instance count of "
                      "the levels inside its own (mesh_layout maps to the combined instance id)");
      }
      int const id = program_id<detail::topology_at<level, Topos...>()>();
      return (id / static_cast<int>(stride / inner)) % static_cast<int>(extent);  // idx2crd, one mode
    }
  }
};

template <class T>
inline constexpr bool is_mesh_v = false;
template <class L, TopologyScope... Topos>
inline constexpr bool is_mesh_v<Mesh<L, Topos...>> = true;

/// Mesh<L, Topos...>{layout} with the layout type deduced.
template <TopologyScope... Topos, class MeshLayout>
CUTE_HOST_DEVICE constexpr auto make_mesh(MeshLayout const& layout) {
  return Mesh<MeshLayout, Topos...>{layout};
}

}  // namespace tilefoundry
