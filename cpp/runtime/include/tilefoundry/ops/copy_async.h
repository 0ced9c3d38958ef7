// tilefoundry::ops::copy_async: async gmem -> smem staging (seed 000 §3.6). Device code.
//
// Tiers: cp.async 16-byte (sm_80+, gmem src, smem dst, 16-byte vectors allowed by both
// layouts, 16-byte aligned bases) or a synchronous vectorized copy. Either way later reads are
// ordered by cp_async_commit() then cp_async_wait<N>() (and a barrier when other threads read).
#pragma once

#include <cute/tensor.hpp>

#include <tilefoundry/ops/accum.h>
#include <tilefoundry/ops/vector_copy.h>
#include <tilefoundry/runtime/cuda/arch/arch.cuh>
#include <tilefoundry/runtime/cuda/arch/cp_async.cuh>

namespace tilefoundry::ops {

namespace detail {

/// True when a (src, dst) pair may take the cp.async 16-byte path on this architecture.
template <class TSrc, class TDst>
inline constexpr bool copy_async_16b_v =
    arch::has_cp_async && cute::is_gmem<typename TSrc::iterator>::value &&
    cute::is_smem<typename TDst::iterator>::value &&
    std::is_same_v<tilefoundry::detail::value_t<TSrc>, tilefoundry::detail::value_t<TDst>> &&
    tilefoundry::detail::vector_bits_v<TSrc, TDst> == 128;

}  // namespace detail

/**
 * @brief Async staging copy; fast path stages a gmem source into an smem destination.
 * @param src per-thread projected source operand
 * @param dst per-thread projected destination operand, same size
 */
template <class TSrc, class TDst>
__device__ void copy_async(TSrc const& src, TDst&& dst) {
  using S = cute::remove_cvref_t<TSrc>;
  using D = cute::remove_cvref_t<TDst>;
  static_assert(cute::is_tensor<S>::value && cute::is_tensor<D>::value,
                "ops::copy_async: src and dst must be CuTe tensors (per-thread projected views)");
  using SrcSize = decltype(cute::size(src));
  using DstSize = decltype(cute::size(dst));
  if constexpr (cute::is_static<SrcSize>::value && cute::is_static<DstSize>::value) {
    static_assert(SrcSize::value == DstSize::value, "ops::copy_async: src and dst must have the same size");
  }
  if constexpr (detail::copy_async_16b_v<S, D>) {
    if (tilefoundry::detail::bases_aligned<16>(src, dst)) {
      auto const s = tilefoundry::detail::as_words<128>(src);
      auto d = tilefoundry::detail::as_words<128>(dst);
      CUTE_UNROLL
      for (int i = 0; i < cute::size(d); ++i) {
        arch::cp_async_cg_16(cute::raw_pointer_cast(&d(i)), cute::raw_pointer_cast(&s(i)));
      }
      return;
    }
  }
  tilefoundry::detail::copy_vectorized(src, dst);
}

/// Closes the group of copy_async issued by this thread since the last commit.
__device__ inline void cp_async_commit() { arch::cp_async_commit_group(); }

/// Waits until at most N committed copy_async groups of this thread are still in flight.
template <int N = 0>
__device__ void cp_async_wait() {
  static_assert(N >= 0, "ops::cp_async_wait: N counts groups left in flight, N >= 0");
  arch::cp_async_wait_group<N>();
}

}  // namespace tilefoundry::ops
