// Host-side co-residency limit for kernels that use grid barriers (ops::sync<SyncKind::grid>).
#pragma once

#include <cstddef>

#include <cuda_runtime_api.h>

namespace tilefoundry {

/**
 * @brief The largest grid of `kernel` whose CTAs are all resident at once on the current device.
 *
 * A grid barrier deadlocks unless every CTA of the launch is resident; the launcher refuses a
 * grid larger than this. Returns 0 when the device cannot be queried (no launch fits).
 */
template <class Kernel>
inline int co_resident_cta_limit(Kernel kernel, int threads_per_cta, std::size_t dynamic_smem_bytes) {
  int device = 0;
  int sms = 0;
  int per_sm = 0;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess ||
      cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, threads_per_cta, dynamic_smem_bytes) !=
          cudaSuccess) {
    return 0;
  }
  return sms * per_sm;
}

}  // namespace tilefoundry
