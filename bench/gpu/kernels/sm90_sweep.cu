// Sweep of the sm90 GEMM collective's schedule on the M = 128 projections of Qwen3-1.7B and
// Qwen3-8B (bf16, B stored (N, K) as HF linears store it), where a 128 x 128 data-parallel grid
// has only N / 128 tiles for 132 SMs (bench.gpu, 2026-11-30: 0.38-0.67x cuBLAS where K <= 6144).
// Variants: the data-parallel grid at 128 x 128 (what runs today), 128 x 64, and 64 x 128 / 64 x 64
// with the ping-pong schedule; CUTLASS's stream-K scheduler by its own heuristic and as plain
// split-K with S = 2, 4, 8 (ordered reduction; S = 4 also unordered, to price the order).
// cuBLAS runs the same shapes beside them. Each call is captured as the runtime runs it
// (gemm_sm90: initialize, which clears the scheduler's workspace, then run) into a CUDA graph of
// 20 calls that rotate through copies of B larger than L2; weights are random. Prints us per
// call (median of 7 replays) and each variant's largest difference from cuBLAS's result.
//
//   nvcc -std=c++17 -O3 -gencode arch=compute_90a,code=sm_90a --expt-relaxed-constexpr -DNDEBUG \
//        -I cpp/runtime/include -I <cutlass>/include -I <cublas>/include \
//        bench/gpu/kernels/sm90_sweep.cu -o /tmp/sm90_sweep -L <cublas>/lib -l:libcublas.so.13
//   (<cublas>: the nvidia/cu13 directory of torch's wheels; LD_LIBRARY_PATH=<cublas>/lib to run)
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <type_traits>
#include <vector>

#include <cublas_v2.h>
#include <cuda_runtime.h>

#define TILEFOUNDRY_SM90_TILE_M 128
#define TILEFOUNDRY_SM90_TILE_N 128
#include <tilefoundry/runtime/cuda/atoms/gemm_sm90.cuh>

#include "random_fill.cuh"

using namespace tilefoundry::atoms::detail;
using T = cutlass::bfloat16_t;

constexpr int kCalls = 20;     // calls per graph
constexpr int kReplays = 7;    // timed replays (median)
constexpr size_t kRotateBytes = size_t(160) << 20;  // B copies in rotation: more than L2 (60 MB)

#define CHECK(x)                                                                       \
  do {                                                                                 \
    auto const e_ = (x);                                                               \
    if (e_ != 0) {                                                                     \
      std::fprintf(stderr, "%s:%d: %s failed (%d)\n", __FILE__, __LINE__, #x, int(e_)); \
      std::exit(1);                                                                    \
    }                                                                                  \
  } while (0)

struct Shape {
  char const* name;
  int64_t n, k;
};

/// Operands of one shape: A (M, K), `copies` B (N, K) in rotation, C (M, N) per copy.
struct Problem {
  int64_t m, n, k;
  int copies;
  T* a;
  std::vector<T*> b, c;

  Problem(int64_t m_, Shape s) : m(m_), n(s.n), k(s.k) {
    size_t const bytes = size_t(n * k) * sizeof(T);
    copies = static_cast<int>(std::max<size_t>(1, (kRotateBytes + bytes - 1) / bytes));
    CHECK(cudaMalloc(&a, size_t(m * k) * sizeof(T)));
    fill_random<<<1024, 256>>>(a, size_t(m * k), 1);
    for (int i = 0; i < copies; ++i) {
      T *bi, *ci;
      CHECK(cudaMalloc(&bi, bytes));
      CHECK(cudaMalloc(&ci, size_t(m * n) * sizeof(T)));
      fill_random<<<1024, 256>>>(bi, size_t(n * k), 100 + i);
      b.push_back(bi);
      c.push_back(ci);
    }
    CHECK(cudaDeviceSynchronize());
  }
  ~Problem() {
    cudaFree(a);
    for (int i = 0; i < copies; ++i) {
      cudaFree(b[i]);
      cudaFree(c[i]);
    }
  }
};

/// us per call of `call(i, stream)` (i: the B copy), replayed from graphs of kCalls calls.
double time_calls(std::function<void(int, cudaStream_t)> const& call, int copies, cudaStream_t st) {
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  CHECK(cudaStreamBeginCapture(st, cudaStreamCaptureModeGlobal));
  for (int i = 0; i < kCalls; ++i) call(i % copies, st);
  CHECK(cudaStreamEndCapture(st, &graph));
  CHECK(cudaGraphInstantiate(&exec, graph, 0));
  for (int w = 0; w < 3; ++w) CHECK(cudaGraphLaunch(exec, st));
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  std::vector<double> us;
  for (int r = 0; r < kReplays; ++r) {
    cudaEventRecord(e0, st);
    CHECK(cudaGraphLaunch(exec, st));
    cudaEventRecord(e1, st);
    CHECK(cudaEventSynchronize(e1));
    float ms = 0;
    cudaEventElapsedTime(&ms, e0, e1);
    us.push_back(ms * 1e3 / kCalls);
  }
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  std::sort(us.begin(), us.end());
  return us[us.size() / 2];
}

/// Largest |x - ref| over C of copy 0, relative to the largest |ref|.
double difference(T const* x, T const* ref, int64_t count) {
  std::vector<T> hx(count), hr(count);
  CHECK(cudaMemcpy(hx.data(), x, count * sizeof(T), cudaMemcpyDeviceToHost));
  CHECK(cudaMemcpy(hr.data(), ref, count * sizeof(T), cudaMemcpyDeviceToHost));
  double worst = 0, scale = 1e-30;
  for (int64_t i = 0; i < count; ++i) {
    worst = std::max(worst, std::fabs(double(float(hx[i])) - double(float(hr[i]))));
    scale = std::max(scale, std::fabs(double(float(hr[i]))));
  }
  return worst / scale;
}

/// Scheduler arguments of a variant; ignored by the data-parallel (void) scheduler.
struct Split {
  int splits = 1;  // 1: the stream-K scheduler's own heuristic
  bool ordered = true;
};

template <class G>
void run_variant(char const* label, Problem& p, Split split, T* ref, cudaStream_t st) {
  auto arguments = [&](int i) {
    auto args = G::arguments(p.a, p.b[i], p.c[i], 1, p.m, p.n, p.k);
    if constexpr (std::is_same_v<typename G::Kernel::TileSchedulerTag, cutlass::gemm::StreamKScheduler>) {
      using Params = cutlass::gemm::kernel::detail::PersistentTileSchedulerSm90StreamKParams;
      using Mode = Params::DecompositionMode;
      using Reduction = Params::ReductionMode;
      if (split.splits > 1) {
        args.scheduler.splits = split.splits;
        args.scheduler.decomposition_mode = Mode::SplitK;
      }
      args.scheduler.reduction_mode = split.ordered ? Reduction::Deterministic : Reduction::Nondeterministic;
    }
    return args;
  };
  std::vector<typename G::Device> gemms(p.copies);
  std::vector<void*> workspaces(p.copies, nullptr);
  for (int i = 0; i < p.copies; ++i) {
    auto const args = arguments(i);
    if (G::Device::can_implement(args) != cutlass::Status::kSuccess) {
      std::printf("  %-22s cannot run this shape\n", label);
      return;
    }
    size_t const ws = G::Device::get_workspace_size(args);
    if (ws) CHECK(cudaMalloc(&workspaces[i], ws));
  }
  double const us = time_calls(
      [&](int i, cudaStream_t s) {  // as gemm_sm90 runs a call: initialize (clears the workspace), run
        CHECK(int(gemms[i].initialize(arguments(i), workspaces[i], s)));
        CHECK(int(gemms[i].run(s)));
      },
      p.copies, st);
  CHECK(cudaStreamSynchronize(st));
  std::printf("  %-22s %7.2f us  %6.2f TB/s  diff %.1e\n", label, us, double(p.n * p.k * 2) / (us * 1e6),
              difference(p.c[0], ref, p.m * p.n));
  for (void* w : workspaces) cudaFree(w);
}

int main() {
  int64_t const m = 128;
  std::vector<Shape> const shapes = {
      {"1.7b q", 2048, 2048},  {"1.7b kv", 1024, 2048},    {"1.7b gate_up", 6144, 2048},
      {"1.7b down", 2048, 6144}, {"8b q", 4096, 4096},     {"8b kv", 1024, 4096},
      {"8b gate_up", 12288, 4096}, {"8b down", 4096, 12288},
  };
  cudaStream_t st;
  CHECK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  cublasHandle_t blas;
  CHECK(cublasCreate(&blas));
  CHECK(cublasSetStream(blas, st));
  void* blas_ws;
  CHECK(cudaMalloc(&blas_ws, size_t(32) << 20));
  CHECK(cublasSetWorkspace(blas, blas_ws, size_t(32) << 20));
  using DataParallel = Sm90Gemm<T, true>;
  using StreamK = Sm90Gemm<T, true, 128, 128, cutlass::gemm::StreamKScheduler>;
  using Narrow = Sm90Gemm<T, true, 128, 64>;
  using Pingpong = Sm90Gemm<T, true, 64, 128, void, true>;
  using PingpongSmall = Sm90Gemm<T, true, 64, 64, void, true>;
  for (Shape const& s : shapes) {
    Problem p(m, s);
    T* ref;
    CHECK(cudaMalloc(&ref, size_t(m * s.n) * sizeof(T)));
    float const one = 1.0f, zero = 0.0f;
    // Row-major C (M, N) = A (M, K) . B (N, K)^T is column-major C^T = B^T(op T of B's (K, N)) . A.
    auto blas_call = [&](int i, T* c) {
      CHECK(cublasGemmEx(blas, CUBLAS_OP_T, CUBLAS_OP_N, int(s.n), int(m), int(s.k), &one, p.b[i], CUDA_R_16BF,
                         int(s.k), p.a, CUDA_R_16BF, int(s.k), &zero, c, CUDA_R_16BF, int(s.n), CUBLAS_COMPUTE_32F,
                         CUBLAS_GEMM_DEFAULT));
    };
    blas_call(0, ref);
    CHECK(cudaStreamSynchronize(st));
    double const blas_us = time_calls([&](int i, cudaStream_t) { blas_call(i, p.c[i]); }, p.copies, st);
    std::printf("%s: M %lld, N %lld, K %lld (%d copies of B)\n  %-22s %7.2f us  %6.2f TB/s\n", s.name,
                static_cast<long long>(m), static_cast<long long>(s.n), static_cast<long long>(s.k), p.copies,
                "cuBLAS", blas_us, double(s.n * s.k * 2) / (blas_us * 1e6));
    run_variant<DataParallel>("128x128 data-parallel", p, {}, ref, st);
    run_variant<Narrow>("128x64 data-parallel", p, {}, ref, st);
    run_variant<Pingpong>("64x128 ping-pong", p, {}, ref, st);
    run_variant<PingpongSmall>("64x64 ping-pong", p, {}, ref, st);
    run_variant<StreamK>("stream-K heuristic", p, {}, ref, st);
    for (int splits : {2, 4, 8}) {
      char label[32];
      std::snprintf(label, sizeof label, "split-K %d ordered", splits);
      run_variant<StreamK>(label, p, {splits, true}, ref, st);
    }
    run_variant<StreamK>("split-K 4 unordered", p, {4, false}, ref, st);
    cudaFree(ref);
  }
  cublasDestroy(blas);
  return 0;
}
