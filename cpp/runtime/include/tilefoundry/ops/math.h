// Exact device math on the compute types (f32, f64): no approximate intrinsics (__expf, ...),
// as DESIGN §3 requires unless a caller opts in.
#pragma once

namespace tilefoundry::detail::math {

__device__ inline float exp(float x) { return ::expf(x); }
__device__ inline double exp(double x) { return ::exp(x); }
__device__ inline float exp2(float x) { return ::exp2f(x); }
__device__ inline double exp2(double x) { return ::exp2(x); }
__device__ inline float log(float x) { return ::logf(x); }
__device__ inline double log(double x) { return ::log(x); }
__device__ inline float log2(float x) { return ::log2f(x); }
__device__ inline double log2(double x) { return ::log2(x); }
__device__ inline float log1p(float x) { return ::log1pf(x); }
__device__ inline double log1p(double x) { return ::log1p(x); }
__device__ inline float sqrt(float x) { return ::sqrtf(x); }
__device__ inline double sqrt(double x) { return ::sqrt(x); }
__device__ inline float rsqrt(float x) { return ::rsqrtf(x); }
__device__ inline double rsqrt(double x) { return ::rsqrt(x); }
__device__ inline float tanh(float x) { return ::tanhf(x); }
__device__ inline double tanh(double x) { return ::tanh(x); }
__device__ inline float erf(float x) { return ::erff(x); }
__device__ inline double erf(double x) { return ::erf(x); }
__device__ inline float pow(float x, float y) { return ::powf(x, y); }
__device__ inline double pow(double x, double y) { return ::pow(x, y); }

}  // namespace tilefoundry::detail::math
