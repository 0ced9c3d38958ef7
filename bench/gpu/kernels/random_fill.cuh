// Random bf16 operands for the standalone sweeps: Hopper compresses constant data, so memset
// weights stream faster than real ones. Values in [-1/16, 1/16], a hash of the index and seed.
#pragma once

#include <cstddef>
#include <cstdint>

#include <cutlass/bfloat16.h>

__global__ void fill_random(cutlass::bfloat16_t* x, size_t n, uint64_t seed) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    uint64_t h = (i + 1) * 0x9E3779B97F4A7C15ull ^ seed;
    h ^= h >> 31;
    h *= 0xBF58476D1CE4E5B9ull;
    h ^= h >> 29;
    x[i] = cutlass::bfloat16_t(static_cast<float>(static_cast<int64_t>(h % 2001) - 1000) / 16000.0f);
  }
}
