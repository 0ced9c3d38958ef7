// Scalar support of generated CUDA kernels: the storage types and the exact scalar functions
// TileIR expressions are written with, under the names the C++ expression printer uses on every
// target (cast<T>, max_nan, min_nan, ipow, sigmoid), so one printer serves CPU and CUDA.
//
//   out0[i] = cast<bf16>(sigmoid(cast<float>(x[i])));   // bf16 storage, f32 arithmetic
#pragma once

#include <cstdint>
#include <limits>
#include <type_traits>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cute/numeric/numeric_types.hpp>

namespace tilefoundry::atoms {

// 16-bit float storage; arithmetic happens in f32 (TileIR casts before computing).
using bf16 = cute::bfloat16_t;
using f16 = cute::half_t;

template <class T>
inline constexpr bool is_half_v = std::is_same_v<T, bf16> || std::is_same_v<T, f16>;

/// cast<To>(from): torch's `.to` semantics; 16-bit floats convert through f32 (round to nearest even).
template <class To, class From>
__host__ __device__ inline To cast(From v) {
  if constexpr (std::is_same_v<To, From>) {
    return v;
  } else if constexpr (is_half_v<From>) {
    return cast<To>(static_cast<float>(v));
  } else if constexpr (std::is_same_v<To, bf16> && std::is_same_v<From, float>) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    // The paired cvt is F2FP.BF16.F32.PACK_AB; the single cvt.rn.bf16.f32 is F2F, which shares a
    // pipe with MUFU: a hand-written gelu_chain (four roundings, a tanh) took 251 -> 211 us on the
    // H200 (bench/gpu/kernels/bf16_round_sweep.cu). Same rounding; nvcc already pairs f16.
    uint32_t packed;
    asm("cvt.rn.bf16x2.f32 %0, %1, %1;" : "=r"(packed) : "f"(v));
    return bf16::bitcast(static_cast<uint16_t>(packed));
#else
    return bf16(v);
#endif
  } else if constexpr (is_half_v<To>) {
    return To(static_cast<float>(v));
  } else if constexpr (std::is_same_v<To, bool>) {
    return v != From(0);
  } else {
    return static_cast<To>(v);
  }
}

namespace detail {
/// A 16-bit float as CUDA's own type, for its `_rn` intrinsics, and back.
__device__ inline __nv_bfloat16 native16(bf16 v) { return __ushort_as_bfloat16(v.raw()); }
__device__ inline __half native16(f16 v) { return __ushort_as_half(v.raw()); }
__device__ inline bf16 from_native16(__nv_bfloat16 v) { return bf16::bitcast(__bfloat16_as_ushort(v)); }
__device__ inline f16 from_native16(__half v) { return f16::bitcast(__half_as_ushort(v)); }

/// `native(a, b)` on the GPU (a CUDA `_rn` intrinsic), else `wide` in f32 rounded back: one value.
template <class T, class Native, class Wide>
__host__ __device__ inline T rounded16(T a, T b, Native native, Wide wide) {
  static_assert(is_half_v<T>, "add_rn / sub_rn / mul_rn take two bf16 or two f16 values");
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  return from_native16(native(native16(a), native16(b)));
#else
  return cast<T>(wide(cast<float>(a), cast<float>(b)));
#endif
}
}  // namespace detail

// add_rn / sub_rn / mul_rn: two 16-bit floats combined and rounded once to their type, the value
// cast<T>(cast<float>(a) op cast<float>(b)) has (tilefoundry/ir/tile/cexpr.py says why), in one
// 16-bit instruction that ptxas pairs into HADD2 / HMUL2 where it can: gelu_chain's pack of 8 took
// 268 instead of 336 SASS instructions. The `_rn` intrinsics are never contracted into an FMA.
template <class T>
__host__ __device__ inline T add_rn(T a, T b) {
  return detail::rounded16(
      a, b, [](auto x, auto y) { return __hadd_rn(x, y); }, [](float x, float y) { return x + y; });
}
template <class T>
__host__ __device__ inline T sub_rn(T a, T b) {
  return detail::rounded16(
      a, b, [](auto x, auto y) { return __hsub_rn(x, y); }, [](float x, float y) { return x - y; });
}
template <class T>
__host__ __device__ inline T mul_rn(T a, T b) {
  return detail::rounded16(
      a, b, [](auto x, auto y) { return __hmul_rn(x, y); }, [](float x, float y) { return x * y; });
}

/// NaN-propagating maximum (torch.maximum / amax semantics). An f32 pair on sm_80 or later is
/// one `max.NaN` instruction, not two NaN tests, a compare and a select (a row max's whole cost).
template <class T>
__host__ __device__ inline T max_nan(T a, T b) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  if constexpr (std::is_same_v<T, float>) {
    float d;
    asm("max.NaN.f32 %0, %1, %2;" : "=f"(d) : "f"(a), "f"(b));
    return d;
  }
#endif
  if constexpr (std::is_floating_point_v<T>) {
    return (a != a) ? a : ((b != b) ? b : (a > b ? a : b));
  } else {
    return a > b ? a : b;
  }
}

/// NaN-propagating minimum (torch.minimum / amin semantics); `min.NaN` as max_nan.
template <class T>
__host__ __device__ inline T min_nan(T a, T b) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  if constexpr (std::is_same_v<T, float>) {
    float d;
    asm("min.NaN.f32 %0, %1, %2;" : "=f"(d) : "f"(a), "f"(b));
    return d;
  }
#endif
  if constexpr (std::is_floating_point_v<T>) {
    return (a != a) ? a : ((b != b) ? b : (a < b ? a : b));
  } else {
    return a < b ? a : b;
  }
}

/// Integer power by repeated multiplication (torch.pow on integer tensors; negative exponents give 1).
template <class T>
__host__ __device__ inline T ipow(T base, T exp) {
  T out = 1;
  for (; exp > 0; --exp) out *= base;
  return out;
}

__device__ inline float sigmoid(float x) { return 1.0f / (1.0f + ::expf(-x)); }
__device__ inline double sigmoid(double x) { return 1.0 / (1.0 + ::exp(-x)); }

/// Identity of a combiner (add, max, min) in type T, for partial carries of distributed reductions.
template <class T>
__device__ inline T identity_add() {
  return T(0);
}
template <class T>
__device__ inline T identity_max() {
  if constexpr (std::numeric_limits<T>::has_infinity) return -std::numeric_limits<T>::infinity();
  else return std::numeric_limits<T>::lowest();
}
template <class T>
__device__ inline T identity_min() {
  if constexpr (std::numeric_limits<T>::has_infinity) return std::numeric_limits<T>::infinity();
  else return std::numeric_limits<T>::max();
}

}  // namespace tilefoundry::atoms
