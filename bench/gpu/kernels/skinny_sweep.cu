// Sweep of the skinny B (N, K) GEMV's launch shape on Qwen3-1.7B's decode projections, M = 1,
// bf16, as a decode step runs them: each GEMV follows a short kernel that writes its A (an RMS
// norm of one row), both launched with programmatic dependent launch and replayed from a CUDA
// graph. Variants: the register kernel's rows per warp R and packs in flight per lane U, and the
// bulk-copy kernel (gemm_skinny_bulk.cuh, cut as the atom would cut it at any size). Prints the
// GEMV's share of each step (the step's time less the norm-only step's) and the TB/s of weight
// streaming that share implies, then its time per call in a chain of itself ("alone", as
// bench/gpu times a lone GEMM: each launches while the one before runs, its CTAs waiting on the
// SMs at the PDL wait). Weights are random (Hopper compresses constant data, so memset weights
// read faster than real ones) and rotate through copies larger than L2.
// `sweep prefetch` instead times each GEMV behind a latency-bound stretch (a spinning CTA standing
// in for attention or rope) three ways: as it is, with its weights prefetched into L2 when the
// stretch starts, and with `settled` B (its CTAs load their first packs before the PDL wait).
// `sweep check` compares the bulk kernel's results with the register kernel's on each shape;
// `sweep pair` times down behind gate/up launched several ways (pair_sweep); `sweep resident`, the
// same pair behind a stretch that prefetches down's weights into L2 (resident_sweep); `sweep chain`,
// the pair as one kernel (skinny_chain.cuh) against its two launches (chain_sweep); `sweep wave`,
// each projection as one wave of 16-warp CTAs (skinny_wave.cuh) against the atom's R2U4 (wave_sweep);
// `sweep split`, the MLP as one kernel split over the intermediate dimension (skinny_split.cuh)
// and the runtime's gemm_chain in several ChainShapes against its three launches, alone, behind
// o_proj and inside a layer (split_sweep); `sweep barrier`, a grid barrier's cost against a
// kernel boundary's (barrier_sweep); `sweep attention`, Qwen3-1.7B's decode attention at short context: the atom's split-KV clusters, the
// same clusters with rank 0 taking every key (solo), one CTA a kv head (decode_attention_small.cuh).
//
//   nvcc -std=c++17 -O3 -gencode arch=compute_90a,code=sm_90a --expt-relaxed-constexpr -DNDEBUG \
//        -I cpp/runtime/include -I <cutlass>/include bench/gpu/kernels/skinny_sweep.cu -o /tmp/sweep
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include <cuda_runtime.h>

#include <tilefoundry/runtime/cuda/atoms/attention.cuh>
#include <tilefoundry/runtime/cuda/atoms/gemm_skinny.cuh>

#include "decode_attention_small.cuh"
#include "random_fill.cuh"
#include "skinny_chain.cuh"
#include "skinny_split.cuh"
#include "skinny_wave.cuh"

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

struct SiluMul {  // gate/up's epilogue in a decode layer: h = silu(gate) * up, down's A
  T* h;
  /// As the runtime's gemm_chain calls it.
  __device__ void operator()(int64_t, int64_t n, T const (&c)[2]) const {
    float const g = static_cast<float>(c[0]);
    h[n] = T(g / (1.0f + __expf(-g)) * static_cast<float>(c[1]));
  }
  /// As the skinny GEMV calls it.
  __device__ void operator()(int, int64_t m, int64_t n, int64_t, T const (&c)[2]) const { (*this)(m, n, c); }
};

struct AddResidual {  // down's epilogue in a decode layer: the residual stream plus its result
  T const* r;
  T* c;
  __device__ void operator()(int, int64_t, int64_t n, int64_t, T const (&v)[1]) const {
    c[n] = T(static_cast<float>(r[n]) + static_cast<float>(v[0]));
  }
};

struct Collect {  // every member's results as f32, member by member
  float* c[kSkinnyBtMembers];
  template <int G>
  __device__ void operator()(int s, int64_t, int64_t n, int64_t, T const (&v)[G]) const {
#pragma unroll
    for (int g = 0; g < G; ++g) c[G == 1 ? s : g][n] = static_cast<float>(v[g]);
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

/// One projection's weights (copies that rotate past L2) and its A row, on the device.
struct Bench {
  Shape s;
  std::vector<T*> weights_;
  T* A = nullptr;
  size_t bytes = 0;

  explicit Bench(Shape shape) : s(std::move(shape)) {
    size_t elems = 0;
    for (int m = 0; m < members(); ++m) elems += rows(m) * s.k;
    bytes = elems * sizeof(T);
    int const copies = static_cast<int>((400ull << 20) / bytes) + 2;
    for (int c = 0; c < copies; ++c) {
      T* w;
      cudaMalloc(&w, bytes);
      fill_random<<<1024, 256>>>(w, elems, reinterpret_cast<uintptr_t>(w));
      weights_.push_back(w);
    }
    cudaMalloc(&A, s.k * sizeof(T));
    fill_random<<<16, 256>>>(A, s.k, 7);
  }
  ~Bench() {
    for (auto w : weights_) cudaFree(w);
    cudaFree(A);
  }
  int members() const { return s.G == 1 ? static_cast<int>(s.n.size()) : s.G; }
  int64_t rows(int m) const { return s.G == 1 ? s.n[m] : s.n[0]; }
  T* weights(int i) const { return weights_[i % weights_.size()]; }
  /// The launch's rows: members end to end (G = 1) or side by side.
  SkinnyBtRows<T> layout() const {
    SkinnyBtRows<T> r{};
    int64_t end = 0;
    for (int m = 0; m < members(); ++m) r.end[m] = s.G == 1 ? (end += rows(m)) : rows(0);
    r.count = members();
    return r;
  }
  /// Points each member's B into weight copy i.
  void point(SkinnyBtRows<T>& r, int i, bool settled) const {
    int64_t off = 0;
    for (int m = 0; m < members(); ++m) {
      r.B[m] = weights(i) + off;
      off += rows(m) * s.k;
    }
    r.settled = settled;
  }
};

/// Raises `smem` so that at most `per_sm` CTAs of `kernel` fit an SM, asking for shared memory
/// they do not use, and opts `kernel` into it; unchanged where no more would fit anyway.
template <class Kernel>
cudaError_t skinny_cap_ctas(Kernel kernel, int per_sm, size_t& smem) {
  int dev = 0, sm_bytes = 0, fit = 0;
  cudaError_t err = cudaGetDevice(&dev);
  if (err == cudaSuccess) err = cudaDeviceGetAttribute(&sm_bytes, cudaDevAttrMaxSharedMemoryPerMultiprocessor, dev);
  if (err == cudaSuccess) err = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&fit, kernel, kSkinnyBtWarps * 32, smem);
  if (err != cudaSuccess) return err;
  size_t const pad = static_cast<size_t>(sm_bytes) / (per_sm + 1) + 1;  // per_sm + 1 CTAs overflow the SM
  if (fit <= per_sm || pad <= smem) return cudaSuccess;
  err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(pad));
  if (err == cudaSuccess) smem = pad;
  return err;
}

/// The GEMV of `bench` with launch shape R x U: `launch(i, ...)` runs it on weight copy i.
template <int G, int R, int U>
struct Gemv {
  Bench const& bench;
  SkinnyBtRows<T> rows;
  dim3 grid;

  explicit Gemv(Bench const& b) : bench(b), rows(b.layout()) {
    grid = dim3(static_cast<unsigned>((rows.template total<G>() + kSkinnyBtWarps * R - 1) / (kSkinnyBtWarps * R)));
  }
  T* weights(int i) const { return bench.weights(i); }
  template <class Out = Sink>
  void launch(int i, cudaStream_t st, bool settled = false, Out out = {}) {
    bench.point(rows, i, settled);
    launch_kernel(gemm_skinny_nk<T, 1, G, R, U, Out>, grid, dim3(kSkinnyBtWarps * 32), 0, st,
                  static_cast<T const*>(bench.A), rows, int64_t(1), bench.s.k, out, NoPrologue{});
  }
  /// The settled launch with PDL or without it, holding at most `per_sm` CTAs an SM (0: as many as
  /// fit) by asking for shared memory it does not use.
  template <class Out = Sink>
  void launch_as(int i, cudaStream_t st, bool pdl, int per_sm, Out out = {}) {
    bench.point(rows, i, true);
    auto* kernel = gemm_skinny_nk<T, 1, G, R, U, Out>;
    size_t pad = 0;
    if (per_sm > 0) skinny_cap_ctas(kernel, per_sm, pad);
    T const* a = bench.A;
    if (pdl) {
      launch_kernel(kernel, grid, dim3(kSkinnyBtWarps * 32), pad, st, a, rows, int64_t(1), bench.s.k, out,
                    NoPrologue{});
    } else {
      kernel<<<grid, kSkinnyBtWarps * 32, pad, st>>>(a, rows, int64_t(1), bench.s.k, out, NoPrologue{});
    }
  }
};

/// The same GEMV on the bulk-copy kernel (gemm_skinny_bulk.cuh), cut as the atom cuts it.
template <int G>
struct BulkGemv {
  Bench const& bench;
  SkinnyBtRows<T> rows;
  BulkPlan plan;

  explicit BulkGemv(Bench const& b)
      : bench(b), rows(b.layout()), plan(skinny_bulk_plan<T, G>(rows, b.s.k, 0)) {}  // past kBulkMinBytes or not
  T* weights(int i) const { return bench.weights(i); }
  template <class Out = Sink>
  void launch(int i, cudaStream_t st, bool settled = false, Out out = {}) {
    bench.point(rows, i, settled);
    skinny_bulk_rows<T, G>(plan, static_cast<T const*>(bench.A), rows, bench.s.k, out, st);
  }
};

template <class Gemv>
void variant(Bench const& bench, float norm_us, char const* label) {
  Gemv gemv(bench);
  float const us = per_step([&](int i, cudaStream_t st) {
    launch_kernel(norm_row, dim3(1), dim3(256), 0, st, bench.A, bench.s.k);
    gemv.launch(i, st);
  }) - norm_us;
  float const alone = per_step([&](int i, cudaStream_t st) { gemv.launch(i, st); });
  std::printf("  %s %5.1f us %4.2f (alone %5.1f)", label, us, bench.bytes / (us * 1e6), alone);
}

template <int G>
void sweep(Shape const& s) {
  Bench const bench(s);
  float const norm_us = per_step([&](int, cudaStream_t st) {
    launch_kernel(norm_row, dim3(1), dim3(256), 0, st, bench.A, s.k);
  });
  std::printf("%-8s %6.1f MB (norm alone %.1f us):", s.name, bench.bytes / 1e6, norm_us);
  variant<Gemv<G, 2, 4>>(bench, norm_us, "R2U4");
  variant<Gemv<G, 4, 2>>(bench, norm_us, "R4U2");
  BulkPlan const plan = BulkGemv<G>(bench).plan;
  std::printf("  bulk RU%d x%d", plan.ru, plan.stages);
  if (plan.ru > 0) variant<BulkGemv<G>>(bench, norm_us, "");
  std::printf("  (TB/s)\n");
}

// ---------------------------------------------------------------- L2 prefetch across kernels

/// Prefetches `bytes` of `w` into L2 across the grid (`prefetch.global.L2::evict_last`, or
/// `evict_normal` when `!last`, a 128-byte line a thread), then CTA 0 stands in for a
/// latency-bound kernel (attention, rope) for `spin_ns`; the others exit.
/// (`cp.async.bulk.prefetch.L2` in 64 KB pieces was tried too: the GEMV behind it took 35-80 us,
/// the prefetch queue holding its loads back.)
__global__ void prefetch_then_spin(T const* w, size_t bytes, int64_t spin_ns, bool last) {
  pdl_begin();
  char const* base = reinterpret_cast<char const*>(w);
  size_t const thread = blockIdx.x * size_t(blockDim.x) + threadIdx.x;
  size_t const threads = gridDim.x * size_t(blockDim.x);
  for (size_t off = thread * 128; off < bytes; off += threads * 128) {
    if (last)
      asm volatile("prefetch.global.L2::evict_last [%0];" ::"l"(base + off) : "memory");
    else
      asm volatile("prefetch.global.L2::evict_normal [%0];" ::"l"(base + off) : "memory");
  }
  if (blockIdx.x != 0) return;
  uint64_t t0;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  for (;;) {
    uint64_t t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    if (static_cast<int64_t>(t - t0) >= spin_ns) break;
  }
}

/// A GEMV after a latency-bound stretch of `spin_ns`: its share of the step in microseconds as
/// it is, with its weights prefetched into L2 at the stretch's start, and with `settled` B (the
/// GEMV's CTAs load their head of B before the PDL wait, while the stretch runs).
template <class Gemv>
void prefetch_variant(Bench const& bench, int64_t spin_ns) {
  Gemv gemv(bench);
  auto step = [&](bool prefetch, bool settled) {
    return [&, prefetch, settled](int i, cudaStream_t st) {
      launch_kernel(prefetch_then_spin, dim3(132), dim3(256), 0, st, static_cast<T const*>(gemv.weights(i)),
                    prefetch ? bench.bytes : size_t(0), spin_ns, true);
      gemv.launch(i, st, settled);
    };
  };
  float const spin = per_step([&](int, cudaStream_t st) {
    launch_kernel(prefetch_then_spin, dim3(132), dim3(256), 0, st, static_cast<T const*>(bench.A), size_t(0), spin_ns, true);
  });
  float const cold = per_step(step(false, false)) - spin;
  float const lines = per_step(step(true, false)) - spin;
  float const settled = per_step(step(false, true)) - spin;
  std::printf("  spin %4.1f us: GEMV %5.1f, L2 prefetch %5.1f, settled %5.1f", spin, cold, lines, settled);
}

template <int G, int R, int U>
void prefetch_sweep(Shape const& s) {
  Bench const bench(s);
  std::printf("%-8s %6.1f MB R%dU%d:", s.name, bench.bytes / 1e6, R, U);
  for (int64_t ns : {1000, 3000, 6000, 10000}) prefetch_variant<Gemv<G, R, U>>(bench, ns);
  std::printf("\n%-8s %6.1f MB bulk:", s.name, bench.bytes / 1e6);
  if (BulkGemv<G>(bench).plan.ru == 0) std::printf(" no cut");
  else
    for (int64_t ns : {1000, 3000, 6000, 10000}) prefetch_variant<BulkGemv<G>>(bench, ns);
  std::printf("\n");
}

/// `other`'s results against the register kernel's on weight copy 1 (bf16 results: they may
/// differ by a rounding step, their sums being added in other orders); `label` names `other`.
template <int G, class Other>
void compare(Bench const& bench, Other& other, char const* label) {
  Gemv<G, 2, 4> ref(bench);
  int64_t total = 0;
  for (int m = 0; m < bench.members(); ++m) total += bench.rows(m);
  float *a, *b;
  cudaMalloc(&a, total * sizeof(float));
  cudaMalloc(&b, total * sizeof(float));
  Collect ca{}, cb{};
  int64_t off = 0;
  for (int m = 0; m < bench.members(); ++m) {
    ca.c[m] = a + off;
    cb.c[m] = b + off;
    off += bench.rows(m);
  }
  cudaMemset(b, 0xff, total * sizeof(float));  // NaN where `other` writes nothing
  ref.launch(1, nullptr, false, ca);
  other.launch(1, nullptr, true, cb);
  std::vector<float> ha(total), hb(total);
  cudaMemcpy(ha.data(), a, total * sizeof(float), cudaMemcpyDeviceToHost);
  cudaMemcpy(hb.data(), b, total * sizeof(float), cudaMemcpyDeviceToHost);
  double worst = 0, scale = 0;
  int64_t bad = 0;
  for (int64_t i = 0; i < total; ++i) {
    double const d = std::abs(double(ha[i]) - double(hb[i]));
    if (!(d <= 0.02 * (std::abs(ha[i]) + 1))) ++bad;
    worst = d > worst ? d : worst;
    scale = std::abs(ha[i]) > scale ? std::abs(ha[i]) : scale;
  }
  std::printf("check %-8s %s: %lld of %lld off (max diff %.3g, max |c| %.3g)\n", bench.s.name, label,
              static_cast<long long>(bad), static_cast<long long>(total), worst, scale);
  cudaFree(a);
  cudaFree(b);
}

/// The bulk kernel's results against the register-streaming kernel's.
template <int G>
void check(Shape const& s) {
  Bench const bench(s);
  BulkGemv<G> bulk(bench);
  if (bulk.plan.ru == 0) {
    std::printf("check %-8s: no bulk cut\n", s.name);
    return;
  }
  char label[32];
  std::snprintf(label, sizeof label, "bulk RU%d x%d", bulk.plan.ru, bulk.plan.stages);
  compare<G>(bench, bulk, label);
}

/// The MLP pair of a decode layer: the RMS norm, gate/up (settled, with PDL), then down launched
/// several ways. In the decode step (eighth session) down added 13.8 us a layer after gate/up,
/// against 10.6 us alone: its CTAs, launched early, become resident as gate/up's leave. Is it
/// where they land (up to 4 an SM on the SMs that free first), or the early start itself?
void pair_sweep() {
  Bench const gu({"gate_up", 2, {6144}, 2048});
  Bench const dn({"down", 1, {2048}, 6144});
  Gemv<2, 2, 4> gate_up(gu);
  Gemv<1, 2, 4> down(dn);
  float const norm = per_step([&](int, cudaStream_t st) {
    launch_kernel(norm_row, dim3(1), dim3(256), 0, st, gu.A, gu.s.k);
  });
  float const first = per_step([&](int i, cudaStream_t st) {
    launch_kernel(norm_row, dim3(1), dim3(256), 0, st, gu.A, gu.s.k);
    gate_up.launch(i, st, true);
  });
  std::printf("pair: norm %.1f us, norm + gate/up %.1f us; down's share after them:\n", norm, first);
  struct Way {
    char const* name;
    bool pdl;
    int per_sm;
  };
  for (Way const w : {Way{"PDL (as in decode)", true, 0}, Way{"no PDL", false, 0},
                      Way{"PDL, <= 2 CTAs an SM", true, 2}, Way{"PDL, <= 3 CTAs an SM", true, 3},
                      Way{"no PDL, <= 2 CTAs an SM", false, 2}}) {
    float const us = per_step([&](int i, cudaStream_t st) {
      launch_kernel(norm_row, dim3(1), dim3(256), 0, st, gu.A, gu.s.k);
      gate_up.launch(i, st, true);
      down.launch_as(i, st, w.pdl, w.per_sm);
    });
    std::printf("  %-26s %5.1f us\n", w.name, us - first);
  }
  Gemv<1, 1, 4> down_r1(dn);  // 512 CTAs: finer placement
  float const r1 = per_step([&](int i, cudaStream_t st) {
    launch_kernel(norm_row, dim3(1), dim3(256), 0, st, gu.A, gu.s.k);
    gate_up.launch(i, st, true);
    down_r1.launch_as(i, st, true, 0);
  });
  std::printf("  %-26s %5.1f us\n", "PDL, R1U4 (512 CTAs)", r1 - first);
  // As a decode layer runs them: gate/up writes down's A through silu * mul, and down adds its
  // result to the residual stream (in the step, down's marginal is 13.7 us a layer against the
  // 9.1-9.5 above: are the epilogues the difference? 2026-12-01: 8.9 us, they are not).
  T* x;
  cudaMalloc(&x, 2 * dn.s.n[0] * sizeof(T));
  fill_random<<<16, 256>>>(x, 2 * dn.s.n[0], 11);
  AddResidual const add{x, x + dn.s.n[0]};
  auto decode_like = [&](int i, cudaStream_t st) {
    launch_kernel(norm_row, dim3(1), dim3(256), 0, st, gu.A, gu.s.k);
    gate_up.launch(i, st, true, SiluMul{dn.A});
  };
  float const first_h = per_step(decode_like);
  float const epilogues = per_step([&](int i, cudaStream_t st) {
    decode_like(i, st);
    down.launch_as(i, st, true, 0, add);
  });
  std::printf("  %-26s %5.1f us (norm + gate/up writing h: %.1f us)\n", "PDL, both epilogues", epilogues - first_h,
              first_h);
  cudaFree(x);
}

/// The MLP pair behind a latency-bound stretch (attention in a decode layer) that prefetches down's
/// weights into L2 while it runs: does down then read them from L2 after gate/up streamed 50 MB?
/// (2026-12-01: down's share fell by 0.3-1.1 us and the step grew by 1.4-3.1 us; also with B
/// loads hinted evict_first, a throwaway build: bench/results/skinny-sweep-resident-*.)
void resident_sweep(int64_t spin_ns) {
  Bench const gu({"gate_up", 2, {6144}, 2048});
  Bench const dn({"down", 1, {2048}, 6144});
  Gemv<2, 2, 4> gate_up(gu);
  Gemv<1, 2, 4> down(dn);
  auto head = [&](int i, cudaStream_t st, size_t bytes, bool last) {
    launch_kernel(prefetch_then_spin, dim3(132), dim3(256), 0, st, static_cast<T const*>(dn.weights(i)), bytes,
                  spin_ns, last);
    launch_kernel(norm_row, dim3(1), dim3(256), 0, st, gu.A, gu.s.k);
    gate_up.launch(i, st, true);
  };
  struct Way {
    char const* name;
    size_t bytes;
    bool last;
  };
  std::printf("resident (spin %.1f us):", spin_ns / 1e3);
  for (Way const w : {Way{"no prefetch", 0, false}, Way{"down evict_normal", dn.bytes, false},
                      Way{"down evict_last", dn.bytes, true}}) {
    float const first = per_step([&](int i, cudaStream_t st) { head(i, st, w.bytes, w.last); });
    float const both = per_step([&](int i, cudaStream_t st) {
      head(i, st, w.bytes, w.last);
      down.launch_as(i, st, true, 0);
    });
    std::printf("  %s: step %5.1f us, down %4.1f", w.name, both, both - first);
  }
  std::printf("\n");
}

/// Copies n bf16 values of the device to the host as floats.
std::vector<float> host_floats(T const* d, int64_t n) {
  std::vector<T> raw(n);
  cudaMemcpy(raw.data(), d, n * sizeof(T), cudaMemcpyDeviceToHost);
  std::vector<float> out(n);
  for (int64_t i = 0; i < n; ++i) out[i] = static_cast<float>(raw[i]);
  return out;
}

/// Prints how many of `got` differ from `ref` by more than 2% (of |ref| + 1), and the largest gap.
void compare_floats(char const* what, std::vector<float> const& ref, std::vector<float> const& got) {
  double worst = 0;
  int64_t bad = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    double const d = std::abs(double(ref[i]) - double(got[i]));
    if (!(d <= 0.02 * (std::abs(ref[i]) + 1))) ++bad;
    worst = d > worst ? d : worst;
  }
  std::printf("  check %s: %lld of %zu off (max diff %.3g)\n", what, static_cast<long long>(bad), ref.size(), worst);
}

/// The MLP pair of a decode layer (norm, gate/up writing h through silu * mul, down adding to the
/// residual stream) as two launches and as one (gemm_skinny_chain.cuh, down's slice copied into
/// shared memory before or after the PDL wait); then the one launch's h and result against the
/// two launches'.
void chain_sweep() {
  Bench const gu({"gate_up", 2, {6144}, 2048});
  Bench const dn({"down", 1, {2048}, 6144});
  Gemv<2, 2, 4> gate_up(gu);
  Gemv<1, 2, 4> down(dn);
  int64_t const n2 = dn.s.n[0];
  T* x;
  cudaMalloc(&x, 2 * n2 * sizeof(T));
  fill_random<<<16, 256>>>(x, 2 * n2, 11);
  AddResidual const add{x, x + n2};
  chain::ChainBarrier* bar;
  cudaMalloc(&bar, sizeof(chain::ChainBarrier));
  cudaMemset(bar, 0, sizeof(chain::ChainBarrier));
  DeviceFacts const facts = device_facts();
  chain::ChainPlan const plan = chain::skinny_chain_plan(gu.s.n[0], gu.s.k, n2, dn.s.k, sizeof(T), facts.sms, facts.smem_optin);
  std::printf("chain: grid %d, %lld rows of down a CTA, %zu bytes of shared memory\n", plan.grid,
              static_cast<long long>(plan.rows2), plan.smem);
  if (plan.grid == 0) return;
  auto norm = [&](cudaStream_t st) { launch_kernel(norm_row, dim3(1), dim3(256), 0, st, gu.A, gu.s.k); };
  auto two = [&](int i, cudaStream_t st) {
    norm(st);
    gate_up.launch(i, st, true, SiluMul{dn.A});
    down.launch_as(i, st, true, 0, add);
  };
  auto one = [&](chain::ChainWays ways, uint64_t* stamps = nullptr) {
    return [&, ways, stamps](int i, cudaStream_t st) {
      norm(st);
      SkinnyBtRows<T> rows = gu.layout();
      gu.point(rows, i, true);
      cudaError_t const err = chain::skinny_chain<T, 2, 8>(plan, static_cast<T const*>(gu.A), rows, SiluMul{dn.A},
                                                           static_cast<T const*>(dn.A),
                                                           static_cast<T const*>(dn.weights(i)), n2, bar, ways, add,
                                                           st, stamps);
      if (err != cudaSuccess) std::printf("chain launch: %s\n", cudaGetErrorString(err));
    };
  };
  struct Way {
    char const* name;
    chain::ChainWays ways;
  };
  Way const ways[] = {{"slice before the PDL wait", {true, false, true}},
                      {"slice after it", {false, false, true}},
                      {"after, dynamic rows", {false, true, true}},
                      {"after, dynamic rows, busy barrier", {false, true, false}}};
  float const alone = per_step([&](int, cudaStream_t st) { norm(st); });
  std::printf("  norm %.1f us; norm + gate/up + down: two launches %.1f us\n", alone, per_step(two));
  for (Way const& w : ways) std::printf("    one launch, %-34s %.1f us\n", w.name, per_step(one(w.ways)));
  two(1, nullptr);
  cudaDeviceSynchronize();
  std::vector<float> const h_ref = host_floats(dn.A, dn.s.k), c_ref = host_floats(x + n2, n2);
  cudaMemset(dn.A, 0, dn.s.k * sizeof(T));
  cudaMemset(x + n2, 0, n2 * sizeof(T));
  one(ways[3].ways)(1, nullptr);
  cudaDeviceSynchronize();
  std::vector<float> const h = host_floats(dn.A, dn.s.k), c = host_floats(x + n2, n2);
  compare_floats("h", h_ref, h);
  compare_floats("down + residual", c_ref, c);
  // Where one launch's time goes: each CTA's globaltimer at its phases (one launch, after a norm).
  uint64_t* stamps;
  cudaMalloc(&stamps, plan.grid * 6 * sizeof(uint64_t));
  for (Way const& w : ways) {
    one(w.ways, stamps)(2, nullptr);
    cudaDeviceSynchronize();
    std::vector<uint64_t> t(plan.grid * 6);
    cudaMemcpy(t.data(), stamps, t.size() * sizeof(uint64_t), cudaMemcpyDeviceToHost);
    uint64_t t0 = t[0];
    for (int b = 0; b < plan.grid; ++b) t0 = t[b * 6] < t0 ? t[b * 6] : t0;
    std::printf("  phases (%s), us from the first CTA's start, min / median / max over CTAs:\n", w.name);
    char const* names[6] = {"start", "PDL wait done", "gate/up done", "barrier passed", "slice landed", "end"};
    for (int at = 0; at < 6; ++at) {
      std::vector<double> v;
      for (int b = 0; b < plan.grid; ++b) v.push_back((t[b * 6 + at] - t0) / 1e3);
      std::sort(v.begin(), v.end());
      std::printf("    %-15s %6.2f %6.2f %6.2f\n", names[at], v.front(), v[v.size() / 2], v.back());
    }
  }
  cudaFree(stamps);
  cudaFree(bar);
  cudaFree(x);
}

/// The MLP of a decode layer (norm, gate/up writing h through silu * mul, down adding to the
/// residual stream) as three launches, as one split over the intermediate dimension
/// (skinny_split.cuh), and as the runtime's gemm_chain behind the norm kernel in several
/// ChainShapes. Each is timed alone, behind o_proj's GEMV, and inside a layer: behind o_proj and
/// before the next layer's norm and q/k/v GEMV, whose settled weights load under the MLP's tail
/// where its CTAs find room (the model lost with the chain's one full CTA an SM, 2026-12-05).
/// Then each form's result against the three launches'.
void split_sweep() {
  Bench const op({"o_proj", 1, {2048}, 2048});
  Bench const gu({"gate_up", 2, {6144}, 2048});
  Bench const dn({"down", 1, {2048}, 6144});
  Bench const dn_t({"down_t", 1, {6144}, 2048});  // down transposed, (I, N2): timing only
  Bench const qkv_b({"qkv", 1, {2048, 1024, 1024}, 2048});
  Gemv<1, 2, 4> o_proj(op);
  Gemv<1, 2, 4> qkv(qkv_b);
  Gemv<2, 2, 4> gate_up(gu);
  Gemv<1, 2, 4> down(dn);
  int const I = static_cast<int>(gu.s.n[0]), K1 = static_cast<int>(gu.s.k), N2 = static_cast<int>(dn.s.n[0]);
  T* x;  // the residual stream (r) and the split launch's y
  cudaMalloc(&x, 2 * N2 * sizeof(T));
  fill_random<<<16, 256>>>(x, 2 * N2, 11);
  AddResidual const add{x, x + N2};
  split::SplitWork work{};
  cudaMalloc(&work.acc, N2 * sizeof(float));
  cudaMalloc(&work.count, sizeof(unsigned));
  cudaMemset(work.acc, 0, N2 * sizeof(float));
  cudaMemset(work.count, 0, sizeof(unsigned));
  int const sms = device_facts().sms;
  float* partials;
  cudaMalloc(&partials, 4 * sms * N2 * sizeof(float));
  auto three = [&](int i, cudaStream_t st) {
    launch_kernel(norm_row, dim3(1), dim3(256), 0, st, gu.A, K1);
    gate_up.launch(i, st, true, SiluMul{dn.A});
    down.launch_as(i, st, true, 0, add);
  };
  auto one = [&](auto launch, split::SplitWays ways) {
    return [&, launch, ways](int i, cudaStream_t st) {
      T const* w = gu.weights(i);
      T const* d = ways.down_t ? dn_t.weights(i) : dn.weights(i);
      cudaError_t const err = launch(sms, static_cast<T const*>(gu.A), w, w + int64_t(I) * K1, I, d, N2,
                                     static_cast<T const*>(x), x + N2, work, ways, st);
      if (err != cudaSuccess) std::printf("split launch: %s\n", cudaGetErrorString(err));
    };
  };
  // The runtime's chain (atoms/gemm_chain.cuh) in shape S, behind the norm kernel, as the compiler emits it.
  auto chained = [&](auto shape) {
    using S = decltype(shape);
    return [&](int i, cudaStream_t st) {
      launch_kernel(norm_row, dim3(1), dim3(256), 0, st, gu.A, K1);
      T const* w = gu.weights(i);
      GemmGroup<T> g{};
      g.B[0] = w;
      g.B[1] = w + int64_t(I) * K1;
      g.N[0] = g.N[1] = I;
      g.count = 2;
      g.b_settled = true;
      GemmGroup<T> g2{};
      g2.B[0] = dn.weights(i);
      g2.N[0] = N2;
      g2.count = 1;
      g2.b_settled = true;
      bool ok = false;
      cudaError_t const err = gemm_chain<GemmLayout::rcr, 2, 8, S>(
          static_cast<T const*>(gu.A), g, 1, K1, SiluMul{dn.A}, static_cast<T const*>(dn.A), g2, I,
          split::ResidualAdd<T>{x, x + N2}, partials, st, &ok);
      if (err != cudaSuccess || !ok) std::printf("gemm_chain: %s, chained %d\n", cudaGetErrorString(err), ok);
    };
  };
  auto w8 = split::launch_mlp_split<T, 8, 8, 1>;
  auto w4x2 = split::launch_mlp_split<T, 4, 8, 2>;
  auto w4x3 = split::launch_mlp_split<T, 4, 8, 3>;
  auto w8d4 = split::launch_mlp_split<T, 8, 8, 1, 4>;
  struct Way {
    char const* name;
    std::function<void(int, cudaStream_t)> run;
    bool writes_y;  // its result is compared with the three launches' (not a phase alone, not down_t's weights)
  };
  Way const ways[] = {{"split, 8 warps x 1 an SM", one(w8, {}), true},
                      {"split, 8 warps, no final pass", one(w8, {false}), false},
                      {"split, 8 warps, gate/up only", one(w8, {false, true, false, false}), false},
                      {"split, 8 warps, down only", one(w8, {false, false, true, false}), false},
                      {"split, 8 warps, down + atomics", one(w8, {false, false, true, true}), false},
                      {"split + reduce kernel, 8 warps", one(w8, {false, true, true, false, partials}), true},
                      {"split + reduce kernel, 4 warps x 2", one(w4x2, {false, true, true, false, partials}), true},
                      {"split, 8 warps, down transposed (t)", one(w8, {true, true, true, true, nullptr, true}), false},
                      {"split, 8 warps, (t) down only", one(w8, {false, false, true, false, nullptr, true}), false},
                      {"split + reduce kernel, (t) 8 warps", one(w8, {false, true, true, false, partials, true}), false},
                      {"split, 8 warps, 4 rows of down", one(w8d4, {}), true},
                      {"split, 4 warps x 2 an SM", one(w4x2, {}), true},
                      {"split, 4 warps x 3 an SM", one(w4x3, {}), true},
                      {"chain 8w x1, D8 (the default)", chained(ChainShape<8, 1, 8>{}), true},
                      {"chain 8w x1, D8, regs for 2 (spills)", chained(ChainShape<8, 1, 8, 2>{}), true},
                      {"chain 4w x1, D8", chained(ChainShape<4, 1, 8>{}), true},
                      {"chain 4w x1, D4", chained(ChainShape<4, 1, 4>{}), true},
                      {"chain 4w x2, D8", chained(ChainShape<4, 2, 8>{}), true},
                      {"chain 2w x2, D8", chained(ChainShape<2, 2, 8>{}), true},
                      {"chain 2w x1, D8", chained(ChainShape<2, 1, 8>{}), true}};
  float const o_alone = per_step([&](int i, cudaStream_t st) { o_proj.launch(i, st, true); });
  float const norm_alone = per_step([&](int, cudaStream_t st) {
    launch_kernel(norm_row, dim3(1), dim3(256), 0, st, gu.A, K1);
  });
  auto next_layer = [&](int i, cudaStream_t st) {  // the next layer's norm and q/k/v GEMV
    launch_kernel(norm_row, dim3(1), dim3(256), 0, st, qkv_b.A, qkv_b.s.k);
    qkv.launch(i, st, true);
  };
  float const around = per_step([&](int i, cudaStream_t st) {
    o_proj.launch(i, st, true);
    next_layer(i, st);
  });
  std::printf("split: o_proj %.1f us, norm %.1f us, o_proj + next norm + q/k/v %.1f us; the MLP's share "
              "(alone / behind o_proj / in a layer):\n", o_alone, norm_alone, around);
  auto row = [&](char const* name, std::function<void(int, cudaStream_t)> const& mlp) {
    float const alone = per_step(mlp);
    float const behind = per_step([&](int i, cudaStream_t st) {
      o_proj.launch(i, st, true);
      mlp(i, st);
    });
    float const in_layer = per_step([&](int i, cudaStream_t st) {
      o_proj.launch(i, st, true);
      mlp(i, st);
      next_layer(i, st);
    });
    std::printf("  %-34s %5.1f us  %5.1f us  %5.1f us  (%.2f TB/s behind o_proj)\n", name, alone, behind - o_alone,
                in_layer - around, (gu.bytes + dn.bytes) / ((behind - o_alone) * 1e6));
  };
  row("norm + gate/up + down, 3 launches", three);
  for (Way const& w : ways) row(w.name, w.run);
  // Results: the three launches' y against each split form's.
  three(1, nullptr);
  cudaDeviceSynchronize();
  std::vector<float> const ref = host_floats(x + N2, N2);
  for (Way const& w : ways) {
    if (!w.writes_y) continue;
    cudaMemset(x + N2, 0, N2 * sizeof(T));
    w.run(1, nullptr);
    cudaDeviceSynchronize();
    compare_floats(w.name, ref, host_floats(x + N2, N2));
  }
  cudaFree(partials);
  cudaFree(work.acc);
  cudaFree(work.count);
  cudaFree(x);
}

/// `iters` grid barriers in a row (chain_grid_barrier: one counter, a generation word).
__global__ void barrier_counter(chain::ChainBarrier* bar, int iters) {
  pdl_begin();
  for (int i = 0; i < iters; ++i) chain::chain_grid_barrier(bar, false);
}

/// `iters` grid barriers in a row where each CTA raises a flag of its own (its round count) and
/// its first gridDim.x threads each poll one CTA's flag: no atomic, every arrival in parallel.
/// Every flag holds the same count when a launch starts (the launches before ran as many rounds).
__global__ void barrier_flags(unsigned* flags, int iters) {
  pdl_begin();
  unsigned const base = flags[blockIdx.x];
  for (int i = 1; i <= iters; ++i) {
    __syncthreads();
    if (threadIdx.x == 0) {
      __threadfence();
      asm volatile("st.release.gpu.global.u32 [%0], %1;" ::"l"(flags + blockIdx.x), "r"(base + i) : "memory");
    }
    if (threadIdx.x < gridDim.x) {
      while (static_cast<int>(chain::load_acquire(flags + threadIdx.x) - (base + i)) < 0) {
      }
    }
    __syncthreads();
  }
}

/// An empty PDL kernel: what a kernel boundary costs in a graph, with nothing to do.
__global__ void empty_step() { pdl_begin(); }

/// A grid barrier's cost against a kernel boundary's, one CTA of 512 threads an SM: per_step of
/// kSteps launches of `iters` barriers each, less the same launches without barriers.
void barrier_sweep() {
  int const sms = device_facts().sms;
  chain::ChainBarrier* bar;
  cudaMalloc(&bar, sizeof(chain::ChainBarrier));
  cudaMemset(bar, 0, sizeof(chain::ChainBarrier));
  unsigned* flags;
  cudaMalloc(&flags, sms * sizeof(unsigned));
  cudaMemset(flags, 0, sms * sizeof(unsigned));
  constexpr int kIters = 50;
  float const empty = per_step([&](int, cudaStream_t st) { launch_kernel(empty_step, dim3(sms), dim3(512), 0, st); });
  float const none = per_step([&](int, cudaStream_t st) {
    launch_kernel(barrier_counter, dim3(sms), dim3(512), 0, st, bar, 0);
  });
  float const counter = per_step([&](int, cudaStream_t st) {
    launch_kernel(barrier_counter, dim3(sms), dim3(512), 0, st, bar, kIters);
  });
  float const flag = per_step([&](int, cudaStream_t st) {
    launch_kernel(barrier_flags, dim3(sms), dim3(512), 0, st, flags, kIters);
  });
  std::printf("barrier (%d CTAs of 512): a kernel boundary (empty PDL kernels in a graph) %.2f us; a grid barrier:"
              " counter %.2f us, flags %.2f us\n", sms, empty, (counter - none) / kIters, (flag - none) / kIters);
  cudaFree(flags);
  cudaFree(bar);
}

/// Decode attention of Qwen3-1.7B's shape (Hq 16, Hkv 8, D 128, a 4096-key cache) behind a 1-CTA
/// stand-in, per kv length: the atom (16-CTA clusters at this capacity), the same kernel with its
/// rank 0 taking every key alone (plan.solo), and one small CTA a kv head; outputs compared.
void attention_sweep() {
  constexpr int64_t kHq = 16, kHkv = 8, kD = 128, kSkv = 4096;
  T *q, *k, *v, *out_atom, *out_solo, *out_small, *stand;
  int64_t* kv_len;
  cudaMalloc(&q, kHq * kD * sizeof(T));
  cudaMalloc(&k, kHkv * kSkv * kD * sizeof(T));
  cudaMalloc(&v, kHkv * kSkv * kD * sizeof(T));
  cudaMalloc(&out_atom, kHq * kD * sizeof(T));
  cudaMalloc(&out_small, kHq * kD * sizeof(T));
  cudaMalloc(&out_solo, kHq * kD * sizeof(T));
  cudaMalloc(&stand, 2048 * sizeof(T));
  cudaMalloc(&kv_len, sizeof(int64_t));
  fill_random<<<64, 256>>>(q, kHq * kD, 3);
  fill_random<<<1024, 256>>>(k, kHkv * kSkv * kD, 5);
  fill_random<<<1024, 256>>>(v, kHkv * kSkv * kD, 7);
  fill_random<<<16, 256>>>(stand, 2048, 9);
  float const scale = 1.0f / std::sqrt(static_cast<float>(kD));
  AttentionArgs<T, int64_t> a{q, k, v, out_atom, kv_len, false, 1, kHq, kHkv, 1, kSkv, scale, true};
  void* ws = nullptr;
  size_t const ws_bytes = attention_workspace_bytes(a, kD);
  if (ws_bytes > 0) cudaMalloc(&ws, ws_bytes);
  detail::AttnPlan const plan = detail::attention_plan(a, kD);
  std::printf("attention: atom plan %d splits, cluster %d, %lld keys a split at most, solo up to %d keys\n",
              plan.splits, plan.cluster ? 1 : 0, static_cast<long long>(plan.chunk), plan.solo);
  if (!plan.cluster) {
    std::printf("attention: the plan is not the cluster form; nothing to compare\n");
    return;
  }
  auto stand_in = [&](cudaStream_t st) { launch_kernel(norm_row, dim3(1), dim3(256), 0, st, stand, int64_t{2048}); };
  auto atom_as = [&](int solo, T* out, cudaStream_t st) {  // the plan's cluster kernel, its solo bound set
    AttentionArgs<T, int64_t> b = a;
    b.out = out;
    detail::AttnPlan p = plan;
    p.solo = solo;
    cudaError_t const err = detail::flash_mma_cluster<T, int64_t, detail::FlashKeysConfig<128>>(b, p, st);
    if (err != cudaSuccess) std::printf("atom: %s\n", cudaGetErrorString(err));
  };
  auto atom = [&](cudaStream_t st) { atom_as(0, out_atom, st); };
  auto solo = [&](cudaStream_t st) { atom_as(kSkv, out_solo, st); };
  auto small = [&](cudaStream_t st) {
    small_attention::launch_small<T, kHq / kHkv>(q, k, v, out_small, kv_len, 1, kHkv, kSkv, scale, st);
  };
  auto worst_gap = [&](T const* x, T const* y) {
    std::vector<float> const rx = host_floats(x, kHq * kD), ry = host_floats(y, kHq * kD);
    double worst = 0;
    for (size_t i = 0; i < rx.size(); ++i) worst = std::max(worst, std::abs(double(rx[i]) - double(ry[i])));
    return worst;
  };
  for (int64_t n : {16, 64, 144, 256, 512, 1024, 2048}) {
    cudaMemcpy(kv_len, &n, sizeof(n), cudaMemcpyHostToDevice);
    float const base = per_step([&](int, cudaStream_t st) { stand_in(st); });
    float const t_atom = per_step([&](int, cudaStream_t st) { stand_in(st); atom(st); }) - base;
    float const t_solo = per_step([&](int, cudaStream_t st) { stand_in(st); solo(st); }) - base;
    float const t_small = per_step([&](int, cudaStream_t st) { stand_in(st); small(st); }) - base;
    atom(nullptr);
    solo(nullptr);
    small(nullptr);
    cudaDeviceSynchronize();
    std::printf("  %5lld keys behind a 1-CTA kernel: atom %5.1f us, its rank 0 alone %5.1f us, one small CTA a kv head"
                " %5.1f us; outputs differ from the atom's by %.3g (alone), %.3g (small) at most\n",
                static_cast<long long>(n), t_atom, t_solo, t_small, worst_gap(out_atom, out_solo),
                worst_gap(out_atom, out_small));
  }
  cudaFree(ws);
  cudaFree(kv_len);
  cudaFree(stand);
  cudaFree(out_small);
  cudaFree(out_solo);
  cudaFree(out_atom);
  cudaFree(v);
  cudaFree(k);
  cudaFree(q);
}

/// bench/gpu's decode attention rows (B 1, Hq 32, Hkv 8, D 128, kv_len = the cache's capacity) in
/// the atom's cluster form with other keys configs: deeper cp.async pipelines at one CTA an SM,
/// and eight key warps. The KV copies rotate past L2; each config's output is compared with the
/// atom's (the same splits; the key warps' combine order may differ).
template <class Cfg>
float depth_time(AttentionArgs<T, int64_t> const& a, detail::AttnPlan const& plan, std::vector<T*> const& ks,
                 std::vector<T*> const& vs, T* out) {
  detail::flash_cluster_room<T, int64_t, Cfg>();  // readies its shared memory and cluster size
  auto run = [&](int i, cudaStream_t st) {
    AttentionArgs<T, int64_t> b = a;
    b.k = ks[i % ks.size()];
    b.v = vs[i % vs.size()];
    b.out = out;
    cudaError_t const err = detail::flash_mma_cluster<T, int64_t, Cfg>(b, plan, st);
    if (err != cudaSuccess) std::printf("depth: %s\n", cudaGetErrorString(err));
  };
  float const us = per_step(run);
  run(0, nullptr);
  cudaDeviceSynchronize();
  return us;
}

/// The same call in the workspace form: `want` splits a row block (Cfg, FlashKeysConfig by
/// default: no cluster, two CTAs an SM anywhere), then attention_merge over the partials.
/// Negative where the device refuses the config's shared memory (nothing is launched).
template <class Cfg = detail::FlashKeysConfig<128>>
float workspace_time(AttentionArgs<T, int64_t> const& a, int64_t want, std::vector<T*> const& ks,
                     std::vector<T*> const& vs, T* out, int& splits) {
  int64_t const rows = a.batch * a.heads * a.sq, ctas = a.batch * a.kv_heads;
  detail::AttnPlan const plan =
      detail::split_keys(detail::AttnTier::mma_keys, ctas, ctas * want, a.skv, Cfg::kStepKeys, detail::kFlashMinChunk, 1);
  splits = plan.splits;
  static std::atomic<unsigned long long> raised{0};
  if (detail::allow_smem(detail::flash_mma_kernel<T, int64_t, Cfg, false>, Cfg::kSmemBytes, raised) != cudaSuccess) {
    std::printf("workspace: shared memory of %zu bytes refused\n", Cfg::kSmemBytes);
    cudaGetLastError();  // not launched: the next config starts with no error pending
    return -1.0f;
  }
  void* ws = nullptr;
  cudaMalloc(&ws, detail::attention_partial_bytes(plan.splits, rows, 128));
  detail::AttnPartials const part = detail::AttnPartials::in(ws, plan.splits, rows);
  auto run = [&](int i, cudaStream_t st) {
    AttentionArgs<T, int64_t> b = a;
    b.k = ks[i % ks.size()];
    b.v = vs[i % vs.size()];
    b.out = out;
    cudaError_t err = detail::flash_mma<T, int64_t, Cfg>(b, part, plan, st);
    if (err == cudaSuccess) {
      err = launch_kernel(detail::attention_merge<T, 128, int64_t>, dim3(static_cast<unsigned>(rows)),
                          dim3(detail::kMergeRuns * 32), 0, st, part, b.out_rows(), plan.splits,
                          detail::SoloRows<int64_t>{b.kv_len, false, b.skv, b.heads * b.sq, 0});
    }
    if (err != cudaSuccess) std::printf("workspace: %s\n", cudaGetErrorString(err));
  };
  float const us = per_step(run);
  run(0, nullptr);
  cudaDeviceSynchronize();
  cudaFree(ws);
  return us;
}

void depth_sweep() {
  constexpr int64_t kHq = 32, kHkv = 8, kD = 128;
  for (int64_t skv : {1024, 4096, 16384, 32768}) {
    size_t const elems = static_cast<size_t>(kHkv) * skv * kD;
    int const copies = static_cast<int>(std::max<size_t>(2, (size_t{256} << 20) / (2 * elems * sizeof(T)) + 1));
    std::vector<T*> ks(copies), vs(copies);
    for (int c = 0; c < copies; ++c) {
      cudaMalloc(&ks[c], elems * sizeof(T));
      cudaMalloc(&vs[c], elems * sizeof(T));
      fill_random<<<1024, 256>>>(ks[c], static_cast<int64_t>(elems), 5 + 2 * c);
      fill_random<<<1024, 256>>>(vs[c], static_cast<int64_t>(elems), 6 + 2 * c);
    }
    T *q, *o_ref, *o_var;
    int64_t* kv_len;
    cudaMalloc(&q, kHq * kD * sizeof(T));
    cudaMalloc(&o_ref, kHq * kD * sizeof(T));
    cudaMalloc(&o_var, kHq * kD * sizeof(T));
    cudaMalloc(&kv_len, sizeof(int64_t));
    fill_random<<<64, 256>>>(q, kHq * kD, 3);
    cudaMemcpy(kv_len, &skv, sizeof(skv), cudaMemcpyHostToDevice);
    float const scale = 1.0f / std::sqrt(static_cast<float>(kD));
    AttentionArgs<T, int64_t> a{q, ks[0], vs[0], o_ref, kv_len, false, 1, kHq, kHkv, 1, skv, scale, true};
    // The cluster form the plan takes up to 4096 keys, at every capacity here.
    detail::AttnPlan plan = detail::split_keys(detail::AttnTier::mma_keys, kHkv, 264, skv, 64, detail::kFlashMinChunk,
                                               1, detail::kClusterNonPortable);
    plan.cluster = true;
    double const mb = 2.0 * elems * sizeof(T) / 1e6;
    std::printf("ctx %5lld (%.1f MB of K and V, %d copies): plan %d splits of %lld keys, cluster %d\n",
                static_cast<long long>(skv), mb, copies, plan.splits, static_cast<long long>(plan.chunk),
                plan.cluster ? 1 : 0);
    {
      auto row = [&](char const* name, float us, T const* out) {
        if (us < 0) {
          std::printf("  %-44s not run\n", name);
          return;
        }
        std::vector<float> const rr = host_floats(o_ref, kHq * kD), rv = host_floats(out, kHq * kD);
        double worst = 0;
        for (size_t i = 0; i < rr.size(); ++i) worst = std::max(worst, std::abs(double(rr[i]) - double(rv[i])));
        std::printf("  %-44s %6.1f us  %5.2f TB/s  (differs by %.3g)\n", name, us, mb / us,
                    worst);
      };
      using detail::FlashConfig;
      float const base = depth_time<FlashConfig<128, 1, 4, 16, 3, 2>>(a, plan, ks, vs, o_ref);
      row("atom: 4 key warps, 3 stages, 2 CTAs an SM", base, o_ref);
      row("4 key warps, 4 stages, 1 CTA an SM", depth_time<FlashConfig<128, 1, 4, 16, 4, 1>>(a, plan, ks, vs, o_var),
          o_var);
      row("4 key warps, 6 stages, 1 CTA an SM", depth_time<FlashConfig<128, 1, 4, 16, 6, 1>>(a, plan, ks, vs, o_var),
          o_var);
      row("8 key warps, 3 stages, 1 CTA an SM", depth_time<FlashConfig<128, 1, 8, 16, 3, 1>>(a, plan, ks, vs, o_var),
          o_var);
      for (int64_t want : {16, 33, 66}) {
        int splits = 0;
        float const us = workspace_time(a, want, ks, vs, o_var, splits);
        char name[64];
        std::snprintf(name, sizeof(name), "workspace form, %d splits + merge kernel", splits);
        row(name, us, o_var);
      }
      // Deeper pipelines in the workspace form (the plan's form past 4096 keys), 16 and 33 splits
      for (int64_t want : {16, 33}) {
        int splits = 0;
        char name[64];
        float us = workspace_time<FlashConfig<128, 1, 4, 16, 6, 1>>(a, want, ks, vs, o_var, splits);
        std::snprintf(name, sizeof(name), "ws %d splits, 6 stages, 1 CTA an SM", splits);
        row(name, us, o_var);
        us = workspace_time<FlashConfig<128, 1, 4, 16, 5, 2>>(a, want, ks, vs, o_var, splits);
        std::snprintf(name, sizeof(name), "ws %d splits, 5 stages, 2 CTAs an SM", splits);
        row(name, us, o_var);
        us = workspace_time<FlashConfig<128, 1, 8, 16, 3, 1>>(a, want, ks, vs, o_var, splits);
        std::snprintf(name, sizeof(name), "ws %d splits, 8 key warps, 3 stages", splits);
        row(name, us, o_var);
        us = workspace_time<FlashConfig<128, 1, 4, 32, 3, 1>>(a, want, ks, vs, o_var, splits);
        std::snprintf(name, sizeof(name), "ws %d splits, 32 keys a warp, 3 stages", splits);
        row(name, us, o_var);
      }
    }
    using detail::FlashConfig;
    detail::ClusterRoom const r2 = detail::flash_cluster_room<T, int64_t, FlashConfig<128, 1, 4, 16, 3, 2>>();
    detail::ClusterRoom const r1 = detail::flash_cluster_room<T, int64_t, FlashConfig<128, 1, 4, 16, 4, 1>>();
    if (skv == 1024) {
      std::printf("  clusters resident at once: 2 CTAs an SM %d of 8, %d of 16; 1 CTA an SM %d of 8, %d of 16\n",
                  r2.of8, r2.of16, r1.of8, r1.of16);
    }
    for (int c = 0; c < copies; ++c) {
      cudaFree(ks[c]);
      cudaFree(vs[c]);
    }
    cudaFree(q);
    cudaFree(o_ref);
    cudaFree(o_var);
    cudaFree(kv_len);
  }
}

/// The GEMV of `bench` as one wave of 16-warp CTAs, CP packs a lane a member in flight (skinny_wave.cuh).
template <int G, int CP>
struct WaveGemv {
  Bench const& bench;
  SkinnyBtRows<T> rows;

  explicit WaveGemv(Bench const& b) : bench(b), rows(b.layout()) {}
  template <class Out = Sink>
  void launch(int i, cudaStream_t st, bool settled = false, Out out = {}) {
    bench.point(rows, i, settled);
    wave::launch_wave<T, G, CP>(static_cast<T const*>(bench.A), rows, bench.s.k, out, st);
  }
};

/// Microseconds `Gemv` adds behind a norm, its B not settled and settled.
template <class Gemv>
void wave_variant(Bench const& bench, float norm_us, char const* label) {
  Gemv gemv(bench);
  float us[2];
  for (int settled = 0; settled < 2; ++settled) {
    us[settled] = per_step([&](int i, cudaStream_t st) {
      launch_kernel(norm_row, dim3(1), dim3(256), 0, st, bench.A, bench.s.k);
      gemv.launch(i, st, settled == 1);
    }) - norm_us;
  }
  std::printf("  %s %5.1f / %5.1f us", label, us[0], us[1]);
}

template <int G, int CP1, int CP2>
void wave_row(Shape const& s) {
  Bench const bench(s);
  float const norm_us = per_step([&](int, cudaStream_t st) {
    launch_kernel(norm_row, dim3(1), dim3(256), 0, st, bench.A, s.k);
  });
  std::printf("%-8s %6.1f MB (unsettled / settled):", s.name, bench.bytes / 1e6);
  wave_variant<Gemv<G, 2, 4>>(bench, norm_us, "R2U4");
  wave_variant<WaveGemv<G, CP1>>(bench, norm_us, CP1 == 4 ? "wave CP4" : CP1 == 8 ? "wave CP8" : "wave CP16");
  wave_variant<WaveGemv<G, CP2>>(bench, norm_us, CP2 == 4 ? "wave CP4" : CP2 == 8 ? "wave CP8" : "wave CP16");
  std::printf("\n");
}

/// Every decode projection: the atom's register kernel against one wave of 16-warp CTAs, and
/// the wave kernel's results against the register kernel's (down, and two odd-sized members).
void wave_sweep() {
  wave_row<1, 8, 16>({"qkv", 1, {2048, 1024, 1024}, 2048});
  wave_row<1, 8, 16>({"o_proj", 1, {2048}, 2048});
  wave_row<2, 4, 8>({"gate_up", 2, {6144}, 2048});
  wave_row<1, 8, 16>({"down", 1, {2048}, 6144});
  wave_row<1, 8, 16>({"n6144", 1, {6144}, 2048});
  wave_row<1, 8, 16>({"lm_head", 1, {151936}, 2048});
  for (Shape const& sh : {Shape{"down", 1, {2048}, 6144}, Shape{"odd", 1, {36, 20}, 2048}}) {
    Bench const bench(sh);
    WaveGemv<1, 16> wave(bench);
    compare<1>(bench, wave, "wave CP16");
  }
}

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IONBF, 0);  // what printed before a crash still shows
  std::string const mode = argc > 1 ? argv[1] : "";
  std::pair<char const*, std::function<void()>> const modes[] = {
      {"resident", [] { for (int64_t ns : {4000, 8000, 12000}) resident_sweep(ns); }},
      {"barrier", barrier_sweep},
      {"attention", attention_sweep},
      {"depth", depth_sweep},
      {"wave", wave_sweep},
      {"chain", chain_sweep},
      {"split", split_sweep},
      {"pair", pair_sweep},
      {"check",
       [] {
         check<1>({"qkv", 1, {2048, 1024, 1024}, 2048});
         check<2>({"gate_up", 2, {6144}, 2048});
         check<1>({"down", 1, {2048}, 6144});
         check<1>({"lm_head", 1, {151936}, 2048});
         check<1>({"odd", 1, {36, 20}, 2048});
       }},
      {"prefetch",
       [] {
         prefetch_sweep<1, 2, 4>({"qkv", 1, {2048, 1024, 1024}, 2048});
         prefetch_sweep<1, 2, 4>({"o_proj", 1, {2048}, 2048});
         prefetch_sweep<2, 2, 4>({"gate_up", 2, {6144}, 2048});
         prefetch_sweep<1, 1, 4>({"down", 1, {2048}, 6144});
         prefetch_sweep<1, 4, 2>({"lm_head", 1, {151936}, 2048});
       }},
      {"",
       [] {
         sweep<1>({"qkv", 1, {2048, 1024, 1024}, 2048});
         sweep<1>({"o_proj", 1, {2048}, 2048});
         sweep<2>({"gate_up", 2, {6144}, 2048});
         sweep<1>({"down", 1, {2048}, 6144});
         sweep<1>({"lm_head", 1, {151936}, 2048});
         sweep<1>({"n6144", 1, {6144}, 2048});  // bench/gpu's lone gate_up GEMV (x @ w.T, one member)
       }},
  };
  for (auto const& [name, run] : modes) {
    if (mode != name) continue;
    run();
    std::printf("status: %s\n", cudaGetErrorString(cudaGetLastError()));
    return 0;
  }
  std::printf("skinny_sweep: unknown mode '%s'; modes: resident, barrier, attention, depth, wave, chain, split, pair, check, prefetch, or none\n",
              mode.c_str());
  return 2;
}
