// tilefoundry::ShardLayout: a layout / attrs / mesh aggregate (seed 000 §2.4) and its local shape.
//
// The layout is canonical: S<k> names leaf k of the flattened layout (a split position), that
// leaf has the extent of the mesh axis splitting it, and strides are storage-physical (0 when
// every instance holds only its own slice, e.g. a register fragment). The local shape sets each
// split position to 1 and keeps the nesting, so top-level modes stay the tensor's axes.
//
// Example: a (8,6) row-major gmem tensor split by a (2,3) mesh, rows by axis 0, cols by axis 1:
//   layout ((4,2),(2,3)):((6,24),(1,2)), attrs (S<1>, S<3>)  ->  local shape ((4,_1),(2,_1))
#pragma once

#include <cute/layout.hpp>

#include <tilefoundry/mesh.h>
#include <tilefoundry/shard.h>

namespace tilefoundry {

template <class Layout, class Attrs, class Mesh>
struct ShardLayout;

template <class T>
inline constexpr bool is_shard_layout_v = false;
template <class L, class A, class M>
inline constexpr bool is_shard_layout_v<ShardLayout<L, A, M>> = true;

namespace detail {

template <class Attrs, int M>
using attr_t = cute::remove_cvref_t<decltype(cute::get<M>(cute::declval<Attrs>()))>;

template <class Layout>
using layout_leaves_t = flat_leaves_t<decltype(cute::declval<Layout>().shape())>;

template <class Shape, int... I>
constexpr int mode_of_leaf_in(int leaf, cute::seq<I...>) {
  constexpr int counts[] = {
      static_cast<int>(cute::tuple_size<flat_leaves_t<cute::remove_cvref_t<decltype(cute::get<I>(cute::declval<Shape>()))>>>::value)...,
      0};
  for (int i = 0; i < static_cast<int>(sizeof...(I)); ++i) {
    if (leaf < counts[i]) return i;
    leaf -= counts[i];
  }
  return -1;
}

/// The top-level mode (tensor axis) of Layout that flattened leaf `leaf` belongs to.
template <class Layout>
constexpr int mode_of_leaf(int leaf) {
  using Shape = decltype(cute::declval<Layout>().shape());
  if constexpr (cute::is_tuple<Shape>::value) {
    return mode_of_leaf_in<Shape>(leaf, cute::make_seq<cute::tuple_size<Shape>::value>{});
  } else {
    return leaf == 0 ? 0 : -1;
  }
}

/// True when some mesh axis splits layout leaf K.
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
    constexpr int leaves = cute::tuple_size<layout_leaves_t<Layout>>::value;
    static_assert(split_mode_v<A> < leaves, "ShardLayout: shard::S<k> names a leaf past the flattened layout");
    if constexpr (split_mode_v<A> < leaves) {
      constexpr int leaf_extent = static_leaf<layout_leaves_t<Layout>, split_mode_v<A>>();
      constexpr int axis_extent = static_leaf<typename MeshT::shape_type, M>();
      static_assert(leaf_extent == 0 || axis_extent == 0 || leaf_extent == axis_extent,
                    "ShardLayout: not canonical: a split position's extent must equal its mesh axis extent");
    }
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

/// The flat leaves of `shape` with every split position replaced by _1.
template <class Attrs, int MeshRank, class Shape, int... K>
CUTE_HOST_DEVICE constexpr auto local_leaves(Shape const& shape, cute::seq<K...>) {
  auto const leaves = flat_leaves(shape);
  auto leaf = [&](auto k) {
    if constexpr (is_split_position<Attrs, decltype(k)::value>(cute::make_seq<MeshRank>{})) {
      return cute::Int<1>{};
    } else {
      return cute::get<decltype(k)::value>(leaves);
    }
  };
  return cute::make_tuple(leaf(cute::Int<K>{})...);
}

}  // namespace detail

/**
 * @brief A plain layout / attrs / mesh aggregate.
 */
template <class Layout, class Attrs, class Mesh>
struct ShardLayout {
  static_assert(detail::check_shard_layout<Layout, Attrs, Mesh>(cute::make_seq<cute::tuple_size<Attrs>::value>{}));

  Layout layout;  ///< the underlying CuTe layout
  Attrs attrs;    ///< shard attributes, ordered by mesh axis
  Mesh mesh;      ///< the bound device domain
};

/// ShardLayout{layout, attrs, mesh} with the types deduced.
template <class Layout, class Attrs, class MeshT>
CUTE_HOST_DEVICE constexpr auto make_shard_layout(Layout const& layout, Attrs const& attrs, MeshT const& mesh) {
  return ShardLayout<Layout, Attrs, MeshT>{layout, attrs, mesh};
}

/// Shape of one instance's slice: the layout's shape, nesting kept, every split leaf set to _1.
template <class Layout, class Attrs, class MeshT>
CUTE_HOST_DEVICE constexpr auto shard_layout_local_shape(ShardLayout<Layout, Attrs, MeshT> const& sl) {
  constexpr int leaves = cute::tuple_size<detail::layout_leaves_t<Layout>>::value;
  auto const flat = detail::local_leaves<Attrs, MeshT::rank>(sl.layout.shape(), cute::make_seq<leaves>{});
  if constexpr (cute::is_tuple<decltype(sl.layout.shape())>::value) {
    return cute::unflatten(flat, sl.layout.shape());
  } else {
    return cute::get<0>(flat);
  }
}

}  // namespace tilefoundry
