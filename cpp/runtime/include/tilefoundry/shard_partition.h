// CuTe tensors laid out by a ShardLayout (seed 000 §2.9) and shard_partition (§3.3).
#pragma once

#include <cute/tensor.hpp>

#include <tilefoundry/local.h>
#include <tilefoundry/shard_layout.h>

namespace tilefoundry {

/// A cute::Tensor whose layout() is a ShardLayout: the distributed view of `iter`'s storage.
template <class Iterator, class SL>
CUTE_HOST_DEVICE auto make_shard_view(Iterator const& iter, SL const& shard_layout) {
  static_assert(!std::is_pointer_v<Iterator>,
                "make_shard_view: got a raw pointer; pass cute::make_gmem_ptr / make_smem_ptr so the "
                "view keeps its residency");
  static_assert(is_shard_layout_v<SL>, "make_shard_view: shard_layout must be a tilefoundry::ShardLayout");
  using Engine = cute::ViewEngine<Iterator>;
  return cute::Tensor<Engine, SL>(Engine{iter}, shard_layout);
}

/**
 * @brief Project tensor to the current device coordinate's local view.
 * @param tensor a tensor whose layout() is a ShardLayout
 * @return a cute::Tensor with a plain CuTe layout, the same view local() gives
 */
template <class Tensor>
CUTE_HOST_DEVICE auto shard_partition(Tensor const& tensor) {
  static_assert(is_shard_layout_v<cute::remove_cvref_t<decltype(tensor.layout())>>,
                "shard_partition: tensor.layout() must be a tilefoundry::ShardLayout "
                "(build it with make_shard_view)");
  return detail::project_local(tensor.data(), tensor.layout());
}

}  // namespace tilefoundry
