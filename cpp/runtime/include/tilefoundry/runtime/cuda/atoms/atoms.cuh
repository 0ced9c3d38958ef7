// What generated CUDA code calls besides the ops:: families: scalar support, 16-byte packs,
// group reductions of row kernels, whole-region atoms (GEMM, attention), and the host-entry
// support (argument checks, stream, temporaries). Included only through <tilefoundry/runtime.h>.
#pragma once

#include <tilefoundry/runtime/cuda/atoms/attention.cuh>
#include <tilefoundry/runtime/cuda/atoms/gemm.cuh>
#include <tilefoundry/runtime/cuda/atoms/gemm_chain.cuh>
#include <tilefoundry/runtime/cuda/atoms/group_reduce.cuh>
#include <tilefoundry/runtime/cuda/atoms/launch.cuh>
#include <tilefoundry/runtime/cuda/atoms/scalar.cuh>
#include <tilefoundry/runtime/cuda/atoms/vector_access.cuh>

// NOTE: host entries need the tvm-ffi headers; device-only users of the runtime (its header
// tests) build without them, and get everything above.
#if __has_include(<tvm/ffi/function.h>)
#include <tilefoundry/runtime/cuda/atoms/host_entry.cuh>
#endif
