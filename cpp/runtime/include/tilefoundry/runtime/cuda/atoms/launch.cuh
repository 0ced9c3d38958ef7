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
// without the wait would race its predecessor. The exceptions read before the wait memory no
// kernel that may still run writes (the skinny GEMM's weights when the caller vouches for them),
// or a guess checked after it (decode attention's kv_len, attention_mma.cuh). PDL is used only
// on sm_90+ devices running code of this module built for sm_90+ (an sm_80 build has the wait
// compiled out), and not when TILEFOUNDRY_CUDA_PDL=0 (for profiling); otherwise `launch_kernel`
// is a plain stream-ordered launch. CUDA-graph capture records the programmatic edges (CUDA
// 12.3+), so replayed steps keep the overlap.
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

}  // namespace tilefoundry::atoms
