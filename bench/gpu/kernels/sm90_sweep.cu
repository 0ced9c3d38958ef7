// Sweeps of the sm90 GEMM collective's configurations against cuBLAS on the H200 (bf16).
//
// Default build, the M = 128 projections of Qwen3-1.7B and Qwen3-8B (B stored (N, K) as HF
// linears store it), where a 128 x 128 data-parallel grid has only N / 128 tiles for 132 SMs
// (bench.gpu, 2026-11-30: 0.38-0.67x cuBLAS where K <= 6144). Variants: 128 x 64 data-parallel and
// 64 x 64 ping-pong (what the runtime runs there), and the swapped TN GEMM on 64-row tiles of B
// with 16, 32, 64 or 128 rows of A a tile (the fifth session's 128 x 128, 64 x 128, stream-K and
// split-K variants lost everywhere and are gone).
//
// Built with -DSM90_SWEEP_LARGE, the compute-bound rows bench.gpu holds below 0.95x cuBLAS
// (2026-11-30, third session: 0.92-0.93x at 4096^3, 8192^3 and Qwen3-8B's gate_up at M = 2048):
// the tiles "auto" takes (128 x 256, 128 x 128) and 256 x 128, each as clusters of 1 x 1 (what
// runs today), 2 x 1 (B multicast to two M tiles) and 1 x 2 (A to two N tiles), and the
// persistent scheduler's swizzle (1, 2, 4, 8: tiles visited in bands, for L2 reuse).
//
// Built with -DSM90_SWEEP_SKINNY, the M = 16 projections of both models (bench.gpu, 2026-12-02:
// 0.64-0.84x cuBLAS but for the kv rows): what the runtime runs there (the tensor-core skinny kernel
// where N / 16 CTAs fit one wave, else the sm90 tiles) against the swapped TN GEMM (C^T = B . A^T,
// B's rows on the tile's M mode, M = 16 on its N mode) at 128 and 64 rows, K steps of 64 and 128,
// and on the stream-K scheduler by its heuristic and as split-K with S = 2, 4; then the same
// projections at M = 8 and 1 (the skinny tier's) against the chosen 64 x 16 tile and a 64 x 8 one.
//
// Built with -DSM90_SWEEP_MID, both models' projections at M = 32, 64 and 128: what the runtime runs
// (every variant "auto" may take there built in) against cuBLAS, and the wide-N rows' tiles as
// clusters sharing B by multicast.
//
// Built with -DSM90_SWEEP_NEAR, the rows bench.gpu still holds below 0.95x cuBLAS (2026-12-04):
// Qwen3-1.7B's kv at M = 2048 (0.94x on 128 x 128: 128 tiles, one wave with no tail), its gate_up
// at M = 16 (0.94x, swapped 64 x 16: 96 tiles) and at M = 128 (0.75x), and Qwen3-8B's kv at M = 32
// (0.88x, swapped 64 x 32: 16 tiles along K = 4096): what the runtime runs against tiles with more
// CTAs (128 x 64, 64 x 128) and against K shared out by the stream-K scheduler (its heuristic, and
// split-K with 2 or 4 splits), which needs the cooperative schedule (128-row tiles).
//
// Each call is captured as the runtime runs it (gemm_sm90: initialize, which clears the
// scheduler's workspace, then run) into a CUDA graph of 20 calls that rotate through copies of B
// larger than L2; operands are random. Prints us per call (median of 7 replays), the B stream's
// TB/s, TFLOP/s, the ratio to cuBLAS (timed before and after each shape's variants) and each
// variant's largest difference from cuBLAS's result.
//
//   mkdir -p /tmp/cublas && ln -sf <cu13>/include/cublas*.h /tmp/cublas/
//   nvcc -std=c++17 -O3 -gencode arch=compute_90a,code=sm_90a --expt-relaxed-constexpr -DNDEBUG \
//        -I cpp/runtime/include -I <cutlass>/include -I /tmp/cublas [-DSM90_SWEEP_LARGE] \
//        bench/gpu/kernels/sm90_sweep.cu -o /tmp/sm90_sweep -L <cu13>/lib -l:libcublas.so.13
//   (<cu13>: the nvidia/cu13 directory of torch's wheels, whose cublas headers alone are taken:
//   its CCCL headers break nvcc's when the two CUDA versions differ; LD_LIBRARY_PATH=<cu13>/lib to
//   run. The large build took 66 s here on 2 cores, 2026-12-01.)
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <string>
#include <type_traits>
#include <vector>

#include <cublas_v2.h>
#include <cuda_runtime.h>

#define TILEFOUNDRY_SM90_TILE_M 128
#define TILEFOUNDRY_SM90_TILE_N 128
#if defined(SM90_SWEEP_SKINNY) || defined(SM90_SWEEP_MID) || defined(SM90_SWEEP_NEAR)
#define TILEFOUNDRY_CUDA_GEMM_SM90
#define TILEFOUNDRY_SM90_SMALL_TILE
#define TILEFOUNDRY_SM90_SWAPPED
#if defined(SM90_SWEEP_MID) || defined(SM90_SWEEP_NEAR)  // every variant "auto" may take
#define TILEFOUNDRY_SM90_SWAPPED_MID
#define TILEFOUNDRY_SM90_SMALL_WIDE
#define TILEFOUNDRY_SM90_STREAM_K
#endif
#include <tilefoundry/runtime/cuda/atoms/gemm.cuh>
#else
#include <tilefoundry/runtime/cuda/atoms/gemm_sm90.cuh>
#endif

#include "check_status.cuh"
#include "random_fill.cuh"

using namespace tilefoundry::atoms::detail;
using T = cutlass::bfloat16_t;

constexpr int kCalls = 20;     // calls per graph
constexpr int kReplays = 7;    // timed replays (median)
constexpr size_t kRotateBytes = size_t(160) << 20;  // B copies in rotation: more than L2 (60 MB)

struct Shape {
  char const* name;
  int64_t m, n, k;
  bool b_k_major;  // B stored (N, K) as a linear's weight; else (K, N) row-major
};

/// Operands of one shape: A (M, K), `copies` B in rotation, C (M, N) per copy.
struct Problem {
  int64_t m, n, k;
  bool b_k_major;
  int copies;
  T* a;
  std::vector<T*> b, c;

  explicit Problem(Shape s) : m(s.m), n(s.n), k(s.k), b_k_major(s.b_k_major) {
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

/// Scheduler arguments of a variant: stream-K's (ignored by the data-parallel scheduler) and the
/// persistent scheduler's swizzle.
struct Schedule {
  int splits = 1;  // 1: the stream-K scheduler's own heuristic
  bool ordered = true;
  int swizzle = 1;
};

/// cuBLAS's C (M, N) = A (M, K) . B for one B copy, both B layouts, into `c`.
struct Blas {
  cublasHandle_t handle;
  void* workspace;

  explicit Blas(cudaStream_t st) {
    CHECK(cublasCreate(&handle));
    CHECK(cublasSetStream(handle, st));
    CHECK(cudaMalloc(&workspace, size_t(32) << 20));
    CHECK(cublasSetWorkspace(handle, workspace, size_t(32) << 20));
  }
  ~Blas() {
    cublasDestroy(handle);
    cudaFree(workspace);
  }

  // Row-major C (M, N) = A (M, K) . B is column-major C^T = B^T . A^T: B (N, K) row-major is
  // op T of a column-major (K, N); B (K, N) row-major is a column-major (N, K) as it stands.
  void gemm(Problem const& p, int i, T* c) const {
    float const one = 1.0f, zero = 0.0f;
    CHECK(cublasGemmEx(handle, p.b_k_major ? CUBLAS_OP_T : CUBLAS_OP_N, CUBLAS_OP_N, int(p.n), int(p.m), int(p.k),
                       &one, p.b[i], CUDA_R_16BF, int(p.b_k_major ? p.k : p.n), p.a, CUDA_R_16BF, int(p.k), &zero,
                       c, CUDA_R_16BF, int(p.n), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  }

  double time(Problem& p, cudaStream_t st) const {
    return time_calls([&](int i, cudaStream_t) { gemm(p, i, p.c[i]); }, p.copies, st);
  }
};

double tflops(Problem const& p, double us) { return 2.0 * double(p.m) * double(p.n) * double(p.k) / (us * 1e6); }
double b_tbps(Problem const& p, double us) { return double(p.n * p.k * 2) / (us * 1e6); }

void print_blas(char const* label, Problem const& p, double us) {
  std::printf("  %-26s %8.2f us  %6.2f TB/s  %6.1f TFLOP/s\n", label, us, b_tbps(p, us), tflops(p, us));
}

/// One variant's line: its time, rates, ratio to cuBLAS and largest difference from cuBLAS's result.
void print_variant(char const* label, Problem const& p, double us, T const* ref, double blas_us) {
  std::printf("  %-26s %8.2f us  %6.2f TB/s  %6.1f TFLOP/s  %5.3fx cuBLAS  diff %.1e\n", label, us, b_tbps(p, us),
              tflops(p, us), blas_us / us, difference(p.c[0], ref, p.m * p.n));
}

template <class G>
void run_variant(char const* label, Problem& p, Schedule sched, T* ref, double blas_us, cudaStream_t st) {
  auto arguments = [&](int i) {
    auto args = G::arguments(p.a, p.b[i], p.c[i], 1, p.m, p.n, p.k);
    args.scheduler.max_swizzle_size = sched.swizzle;
    if constexpr (std::is_same_v<typename G::Kernel::TileSchedulerTag, cutlass::gemm::StreamKScheduler>) {
      using Params = cutlass::gemm::kernel::detail::PersistentTileSchedulerSm90StreamKParams;
      using Mode = Params::DecompositionMode;
      using Reduction = Params::ReductionMode;
      if (sched.splits > 1) {
        args.scheduler.splits = sched.splits;
        args.scheduler.decomposition_mode = Mode::SplitK;
      }
      args.scheduler.reduction_mode = sched.ordered ? Reduction::Deterministic : Reduction::Nondeterministic;
    }
    return args;
  };
  std::vector<typename G::Device> gemms(p.copies);
  std::vector<void*> workspaces(p.copies, nullptr);
  for (int i = 0; i < p.copies; ++i) {
    auto const args = arguments(i);
    if (G::Device::can_implement(args) != cutlass::Status::kSuccess) {
      std::printf("  %-26s cannot run this shape\n", label);
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
  print_variant(label, p, us, ref, blas_us);
  for (void* w : workspaces) cudaFree(w);
}

/// Each shape in turn: cuBLAS (its result is every variant's reference), then
/// `variants(p, ref, blas_us, stream)`, then cuBLAS again, so drift over the shape's variants shows.
template <class F>
void sweep(std::vector<Shape> const& shapes, F&& variants) {
  cudaStream_t st;
  CHECK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  Blas const blas(st);
  for (Shape const& s : shapes) {
    Problem p(s);
    T* ref;
    CHECK(cudaMalloc(&ref, size_t(p.m * p.n) * sizeof(T)));
    blas.gemm(p, 0, ref);
    CHECK(cudaStreamSynchronize(st));
    double const blas_us = blas.time(p, st);
    std::printf("%s: M %lld, N %lld, K %lld, B %s (%d copies of B)\n", s.name, static_cast<long long>(p.m),
                static_cast<long long>(p.n), static_cast<long long>(p.k), p.b_k_major ? "(N, K)" : "(K, N)", p.copies);
    print_blas("cuBLAS", p, blas_us);
    variants(p, ref, blas_us, st);
    print_blas("cuBLAS again", p, blas.time(p, st));
    cudaFree(ref);
  }
}

#if defined(SM90_SWEEP_SKINNY) || defined(SM90_SWEEP_MID) || defined(SM90_SWEEP_NEAR)

/// What the runtime's gemm<rcr> runs for the problem, timed as the variants are.
void run_runtime(Problem& p, T* ref, double blas_us, cudaStream_t st) {
  using tilefoundry::atoms::GemmLayout;
  size_t const ws = tilefoundry::atoms::gemm_workspace_bytes<GemmLayout::rcr>(p.a, p.b[0], p.c[0], 1, p.m, p.n, p.k);
  void* workspace = nullptr;
  if (ws) CHECK(cudaMalloc(&workspace, ws));
  auto const tier = tilefoundry::atoms::gemm_tier<GemmLayout::rcr>(p.a, p.b[0], p.c[0], 1, p.m, p.n, p.k);
  double const us = time_calls(
      [&](int i, cudaStream_t s) {
        CHECK(tilefoundry::atoms::gemm<GemmLayout::rcr>(p.a, p.b[i], p.c[i], 1, p.m, p.n, p.k, workspace, s));
      },
      p.copies, st);
  CHECK(cudaStreamSynchronize(st));
  char const* tile = "skinny";
  if (tier == tilefoundry::atoms::GemmTier::sm90) {
    bool wide = sm90_small_wide_pays(1, p.m, p.n);
#if !defined(TILEFOUNDRY_SM90_SMALL_WIDE)
    wide = false;
#endif
    tile = sm90_swapped_pays(p.m, p.n, p.k)       ? (sm90_swapped_quad_pays(p.n) ? "sm90 swapped 64x16 4x1"
                                                                                  : "sm90 swapped 64x16")
           : sm90_swapped_mid_pays(1, p.m, p.n)   ? "sm90 swapped 64x32"
           : sm90_small_tile_pays(1, p.m, p.n)    ? (wide ? "sm90 64x96" : "sm90 64x64")
           : sm90_stream_k_pays(1, p.m, p.n, p.k) ? "sm90 stream-K"
                                                  : "sm90 128x128";
  }
  char label[40];
  std::snprintf(label, sizeof label, "runtime (%s)", tile);
  print_variant(label, p, us, ref, blas_us);
  cudaFree(workspace);
}

/// A linear of both models: B stored (N, K).
struct Projection {
  char const* name;
  int64_t n, k;
};

/// Every projection at every M of `ms`, named "<projection> m<M>": `names` owns the strings the
/// shapes point into, so it is reserved whole before the first is added.
void projection_shapes(std::vector<Projection> const& projections, std::vector<int64_t> const& ms,
                       std::vector<std::string>& names, std::vector<Shape>& shapes) {
  names.reserve(names.size() + ms.size() * projections.size());
  for (int64_t m : ms) {
    for (Projection const& p : projections) {
      names.push_back(std::string(p.name) + " m" + std::to_string(m));
      shapes.push_back({names.back().c_str(), m, p.n, p.k, true});
    }
  }
}

#endif

#if defined(SM90_SWEEP_SKINNY)

int main() {
  std::vector<Projection> const projections = {
      {"1.7b q", 2048, 2048},   {"1.7b kv", 1024, 2048},  {"1.7b gate_up", 6144, 2048}, {"1.7b down", 2048, 6144},
      {"1.7b lm_head", 151936, 2048}, {"8b q", 4096, 4096}, {"8b kv", 1024, 4096},     {"8b gate_up", 12288, 4096},
      {"8b down", 4096, 12288}, {"8b lm_head", 151936, 4096},
  };
  std::vector<std::string> names;
  std::vector<Shape> shapes;
  projection_shapes(projections, {16, 8, 1}, names, shapes);
  using Swapped = Sm90GemmSwapped<T, 128, 16, 64>;
  using SwappedK128 = Sm90GemmSwapped<T, 128, 16, 128>;
  using SwappedHalf = Sm90GemmSwapped<T, 64, 16, 64, void, true>;
  using SwappedHalfK128 = Sm90GemmSwapped<T, 64, 16, 128, void, true>;
  using SwappedEight = Sm90GemmSwapped<T, 64, 8, 128, void, true>;
  using SwappedStreamK = Sm90GemmSwapped<T, 128, 16, 64, cutlass::gemm::StreamKScheduler>;
  using SwappedQuad = Sm90GemmSwapped<T, 64, 16, 128, void, true, 1, 4>;
  sweep(shapes, [](Problem& p, T* ref, double blas_us, cudaStream_t st) {
    run_runtime(p, ref, blas_us, st);
    // The chosen tile as cuBLAS runs its 64 x 16 tiles at M = 16: 4 x 1 clusters sharing A's tile.
    run_variant<SwappedQuad>("swapped 64x16 k128 pp 4x1", p, {}, ref, blas_us, st);
    if (p.m <= 8) {  // the M = 16 variants' verdicts are in (2026-12-03); the narrow tile beside the chosen one
      run_variant<SwappedHalfK128>("swapped 64x16 k128 pp", p, {}, ref, blas_us, st);
      run_variant<SwappedEight>("swapped 64x8 k128 pp", p, {}, ref, blas_us, st);
      return;
    }
    run_variant<Swapped>("swapped 128x16 k64", p, {}, ref, blas_us, st);
    run_variant<SwappedK128>("swapped 128x16 k128", p, {}, ref, blas_us, st);
    run_variant<SwappedHalf>("swapped 64x16 k64 pp", p, {}, ref, blas_us, st);
    run_variant<SwappedHalfK128>("swapped 64x16 k128 pp", p, {}, ref, blas_us, st);
    run_variant<SwappedStreamK>("swapped stream-K heur.", p, {}, ref, blas_us, st);
    run_variant<SwappedStreamK>("swapped split-K 2", p, {2, true}, ref, blas_us, st);
    run_variant<SwappedStreamK>("swapped split-K 4", p, {4, true}, ref, blas_us, st);
  });
  return 0;
}

#elif defined(SM90_SWEEP_MID)

// Built with -DSM90_SWEEP_MID, the projections of both models at M = 32, 64 and 128 (the 64 x 32
// swapped tile's one-wave rule of 2026-12-04 reaches the first two untimed): what the runtime runs
// against cuBLAS, and at N >= 6144, where no tile "auto" holds keeps up (1.7B gate_up at M = 128:
// 0.74-0.84x), those tiles as clusters whose CTAs share each tile of B by multicast.
int main() {
  std::vector<Projection> const projections = {
      {"1.7b q", 2048, 2048}, {"1.7b kv", 1024, 2048}, {"1.7b gate_up", 6144, 2048}, {"1.7b down", 2048, 6144},
      {"8b q", 4096, 4096},   {"8b kv", 1024, 4096},   {"8b gate_up", 12288, 4096}, {"8b down", 4096, 12288},
  };
  std::vector<std::string> names;
  std::vector<Shape> shapes;
  projection_shapes(projections, {32, 64, 128}, names, shapes);
  using SmallPair = Sm90Gemm<T, true, 64, 64, void, true, 2, 1>;
  using MidPair = Sm90GemmSwapped<T, 64, 32, 128, void, true, 2>;
  using MidQuad = Sm90GemmSwapped<T, 64, 32, 128, void, true, 4>;
  using HalfPair = Sm90GemmSwapped<T, 64, 64, 128, void, true, 2>;
  using Wide96 = Sm90Gemm<T, true, 64, 96, void, true>;
  sweep(shapes, [](Problem& p, T* ref, double blas_us, cudaStream_t st) {
    run_runtime(p, ref, blas_us, st);
    // cuBLAS's tile at M = 128 on 1.7B's gate_up (96 x 64 in its view; the near sweep: 0.90x against
    // the 64 x 64 tile's 0.76x), on every row.
    run_variant<Wide96>("64x96 pp", p, {}, ref, blas_us, st);
    if (p.n < 6144) return;
    run_variant<SmallPair>("64x64 pp cluster 2x1", p, {}, ref, blas_us, st);
    run_variant<MidPair>("swapped 64x32 cluster 1x2", p, {}, ref, blas_us, st);
    run_variant<MidQuad>("swapped 64x32 cluster 1x4", p, {}, ref, blas_us, st);
    run_variant<HalfPair>("swapped 64x64 cluster 1x2", p, {}, ref, blas_us, st);
  });
  return 0;
}

#elif defined(SM90_SWEEP_NEAR)

int main() {
  std::vector<Shape> const shapes = {
      {"1.7b kv m2048", 2048, 1024, 2048, true},
      {"1.7b gate_up m16", 16, 6144, 2048, true},
      {"1.7b gate_up m128", 128, 6144, 2048, true},
      {"8b kv m32", 32, 1024, 4096, true},
      {"8b gate_up m128", 128, 12288, 4096, true},
  };
  using Narrow = Sm90Gemm<T, true, 128, 64>;
  using Flat = Sm90Gemm<T, true, 64, 128, void, true>;
  using SquareStreamK = Sm90Gemm<T, true, 128, 128, cutlass::gemm::StreamKScheduler>;
  using NarrowStreamK = Sm90Gemm<T, true, 128, 64, cutlass::gemm::StreamKScheduler>;
  using SquareM2 = Sm90Gemm<T, true, 128, 128, void, false, 2, 1>;
  using Swapped16K64 = Sm90GemmSwapped<T, 64, 16, 64, void, true>;
  using Swapped16StreamK = Sm90GemmSwapped<T, 128, 16, 128, cutlass::gemm::StreamKScheduler>;
  using Swapped32StreamK = Sm90GemmSwapped<T, 128, 32, 128, cutlass::gemm::StreamKScheduler>;
  using Swapped128StreamK = Sm90GemmSwapped<T, 128, 128, 64, cutlass::gemm::StreamKScheduler>;
  using Swapped128 = Sm90GemmSwapped<T, 64, 128, 64, void, true>;
  // cuBLAS's own picks (bench/results/cublas-kernels-nvidia-h200-2026-12-04.txt, its column-major
  // view: its M is our N): kv at M = 2048 on 128 x 128 as clusters sharing the tile of A; gate_up at
  // M = 16 on 64 x 16 tiles of 16 stages as 4 x 1 clusters sharing A; at M = 128 on 96 x 64 tiles
  // as 1 x 2 clusters sharing B (for us: 64 x 96 tiles, two M tiles a cluster); 8B's at 192 x 64.
  using SquareN2 = Sm90Gemm<T, true, 128, 128, void, false, 1, 2>;
  using Swapped16Quad = Sm90GemmSwapped<T, 64, 16, 64, void, true, 1, 4>;
  using Swapped16K128Quad = Sm90GemmSwapped<T, 64, 16, 128, void, true, 1, 4>;
  using Wide96 = Sm90Gemm<T, true, 64, 96, void, true>;
  using Wide96Pair = Sm90Gemm<T, true, 64, 96, void, true, 2, 1>;
  using Wide192Pair = Sm90Gemm<T, true, 64, 192, void, true, 2, 1>;
  sweep(shapes, [](Problem& p, T* ref, double blas_us, cudaStream_t st) {
    run_runtime(p, ref, blas_us, st);
    if (p.m == 2048) {
      run_variant<SquareN2>("128x128 cluster 1x2", p, {}, ref, blas_us, st);
      run_variant<Narrow>("128x64 coop", p, {}, ref, blas_us, st);
      run_variant<Flat>("64x128 pp", p, {}, ref, blas_us, st);
      run_variant<SquareM2>("128x128 cluster 2x1", p, {}, ref, blas_us, st);
      run_variant<SquareStreamK>("128x128 stream-K heur.", p, {}, ref, blas_us, st);
      run_variant<SquareStreamK>("128x128 split-K 2", p, {2, true}, ref, blas_us, st);
      for (int swizzle : {2, 4}) {
        char label[40];
        std::snprintf(label, sizeof label, "128x128 swizzle %d", swizzle);
        run_variant<Sm90Gemm<T, true>>(label, p, {1, true, swizzle}, ref, blas_us, st);
      }
      return;
    }
    if (p.m == 16) {
      run_variant<Swapped16Quad>("swapped 64x16 k64 pp 4x1", p, {}, ref, blas_us, st);
      run_variant<Swapped16K128Quad>("swapped 64x16 k128 pp 4x1", p, {}, ref, blas_us, st);
      run_variant<Swapped16K64>("swapped 64x16 k64 pp", p, {}, ref, blas_us, st);
      run_variant<Swapped16StreamK>("swapped 128x16 stream-K", p, {}, ref, blas_us, st);
      run_variant<Swapped16StreamK>("swapped 128x16 split-K 2", p, {2, true}, ref, blas_us, st);
      run_variant<Swapped16StreamK>("swapped 128x16 split-K 3", p, {3, true}, ref, blas_us, st);
      return;
    }
    if (p.m == 32) {
      run_variant<Swapped32StreamK>("swapped 128x32 stream-K", p, {}, ref, blas_us, st);
      run_variant<Swapped32StreamK>("swapped 128x32 split-K 4", p, {4, true}, ref, blas_us, st);
      run_variant<Swapped16StreamK>("swapped 128x16 stream-K", p, {}, ref, blas_us, st);
      run_variant<Swapped16StreamK>("swapped 128x16 split-K 8", p, {8, true}, ref, blas_us, st);
      return;
    }
    run_variant<Wide96>("64x96 pp", p, {}, ref, blas_us, st);
    run_variant<Wide96Pair>("64x96 pp cluster 2x1", p, {}, ref, blas_us, st);
    run_variant<Wide192Pair>("64x192 pp cluster 2x1", p, {}, ref, blas_us, st);
    if (p.n > 6144) return;
    run_variant<Narrow>("128x64 coop", p, {}, ref, blas_us, st);
    run_variant<NarrowStreamK>("128x64 stream-K heur.", p, {}, ref, blas_us, st);
    run_variant<NarrowStreamK>("128x64 split-K 2", p, {2, true}, ref, blas_us, st);
    run_variant<SquareStreamK>("128x128 stream-K heur.", p, {}, ref, blas_us, st);
    run_variant<SquareStreamK>("128x128 split-K 2", p, {2, true}, ref, blas_us, st);
    run_variant<SquareStreamK>("128x128 split-K 3", p, {3, true}, ref, blas_us, st);
    run_variant<Swapped128>("swapped 64x128 k64 pp", p, {}, ref, blas_us, st);
    run_variant<Swapped128StreamK>("swapped 128x128 stream-K", p, {}, ref, blas_us, st);
    run_variant<Swapped128StreamK>("swapped 128x128 split-K 2", p, {2, true}, ref, blas_us, st);
  });
  return 0;
}

#elif defined(SM90_SWEEP_LARGE)

/// The large variants for one B layout: tiles x clusters, then the swizzles of the two that
/// "auto" takes for such shapes.
template <bool BKMajor>
void large_variants(Problem& p, T* ref, double blas_us, cudaStream_t st) {
  using Wide = Sm90Gemm<T, BKMajor, 128, 256>;
  using WideM2 = Sm90Gemm<T, BKMajor, 128, 256, void, false, 2, 1>;
  using WideN2 = Sm90Gemm<T, BKMajor, 128, 256, void, false, 1, 2>;
  using Square = Sm90Gemm<T, BKMajor, 128, 128>;
  using SquareM2 = Sm90Gemm<T, BKMajor, 128, 128, void, false, 2, 1>;
  using Tall = Sm90Gemm<T, BKMajor, 256, 128>;
  using TallN2 = Sm90Gemm<T, BKMajor, 256, 128, void, false, 1, 2>;
  run_variant<Wide>("128x256 cluster 1x1", p, {}, ref, blas_us, st);
  run_variant<WideM2>("128x256 cluster 2x1", p, {}, ref, blas_us, st);
  run_variant<WideN2>("128x256 cluster 1x2", p, {}, ref, blas_us, st);
  run_variant<Square>("128x128 cluster 1x1", p, {}, ref, blas_us, st);
  run_variant<SquareM2>("128x128 cluster 2x1", p, {}, ref, blas_us, st);
  run_variant<Tall>("256x128 cluster 1x1", p, {}, ref, blas_us, st);
  run_variant<TallN2>("256x128 cluster 1x2", p, {}, ref, blas_us, st);
  for (int swizzle : {2, 4, 8}) {
    char label[40];
    std::snprintf(label, sizeof label, "128x256 1x1 swizzle %d", swizzle);
    run_variant<Wide>(label, p, {1, true, swizzle}, ref, blas_us, st);
    std::snprintf(label, sizeof label, "128x256 2x1 swizzle %d", swizzle);
    run_variant<WideM2>(label, p, {1, true, swizzle}, ref, blas_us, st);
  }
}

int main() {
  std::vector<Shape> const shapes = {
      {"square 4096", 4096, 4096, 4096, false},         {"square 8192", 8192, 8192, 8192, false},
      {"8b gate_up m2048", 2048, 12288, 4096, true},   {"8b down m2048", 2048, 4096, 12288, true},
      {"1.7b gate_up m2048", 2048, 6144, 2048, true},
  };
  sweep(shapes, [](Problem& p, T* ref, double blas_us, cudaStream_t st) {
    if (p.b_k_major) {
      large_variants<true>(p, ref, blas_us, st);
    } else {
      large_variants<false>(p, ref, blas_us, st);
    }
  });
  return 0;
}

#else

int main() {
  std::vector<Shape> const shapes = {
      {"1.7b q", 128, 2048, 2048, true},      {"1.7b kv", 128, 1024, 2048, true},
      {"1.7b gate_up", 128, 6144, 2048, true}, {"1.7b down", 128, 2048, 6144, true},
      {"8b q", 128, 4096, 4096, true},        {"8b kv", 128, 1024, 4096, true},
      {"8b gate_up", 128, 12288, 4096, true}, {"8b down", 128, 4096, 12288, true},
  };
  using Narrow = Sm90Gemm<T, true, 128, 64>;
  using PingpongSmall = Sm90Gemm<T, true, 64, 64, void, true>;
  // The swapped TN GEMM (C^T = B . A^T): B's rows on the tile's 64-row M mode, A's 128 rows on its
  // N mode in 16 to 128-row slices, so a short N still gives every SM tiles (the 2026-11-30 verdicts
  // on the unswapped tiles and split-K are in bench/results/sm90-sweep-m128-nvidia-h200-2026-11-30.txt).
  using Swapped16 = Sm90GemmSwapped<T, 64, 16, 128, void, true>;
  using Swapped32 = Sm90GemmSwapped<T, 64, 32, 128, void, true>;
  using Swapped64 = Sm90GemmSwapped<T, 64, 64, 128, void, true>;
  using Swapped32K64 = Sm90GemmSwapped<T, 64, 32, 64, void, true>;
  using Swapped128 = Sm90GemmSwapped<T, 64, 128, 64, void, true>;
  sweep(shapes, [](Problem& p, T* ref, double blas_us, cudaStream_t st) {
    run_variant<Narrow>("128x64 data-parallel", p, {}, ref, blas_us, st);
    run_variant<PingpongSmall>("64x64 ping-pong", p, {}, ref, blas_us, st);
    run_variant<Swapped16>("swapped 64x16 k128 pp", p, {}, ref, blas_us, st);
    run_variant<Swapped32>("swapped 64x32 k128 pp", p, {}, ref, blas_us, st);
    run_variant<Swapped32K64>("swapped 64x32 k64 pp", p, {}, ref, blas_us, st);
    run_variant<Swapped64>("swapped 64x64 k128 pp", p, {}, ref, blas_us, st);
    run_variant<Swapped128>("swapped 64x128 k64 pp", p, {}, ref, blas_us, st);
  });
  return 0;
}

#endif
