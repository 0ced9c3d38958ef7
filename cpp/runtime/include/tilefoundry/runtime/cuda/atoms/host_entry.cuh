// Host-entry support of compiled CUDA modules: argument checks that raise a tvm-ffi error naming
// the parameter (a Python TypeError / ValueError, never a crash or a device fault), the caller's
// stream, temporaries from the caller's allocator, launch checks, and data-dependent index
// validation.
//
//   void rms_entry(TensorView x, TensorView out0) {
//     const tilefoundry::atoms::Entry e{"rms"};
//     e.tensor(x, "x", tilefoundry::atoms::dtype<float>(), 2, "(T, 64) f32");  // CUDA, dtype, rank
//     const int64_t d_T = e.bind(x, "x", 0, "T", 1, 65);                       // DimVar T in [1, 65)
//     cudaStream_t stream = e.stream();              // torch's current stream on x's device
//   }
#pragma once

#include <cuda_runtime_api.h>
#include <tvm/ffi/container/tensor.h>
#include <tvm/ffi/error.h>
#include <tvm/ffi/extra/c_env_api.h>
#include <tvm/ffi/function.h>

#include <cstdint>
#include <initializer_list>

#include <tilefoundry/runtime/cuda/atoms/scalar.cuh>
#include <tilefoundry/runtime/host_checks.h>

namespace tilefoundry::atoms {

/// The DLPack dtype of the element type `T` (this target's bf16 and f16 included).
template <class T>
inline DLDataType dtype() {
  return tilefoundry::detail::dl_dtype<T, bf16, f16>();
}

inline const char* device_name(DLDevice d) {
  switch (d.device_type) {
    case kDLCPU: return "cpu";
    case kDLCUDA: return "cuda";
    case kDLCUDAHost: return "cuda pinned host";
    case kDLCUDAManaged: return "cuda managed";
    default: return "non-CUDA device";
  }
}

template <class T>
inline T* data(const tvm::ffi::TensorView& t) {
  return reinterpret_cast<T*>(static_cast<char*>(t.data_ptr()) + t.byte_offset());
}

// The checks of one entry; every message starts with the entry and parameter name.
struct Entry : tilefoundry::detail::EntryChecks {
  using EntryChecks::EntryChecks;

  mutable int device_id = -1;
  mutable const char* device_param = nullptr;

  /// A contiguous CUDA tensor of dtype `want` and rank `rank`, on the device of the parameters before it.
  void tensor(const tvm::ffi::TensorView& t, const char* param, DLDataType want, int rank, const char* decl) const {
    DLDevice dev = t.device();
    if (dev.device_type != kDLCUDA) {
      TVM_FFI_THROW(TypeError) << name << ": parameter '" << param << "' must be a CUDA tensor, got a "
                               << device_name(dev) << " tensor (device type " << dev.device_type << ")";
    }
    if (device_id < 0) {
      device_id = dev.device_id;
      device_param = param;
    } else if (dev.device_id != device_id) {
      TVM_FFI_THROW(ValueError) << name << ": parameter '" << param << "' is on cuda:" << dev.device_id
                                << " but '" << device_param << "' is on cuda:" << device_id
                                << "; every tensor of one call must be on one device";
    }
    declared(t, param, want, rank, decl);
  }

  /// The device every tensor parameter is on (cuda:0 for an entry without tensors).
  DLDevice device() const { return DLDevice{kDLCUDA, device_id < 0 ? 0 : device_id}; }

  /// The caller's current stream on that device (torch's current stream when called from torch),
  /// so launches order with the caller's work and join a CUDA-graph capture in progress.
  cudaStream_t stream() const {
    return static_cast<cudaStream_t>(TVMFFIEnvGetStream(kDLCUDA, device().device_id));
  }

  /// Raise, naming the kernel, when its launch was refused (bad geometry, too much shared memory).
  void launched(const char* kernel) const {
    cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess) {
      TVM_FFI_THROW(RuntimeError) << name << ": launching kernel " << kernel << " failed: " << cudaGetErrorString(err);
    }
  }

  void cuda(cudaError_t err, const char* what) const {
    if (err != cudaSuccess) {
      TVM_FFI_THROW(RuntimeError) << name << ": " << what << " failed: " << cudaGetErrorString(err);
    }
  }
};

/// Makes `device` current for the entry's allocations and launches; restores the caller's on exit.
struct DeviceGuard {
  int previous = -1;
  explicit DeviceGuard(DLDevice device) {
    if (cudaGetDevice(&previous) == cudaSuccess && previous != device.device_id) cudaSetDevice(device.device_id);
  }
  ~DeviceGuard() {
    int now = -1;
    if (previous >= 0 && cudaGetDevice(&now) == cudaSuccess && now != previous) cudaSetDevice(previous);
  }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;
};

// A temporary between kernels, released at the end of the entry. It comes from the caller's
// allocator when one is registered (torch's caching allocator: cheap, and inside a CUDA-graph
// capture it lands in the graph's private pool), else from the stream-ordered cudaMallocAsync.
template <class T>
struct DeviceScratch {
  DeviceScratch(const Entry& e, int64_t n, cudaStream_t stream) : stream_(stream) {
    if (n <= 0) return;
    int64_t bytes = ((n * static_cast<int64_t>(sizeof(T)) + 255) / 256) * 256;
    if (TVMFFIEnvGetDLPackManagedTensorAllocator() != nullptr) {
      tensor_ = tvm::ffi::Tensor::FromEnvAlloc(TVMFFIEnvTensorAlloc, tvm::ffi::Shape({bytes}),
                                               DLDataType{kDLUInt, 8, 1}, e.device());
      ptr = static_cast<T*>(tensor_.data_ptr());
    } else {
      void* raw = nullptr;
      e.cuda(cudaMallocAsync(&raw, bytes, stream), "allocating a temporary");
      ptr = static_cast<T*>(raw);
      owned_ = true;
    }
  }
  ~DeviceScratch() {
    if (owned_) cudaFreeAsync(ptr, stream_);
  }
  DeviceScratch(const DeviceScratch&) = delete;
  DeviceScratch& operator=(const DeviceScratch&) = delete;

  T* ptr = nullptr;

 private:
  tvm::ffi::Tensor tensor_;
  cudaStream_t stream_;
  bool owned_ = false;
};

// ---------------------------------------------------------------- data-dependent index checks

/// A check kernel's verdict in device memory: word 0 is set to the 1-based id of the first check
/// found violated, word 1 holds the value it saw. In a capture (or when `trap` is set) a violation
/// traps instead, as torch's device-side asserts do: a graph cannot stop to raise.
struct IndexVerdict {
  unsigned long long* words;
  bool trap;
};

/// Record that check `check` (1-based, the host's message order) saw `shown`; the first one wins.
__device__ inline void report_index(IndexVerdict v, unsigned long long check, int64_t shown) {
  if (v.trap) __trap();
  if (atomicCAS(v.words, 0ull, check) == 0ull) v.words[1] = static_cast<unsigned long long>(shown);
}

/// Whether `stream` is being captured into a CUDA graph.
inline bool capturing_stream(const Entry& e, cudaStream_t stream) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  e.cuda(cudaStreamIsCapturing(stream, &status), "querying the stream's capture status");
  return status != cudaStreamCaptureStatusNone;
}

/// Host side of one check kernel (every check of it in one launch): zero the verdict before it,
/// read it (one sync) after it. In a capture the kernel traps instead, so no verdict is allocated
/// or cleared (no memset node in a replayed decode step).
struct IndexCheck {
  const Entry& e;
  cudaStream_t stream;
  bool capturing;
  DeviceScratch<unsigned long long> words;

  IndexCheck(const Entry& entry, cudaStream_t s)
      : e(entry), stream(s), capturing(capturing_stream(entry, s)), words(entry, capturing ? 0 : 2, s) {
    if (!capturing) {
      e.cuda(cudaMemsetAsync(words.ptr, 0, 2 * sizeof(unsigned long long), stream), "clearing an index verdict");
    }
  }

  IndexVerdict verdict() const { return IndexVerdict{words.ptr, capturing}; }

  /// Raise IndexError with the message of the violated check (`messages[id - 1]`) and its value.
  void raise_if_violated(std::initializer_list<const char*> messages) const {
    if (capturing) return;
    unsigned long long host[2] = {0, 0};
    e.cuda(cudaMemcpyAsync(host, words.ptr, sizeof(host), cudaMemcpyDeviceToHost, stream), "reading an index verdict");
    e.cuda(cudaStreamSynchronize(stream), "waiting for an index check");
    if (host[0] == 0) return;
    if (host[0] > messages.size()) {
      TVM_FFI_THROW(RuntimeError) << e.name << ": an index check reported check " << host[0] << " of "
                                  << messages.size();
    }
    TVM_FFI_THROW(IndexError) << e.name << ": " << messages.begin()[host[0] - 1] << static_cast<int64_t>(host[1]);
  }
};

/// Blocks for `work` independent items at `per_block` items per block, capped by the grid limit
/// (kernels stride over the rest).
inline unsigned grid_blocks(int64_t work, int64_t per_block) {
  int64_t blocks = (work + per_block - 1) / per_block;
  constexpr int64_t kMaxBlocks = 2147483647;
  return static_cast<unsigned>(blocks < kMaxBlocks ? blocks : kMaxBlocks);
}

}  // namespace tilefoundry::atoms
