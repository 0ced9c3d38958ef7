// What the host side of the atoms reads off the current device, read once per device: the one
// cache behind tier and split choices (GEMM, skinny GEMM, attention) and programmatic launch.
//
//   DeviceFacts const dev = device_facts();   // dev.sms, dev.smem_optin, dev.major, dev.sm90_code, dev.pdl
//
// TILEFOUNDRY_CUDA_PDL=0 in the environment turns programmatic dependent launch off (read once
// per device): a profiler then times each kernel alone instead of from its early launch, when
// it still waits for the kernel before it.
#pragma once

#include <cuda_runtime.h>

#include <atomic>
#include <cstdlib>
#include <cstring>

namespace tilefoundry::atoms::detail {

struct DeviceFacts {
  int sms = 1;          ///< multiprocessors
  int smem_optin = 0;   ///< shared memory a block may opt into, bytes
  int major = 0;        ///< compute capability major
  bool sm90_code = false;  ///< this module's code was built for sm_90+ and runs here as such
  bool pdl = false;        ///< launches overlap their predecessor (launch.cuh): sm90_code, unless turned off
};

namespace {
// What this translation unit's code was built for. An sm_80 build JIT-compiled from its PTX on a
// Hopper reports binaryVersion 90 but ptxVersion 80: its sm_90-only paths (clusters, the PDL
// wait) are compiled out, so both must say 90. TU-local, like every host symbol of a module.
__global__ void code_probe() {}
}  // namespace

inline constexpr int kMaxDevices = 64;

inline DeviceFacts device_facts() {
  static std::atomic<int> cache[kMaxDevices][5];  // sms (0: not read yet), smem, major, sm90 code, pdl
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess || dev < 0 || dev >= kMaxDevices) return {};
  if (cache[dev][0].load() == 0) {
    int sms = 0, smem = 0, major = 0;
    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
    cudaDeviceGetAttribute(&smem, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev);
    cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev);
    cudaFuncAttributes attr{};
    bool const built =
        cudaFuncGetAttributes(&attr, code_probe) == cudaSuccess && attr.ptxVersion >= 90 && attr.binaryVersion >= 90;
    cache[dev][1].store(smem);
    cache[dev][2].store(major);
    char const* pdl = std::getenv("TILEFOUNDRY_CUDA_PDL");
    cache[dev][3].store(major >= 9 && built ? 1 : 0);
    cache[dev][4].store(major >= 9 && built && !(pdl != nullptr && std::strcmp(pdl, "0") == 0) ? 1 : 0);
    cache[dev][0].store(sms > 0 ? sms : 1);
  }
  return {cache[dev][0].load(), cache[dev][1].load(), cache[dev][2].load(), cache[dev][3].load() == 1,
          cache[dev][4].load() == 1};
}

}  // namespace tilefoundry::atoms::detail
