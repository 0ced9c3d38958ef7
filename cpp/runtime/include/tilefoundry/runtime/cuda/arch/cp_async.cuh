// Raw cp.async instructions (sm_80+). When they are legal is decided by ops/copy_async.h; on an
// older architecture a call traps instead of silently doing nothing.
#pragma once

#include <tilefoundry/runtime/cuda/arch/arch.cuh>

namespace tilefoundry::arch {

/// cp.async.cg.shared.global, 16 bytes: both addresses 16-byte aligned.
__device__ inline void cp_async_cg_16(void* smem_dst, void const* gmem_src) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  unsigned const dst = static_cast<unsigned>(__cvta_generic_to_shared(smem_dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst), "l"(gmem_src) : "memory");
#else
  __trap();
#endif
}

/// cp.async.commit_group: closes the group of cp.async issued since the last commit.
__device__ inline void cp_async_commit_group() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.commit_group;\n" ::: "memory");
#endif
}

/// cp.async.wait_group N: waits until at most N committed groups are still in flight.
template <int N>
__device__ inline void cp_async_wait_group() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
#endif
}

}  // namespace tilefoundry::arch
