// tilefoundry::Mesh: a CuTe layout whose axes map to program topology levels (seed 000 §2.3).
//
// The mesh axes are the leaves of mesh_layout. They group onto the levels by the trailing-greedy
// rule (mesh_detail.h), and each level's group is its own layout: its sub-shape and sub-stride
// number that level's program ids, so idx2crd(program_id<T>(), sub_shape, sub_stride) gives the
// group's coordinates.
//
// Example: (2,4):(1,1) over (cta, thread) with 4 static threads: axis 1 -> thread, axis 0 -> cta;
// the instance with cta 1, thread 2 has local_index() == (1, 2). Under 256 threads,
// (8,32):(32,1) is 8 warps of 32 lanes.
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

  using shape_type = detail::flat_leaves_t<decltype(cute::declval<MeshLayout>().shape())>;    ///< axis extents
  using stride_type = detail::flat_leaves_t<decltype(cute::declval<MeshLayout>().stride())>;  ///< axis strides
  static constexpr int rank = cute::tuple_size<shape_type>::value;
  static constexpr int levels = static_cast<int>(sizeof...(Topos));

  static constexpr auto grouping = detail::group_mesh_axes<rank, levels>(
      detail::static_leaves<shape_type>(cute::make_seq<rank>{}).v, {topology_extent<Topos>::value...});
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
  static_assert(detail::groups_number_ids_once<rank, levels>(
                    grouping, detail::static_leaves<shape_type>(cute::make_seq<rank>{}).v,
                    detail::static_leaves<stride_type>(cute::make_seq<rank>{}).v, {topology_extent<Topos>::value...}),
                "Mesh: each topology level's axes must number its ids one to one (a compact sub-layout, "
                "e.g. (8,32):(32,1) for 256 threads)");

  /// The level at position I of the topologies list.
  template <int I>
  static constexpr TopologyScope level = detail::topology_at<I, Topos...>();

  MeshLayout mesh_layout;                                         ///< a CuTe-compatible layout
  static constexpr auto topologies = cute::make_tuple(Topos...);  ///< sparse level list (type-level)

  /// Full mesh coordinate of this execution instance: for each level, idx2crd of its program_id
  /// over the level's axes, concatenated in axis order.
  CUTE_HOST_DEVICE auto local_index() const noexcept { return axis_coords(cute::make_seq<rank>{}); }

 private:
  template <int... A>
  CUTE_HOST_DEVICE auto axis_coords(cute::seq<A...>) const noexcept {
    return cute::make_tuple(axis_coord<A>()...);
  }

  template <int A>
  CUTE_HOST_DEVICE auto axis_coord() const noexcept {
    if constexpr (detail::static_leaf<shape_type, A>() == 1) {
      return cute::Int<0>{};
    } else {
      auto const extent = cute::get<A>(detail::flat_leaves(mesh_layout.shape()));
      auto const stride = cute::get<A>(detail::flat_leaves(mesh_layout.stride()));
      using Stride = cute::remove_cvref_t<decltype(stride)>;
      if constexpr (cute::is_static<Stride>::value) {
        static_assert(Stride::value > 0,
                      "Mesh: a mesh axis of extent above 1 needs a positive stride (each level's axes "
                      "number its program ids one to one)");
      }
      int const id = program_id<level<grouping.owner[A]>>();
      return (id / static_cast<int>(stride)) % static_cast<int>(extent);  // idx2crd, one mode
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
