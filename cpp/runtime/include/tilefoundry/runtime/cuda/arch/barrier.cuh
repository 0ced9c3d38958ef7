// Raw barrier instructions. When they are legal is decided by ops/sync.h.
#pragma once

namespace tilefoundry::arch {

/// bar.sync id, count: blocks until `count` threads (whole warps) arrived at barrier `id`.
__device__ inline void named_barrier_sync(int id, int count) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(count) : "memory");
}

}  // namespace tilefoundry::arch
