// Accumulation and compute types of the device ops, and value conversion between element types.
// Precision is explicit: 16-bit and 8-bit floats compute and accumulate in f32; f32 stays f32.
#pragma once

#include <type_traits>

#include <cute/numeric/numeric_types.hpp>

namespace tilefoundry::ops {

template <class T>
struct accum {
  using type = T;
};
template <>
struct accum<cute::half_t> {
  using type = float;
};
template <>
struct accum<cute::bfloat16_t> {
  using type = float;
};
template <>
struct accum<cute::float_e4m3_t> {
  using type = float;
};
template <>
struct accum<cute::float_e5m2_t> {
  using type = float;
};

/// The type a value of T is computed and accumulated in.
template <class T>
using accum_t = typename accum<std::remove_cv_t<T>>::type;

}  // namespace tilefoundry::ops

namespace tilefoundry::detail {

/// Element type of a CuTe tensor (or of a tensor reference).
template <class Tensor>
using value_t = std::remove_cv_t<typename std::remove_reference_t<Tensor>::value_type>;

/// Converts between element types; two non-builtin types (half_t -> bfloat16_t) go through f32.
template <class To, class From>
__device__ To convert(From x) {
  if constexpr (std::is_same_v<To, From>) {
    return x;
  } else if constexpr (std::is_arithmetic_v<To> || std::is_arithmetic_v<From>) {
    return static_cast<To>(x);
  } else {
    return static_cast<To>(static_cast<float>(x));
  }
}

}  // namespace tilefoundry::detail
