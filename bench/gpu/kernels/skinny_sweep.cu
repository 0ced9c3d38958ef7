// Sweep of the skinny B (N, K) GEMV's launch shape on Qwen3-1.7B's decode projections, M = 1,
// bf16, as a decode step runs them: each GEMV follows a short kernel that writes its A (an RMS
// norm of one row), both launched with programmatic dependent launch and replayed from a CUDA
// graph. Variants: rows per warp R, packs in flight per lane U. Prints the GEMV's share of each
// step (the step's time less the norm-only step's) and the TB/s of weight streaming that share
// implies, then its time per call in a chain of itself ("alone", as bench/gpu times a lone GEMM:
// each launches while the one before runs, its CTAs waiting on the SMs at the PDL wait). Weights
// are random (Hopper compresses constant data, so memset weights read faster than real ones) and
// rotate through copies larger than L2.
//
//   nvcc -std=c++17 -O3 -gencode arch=compute_90a,code=sm_90a --expt-relaxed-constexpr -DNDEBUG \
//        -I cpp/runtime/include -I <cutlass>/include bench/gpu/kernels/skinny_sweep.cu -o /tmp/sweep
#include <cstdio>
#include <functional>
#include <vector>

#include <cuda_runtime.h>

#include <tilefoundry/runtime/cuda/atoms/gemm_skinny.cuh>

using namespace tilefoundry::atoms;
using namespace tilefoundry::atoms::detail;
using T = cutlass::bfloat16_t;

constexpr int kSteps = 64;

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

/// The GEMV's predecessor: x <- x / rms(x), one CTA (what an RMS norm before a projection costs).
__global__ void norm_row(T* x, int64_t k) {
  pdl_begin();
  __shared__ float part[8];
  float s = 0.0f;
  for (int64_t i = threadIdx.x; i < k; i += blockDim.x) s += static_cast<float>(x[i]) * static_cast<float>(x[i]);
  for (int off = 16; off > 0; off /= 2) s += __shfl_xor_sync(0xffffffffu, s, off);
  if (threadIdx.x % 32 == 0) part[threadIdx.x / 32] = s;
  __syncthreads();
  float total = 0.0f;
  for (int w = 0; w < 8; ++w) total += part[w];
  float const inv = rsqrtf(total / k + 1e-6f);
  __syncthreads();
  for (int64_t i = threadIdx.x; i < k; i += blockDim.x) x[i] = T(static_cast<float>(x[i]) * inv);
}

struct Sink {  // keeps every member's sum live without writing C
  template <int G>
  __device__ void operator()(int, int64_t, int64_t n, int64_t, T const (&c)[G]) const {
    float sum = 0.0f;
#pragma unroll
    for (int g = 0; g < G; ++g) sum += static_cast<float>(c[g]);
    if (sum == 12345.0f) printf("%lld\n", static_cast<long long>(n));
  }
};

/// Microseconds per step of `step(i)` replayed from a graph of kSteps steps.
float per_step(std::function<void(int, cudaStream_t)> const& step) {
  cudaStream_t st;
  cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking);
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  cudaStreamBeginCapture(st, cudaStreamCaptureModeGlobal);
  for (int i = 0; i < kSteps; ++i) step(i, st);
  cudaStreamEndCapture(st, &graph);
  cudaGraphInstantiate(&exec, graph, 0);
  for (int w = 0; w < 3; ++w) cudaGraphLaunch(exec, st);
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  cudaEventRecord(a, st);
  for (int r = 0; r < 10; ++r) cudaGraphLaunch(exec, st);
  cudaEventRecord(b, st);
  cudaEventSynchronize(b);
  float ms = 0;
  cudaEventElapsedTime(&ms, a, b);
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(st);
  return ms * 1000.0f / (10 * kSteps);
}

struct Bench {
  Shape s;
  std::vector<T*> weights;
  T* A;
  size_t bytes;
  float norm_us;
};

template <int G, int R, int U>
void variant(Bench const& bench, char const* label) {
  Shape const& s = bench.s;
  SkinnyBtRows<T> rows{};
  int64_t end = 0;
  int const members = G == 1 ? static_cast<int>(s.n.size()) : G;
  for (int m = 0; m < members; ++m) rows.end[m] = G == 1 ? (end += s.n[m]) : s.n[0];
  rows.count = members;
  int64_t const total = G == 1 ? end : s.n[0];
  int64_t const per_cta = kSkinnyBtWarps * R;
  dim3 const grid(static_cast<unsigned>((total + per_cta - 1) / per_cta));
  auto gemv = [&](int i, cudaStream_t st) {
    T* base = bench.weights[i % bench.weights.size()];
    int64_t off = 0;
    for (int m = 0; m < members; ++m) {
      rows.B[m] = base + off;
      off += (G == 1 ? s.n[m] : s.n[0]) * s.k;
    }
    launch_kernel(gemm_skinny_nk<T, 1, G, R, U, Sink>, grid, dim3(kSkinnyBtWarps * 32), 0, st,
                  static_cast<T const*>(bench.A), rows, int64_t(1), s.k, Sink{}, NoPrologue{});
  };
  float const us = per_step([&](int i, cudaStream_t st) {
    launch_kernel(norm_row, dim3(1), dim3(256), 0, st, bench.A, s.k);
    gemv(i, st);
  }) - bench.norm_us;
  float const alone = per_step(gemv);
  std::printf("  %s %5.1f us %4.2f (alone %5.1f)", label, us, bench.bytes / (us * 1e6), alone);
}

template <int G>
void sweep(Shape const& s) {
  Bench bench{s, {}, nullptr, 0, 0.0f};
  size_t elems = 0;
  for (int m = 0; m < (G == 1 ? static_cast<int>(s.n.size()) : G); ++m) elems += (G == 1 ? s.n[m] : s.n[0]) * s.k;
  bench.bytes = elems * sizeof(T);
  int const copies = static_cast<int>((400ull << 20) / bench.bytes) + 2;
  for (int c = 0; c < copies; ++c) {
    T* w;
    cudaMalloc(&w, bench.bytes);
    fill_random<<<1024, 256>>>(w, elems, reinterpret_cast<uintptr_t>(w));
    bench.weights.push_back(w);
  }
  cudaMalloc(&bench.A, s.k * sizeof(T));
  fill_random<<<16, 256>>>(bench.A, s.k, 7);
  bench.norm_us = per_step([&](int, cudaStream_t st) { launch_kernel(norm_row, dim3(1), dim3(256), 0, st, bench.A, s.k); });
  std::printf("%-8s %6.1f MB (norm alone %.1f us):", s.name, bench.bytes / 1e6, bench.norm_us);
  variant<G, 1, 4>(bench, "R1U4");
  variant<G, 1, 8>(bench, "R1U8");
  variant<G, 2, 4>(bench, "R2U4");
  variant<G, 2, 2>(bench, "R2U2");
  variant<G, 4, 2>(bench, "R4U2");
  std::printf("  (TB/s)\n");
  for (auto w : bench.weights) cudaFree(w);
  cudaFree(bench.A);
}

int main() {
  sweep<1>({"qkv", 1, {2048, 1024, 1024}, 2048});
  sweep<1>({"o_proj", 1, {2048}, 2048});
  sweep<2>({"gate_up", 2, {6144}, 2048});
  sweep<1>({"down", 1, {2048}, 6144});
  sweep<1>({"lm_head", 1, {151936}, 2048});
  std::printf("status: %s\n", cudaGetErrorString(cudaGetLastError()));
  return 0;
}
