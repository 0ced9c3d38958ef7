// tilefoundry::ShardLayout: a layout / attrs / mesh aggregate (seed 000 §2.4) and its local shape.
//
// The layout is canonical: every split position (mode k with attrs[m] = S<k>) has the extent of
// mesh axis m, and its stride is storage-physical (0 when every instance holds only its own
// slice, e.g. a register fragment). The local shape sets each split position to 1.
//
// Example: a (8,6) row-major gmem tensor split by a (2,3) mesh, rows by axis 0, cols by axis 1:
//   layout (2,4,3,2):(24,6,2,1), attrs (S<0>, S<2>)  ->  local shape (_1,4,_1,2)
#pragma once

#include <cute/layout.hpp>

#include <tilefoundry/mesh.h>
#include <tilefoundry/shard.h>

namespace tilefoundry {

/**
 * @brief A plain layout / attrs / mesh aggregate.
 */
template <class Layout, class Attrs, class Mesh>
struct ShardLayout {
  Layout layout;  ///< the underlying CuTe layout
  Attrs attrs;    ///< shard attributes, ordered by mesh axis
  Mesh mesh;      ///< the bound device domain
};

template <class T>
inline constexpr bool is_shard_layout_v = false;
template <class L, class A, class M>
inline constexpr bool is_shard_layout_v<ShardLayout<L, A, M>> = true;

namespace detail {

template <class Attrs, int M>
using attr_t = cute::remove_cvref_t<decltype(cute::get<M>(cute::declval<Attrs>()))>;

/// True when some mesh axis splits layout mode K.
template <class Attrs, int K, int... M>
constexpr bool is_split_position(cute::seq<M...>) {
  return ((split_mode_v<attr_t<Attrs, M>> == K) || ...);
}

template <class Attrs, int... M>
constexpr bool has_dynamic_attr(cute::seq<M...>) {
  return (is_dynamic_v<attr_t<Attrs, M>> || ...);
}

/// Checks the canonical-form facts visible at compile time; true so it can sit in static_assert.
template <class Layout, class Attrs, class MeshT, int M>
constexpr bool check_split_attr() {
  using A = attr_t<Attrs, M>;
  static_assert(is_shard_attr_v<A>, "ShardLayout: attrs must be shard::S<k>, shard::B, shard::P<R> or shard::Dynamic");
  if constexpr (is_split_v<A>) {
    static_assert(split_mode_v<A> < cute::rank_v<Layout>, "ShardLayout: shard::S<k> names a mode past the layout's rank");
    using Shape = decltype(cute::declval<Layout>().shape());
    using MeshShape = typename MeshT::shape_type;
    constexpr int mode_extent = static_mode_extent<Shape, split_mode_v<A>>();
    constexpr int axis_extent = static_mode_extent<MeshShape, M>();
    static_assert(mode_extent <= 0 || axis_extent <= 0 || mode_extent == axis_extent,
                  "ShardLayout: not canonical: a split position's extent must equal its mesh axis extent");
  }
  return true;
}

template <class Layout, class Attrs, class MeshT, int... M>
constexpr bool check_shard_layout(cute::seq<M...>) {
  static_assert(cute::is_layout<Layout>::value, "ShardLayout: layout must be a cute::Layout");
  static_assert(is_mesh_v<MeshT>, "ShardLayout: mesh must be a tilefoundry::Mesh");
  static_assert(sizeof...(M) == MeshT::rank, "ShardLayout: attrs needs one shard attribute per mesh axis");
  return (check_split_attr<Layout, Attrs, MeshT, M>() && ...);
}

template <class Attrs, int Rank, class Shape, int... K>
CUTE_HOST_DEVICE constexpr auto local_shape_of(Shape const& shape, cute::seq<K...>) {
  auto mode = [&](auto k) {
    if constexpr (is_split_position<Attrs, decltype(k)::value>(cute::make_seq<Rank>{})) {
      return cute::Int<1>{};
    } else {
      return cute::get<decltype(k)::value>(shape);
    }
  };
  return cute::make_shape(mode(cute::Int<K>{})...);
}

}  // namespace detail

/// Builds a ShardLayout after checking it at compile time: one attribute per mesh axis, each a
/// shard tag, split positions inside the layout's rank with the extent of their mesh axis.
template <class Layout, class Attrs, class MeshT>
CUTE_HOST_DEVICE constexpr auto make_shard_layout(Layout const& layout, Attrs const& attrs, MeshT const& mesh) {
  static_assert(detail::check_shard_layout<Layout, Attrs, MeshT>(cute::make_seq<cute::tuple_size<Attrs>::value>{}));
  return ShardLayout<Layout, Attrs, MeshT>{layout, attrs, mesh};
}

/// Shape of one instance's slice: the layout's shape with every split position set to _1.
template <class Layout, class Attrs, class MeshT>
CUTE_HOST_DEVICE constexpr auto shard_layout_local_shape(ShardLayout<Layout, Attrs, MeshT> const& sl) {
  return detail::local_shape_of<Attrs, MeshT::rank>(sl.layout.shape(), cute::make_seq<cute::rank_v<Layout>>{});
}

}  // namespace tilefoundry
