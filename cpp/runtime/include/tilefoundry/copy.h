// tilefoundry::copy: shard-aware overloads copying the full tensor (seed 000 §2.8).
//
// The full tensor is the engine's storage read through global_layout, so these apply to storage
// every instance shares (host, gmem, smem); a per-instance register fragment is copied through
// local() instead.
#pragma once

#include <cute/tensor.hpp>

#include <tilefoundry/shard_tensor.h>

namespace tilefoundry {
namespace detail {

template <class E, class GL, class SL>
CUTE_HOST_DEVICE auto full_tensor(ShardTensor<E, GL, SL> const& t) {
  return cute::make_tensor(t.engine.data(), t.global_layout);
}

/// Element-by-element copy by logical coordinate. NOTE: cute::copy's default policy assumes
/// 128-bit aligned static tensors and its recast rejects layouts such as (8,6):(6,1); the
/// global layouts here carry no alignment promise.
template <class Src, class Dst>
CUTE_HOST_DEVICE void copy_elements(Src const& src, Dst& dst) {
  cute::copy(cute::AutoVectorizingCopyWithAssumedAlignment<8>{}, src, dst);
}

}  // namespace detail

/**
 * @brief Copy the full tensor, shard → plain.
 * @param src the shard-tensor source
 * @param dst the plain destination tensor, shaped like src.global_layout
 */
template <class T, class GL, class SL, class DT>
CUTE_HOST_DEVICE void copy(ShardTensor<T, GL, SL> const& src, DT& dst) {
  auto const full = detail::full_tensor(src);
  detail::copy_elements(full, dst);
}

/**
 * @brief Copy the full tensor, plain → shard.
 * @param src the plain source tensor, shaped like dst.global_layout
 * @param dst the shard-tensor destination
 */
template <class ST, class T, class GL, class SL>
CUTE_HOST_DEVICE void copy(ST const& src, ShardTensor<T, GL, SL>& dst) {
  auto full = detail::full_tensor(dst);
  detail::copy_elements(src, full);
}

/// Copy the full tensor, shard → shard (the more specialized match for two shard tensors).
template <class T, class GL, class SL, class U, class GL2, class SL2>
CUTE_HOST_DEVICE void copy(ShardTensor<T, GL, SL> const& src, ShardTensor<U, GL2, SL2>& dst) {
  auto full = detail::full_tensor(dst);
  detail::copy_elements(detail::full_tensor(src), full);
}

}  // namespace tilefoundry
