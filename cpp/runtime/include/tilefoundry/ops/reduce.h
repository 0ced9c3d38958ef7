// tilefoundry::ops::reduce: the reduction family (seed 000 §3.5). Device code (CUDA runtime).
//
// Tiers, chosen at compile time from the operands (reduce_detail.h):
//   thread     each thread reduces the Axes modes of its own (local) src into its dst
//   warp       + butterfly shuffles over the lanes of each mesh axis the reduced modes are split on
//   cta        + an exchange through the shared-memory workspace ws, when those lanes span warps
//   cross-CTA  refused: a reduced mode split across CTAs cannot be combined inside one kernel step
// Axes index the top-level modes (tensor axes) of src's local view; dst has the kept modes, in
// order, optionally with extent-1 modes where the reduced ones were (keepdim). Every thread of
// the CTA calls a warp- or cta-tier reduce; after it each participant holds the full result
// (dst is B on the combined axes), and only one participant writes a dst in smem or gmem.
#pragma once

#include <cute/tensor.hpp>

#include <tilefoundry/ops/accum.h>
#include <tilefoundry/ops/reduce_detail.h>
#include <tilefoundry/reduction.h>
#include <tilefoundry/runtime/cuda/topology.cuh>

namespace tilefoundry::ops {

/// ws argument of a reduce that needs no shared-memory workspace.
struct no_workspace {};

namespace detail {

using tilefoundry::detail::combine;

/// Thread tier: acc[j] = map-join of every src element r that feeds output j.
template <class Op, class Axes, class LSrc, class Acc, int N>
__device__ void reduce_thread(LSrc const& lsrc, Acc (&acc)[N]) {
  using Split = tilefoundry::detail::mode_split<Axes, decltype(cute::rank(lsrc.layout()))::value>;
  auto const grouped = cute::make_tensor(
      lsrc.data(), tilefoundry::detail::group_kept_reduced(lsrc.layout(), typename Split::kept{}, typename Split::reduced{}));
  CUTE_UNROLL
  for (int j = 0; j < N; ++j) {
    Acc a = combine<Op>::template init<Acc>();
    for (int r = 0; r < cute::size<1>(grouped); ++r) {
      a = combine<Op>::join(a, combine<Op>::map(tilefoundry::detail::convert<Acc>(grouped(j, r))));
    }
    acc[j] = a;
  }
}

/// Warp tier: butterfly over each combined mesh axis, lane offsets stride, 2·stride, ... < stride·extent.
template <class Op, class P, class Acc, int N>
__device__ void combine_warp(Acc (&acc)[N]) {
  constexpr tilefoundry::detail::ReduceGeometry g = P::geometry();
  CUTE_UNROLL
  for (int i = 0; i < g.count; ++i) {
    CUTE_UNROLL
    for (int offset = g.lane_stride[i]; offset < g.lane_stride[i] * g.extent[i]; offset *= 2) {
      CUTE_UNROLL
      for (int j = 0; j < N; ++j) acc[j] = combine<Op>::join(acc[j], __shfl_xor_sync(0xffffffffu, acc[j], offset));
    }
  }
}

/// CTA tier: every thread publishes its partials in ws(j * threads + tid); each participant then
/// joins its group's partials in the same order, so all of them hold the same result.
template <class Op, class P, class Acc, int N, class Ws>
__device__ void combine_cta(Acc (&acc)[N], Ws& ws) {
  constexpr tilefoundry::detail::ReduceGeometry g = P::geometry();
  int const threads = program_dim<TopologyScope::thread>();
  int const tid = program_id<TopologyScope::thread>();
  CUTE_UNROLL
  for (int j = 0; j < N; ++j) ws(j * threads + tid) = acc[j];
  __syncthreads();
  int base = tid;
  int group = 1;
  CUTE_UNROLL
  for (int i = 0; i < g.count; ++i) {
    base -= (tid / g.lane_stride[i]) % g.extent[i] * g.lane_stride[i];
    group *= g.extent[i];
  }
  CUTE_UNROLL
  for (int j = 0; j < N; ++j) {
    Acc a = combine<Op>::template init<Acc>();
    for (int m = 0; m < group; ++m) {
      int member = base;
      int rest = m;
      CUTE_UNROLL
      for (int i = 0; i < g.count; ++i) {
        member += rest % g.extent[i] * g.lane_stride[i];
        rest /= g.extent[i];
      }
      a = combine<Op>::join(a, ws(j * threads + member));
    }
    acc[j] = a;
  }
  __syncthreads();  // ws may be reused right after
}

/// True for the participant at coordinate 0 on every combined axis.
template <class P>
__device__ bool is_group_leader() {
  constexpr tilefoundry::detail::ReduceGeometry g = P::geometry();
  int const tid = program_id<TopologyScope::thread>();
  bool leader = true;
  CUTE_UNROLL
  for (int i = 0; i < g.count; ++i) leader &= (tid / g.lane_stride[i]) % g.extent[i] == 0;
  return leader;
}

}  // namespace detail

/**
 * @brief Reduce src into dst along Axes.
 * @tparam Op compile-time combine tag (sum_op, mean_op, max_op, min_op, absmax_op)
 * @tparam Axes compile-time reduced modes: cute::Int<k>, a cute::tuple of them, or cute::seq<k...>
 * @param src source operand; sharded operands carry ShardLayout
 * @param dst destination operand; sharded operands carry ShardLayout
 * @param ws optional shared-memory workspace of accum_t<src element> holding at least
 *        size(local dst) * program_dim<thread>() values; no_workspace keeps the reduce within one warp
 */
template <class Op, class Axes, class Src, class Dst, class Ws = no_workspace>
__device__ void reduce(Src const& src, Dst&& dst, Ws&& ws = {}) {
  using SrcT = cute::remove_cvref_t<Src>;
  using DstT = cute::remove_cvref_t<Dst>;
  using P = tilefoundry::detail::reduce_participants<Axes, SrcT>;
  constexpr auto tier = tilefoundry::detail::reduce_tier_v<Axes, SrcT>;
  static_assert(tier != tilefoundry::detail::ReduceTier::cross_cta,
                "ops::reduce: a reduced mode is split across CTAs (its mesh axis belongs to the cta level); "
                "cross-CTA reduction is not supported: reduce within the CTA, or split the work so each "
                "CTA owns whole rows");
  constexpr tilefoundry::detail::ReduceGeometry geometry = P::geometry();
  static_assert(geometry.static_geometry,
                "ops::reduce: a sharded reduce needs static mesh strides and extents for the axes it "
                "combines over");
  static_assert(!tilefoundry::detail::dst_split_on_participant<Axes, SrcT, DstT>::value,
                "ops::reduce: dst is split (shard::S) on a mesh axis the reduction combines over; "
                "expected shard::B there");

  auto const lsrc = tilefoundry::detail::local_view(src);
  auto ldst = tilefoundry::detail::local_view(dst);
  using Split = tilefoundry::detail::mode_split<Axes, decltype(cute::rank(lsrc.layout()))::value>;
  static_assert(Split::axes_in_range, "ops::reduce: Axes names a mode outside src's rank");
  using Out = decltype(cute::size(ldst));
  static_assert(cute::is_static<Out>::value, "ops::reduce: dst must have a static size (one accumulator per element)");
  using Kept = decltype(cute::size(cute::select<0>(tilefoundry::detail::group_kept_reduced(
      lsrc.layout(), typename Split::kept{}, typename Split::reduced{}))));
  if constexpr (cute::is_static<Kept>::value) {
    static_assert(Kept::value == Out::value, "ops::reduce: dst must have one element per kept (unreduced) src element");
  }

  using Acc = accum_t<tilefoundry::detail::value_t<decltype(lsrc)>>;
  constexpr int N = Out::value;
  Acc acc[N];
  detail::reduce_thread<Op, Axes>(lsrc, acc);

  using tilefoundry::detail::ReduceTier;
  if constexpr (tier == ReduceTier::warp) {
    detail::combine_warp<Op, P>(acc);
  } else if constexpr (tier == ReduceTier::cta) {
    using WsT = cute::remove_cvref_t<Ws>;
    if constexpr (std::is_same_v<WsT, no_workspace>) {
      static_assert(!std::is_same_v<WsT, no_workspace>,
                    "ops::reduce: this reduction combines lanes of different warps and needs a shared-memory "
                    "workspace ws (size(local dst) * program_dim<thread>() values of accum_t<src element>)");
    } else {
      static_assert(cute::is_smem<typename WsT::iterator>::value, "ops::reduce: ws must be a shared-memory tensor");
      static_assert(std::is_same_v<tilefoundry::detail::value_t<WsT>, Acc>,
                    "ops::reduce: ws must hold accum_t<src element> values");
      detail::combine_cta<Op, P>(acc, ws);
    }
  }

  int count = cute::size(lsrc) / N;
  CUTE_UNROLL
  for (int i = 0; i < geometry.count; ++i) count *= geometry.extent[i];
  using DstValue = tilefoundry::detail::value_t<decltype(ldst)>;
  constexpr bool shared_dst = !cute::is_rmem<typename decltype(ldst)::iterator>::value;
  if (tier == ReduceTier::thread || !shared_dst || detail::is_group_leader<P>()) {
    CUTE_UNROLL
    for (int j = 0; j < N; ++j) ldst(j) = tilefoundry::detail::convert<DstValue>(detail::combine<Op>::finish(acc[j], count));
  }
}

}  // namespace tilefoundry::ops
