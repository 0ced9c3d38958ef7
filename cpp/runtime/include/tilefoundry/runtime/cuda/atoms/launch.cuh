// Programmatic dependent launch (Hopper): a kernel's launch overlaps the tail of the one before it.
//
// A decode step is hundreds of short kernels in a row; without PDL each waits for its
// predecessor to finish before the GPU even starts launching it (~1-2 us of idle SMs per
// kernel, CUDA graph or not). With PDL a kernel launched with the attribute may be scheduled
// while its predecessor still runs, and it waits (`griddepcontrol.wait`) before its first
// read for every grid it depends on to complete and flush its memory. The contract:
//
//   __global__ void k(...) { tilefoundry::atoms::pdl_begin(); ...body... }   // first statement
//   e.cuda(launch_kernel(k, grid, block, smem, stream_, args...), "launching kernel k");
//
// Only kernels that open with `pdl_begin()` may be launched through `launch_kernel`: one
// without the wait would race its predecessor. The one exception is reading memory no kernel
// that may still run writes (the skinny GEMM's weights when the caller vouches for them) before
// it. PDL is used only on sm_90+ devices running code
// of this module built for sm_90+ (an sm_80 build has the wait compiled out), and not when
// TILEFOUNDRY_CUDA_PDL=0 (for profiling); otherwise `launch_kernel` is a plain stream-ordered
// launch. CUDA-graph capture records the programmatic edges (CUDA 12.3+), so replayed steps
// keep the overlap.
#pragma once

#include <cuda_runtime.h>

#include <utility>

#include <tilefoundry/runtime/cuda/atoms/device_facts.cuh>

namespace tilefoundry::atoms {

/// Wait for the grids this kernel depends on to complete and flush their memory (again: a no-op).
__device__ inline void pdl_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

/// Allow the next kernel in the stream to start launching (pdl_begin's first half, for threads
/// that read nothing an earlier kernel writes and so never wait: a GEMV's weight loader).
__device__ inline void pdl_trigger() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

/// First statement of a PDL-launched kernel: allow the next kernel in the stream to start
/// launching, then wait for the grids this one depends on. The next kernel's CTAs may so become
/// resident while this one still waits (a GEMV loading its settled weights behind a norm that
/// waits on the index checks); it waits in turn, and this one completes only after its own wait,
/// so each kernel still sees every earlier one complete. The trigger fires only once every CTA
/// of this grid has issued it, so waiting CTAs of later kernels never keep this grid's CTAs off
/// the SMs. Only reads of memory no kernel that may still run writes (a weight) may come before it.
__device__ inline void pdl_begin() {
  pdl_trigger();
  pdl_wait();
}

/// Launch `kernel` (which opens with pdl_begin()) on `stream`, overlapping its predecessor where PDL works.
template <class... Params, class... Args>
inline cudaError_t launch_kernel(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream,
                                 Args&&... args) {
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = smem;
  config.stream = stream;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  config.attrs = attr;
  config.numAttrs = detail::device_facts().pdl ? 1 : 0;
  return cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...);
}

// Chained launches (codegen-cuda's chaining.py): the stages of a chain are small kernels that
// read what the stage before wrote, run by one thread-block cluster of at most kChainCtas CTAs
// instead of a launch each. The host launches a chain only where `device_facts().sm90_code`.

/// The largest chain: the portable cluster size, which every sm_90 device schedules at once.
inline constexpr int kChainCtas = 8;

/// Whether chains may launch here: this module's sm_90 code runs on the device (clusters).
inline bool chain_supported() { return detail::device_facts().sm90_code; }

/// Between two stages of a chain: every thread of the cluster arrives after its stage's stores
/// (release) and waits for all the others (acquire), so the next stage reads them from any CTA.
__device__ inline void chain_barrier() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("barrier.cluster.arrive.release.aligned;\n\tbarrier.cluster.wait.acquire.aligned;" ::: "memory");
#elif defined(__CUDA_ARCH__)
  __trap();  // no clusters before sm_90: the host never launches a chain on this code
#endif
}

/// Launch chain `kernel` (which opens with pdl_begin()) as one cluster of `ctas` <= kChainCtas CTAs.
template <class... Params, class... Args>
inline cudaError_t launch_chain(void (*kernel)(Params...), int ctas, int threads, cudaStream_t stream,
                                Args&&... args) {
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(static_cast<unsigned>(ctas));
  config.blockDim = dim3(static_cast<unsigned>(threads));
  config.stream = stream;
  cudaLaunchAttribute attr[2];
  attr[0].id = cudaLaunchAttributeClusterDimension;
  attr[0].val.clusterDim.x = static_cast<unsigned>(ctas);
  attr[0].val.clusterDim.y = 1;
  attr[0].val.clusterDim.z = 1;
  attr[1].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[1].val.programmaticStreamSerializationAllowed = 1;
  config.attrs = attr;
  config.numAttrs = detail::device_facts().pdl ? 2 : 1;
  return cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...);
}

}  // namespace tilefoundry::atoms
