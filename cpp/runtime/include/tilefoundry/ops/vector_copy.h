// Vector-width facts of a (src, dst) tensor pair and the vectorized plain copy the device ops
// share as an internal fast path. Widths come from the layouts at compile time; the base
// addresses are checked at run time, since a pointer's alignment is not in its type.
#pragma once

#include <cstdint>

#include <cute/tensor.hpp>

#include <tilefoundry/ops/accum.h>

namespace tilefoundry::detail {

/// Widest access in bits (<= 128) that both layouts allow: contiguous common elements, bounded
/// by each layout's static alignment (CuTe's rule for its auto-vectorizing copy).
template <class Src, class Dst>
constexpr int vector_bits() {
  using S = cute::remove_cvref_t<Src>;
  using D = cute::remove_cvref_t<Dst>;
  constexpr int elem_bits = cute::sizeof_bits_v<value_t<D>>;
  if constexpr (cute::sizeof_bits_v<value_t<S>> != elem_bits) {
    return elem_bits < cute::sizeof_bits_v<value_t<S>> ? elem_bits : cute::sizeof_bits_v<value_t<S>>;
  } else {
    constexpr int common = decltype(cute::max_common_vector(cute::declval<S>(), cute::declval<D>()))::value;
    constexpr int align = decltype(cute::gcd(cute::max_alignment(cute::declval<S>().layout()),
                                             cute::max_alignment(cute::declval<D>().layout())))::value;
    constexpr int bits = cute::gcd(cute::gcd(common * elem_bits, align * elem_bits), 128);
    return bits;
  }
}

template <class Src, class Dst>
inline constexpr int vector_bits_v = vector_bits<Src, Dst>();

/// True when both tensors' base addresses are aligned to Bytes.
template <int Bytes, class Src, class Dst>
__device__ bool bases_aligned(Src const& src, Dst const& dst) {
  auto const s = reinterpret_cast<std::uintptr_t>(cute::raw_pointer_cast(src.data()));
  auto const d = reinterpret_cast<std::uintptr_t>(cute::raw_pointer_cast(dst.data()));
  return ((s | d) % Bytes) == 0;
}

/// The pair viewed as Bits-wide words, for a fast path whose vector_bits_v is at least Bits.
/// Layouts are coalesced first (which keeps each index -> offset map) so the recast sees one
/// contiguous leading mode.
template <int Bits, class Tensor>
__device__ auto as_words(Tensor&& t) {
  using Word = cute::uint_bit_t<Bits>;
  using Value = value_t<Tensor>;
  using WordT = std::conditional_t<std::is_const_v<typename std::remove_reference_t<Tensor>::element_type>,
                                   Word const, Word>;
  static_assert(Bits % cute::sizeof_bits_v<Value> == 0, "as_words: Bits must be a multiple of the element size");
  return cute::recast<WordT>(cute::make_tensor(t.data(), cute::coalesce(t.layout())));
}

/// Plain copy, in Bits-wide words when Bits exceeds the element size and both bases are aligned.
template <class Src, class Dst>
__device__ void copy_vectorized(Src const& src, Dst& dst) {
  constexpr int bits = vector_bits_v<Src, Dst>;
  if constexpr (bits > cute::sizeof_bits_v<value_t<Dst>>) {
    if (bases_aligned<bits / 8>(src, dst)) {
      auto const s = as_words<bits>(src);
      auto d = as_words<bits>(dst);
      CUTE_UNROLL
      for (int i = 0; i < cute::size(d); ++i) d(i) = s(i);
      return;
    }
  }
  CUTE_UNROLL
  for (int i = 0; i < cute::size(dst); ++i) dst(i) = src(i);
}

}  // namespace tilefoundry::detail
