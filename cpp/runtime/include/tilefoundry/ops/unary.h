// The unary family: ops::unary, ops::cast, ops::copy_n, ops::clamp (seed 000 §3). Device code.
//
// Every entry routes through one skeleton, unary_impl::Unary<Op>, parameterised by a functor
// tag; relu and the other pointwise functions have no entry of their own: codegen calls
// ops::unary(relu_op{}, src, dst). Elements are computed in accum_t of the source type (f32 for
// 16-bit floats) and converted to the destination type. Tiers: a same-type identity over whole
// tensors takes the vectorized copy; everything else runs the element loop.
#pragma once

#include <type_traits>

#include <cute/tensor.hpp>

#include <tilefoundry/ops/accum.h>
#include <tilefoundry/ops/math.h>
#include <tilefoundry/ops/vector_copy.h>

namespace tilefoundry::ops {

// ---------------------------------------------------------------- functor tags

struct identity_op {
  template <class T> __device__ T operator()(T x) const { return x; }
};
struct relu_op {  ///< NaN passes through, as in torch
  template <class T> __device__ T operator()(T x) const { return x < T(0) ? T(0) : x; }
};
struct neg_op {
  template <class T> __device__ T operator()(T x) const { return -x; }
};
struct abs_op {
  template <class T> __device__ T operator()(T x) const { return x < T(0) ? -x : x; }
};
struct exp_op {
  template <class T> __device__ T operator()(T x) const { return tilefoundry::detail::math::exp(x); }
};
struct exp2_op {
  template <class T> __device__ T operator()(T x) const { return tilefoundry::detail::math::exp2(x); }
};
struct log_op {
  template <class T> __device__ T operator()(T x) const { return tilefoundry::detail::math::log(x); }
};
struct log2_op {
  template <class T> __device__ T operator()(T x) const { return tilefoundry::detail::math::log2(x); }
};
struct sqrt_op {
  template <class T> __device__ T operator()(T x) const { return tilefoundry::detail::math::sqrt(x); }
};
struct rsqrt_op {
  template <class T> __device__ T operator()(T x) const { return tilefoundry::detail::math::rsqrt(x); }
};
struct tanh_op {
  template <class T> __device__ T operator()(T x) const { return tilefoundry::detail::math::tanh(x); }
};
struct sigmoid_op {
  template <class T> __device__ T operator()(T x) const { return T(1) / (T(1) + tilefoundry::detail::math::exp(-x)); }
};
struct silu_op {
  template <class T> __device__ T operator()(T x) const { return x / (T(1) + tilefoundry::detail::math::exp(-x)); }
};
struct gelu_op {  ///< erf form, torch's approximate="none"
  template <class T> __device__ T operator()(T x) const {
    return T(0.5) * x * (T(1) + tilefoundry::detail::math::erf(x * T(0.70710678118654752440)));
  }
};
struct gelu_tanh_op {  ///< torch's approximate="tanh"
  template <class T> __device__ T operator()(T x) const {
    T const inner = T(0.79788456080286535588) * (x + T(0.044715) * x * x * x);
    return T(0.5) * x * (T(1) + tilefoundry::detail::math::tanh(inner));
  }
};
struct softplus_op {  ///< torch's beta=1, threshold=20
  template <class T> __device__ T operator()(T x) const {
    return x > T(20) ? x : tilefoundry::detail::math::log1p(tilefoundry::detail::math::exp(x));
  }
};
template <class Bound>
struct clamp_op {  ///< bounds in any arithmetic type, applied in the compute type
  Bound lo;
  Bound hi;
  template <class T> __device__ T operator()(T x) const {
    T const l = static_cast<T>(lo);
    T const h = static_cast<T>(hi);
    return x < l ? l : (x > h ? h : x);
  }
};

// ---------------------------------------------------------------- the skeleton

namespace unary_impl {

template <class Op>
struct Unary {
  Op op;

  /// dst(i) = op(src(i)) for i in [0, n), in linear (colex) order of each tensor's shape.
  template <class Src, class Dst>
  __device__ void operator()(Src const& src, Dst& dst, int n) const {
    using S = tilefoundry::detail::value_t<Src>;
    using D = tilefoundry::detail::value_t<Dst>;
    using C = accum_t<S>;
    for (int i = 0; i < n; ++i) {
      dst(i) = tilefoundry::detail::convert<D>(op(tilefoundry::detail::convert<C>(src(i))));
    }
  }

  /// The whole tensors; the identity between equal element types is a vectorized copy.
  template <class Src, class Dst>
  __device__ void operator()(Src const& src, Dst& dst) const {
    static_assert(cute::is_tensor<Src>::value && cute::is_tensor<cute::remove_cvref_t<Dst>>::value,
                  "ops::unary: src and dst must be CuTe tensors");
    using SrcSize = decltype(cute::size(src));
    using DstSize = decltype(cute::size(dst));
    if constexpr (cute::is_static<SrcSize>::value && cute::is_static<DstSize>::value) {
      static_assert(SrcSize::value == DstSize::value, "ops::unary: src and dst must have the same size");
    }
    if constexpr (std::is_same_v<Op, identity_op> &&
                  std::is_same_v<tilefoundry::detail::value_t<Src>, tilefoundry::detail::value_t<Dst>>) {
      tilefoundry::detail::copy_vectorized(src, dst);
    } else {
      CUTE_UNROLL
      for (int i = 0; i < cute::size(dst); ++i) {
        using C = accum_t<tilefoundry::detail::value_t<Src>>;
        dst(i) = tilefoundry::detail::convert<tilefoundry::detail::value_t<Dst>>(
            op(tilefoundry::detail::convert<C>(src(i))));
      }
    }
  }
};

}  // namespace unary_impl

// ---------------------------------------------------------------- public entries

/// dst = op(src), elementwise; op is a functor tag (relu_op{}, exp_op{}, ...).
template <class Op, class Src, class Dst>
__device__ void unary(Op op, Src const& src, Dst&& dst) {
  unary_impl::Unary<Op>{op}(src, dst);
}

/// dst = src converted to dst's element type.
template <class Src, class Dst>
__device__ void cast(Src const& src, Dst&& dst) {
  unary_impl::Unary<identity_op>{}(src, dst);
}

/// The first n elements (linear order) of src into dst, converted to dst's element type.
template <class Src, class Dst>
__device__ void copy_n(Src const& src, Dst&& dst, int n) {
  unary_impl::Unary<identity_op>{}(src, dst, n);
}

/// dst = min(max(src, lo), hi), in the compute type of src's elements.
template <class Src, class Dst, class Bound>
__device__ void clamp(Src const& src, Dst&& dst, Bound lo, Bound hi) {
  unary_impl::Unary<clamp_op<Bound>>{{lo, hi}}(src, dst);
}

}  // namespace tilefoundry::ops
