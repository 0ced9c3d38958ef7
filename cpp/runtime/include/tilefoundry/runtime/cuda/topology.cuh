// CUDA launch geometry: cta = (blockIdx, gridDim), thread = (threadIdx, blockDim), linearized
// x fastest. Host-side code of a CUDA translation unit reads the host program context instead,
// so host-capable views run on the host as they do on CPU.
#pragma once

#include <tilefoundry/host_program.h>
#include <tilefoundry/topology.h>

namespace tilefoundry::detail {

template <TopologyScope T>
struct launch_geometry {
  static_assert(T == TopologyScope::cta || T == TopologyScope::thread,
                "launch_geometry: T must be cta or thread");
  static constexpr int kLevel = static_cast<int>(T);

  /// (x, y, z) extents of the level.
  CUTE_HOST_DEVICE static auto shape() noexcept {
#if defined(__CUDA_ARCH__)
    dim3 const d = T == TopologyScope::cta ? gridDim : blockDim;
    return cute::make_shape(static_cast<int>(d.x), static_cast<int>(d.y), static_cast<int>(d.z));
#else
    return cute::make_shape(host_program.dim[kLevel], 1, 1);
#endif
  }

  CUTE_HOST_DEVICE static int id() noexcept {
#if defined(__CUDA_ARCH__)
    dim3 const d = T == TopologyScope::cta ? gridDim : blockDim;
    uint3 const i = T == TopologyScope::cta ? blockIdx : threadIdx;
    return static_cast<int>(i.x + d.x * (i.y + d.y * i.z));
#else
    return host_program.id[kLevel];
#endif
  }
};

}  // namespace tilefoundry::detail
