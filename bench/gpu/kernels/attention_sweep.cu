// Sweep of the attention atom's prefill (rows) configurations on the H200, bf16, head dim 128.
//
// bench.gpu (2026-11-30, fifth session) holds prefill at 0.81x torch sdpa flash (causal B4 H32
// S4096: 26% of the bf16 peak, sdpa 32%). The rows config gives each warp one m16 tile, so every
// K and V fragment a warp loads by ldmatrix feeds one MMA pair: half an ldmatrix.x4 per MMA,
// against FlashAttention-2's quarter-to-third with 32 rows a warp at head dim 128. Variants
// (FlashConfig<D, row warps, key warps, keys a step, stages, CTAs an SM, row tiles a warp>):
//   8x16 (what runs today)       <128, 8, 1, 64, 3, 1, 1>   128 rows, Q in registers
//   4x32, 64-key steps           <128, 4, 1, 64, 2, 2, 2>   128 rows, Q reloaded (255 registers, 88-byte stack)
//   4x32, 32-key steps           <128, 4, 1, 32, 3, 2, 2>   253 registers, no stack, twice the steps
//                                                            (the paired rows config: attention_warp_rows 32)
//   8x32, 256 rows               <128, 8, 1, 64, 3, 1, 2>   one CTA an SM
// Shapes: bench.gpu's prefill rows, causal and full: B4 H32 S4096 and B1 H32 S1024. Each call runs
// as attention() runs the rows tier (the plan's splits for the config's CTAs, the merge kernel
// after a split), 10 calls between events, median of 7; prints ms, TFLOP/s (causal counts half
// the score matrix), % of the 989 TFLOP/s peak, and each output's largest difference from an f32
// host reference on sampled rows and from the 8x16 config's output.
//
//   nvcc -std=c++17 -O3 -gencode arch=compute_90a,code=sm_90a --expt-relaxed-constexpr -DNDEBUG \
//        -I cpp/runtime/include -I <cutlass>/include bench/gpu/kernels/attention_sweep.cu -o /tmp/attention_sweep
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include <cuda_runtime.h>

#include <tilefoundry/runtime/cuda/atoms/attention.cuh>

#include "check_status.cuh"
#include "random_fill.cuh"

namespace ta = tilefoundry::atoms;
using namespace tilefoundry::atoms::detail;
using T = cutlass::bfloat16_t;
using Args = ta::AttentionArgs<T, int>;

constexpr int kCalls = 10;
constexpr int kReplays = 7;
constexpr int kSampledRows = 12;
constexpr double kPeak = 989e12;

struct Shape {
  int64_t b, h, s;
  bool causal;
};

std::vector<float> host_floats(T const* d, int64_t n) {
  std::vector<T> h(n);
  CHECK(cudaMemcpy(h.data(), d, n * sizeof(T), cudaMemcpyDeviceToHost));
  std::vector<float> f(n);
  for (int64_t i = 0; i < n; ++i) f[i] = static_cast<float>(h[i]);
  return f;
}

/// q, k, v (B, H, S, 128) random, an output per variant, and a workspace for split partials.
struct Problem {
  Shape shape;
  T *q, *k, *v, *out;
  void* ws = nullptr;
  size_t ws_bytes = 0;
  int64_t elems;
  std::vector<float> hq, hk, hv;  ///< host copies for the sampled reference

  explicit Problem(Shape const& s) : shape(s), elems(s.b * s.h * s.s * 128) {
    for (T** p : {&q, &k, &v, &out}) CHECK(cudaMalloc(p, elems * sizeof(T)));
    fill_random<<<1024, 256>>>(q, elems, 1);
    fill_random<<<1024, 256>>>(k, elems, 2);
    fill_random<<<1024, 256>>>(v, elems, 3);
    CHECK(cudaDeviceSynchronize());
    hq = host_floats(q, elems);
    hk = host_floats(k, elems);
    hv = host_floats(v, elems);
  }
  Args args(T* o) const {
    Args a{q, k, v, o, nullptr, false, shape.b, shape.h, shape.h, shape.s, shape.s, 1.0f / std::sqrt(128.0f),
           shape.causal};
    return a;
  }
  double flops() const {
    double const full = 4.0 * shape.b * shape.h * shape.s * shape.s * 128;
    return shape.causal ? full / 2 : full;
  }
};

/// attention()'s rows tier with config Cfg: the plan from Cfg's facts, its split kernel, the merge.
template <class Cfg>
cudaError_t run_rows(Problem& p, T* o, cudaStream_t st) {
  Args const a = p.args(o);
  int64_t const rows = a.batch * a.heads * a.sq;
  AttnPlan const plan = flash_split(a, flash_facts_of<Cfg>, AttnTier::mma_rows, device_facts());
  size_t const need = attention_partial_bytes(plan.splits, rows, 128);
  if (need > p.ws_bytes) {
    if (p.ws != nullptr) CHECK(cudaFree(p.ws));
    CHECK(cudaMalloc(&p.ws, need));
    p.ws_bytes = need;
  }
  bool const merged = plan.splits > 1;
  AttnPartials const part = merged ? AttnPartials::in(p.ws, plan.splits, rows) : AttnPartials{nullptr, nullptr, rows};
  cudaError_t const err = flash_mma<T, int, Cfg>(a, part, plan, st);
  if (err != cudaSuccess || !merged) return err;
  return launch_attention_merge<128>(a, part, plan, st);
}

/// Largest |out - reference| over sampled rows, the reference in f64 on the host.
double sampled_error(Problem const& p, std::vector<float> const& out) {
  Shape const& s = p.shape;
  std::vector<float> const &q = p.hq, &k = p.hk, &v = p.hv;
  double worst = 0;
  for (int r = 0; r < kSampledRows; ++r) {
    int64_t const bh = (r * 7919) % (s.b * s.h), i = (r * 104729 + r * r * 31) % s.s;
    int64_t const base = bh * s.s * 128;
    int64_t const keys = s.causal ? i + 1 : s.s;
    std::vector<double> score(keys);
    double mx = -1e300;
    for (int64_t j = 0; j < keys; ++j) {
      double dot = 0;
      for (int d = 0; d < 128; ++d) dot += double(q[base + i * 128 + d]) * double(k[base + j * 128 + d]);
      score[j] = dot / std::sqrt(128.0);
      mx = std::max(mx, score[j]);
    }
    double sum = 0;
    for (double& x : score) sum += (x = std::exp(x - mx));
    for (int d = 0; d < 128; ++d) {
      double acc = 0;
      for (int64_t j = 0; j < keys; ++j) acc += score[j] * double(v[base + j * 128 + d]);
      worst = std::max(worst, std::abs(acc / sum - double(out[base + i * 128 + d])));
    }
  }
  return worst;
}

template <class Cfg>
void variant(char const* name, Problem& p, std::vector<float> const* baseline, cudaStream_t st) {
  CHECK(cudaMemset(p.out, 0xff, p.elems * sizeof(T)));  // NaN: an unwritten element shows
  CHECK(run_rows<Cfg>(p, p.out, st));
  CHECK(cudaStreamSynchronize(st));
  std::vector<float> const out = host_floats(p.out, p.elems);
  double vs_base = 0;
  int64_t bad = 0;
  for (int64_t i = 0; i < p.elems; ++i) {
    if (!std::isfinite(out[i])) ++bad;
    if (baseline != nullptr) vs_base = std::max(vs_base, double(std::abs(out[i] - (*baseline)[i])));
  }
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  for (int w = 0; w < 3; ++w) CHECK(run_rows<Cfg>(p, p.out, st));
  std::vector<float> ms;
  for (int r = 0; r < kReplays; ++r) {
    cudaEventRecord(e0, st);
    for (int c = 0; c < kCalls; ++c) CHECK(run_rows<Cfg>(p, p.out, st));
    cudaEventRecord(e1, st);
    CHECK(cudaEventSynchronize(e1));
    float t = 0;
    cudaEventElapsedTime(&t, e0, e1);
    ms.push_back(t / kCalls);
  }
  std::sort(ms.begin(), ms.end());
  double const med = ms[ms.size() / 2];
  double const tflops = p.flops() / (med * 1e-3) / 1e12;
  std::printf("  %-26s %8.3f ms %7.1f TFLOP/s %5.1f%% peak | ref max diff %.2e, vs 8x16 %.2e, non-finite %lld\n", name,
              med, tflops, 100 * tflops * 1e12 / kPeak, sampled_error(p, out), vs_base, static_cast<long long>(bad));
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
}

int main() {
  cudaStream_t st;
  CHECK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  Shape const shapes[] = {{4, 32, 4096, true}, {4, 32, 4096, false}, {1, 32, 1024, true}, {1, 32, 1024, false}};
  for (Shape const& s : shapes) {
    Problem p(s);
    std::printf("B%lld H%lld S%lld D128 %s\n", static_cast<long long>(s.b), static_cast<long long>(s.h),
                static_cast<long long>(s.s), s.causal ? "causal" : "full");
    using Base = FlashConfig<128, 8, 1, 64, 3, 1, 1>;
    variant<Base>("8x16 (today)", p, nullptr, st);
    std::vector<float> const base = host_floats(p.out, p.elems);
    variant<FlashConfig<128, 4, 1, 64, 2, 2, 2>>("4x32, 64 keys, 2 stages", p, &base, st);
    variant<FlashConfig<128, 4, 1, 32, 3, 2, 2>>("4x32, 32 keys, 3 stages", p, &base, st);
    variant<FlashConfig<128, 8, 1, 64, 3, 1, 2>>("8x32 (256 rows)", p, &base, st);
    for (T* d : {p.q, p.k, p.v, p.out}) CHECK(cudaFree(d));
    if (p.ws != nullptr) CHECK(cudaFree(p.ws));
  }
  return 0;
}
