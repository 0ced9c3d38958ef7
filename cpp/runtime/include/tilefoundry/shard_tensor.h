// tilefoundry::ShardTensor and make_shard_tensor (seed 000 §2.6-2.7).
#pragma once

#include <type_traits>

#include <cute/tensor.hpp>

#include <tilefoundry/shard_layout.h>

namespace tilefoundry {

/**
 * @brief A CuTe tensor/view paired with its runtime shard layout.
 *
 * engine is the per-instance CuTe tensor/view; its engine type carries the gmem/smem/rmem
 * residency that local() and copy() rely on. global_layout is the full tensor's logical layout.
 */
template <class Engine_, class GlobalLayout_, class ShardLayout_>
struct ShardTensor {
  using engine_type = Engine_;
  using global_layout_type = GlobalLayout_;
  using shard_layout_type = ShardLayout_;
  Engine_ engine;               ///< CuTe tensor/view (gmem/smem/rmem); raw pointer rejected
  ShardLayout_ shard_layout;    ///< runtime shard-layout value (dynamic dims carry real extents)
  GlobalLayout_ global_layout;  ///< the full tensor's layout over the same storage

  /// Underlying raw pointer of the wrapped tensor. NOTE: drops the residency tag; residency-aware
  /// paths use local() instead.
  CUTE_HOST_DEVICE auto data() { return cute::raw_pointer_cast(engine.data()); }
  CUTE_HOST_DEVICE auto data() const { return cute::raw_pointer_cast(engine.data()); }
};

template <class T>
inline constexpr bool is_shard_tensor_v = false;
template <class E, class GL, class SL>
inline constexpr bool is_shard_tensor_v<ShardTensor<E, GL, SL>> = true;

/**
 * @brief Factory: bind a global layout and a shard layout onto a CuTe tensor.
 * @param tensor a CuTe tensor / view (raw pointers rejected at compile time)
 * @param global_layout the global layout to bind
 * @param shard_layout the shard layout to bind
 */
template <class T, class GL, class SL>
CUTE_HOST_DEVICE auto make_shard_tensor(T const& tensor, GL global_layout, SL shard_layout)
    -> ShardTensor<T, GL, SL> {
  static_assert(!std::is_pointer_v<T>,
                "make_shard_tensor: got a raw pointer; pass a CuTe tensor/view such as "
                "cute::make_tensor(cute::make_gmem_ptr(p), layout): a raw pointer loses its "
                "gmem/smem/rmem residency");
  static_assert(std::is_pointer_v<T> || cute::is_tensor<T>::value,
                "make_shard_tensor: tensor must be a CuTe tensor/view");
  static_assert(cute::is_layout<GL>::value, "make_shard_tensor: global_layout must be a cute::Layout");
  static_assert(is_shard_layout_v<SL>, "make_shard_tensor: shard_layout must be a tilefoundry::ShardLayout");
  return {tensor, shard_layout, global_layout};
}

}  // namespace tilefoundry
