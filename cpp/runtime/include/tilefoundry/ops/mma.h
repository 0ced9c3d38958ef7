// tilefoundry::ops::mma: a CTA-cooperative tile contraction c += a · bᵀ. Device code.
//
//   a (M,K), b (N,K), c (M,N): any storage the threads can address (smem tiles usually), any
//   layout. Every thread of the CTA calls it; it does not synchronize: the caller orders the
//   writes of a and b before it and the reads of c after it (ops::sync).
// Tiers, chosen at compile time from the operands:
//   tensor core  CuTe MMA atom SM80_16x8x16 (f16·f16->f32, bf16·bf16->f32, f16·f16->f16) tiled
//                over the warps of a static thread level, when M, N, K divide the atom tile
//   fma          the checked contraction loop: output elements strided over the threads,
//                each a serial K loop in accum_t (f32 for 16-bit inputs; f32 stays f32)
#pragma once

#include <type_traits>

#include <cute/tensor.hpp>

#include <cute/atom/mma_traits_sm80.hpp>

#include <tilefoundry/copy.h>
#include <tilefoundry/ops/accum.h>
#include <tilefoundry/runtime/cuda/topology.cuh>

namespace tilefoundry::ops {

namespace detail {

/// The SM80 MMA atom for (A, B, C) element types; void when none fits.
template <class A, class B, class C>
struct sm80_mma_atom {
  using type = void;
};
template <>
struct sm80_mma_atom<cute::half_t, cute::half_t, float> {
  using type = cute::SM80_16x8x16_F32F16F16F32_TN;
};
template <>
struct sm80_mma_atom<cute::bfloat16_t, cute::bfloat16_t, float> {
  using type = cute::SM80_16x8x16_F32BF16BF16F32_TN;
};
template <>
struct sm80_mma_atom<cute::half_t, cute::half_t, cute::half_t> {
  using type = cute::SM80_16x8x16_F16F16F16F16_TN;
};

/// Warp arrangement (Wm, Wn) of the tensor-core tier, or (0, 0) when the tile does not fit:
/// all warps along M when M divides, else along N.
template <class TA, class TB, class TC>
struct mma_plan {
  using Atom = typename sm80_mma_atom<tilefoundry::detail::value_t<TA>, tilefoundry::detail::value_t<TB>,
                                      tilefoundry::detail::value_t<TC>>::type;
  static constexpr bool static_shapes = cute::is_static<decltype(cute::shape(cute::declval<TA>()))>::value &&
                                        cute::is_static<decltype(cute::shape(cute::declval<TB>()))>::value &&
                                        cute::is_static<decltype(cute::shape(cute::declval<TC>()))>::value;
  static constexpr int threads = topology_extent<TopologyScope::thread>::value;  // 0: launch-provided

  static constexpr auto arrangement() {
    struct Arrangement {
      int wm = 0;
      int wn = 0;
    };
    if constexpr (std::is_void_v<Atom> || !static_shapes) {
      return Arrangement{};
    } else {
      constexpr int m = decltype(cute::size<0>(cute::declval<TC>()))::value;
      constexpr int n = decltype(cute::size<1>(cute::declval<TC>()))::value;
      constexpr int k = decltype(cute::size<1>(cute::declval<TA>()))::value;
      constexpr int warps = threads >= 32 ? threads / 32 : 1;
      if (threads == 0 || threads % 32 != 0 || k % 16 != 0) return Arrangement{};
      if (m % (16 * warps) == 0 && n % 8 == 0) return Arrangement{warps, 1};
      if (n % (8 * warps) == 0 && m % 16 == 0) return Arrangement{1, warps};
      return Arrangement{};
    }
  }
  static constexpr int wm = arrangement().wm;
  static constexpr int wn = arrangement().wn;
  static constexpr bool tensor_core = wm > 0;
};

template <class TA, class TB, class TC>
inline constexpr bool mma_tensor_core_v = mma_plan<TA, TB, TC>::tensor_core;

template <class Plan, class TA, class TB, class TC>
__device__ void mma_tensor_core(TA const& a, TB const& b, TC& c) {
  using namespace cute;
  auto tiled = make_tiled_mma(MMA_Atom<typename Plan::Atom>{}, Layout<Shape<Int<Plan::wm>, Int<Plan::wn>, _1>>{});
  auto thr = tiled.get_slice(program_id<TopologyScope::thread>());
  auto const tA = thr.partition_A(a);  // (MMA, MMA_M, MMA_K)
  auto const tB = thr.partition_B(b);  // (MMA, MMA_N, MMA_K)
  auto tC = thr.partition_C(c);        // (MMA, MMA_M, MMA_N)
  auto rA = thr.partition_fragment_A(a);
  auto rB = thr.partition_fragment_B(b);
  auto rC = thr.partition_fragment_C(c);
  tilefoundry::detail::copy_elements(tA, rA);
  tilefoundry::detail::copy_elements(tB, rB);
  tilefoundry::detail::copy_elements(tC, rC);
  gemm(tiled, rA, rB, rC);
  tilefoundry::detail::copy_elements(rC, tC);
}

template <class TA, class TB, class TC>
__device__ void mma_fma(TA const& a, TB const& b, TC& c) {
  using Acc = accum_t<tilefoundry::detail::value_t<TA>>;
  using D = tilefoundry::detail::value_t<TC>;
  int const m = cute::size<0>(c);
  int const n = cute::size<1>(c);
  int const k = cute::size<1>(a);
  int const threads = program_dim<TopologyScope::thread>();
  for (int idx = program_id<TopologyScope::thread>(); idx < m * n; idx += threads) {
    int const i = idx % m;
    int const j = idx / m;
    Acc acc = tilefoundry::detail::convert<Acc>(c(i, j));
    for (int kk = 0; kk < k; ++kk) {
      acc += tilefoundry::detail::convert<Acc>(a(i, kk)) * tilefoundry::detail::convert<Acc>(b(j, kk));
    }
    c(i, j) = tilefoundry::detail::convert<D>(acc);
  }
}

}  // namespace detail

/**
 * @brief c += a · bᵀ over one CTA tile, all threads of the CTA cooperating.
 * @param a (M,K) operand
 * @param b (N,K) operand
 * @param c (M,N) accumulator, read and written
 */
template <class TA, class TB, class TC>
__device__ void mma(TA const& a, TB const& b, TC&& c) {
  using A = cute::remove_cvref_t<TA>;
  using B = cute::remove_cvref_t<TB>;
  using C = cute::remove_cvref_t<TC>;
  static_assert(cute::is_tensor<A>::value && cute::is_tensor<B>::value && cute::is_tensor<C>::value,
                "ops::mma: a, b and c must be CuTe tensors: a (M,K), b (N,K), c (M,N)");
  static_assert(cute::rank_v<decltype(a.layout())> == 2 && cute::rank_v<decltype(b.layout())> == 2 &&
                    cute::rank_v<decltype(c.layout())> == 2,
                "ops::mma: a, b and c must be rank 2: a (M,K), b (N,K), c (M,N)");
  if constexpr (detail::mma_tensor_core_v<A, B, C>) {
    detail::mma_tensor_core<detail::mma_plan<A, B, C>>(a, b, c);
  } else {
    detail::mma_fma(a, b, c);
  }
}

}  // namespace tilefoundry::ops
