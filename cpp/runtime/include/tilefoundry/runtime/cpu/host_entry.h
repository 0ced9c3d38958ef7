// Host-entry helpers of compiled CPU modules: argument checks that raise a tvm-ffi error naming
// the parameter (surfacing in Python as TypeError / ValueError, never a crash), scratch
// buffers, 16-bit float storage types and the exact scalar math kernels call.
//
//   void rms_entry(TensorView x, TensorView out0) {
//     tilefoundry::host::Entry e{"rms"};
//     e.tensor(x, "x", tilefoundry::host::dtype<float>(), 2);
//     const int64_t d_T = e.bind(x, "x", 0, "T", 1, 65);   // DimVar T in [1, 65)
//     e.extent(x, "x", 1, 64, "64");
//   }
#pragma once

#include <tvm/ffi/container/tensor.h>
#include <tvm/ffi/error.h>
#include <tvm/ffi/function.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>

#include <tilefoundry/runtime/host_checks.h>

#if defined(_OPENMP)
#include <omp.h>
#endif
#if defined(__linux__)
#include <sys/mman.h>
#endif

// glibc's libmvec carries vector variants of these (SSE/AVX2/AVX-512, <= 4 ulp, no fast-math
// shortcuts); declaring them `simd` lets g++ call them from `#pragma omp simd` lane loops.
// Builds link -lmvec. TILEFOUNDRY_SCALAR_MATH (compile option vector_math=False) keeps glibc's
// scalar functions (<= 1 ulp), which do not vectorize.
#if defined(__x86_64__) && defined(__GLIBC__) && !defined(TILEFOUNDRY_SCALAR_MATH)
extern "C" {
#define TILEFOUNDRY_SIMD_MATH(name) \
  __attribute__((simd("notinbranch"))) float name##f(float) noexcept; \
  __attribute__((simd("notinbranch"))) double name(double) noexcept;
TILEFOUNDRY_SIMD_MATH(exp)
TILEFOUNDRY_SIMD_MATH(exp2)
TILEFOUNDRY_SIMD_MATH(log)
TILEFOUNDRY_SIMD_MATH(log2)
TILEFOUNDRY_SIMD_MATH(log1p)
TILEFOUNDRY_SIMD_MATH(tanh)
TILEFOUNDRY_SIMD_MATH(erf)
#undef TILEFOUNDRY_SIMD_MATH
}
#endif

namespace tilefoundry::host {

// 16-bit float storage; arithmetic happens in f32 after `to_f32`.
struct bf16 {
  uint16_t bits;
};
struct f16 {
  uint16_t bits;
};

inline float to_f32(bf16 v) {
  uint32_t u = static_cast<uint32_t>(v.bits) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

inline bf16 to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return bf16{static_cast<uint16_t>((u >> 16) | 0x40u)};  // quiet NaN
  u += 0x7fffu + ((u >> 16) & 1u);  // round to nearest even
  return bf16{static_cast<uint16_t>(u >> 16)};
}

inline float to_f32(f16 v) { return static_cast<float>(*reinterpret_cast<const _Float16*>(&v.bits)); }

inline f16 to_f16(float f) {
  _Float16 h = static_cast<_Float16>(f);
  f16 out;
  std::memcpy(&out.bits, &h, 2);
  return out;
}

// cast<To>(from): torch's `.to` semantics between storage and compute types.
template <class To, class From>
inline To cast(From v) {
  if constexpr (std::is_same_v<To, From>) {
    return v;
  } else if constexpr (std::is_same_v<From, bf16> || std::is_same_v<From, f16>) {
    return cast<To>(to_f32(v));
  } else if constexpr (std::is_same_v<To, bf16>) {
    return to_bf16(static_cast<float>(v));
  } else if constexpr (std::is_same_v<To, f16>) {
    return to_f16(static_cast<float>(v));
  } else if constexpr (std::is_same_v<To, bool>) {
    return v != From(0);
  } else {
    return static_cast<To>(v);
  }
}

// NaN-propagating max/min (torch.maximum / amax semantics).
template <class T>
inline T max_nan(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    return (a != a) ? a : ((b != b) ? b : (a > b ? a : b));
  } else {
    return a > b ? a : b;
  }
}
template <class T>
inline T min_nan(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    return (a != a) ? a : ((b != b) ? b : (a < b ? a : b));
  } else {
    return a < b ? a : b;
  }
}

// Two 16-bit floats combined and rounded once to their type (the printer's add_rn / sub_rn /
// mul_rn; the CUDA runtime computes them in one 16-bit instruction).
template <class T>
inline T add_rn(T a, T b) {
  static_assert(std::is_same_v<T, bf16> || std::is_same_v<T, f16>,
                "add_rn takes two bf16 or two f16 values");
  return cast<T>(to_f32(a) + to_f32(b));
}
template <class T>
inline T sub_rn(T a, T b) {
  static_assert(std::is_same_v<T, bf16> || std::is_same_v<T, f16>,
                "sub_rn takes two bf16 or two f16 values");
  return cast<T>(to_f32(a) - to_f32(b));
}
template <class T>
inline T mul_rn(T a, T b) {
  static_assert(std::is_same_v<T, bf16> || std::is_same_v<T, f16>,
                "mul_rn takes two bf16 or two f16 values");
  return cast<T>(to_f32(a) * to_f32(b));
}

template <class T>
inline T ipow(T base, T exp) {
  T out = 1;
  for (; exp > 0; --exp) out *= base;
  return out;
}

inline float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }
inline double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }
inline float rsqrt(float x) { return 1.0f / std::sqrt(x); }
inline double rsqrt(double x) { return 1.0 / std::sqrt(x); }

/// The DLPack dtype of the element type `T` (this target's bf16 and f16 included).
template <class T>
inline DLDataType dtype() {
  return tilefoundry::detail::dl_dtype<T, bf16, f16>();
}

// The checks of one entry; every message starts with the entry and parameter name.
struct Entry : tilefoundry::detail::EntryChecks {
  using EntryChecks::EntryChecks;

  /// A contiguous CPU tensor of dtype `want` and rank `rank`.
  void tensor(const tvm::ffi::TensorView& t, const char* param, DLDataType want, int rank, const char* decl) const {
    DLDevice dev = t.device();
    if (dev.device_type != kDLCPU) {
      TVM_FFI_THROW(TypeError) << name << ": parameter '" << param << "' must be a CPU tensor, got device type "
                               << dev.device_type << " (id " << dev.device_id << ")";
    }
    declared(t, param, want, rank, decl);
  }
};

// Iterations per dynamically scheduled chunk of a worker loop: about 8 chunks per worker, so a
// worker that starts late (its core busy with another process) leaves its share to the others
// instead of holding the whole region.
inline int64_t worker_chunk(int64_t iterations) {
  int64_t workers = 1;
#if defined(_OPENMP)
  workers = omp_get_max_threads();
#endif
  return std::max<int64_t>(1, iterations / (8 * workers));
}

template <class T>
inline T* data(const tvm::ffi::TensorView& t) {
  return reinterpret_cast<T*>(static_cast<char*>(t.data_ptr()) + t.byte_offset());
}

// Ask for 2 MiB pages over the whole 2 MiB-aligned part of [data, data + bytes), before its first
// touch. A fresh output of torch.empty is not yet backed by memory; faulting it in 4 KiB pages
// costs one trap per page (a 64 MiB output: 16384 traps, ~50 ms on a VM), 2 MiB pages 32.
// Values are unchanged; a failed or unsupported advice only leaves the default pages.
inline void prefer_huge_pages(void* data, int64_t bytes) {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  constexpr uintptr_t kHuge = uintptr_t(1) << 21;
  const auto begin = (reinterpret_cast<uintptr_t>(data) + kHuge - 1) & ~(kHuge - 1);
  const auto end = (reinterpret_cast<uintptr_t>(data) + static_cast<uintptr_t>(bytes)) & ~(kHuge - 1);
  if (end > begin) madvise(reinterpret_cast<void*>(begin), end - begin, MADV_HUGEPAGE);
#endif
}

inline void prefer_huge_pages(const tvm::ffi::TensorView& t) {
  int64_t n = (t.dtype().bits + 7) / 8;
  for (int d = 0; d < t.ndim(); ++d) n *= t.size(d);
  prefer_huge_pages(static_cast<char*>(t.data_ptr()) + t.byte_offset(), n);
}

// A temporary between kernels, 64-byte aligned; empty for zero elements.
template <class T>
struct Scratch {
  explicit Scratch(int64_t n) : ptr(n > 0 ? static_cast<T*>(std::aligned_alloc(64, ((n * sizeof(T) + 63) / 64) * 64)) : nullptr) {
    if (n > 0 && ptr == nullptr) TVM_FFI_THROW(RuntimeError) << "out of memory allocating " << n << " elements";
  }
  ~Scratch() { std::free(ptr); }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  T* ptr;
};

}  // namespace tilefoundry::host
