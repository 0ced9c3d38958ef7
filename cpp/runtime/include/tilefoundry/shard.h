// tilefoundry::shard: compile-time shard-attribute tags (seed 000 §2.5) and their traits.
#pragma once

namespace tilefoundry::shard {

template <int Axis>
struct S {
  static_assert(Axis >= 0, "shard::S: the split position must be non-negative");
  static constexpr int axis = Axis;
};  ///< Split along layout mode Axis: one slice per index of the mesh axis

struct B {};  ///< Broadcast (replicate)

template <class Reduction>
struct P {
  using reduction = Reduction;
};  ///< Partial reduction: each instance holds a partial result, to be combined with Reduction

struct Dynamic {};  ///< Dynamic / data-dependent: must be resolved before local()

}  // namespace tilefoundry::shard

namespace tilefoundry {

template <class A>
inline constexpr bool is_split_v = false;
template <int K>
inline constexpr bool is_split_v<shard::S<K>> = true;

/// The layout mode a Split attribute divides; -1 for any other attribute.
template <class A>
inline constexpr int split_mode_v = -1;
template <int K>
inline constexpr int split_mode_v<shard::S<K>> = K;

template <class A>
inline constexpr bool is_partial_v = false;
template <class R>
inline constexpr bool is_partial_v<shard::P<R>> = true;

template <class A>
inline constexpr bool is_broadcast_v = false;
template <>
inline constexpr bool is_broadcast_v<shard::B> = true;

template <class A>
inline constexpr bool is_dynamic_v = false;
template <>
inline constexpr bool is_dynamic_v<shard::Dynamic> = true;

template <class A>
inline constexpr bool is_shard_attr_v = is_split_v<A> || is_partial_v<A> || is_broadcast_v<A> || is_dynamic_v<A>;

}  // namespace tilefoundry
