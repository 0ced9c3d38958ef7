// Sweep of the skinny B (N, K) GEMV's launch shape (rows per warp R, packs in flight per lane U,
// warps sharing a row's K S) on Qwen3-1.7B's decode projections, M = 1, bf16: prints TB/s of
// weight streaming per variant. Weights are random (Hopper compresses constant data in L2 and
// HBM, so memset weights read faster than real ones) and rotate through copies larger than L2.
//
//   nvcc -std=c++17 -O3 -gencode arch=compute_90a,code=sm_90a --expt-relaxed-constexpr -DNDEBUG \
//        -I cpp/runtime/include -I <cutlass>/include bench/gpu/kernels/skinny_sweep.cu -o /tmp/sweep
//   /tmp/sweep
#include <cstdio>
#include <vector>

#include <cuda_runtime.h>

#include <tilefoundry/runtime/cuda/atoms/gemm_skinny.cuh>

using namespace tilefoundry::atoms;
using namespace tilefoundry::atoms::detail;
using T = cutlass::bfloat16_t;

struct Shape {
  char const* name;
  int G;
  std::vector<int64_t> n;  // member rows (G = 1: end to end; G > 1: side by side, n[0] each)
  int64_t k;
};

__global__ void fill_random(T* x, size_t n, uint64_t seed) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    uint64_t h = (i + 1) * 0x9E3779B97F4A7C15ull ^ seed;
    h ^= h >> 31;
    h *= 0xBF58476D1CE4E5B9ull;
    h ^= h >> 29;
    x[i] = T(static_cast<float>(static_cast<int64_t>(h % 2001) - 1000) / 16000.0f);
  }
}

struct Nothing {
  template <int G>
  __device__ void operator()(int, int64_t, int64_t n, int64_t, T const (&c)[G]) const {
    float sum = 0.0f;
#pragma unroll
    for (int g = 0; g < G; ++g) sum += static_cast<float>(c[g]);
    if (sum == 12345.0f) printf("%lld\n", static_cast<long long>(n));  // keep every member's sum live
  }
};

template <int G, int R, int U, int S>
float time_variant(Shape const& s, T const* A, std::vector<T*> const& weights, size_t per_copy, int iters) {
  SkinnyBtRows<T> rows{};
  int64_t end = 0;
  int const members = G == 1 ? static_cast<int>(s.n.size()) : G;
  for (int m = 0; m < members; ++m) rows.end[m] = G == 1 ? (end += s.n[m]) : s.n[0];
  rows.count = members;
  int64_t const total = G == 1 ? end : s.n[0];
  int64_t const per_cta = (kSkinnyBtWarps / S) * R;
  dim3 const grid(static_cast<unsigned>((total + per_cta - 1) / per_cta));
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  auto launch = [&](int i) {
    T* base = weights[i % weights.size()];
    int64_t off = 0;
    for (int m = 0; m < members; ++m) {
      rows.B[m] = base + off;
      off += (G == 1 ? s.n[m] : s.n[0]) * s.k;
    }
    launch_kernel(gemm_skinny_nk<T, 1, G, R, U, S, Nothing>, grid, dim3(kSkinnyBtWarps * 32), 0, nullptr, A, rows,
                  int64_t(1), s.k, Nothing{});
  };
  for (int i = 0; i < 20; ++i) launch(i);
  cudaEventRecord(a);
  for (int i = 0; i < iters; ++i) launch(i);
  cudaEventRecord(b);
  cudaEventSynchronize(b);
  float ms = 0;
  cudaEventElapsedTime(&ms, a, b);
  (void)per_copy;
  return ms * 1000.0f / iters;
}

template <int G>
void sweep(Shape const& s) {
  size_t elems = 0;
  for (size_t m = 0; m < (G == 1 ? s.n.size() : size_t(G)); ++m) elems += (G == 1 ? s.n[m] : s.n[0]) * s.k;
  size_t const bytes = elems * sizeof(T);
  int const copies = static_cast<int>((400ull << 20) / bytes) + 2;
  std::vector<T*> weights(copies);
  for (auto& w : weights) {
    cudaMalloc(&w, bytes);
    fill_random<<<1024, 256>>>(w, elems, reinterpret_cast<uintptr_t>(w));
  }
  T* A;
  cudaMalloc(&A, s.k * sizeof(T));
  fill_random<<<16, 256>>>(A, s.k, 7);
  int const iters = 200;
  std::printf("%-8s %6.1f MB:", s.name, bytes / 1e6);
  auto show = [&](char const* label, float us) { std::printf("  %s %5.1f us %4.2f", label, us, bytes / (us * 1e6)); };
  show("R1U4S1", time_variant<G, 1, 4, 1>(s, A, weights, bytes, iters));
  show("R2U4S1", time_variant<G, 2, 4, 1>(s, A, weights, bytes, iters));
  show("R4U2S1", time_variant<G, 4, 2, 1>(s, A, weights, bytes, iters));
  show("R1U4S2", time_variant<G, 1, 4, 2>(s, A, weights, bytes, iters));
  show("R2U4S2", time_variant<G, 2, 4, 2>(s, A, weights, bytes, iters));
  show("R4U2S2", time_variant<G, 4, 2, 2>(s, A, weights, bytes, iters));
  show("R1U4S4", time_variant<G, 1, 4, 4>(s, A, weights, bytes, iters));
  show("R2U2S4", time_variant<G, 2, 2, 4>(s, A, weights, bytes, iters));
  show("R2U4S4", time_variant<G, 2, 4, 4>(s, A, weights, bytes, iters));
  show("R4U2S4", time_variant<G, 4, 2, 4>(s, A, weights, bytes, iters));
  show("R4U1S4", time_variant<G, 4, 1, 4>(s, A, weights, bytes, iters));
  std::printf("  (TB/s)\n");
  for (auto w : weights) cudaFree(w);
  cudaFree(A);
}

int main() {
  sweep<1>({"qkv", 1, {2048, 1024, 1024}, 2048});
  sweep<1>({"o_proj", 1, {2048}, 2048});
  sweep<2>({"gate_up", 2, {6144}, 2048});
  sweep<1>({"down", 1, {2048}, 6144});
  sweep<1>({"lm_head", 1, {151936}, 2048});
  // copy reference: device-to-device memcpy of 1 GiB (read + write counted)
  size_t const n = 1ull << 30;
  void *x, *y;
  cudaMalloc(&x, n);
  cudaMalloc(&y, n);
  fill_random<<<1024, 256>>>(reinterpret_cast<T*>(x), n / sizeof(T), 3);
  cudaMemcpy(y, x, n, cudaMemcpyDeviceToDevice);
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  cudaEventRecord(a);
  for (int i = 0; i < 10; ++i) cudaMemcpy(y, x, n, cudaMemcpyDeviceToDevice);
  cudaEventRecord(b);
  cudaEventSynchronize(b);
  float ms = 0;
  cudaEventElapsedTime(&ms, a, b);
  std::printf("memcpy d2d: %.2f TB/s (read + write)\n", 2.0 * n * 10 / (ms * 1e9));
  std::printf("status: %s\n", cudaGetErrorString(cudaGetLastError()));
  return 0;
}
