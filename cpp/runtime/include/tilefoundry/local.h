// local(): project a shard tensor to this execution instance's view (seed 000 §2.10).
//
//   offset = Σ_{m : attrs[m] = S<k>} coord[m] · S[k],  S = flattened strides, coord = mesh.local_index()
//   local  = make_tensor(engine.data() + offset, Layout(local_shape, stride(layout)))
//
// One path for gmem / smem / rmem: a split stride of 0 (each instance holds only its own slice)
// contributes 0. B and P contribute 0. The iterator keeps its residency tag.
#pragma once

#include <cute/tensor.hpp>

#include <tilefoundry/shard_layout.h>
#include <tilefoundry/shard_tensor.h>

namespace tilefoundry {
namespace detail {

template <class Attrs, int M, class Layout, class Coord>
CUTE_HOST_DEVICE auto split_offset(Layout const& layout, Coord const& coord) {
  using A = attr_t<Attrs, M>;
  if constexpr (is_split_v<A>) {
    return cute::get<M>(coord) * cute::get<split_mode_v<A>>(flat_leaves(layout.stride()));
  } else {
    return cute::Int<0>{};
  }
}

template <class Iterator, class Layout, class Attrs, class MeshT, int... M>
CUTE_HOST_DEVICE auto project_local(Iterator const& base, ShardLayout<Layout, Attrs, MeshT> const& sl,
                                    cute::seq<M...>) {
  static_assert(!has_dynamic_attr<Attrs>(cute::seq<M...>{}),
                "local: a shard::Dynamic attribute must be resolved before local()");
  auto const coord = sl.mesh.local_index();
  auto const offset = (cute::Int<0>{} + ... + split_offset<Attrs, M>(sl.layout, coord));
  return cute::make_tensor(base + offset, cute::make_layout(shard_layout_local_shape(sl), sl.layout.stride()));
}

template <class Iterator, class SL>
CUTE_HOST_DEVICE auto project_local(Iterator const& base, SL const& sl) {
  static_assert(is_shard_layout_v<SL>, "local: expected a tilefoundry::ShardLayout");
  return project_local(base, sl, cute::make_seq<cute::tuple_size<decltype(sl.attrs)>::value>{});
}

}  // namespace detail

/**
 * @brief Project t to this execution instance's local view.
 * @param t the shard tensor to project
 */
template <class E, class GL, class SL>
CUTE_HOST_DEVICE auto local(ShardTensor<E, GL, SL> const& t) noexcept {
  return detail::project_local(t.engine.data(), t.shard_layout);
}

/// The writable local view of t: an owning engine (a register fragment) yields const data
/// through a const t, so destinations project through this overload.
template <class E, class GL, class SL>
CUTE_HOST_DEVICE auto local(ShardTensor<E, GL, SL>& t) noexcept {
  return detail::project_local(t.engine.data(), t.shard_layout);
}

}  // namespace tilefoundry
