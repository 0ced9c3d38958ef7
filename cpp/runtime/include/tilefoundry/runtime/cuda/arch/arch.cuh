// The compute capability being compiled for, as constants the ops' tier traits test.
#pragma once

namespace tilefoundry::arch {

#if defined(__CUDA_ARCH__)
inline constexpr int cuda_arch = __CUDA_ARCH__;
#else
inline constexpr int cuda_arch = 0;  // host pass: device-only tiers are never selected
#endif

inline constexpr bool has_cp_async = cuda_arch >= 800;  ///< cp.async (sm_80+)
inline constexpr bool has_nanosleep = cuda_arch >= 700;

}  // namespace tilefoundry::arch
