// 16-byte vector access of a pack of N consecutive elements, for element grids and row loops
// whose contiguity and alignment the planner proved (N * sizeof(T) a multiple of 16, the pack's
// first element 16-byte aligned). Each pack moves as N * sizeof(T) / 16 `uint4` words.
//
//   float v[4];  load_pack<4>(x + base, v);   // one 16-byte load   (f32 x4)
//   bf16 w[8];   load_pack<8>(g + base, w);   // one 16-byte load   (bf16 x8)
#pragma once

#include <cstdint>
#include <initializer_list>

namespace tilefoundry::atoms {

template <int N, class T>
inline constexpr bool pack_fits_v = (N * sizeof(T)) % 16 == 0;

/// out[0..N) = src[0..N); `src` must be 16-byte aligned.
template <int N, class T>
__device__ inline void load_pack(T const* __restrict__ src, T (&out)[N]) {
  static_assert(pack_fits_v<N, T>, "load_pack: N * sizeof(T) must be a multiple of 16 bytes");
  constexpr int words = N * sizeof(T) / 16;
  uint4 const* s = reinterpret_cast<uint4 const*>(src);
  uint4 w[words];
#pragma unroll
  for (int i = 0; i < words; ++i) w[i] = s[i];
  T const* v = reinterpret_cast<T const*>(w);
#pragma unroll
  for (int i = 0; i < N; ++i) out[i] = v[i];
}

/// dst[0..N) = in[0..N); `dst` must be 16-byte aligned.
template <int N, class T>
__device__ inline void store_pack(T* __restrict__ dst, T const (&in)[N]) {
  static_assert(pack_fits_v<N, T>, "store_pack: N * sizeof(T) must be a multiple of 16 bytes");
  constexpr int words = N * sizeof(T) / 16;
  uint4 w[words];
  T* v = reinterpret_cast<T*>(w);
#pragma unroll
  for (int i = 0; i < N; ++i) v[i] = in[i];
  uint4* d = reinterpret_cast<uint4*>(dst);
  if (__isShared(d)) {  // a GEMM prologue's staged rows
#pragma unroll
    for (int i = 0; i < words; ++i) d[i] = w[i];
    return;
  }
  // One st.global.v4 a word, in PTX: given the uint4 (or __stwb's), NVVM split rope's pack
  // store into four 4-byte stores (each a quarter of every sector a warp writes).
#pragma unroll
  for (int i = 0; i < words; ++i) {
    asm volatile("st.global.v4.b32 [%0], {%1, %2, %3, %4};" ::"l"(d + i), "r"(w[i].x), "r"(w[i].y), "r"(w[i].z),
                 "r"(w[i].w)
                 : "memory");
  }
}

/// True when every pointer is 16-byte aligned (the host picks the vector kernel with it).
inline bool aligned16(std::initializer_list<void const*> ptrs) {
  for (void const* p : ptrs) {
    if (reinterpret_cast<std::uintptr_t>(p) % 16 != 0) return false;
  }
  return true;
}

}  // namespace tilefoundry::atoms
