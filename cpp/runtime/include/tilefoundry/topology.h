// Program topology levels and the program_shape / program_dim / program_id queries (seed 000 §2.1-2.2).
//
// A level is static when the build defines its extent, TILEFOUNDRY_CTA_EXTENT or
// TILEFOUNDRY_THREAD_EXTENT (on the compiler command line, or before including
// <tilefoundry/runtime.h>); program_shape / program_dim then return cute::Int constants.
// Otherwise the level is launch-provided and both are answered at run time by the target's
// detail::launch_geometry (blockIdx/gridDim/threadIdx/blockDim on CUDA, the host program
// context on CPU). NOTE: macros rather than specializations written after the include, because
// the runtime headers themselves use the extents (e.g. ops::mma's tier trait).
#pragma once

#include <cute/layout.hpp>

namespace tilefoundry {

/**
 * @brief A fixed enumeration of program topology levels.
 */
enum class TopologyScope {
  cta,          ///< maps to blockIdx (CPU: the worker of the outer parallel loop)
  thread,       ///< maps to threadIdx (CPU: the vector lane / inner instance)
  scope_count,  ///< a sentinel
};

/// Compile-time extent of topology level T; 0 means launch-provided.
template <TopologyScope T>
struct topology_extent : cute::Int<0> {};

#if defined(TILEFOUNDRY_CTA_EXTENT)
static_assert((TILEFOUNDRY_CTA_EXTENT) > 0, "TILEFOUNDRY_CTA_EXTENT must be a positive CTA count");
template <>
struct topology_extent<TopologyScope::cta> : cute::Int<(TILEFOUNDRY_CTA_EXTENT)> {};
#endif

#if defined(TILEFOUNDRY_THREAD_EXTENT)
static_assert((TILEFOUNDRY_THREAD_EXTENT) > 0, "TILEFOUNDRY_THREAD_EXTENT must be a positive thread count");
template <>
struct topology_extent<TopologyScope::thread> : cute::Int<(TILEFOUNDRY_THREAD_EXTENT)> {};
#endif

template <TopologyScope T>
inline constexpr bool is_static_topology_v = topology_extent<T>::value > 0;

namespace detail {
/// The target's answer for a launch-provided level: static shape() and id(). Defined once per
/// translation unit by runtime/cuda/topology.cuh or runtime/cpu/topology.h.
template <TopologyScope T>
struct launch_geometry;
}  // namespace detail

/**
 * @brief Shape of topology level T (e.g. program_shape<cta>() → grid dims).
 * @tparam T the topology level
 * Static level: cute::Shape<cute::Int<N>>. Launch-provided: the target's runtime extents
 * ((x, y, z) on CUDA, (n) on CPU).
 */
template <TopologyScope T>
CUTE_HOST_DEVICE auto program_shape() noexcept {
  if constexpr (is_static_topology_v<T>) {
    return cute::Shape<cute::Int<topology_extent<T>::value>>{};
  } else {
    return detail::launch_geometry<T>::shape();
  }
}

/**
 * @brief Size of topology level T: cute::Int<N> when static, an int from the launch otherwise.
 * @tparam T the topology level
 */
template <TopologyScope T>
CUTE_HOST_DEVICE auto program_dim() noexcept {
  if constexpr (is_static_topology_v<T>) {
    return cute::Int<topology_extent<T>::value>{};
  } else {
    return static_cast<int>(cute::size(detail::launch_geometry<T>::shape()));
  }
}

/**
 * @brief Linearized scalar runtime id of T (current execution instance), first mode fastest.
 * @tparam T the topology level
 */
template <TopologyScope T>
CUTE_HOST_DEVICE int program_id() noexcept {
  return detail::launch_geometry<T>::id();
}

}  // namespace tilefoundry
