// tilefoundry::ops::binary: elementwise binary ops (a ⊕ b -> dst). Device code.
//
// Either operand may be a scalar (tier chosen by operand kind at compile time); tensors have
// dst's size and pair by linear index, so broadcasting is a stride-0 mode in a's or b's layout.
// Computed in accum_t of a's element type, converted to dst's.
#pragma once

#include <type_traits>

#include <cute/tensor.hpp>

#include <tilefoundry/ops/accum.h>
#include <tilefoundry/ops/math.h>

namespace tilefoundry::ops {

struct add_op {
  template <class T> __device__ T operator()(T a, T b) const { return a + b; }
};
struct sub_op {
  template <class T> __device__ T operator()(T a, T b) const { return a - b; }
};
struct mul_op {
  template <class T> __device__ T operator()(T a, T b) const { return a * b; }
};
struct div_op {
  template <class T> __device__ T operator()(T a, T b) const { return a / b; }
};
struct maximum_op {  ///< propagates NaN, as torch.maximum
  template <class T> __device__ T operator()(T a, T b) const { return (a > b || a != a) ? a : b; }
};
struct minimum_op {  ///< propagates NaN, as torch.minimum
  template <class T> __device__ T operator()(T a, T b) const { return (a < b || a != a) ? a : b; }
};
struct pow_op {
  template <class T> __device__ T operator()(T a, T b) const { return tilefoundry::detail::math::pow(a, b); }
};

namespace detail {

template <class X>
inline constexpr bool is_tensor_operand_v = cute::is_tensor<cute::remove_cvref_t<X>>::value;

/// Element i of an operand: the tensor's, or the scalar itself.
template <class C, class X>
__device__ C operand_at(X const& x, int i) {
  if constexpr (is_tensor_operand_v<X>) return tilefoundry::detail::convert<C>(x(i));
  else return static_cast<C>(x);
}

/// False only when X is a tensor whose static size differs from dst's static size.
template <class X, class Dst>
constexpr bool size_matches() {
  if constexpr (is_tensor_operand_v<X>) {
    using XS = decltype(cute::size(cute::declval<cute::remove_cvref_t<X>>()));
    using DS = decltype(cute::size(cute::declval<cute::remove_cvref_t<Dst>>()));
    if constexpr (cute::is_static<XS>::value && cute::is_static<DS>::value) return XS::value == DS::value;
  }
  return true;
}

template <class X>
struct operand_value {
  using type = std::remove_cv_t<X>;
};
template <class E, class L>
struct operand_value<cute::Tensor<E, L>> {
  using type = tilefoundry::detail::value_t<cute::Tensor<E, L>>;
};

}  // namespace detail

/**
 * @brief dst = op(a, b) elementwise.
 * @param op a functor tag (add_op{}, maximum_op{}, ...)
 * @param a tensor or scalar
 * @param b tensor or scalar
 * @param dst destination tensor
 */
template <class Op, class A, class B, class Dst>
__device__ void binary(Op op, A const& a, B const& b, Dst&& dst) {
  static_assert(detail::is_tensor_operand_v<Dst>, "ops::binary: dst must be a CuTe tensor");
  static_assert(detail::is_tensor_operand_v<A> || detail::is_tensor_operand_v<B>,
                "ops::binary: at least one of a, b must be a tensor");
  static_assert(detail::size_matches<A, Dst>() && detail::size_matches<B, Dst>(),
                "ops::binary: tensor operands must have dst's size (broadcast with stride-0 modes)");
  using Lead = std::conditional_t<detail::is_tensor_operand_v<A>, A, B>;
  using C = accum_t<typename detail::operand_value<cute::remove_cvref_t<Lead>>::type>;
  using D = tilefoundry::detail::value_t<Dst>;
  CUTE_UNROLL
  for (int i = 0; i < cute::size(dst); ++i) {
    dst(i) = tilefoundry::detail::convert<D>(op(detail::operand_at<C>(a, i), detail::operand_at<C>(b, i)));
  }
}

}  // namespace tilefoundry::ops
