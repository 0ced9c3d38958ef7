// tilefoundry::ops::sync: the mesh-scoped barrier (seed 000 §3.4). Device code (CUDA runtime).
//
// The kind and participant geometry are template arguments; the participant predicate is
// derived here, never by codegen:
//   cta    every thread of the CTA (__syncthreads)
//   warp   the lanes of Mask (0 = all 32) of the calling warp
//   named  threads [Base, Base + Count) of the CTA on barrier BarId; others pass through
//   grid   every CTA of the launch; needs all CTAs co-resident (co_resident_cta_limit)
//          and a two-word counter pair (arrivals, generation) zero-initialized by the module
#pragma once

#include <tilefoundry/runtime/cuda/arch/arch.cuh>
#include <tilefoundry/runtime/cuda/arch/barrier.cuh>
#include <tilefoundry/runtime/cuda/topology.cuh>
#include <tilefoundry/topology.h>

namespace tilefoundry::ops {

enum class SyncKind { cta, warp, named, grid };

namespace detail {

/// Generation barrier over `ctas` CTAs on the pair (arrivals, generation). The generation is
/// read before arriving; it can only advance after this CTA arrived, so the read is current.
/// The last arrival resets the count before releasing, so the pair is reusable at once.
__device__ inline void grid_barrier(unsigned int* counter_pair, unsigned int ctas) {
  __syncthreads();
  if (program_id<TopologyScope::thread>() == 0) {
    unsigned int* arrivals = counter_pair;
    unsigned int volatile* generation = counter_pair + 1;
    unsigned int const seen = *generation;
    __threadfence();
    if (atomicAdd(arrivals, 1u) == ctas - 1u) {
      atomicExch(arrivals, 0u);
      __threadfence();
      atomicAdd(counter_pair + 1, 1u);
    } else {
      while (*generation == seen) {
        if constexpr (arch::has_nanosleep) __nanosleep(64);
      }
    }
    __threadfence();
  }
  __syncthreads();
}

}  // namespace detail

/**
 * @brief Mesh-scoped barrier.
 * @tparam Kind compile-time barrier kind; selects CTA, warp, named-barrier, or grid behavior
 * @tparam Base first participating thread of a named barrier
 * @tparam Count participating threads of a named barrier (whole warps)
 * @tparam Mask participating lanes of a warp barrier (0 = the full warp)
 * @tparam BarId compile-time named-barrier id, in [1, 16)
 * @param grid_bar the two-word counter pair of a grid barrier; unused by other kinds
 */
template <SyncKind Kind, int Base = 0, int Count = 0, unsigned Mask = 0u, int BarId = 0>
__device__ void sync(unsigned int* grid_bar = nullptr) {
  if constexpr (Kind == SyncKind::named) {
    static_assert(Count > 0 && Count % 32 == 0,
                  "ops::sync: a named barrier needs Count > 0 threads, a multiple of 32 (whole warps)");
    static_assert(Base >= 0 && Base % 32 == 0, "ops::sync: a named barrier's Base must be warp-aligned");
    static_assert(BarId >= 1 && BarId < 16, "ops::sync: named barrier id must be in [1, 16); 0 is the CTA barrier");
    int const tid = program_id<TopologyScope::thread>();
    if (tid >= Base && tid < Base + Count) arch::named_barrier_sync(BarId, Count);
  } else {
    static_assert(Base == 0 && Count == 0 && BarId == 0,
                  "ops::sync: Base, Count and BarId apply to SyncKind::named only");
    if constexpr (Kind == SyncKind::cta) {
      static_assert(Mask == 0u, "ops::sync: Mask applies to SyncKind::warp only");
      __syncthreads();
    } else if constexpr (Kind == SyncKind::warp) {
      __syncwarp(Mask == 0u ? 0xffffffffu : Mask);
    } else {
      static_assert(Mask == 0u, "ops::sync: Mask applies to SyncKind::warp only");
      detail::grid_barrier(grid_bar, static_cast<unsigned int>(program_dim<TopologyScope::cta>()));
    }
  }
}

}  // namespace tilefoundry::ops
