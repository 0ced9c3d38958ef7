// Sweep of the attention atom's prefill tiers on the H200, bf16, head dim 128.
//
// bench.gpu (2026-12-02, eighteenth session) held prefill at 0.84x torch sdpa flash (causal B4 H32
// S4096) on mma.sync. Variants:
//   paired rows (baseline)   FlashPairedRowsConfig<128>   4 warps of two m16 tiles, 32-key steps
//   8x16 rows                FlashRowsConfig<128>         8 warps of one m16 tile, Q in registers
//   wgmma, 2 / 3 stages      FlashWgmmaConfig<2 / 3>      attention_wgmma.cuh: two warpgroups of 64
//                                                         rows, 128-key steps (the plan takes 3)
// Shapes: bench.gpu's prefill rows, causal and full: B4 H32 S4096 and B1 H32 S1024; and for the
// checks only, grouped-query heads with Sq < Skv (a causal offset, ragged blocks, the plan's
// splits and merge), a negative scale, and a short causal block over more keys. Each call runs as
// attention() runs its tier (the plan's splits for the config's CTAs, the merge kernel after a
// split), 10 calls between events, median of 7; prints ms, TFLOP/s (causal counts half the score
// matrix), % of the 989 TFLOP/s peak, and each output's largest difference from an f64 host
// reference on sampled rows and from the baseline's output.
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
  int64_t b, h, hkv, sq, skv;
  bool causal;
  float scale;  ///< 0: 1 / sqrt(128)
  bool timed;   ///< a bench.gpu row (else a check only)
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
  int64_t elems, kv_elems;
  std::vector<float> hq, hk, hv;  ///< host copies for the sampled reference

  explicit Problem(Shape const& s)
      : shape(s), elems(s.b * s.h * s.sq * 128), kv_elems(s.b * s.hkv * s.skv * 128) {
    for (T** p : {&q, &out}) CHECK(cudaMalloc(p, elems * sizeof(T)));
    for (T** p : {&k, &v}) CHECK(cudaMalloc(p, kv_elems * sizeof(T)));
    fill_random<<<1024, 256>>>(q, elems, 1);
    fill_random<<<1024, 256>>>(k, kv_elems, 2);
    fill_random<<<1024, 256>>>(v, kv_elems, 3);
    CHECK(cudaDeviceSynchronize());
    hq = host_floats(q, elems);
    hk = host_floats(k, kv_elems);
    hv = host_floats(v, kv_elems);
  }
  float scale() const { return shape.scale != 0.0f ? shape.scale : 1.0f / std::sqrt(128.0f); }
  Args args(T* o) const {
    Args a{q, k, v, o, nullptr, false, shape.b, shape.h, shape.hkv, shape.sq, shape.skv, scale(), shape.causal};
    return a;
  }
  double flops() const {
    double const full = 4.0 * shape.b * shape.h * shape.sq * shape.skv * 128;
    return shape.causal ? full / 2 : full;
  }
};

/// The workspace for a plan's partials, grown as needed.
AttnPartials partials(Problem& p, AttnPlan const& plan, int64_t rows) {
  size_t const need = attention_partial_bytes(plan.splits, rows, 128);
  if (need > p.ws_bytes) {
    if (p.ws != nullptr) CHECK(cudaFree(p.ws));
    CHECK(cudaMalloc(&p.ws, need));
    p.ws_bytes = need;
  }
  return plan.splits > 1 ? AttnPartials::in(p.ws, plan.splits, rows) : AttnPartials{nullptr, nullptr, rows};
}

/// attention()'s prefill tier in config Cfg (wgmma or mma.sync): the plan from Cfg's facts, its
/// split kernel, the merge.
template <class Cfg, bool Wgmma = false>
cudaError_t run_rows(Problem& p, T* o, cudaStream_t st) {
  Args const a = p.args(o);
  int64_t const rows = a.batch * a.heads * a.sq;
  AttnTier const tier = Wgmma ? AttnTier::wgmma_rows : AttnTier::mma_rows;
  AttnPlan const plan = flash_split(a, flash_facts_of<Cfg>, tier, device_facts());
  AttnPartials const part = partials(p, plan, rows);
  cudaError_t err;
  if constexpr (Wgmma) {
    err = flash_wgmma<T, int, Cfg>(a, part, plan, st);
  } else {
    err = flash_mma<T, int, Cfg>(a, part, plan, st);
  }
  if (err != cudaSuccess || plan.splits == 1) return err;
  return launch_attention_merge<128>(a, part, plan, st);
}

/// Largest |out - reference| over sampled rows, the reference in f64 on the host.
double sampled_error(Problem const& p, std::vector<float> const& out) {
  Shape const& s = p.shape;
  std::vector<float> const &q = p.hq, &k = p.hk, &v = p.hv;
  double worst = 0;
  for (int r = 0; r < kSampledRows; ++r) {
    int64_t const bh = (r * 7919) % (s.b * s.h), i = (r * 104729 + r * r * 31) % s.sq;
    int64_t const qbase = bh * s.sq * 128;
    int64_t const kbase = (bh / s.h * s.hkv + bh % s.h / (s.h / s.hkv)) * s.skv * 128;
    int64_t const keys = s.causal ? std::min(s.skv, i + s.skv - s.sq + 1) : s.skv;
    std::vector<double> score(keys);
    double mx = -1e300;
    for (int64_t j = 0; j < keys; ++j) {
      double dot = 0;
      for (int d = 0; d < 128; ++d) dot += double(q[qbase + i * 128 + d]) * double(k[kbase + j * 128 + d]);
      score[j] = dot * p.scale();
      mx = std::max(mx, score[j]);
    }
    double sum = 0;
    for (double& x : score) sum += (x = std::exp(x - mx));
    for (int d = 0; d < 128; ++d) {
      double acc = 0;
      for (int64_t j = 0; j < keys; ++j) acc += score[j] * double(v[kbase + j * 128 + d]);
      worst = std::max(worst, std::abs(acc / sum - double(out[qbase + i * 128 + d])));
    }
  }
  return worst;
}

template <class Run>
void variant(char const* name, Run run, Problem& p, std::vector<float> const* baseline, cudaStream_t st) {
  CHECK(cudaMemset(p.out, 0xff, p.elems * sizeof(T)));  // NaN: an unwritten element shows
  CHECK(run(p, p.out, st));
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
  for (int w = 0; w < 3; ++w) CHECK(run(p, p.out, st));
  std::vector<float> ms;
  for (int r = 0; r < kReplays; ++r) {
    cudaEventRecord(e0, st);
    for (int c = 0; c < kCalls; ++c) CHECK(run(p, p.out, st));
    cudaEventRecord(e1, st);
    CHECK(cudaEventSynchronize(e1));
    float t = 0;
    cudaEventElapsedTime(&t, e0, e1);
    ms.push_back(t / kCalls);
  }
  std::sort(ms.begin(), ms.end());
  double const med = ms[ms.size() / 2];
  double const tflops = p.flops() / (med * 1e-3) / 1e12;
  std::printf("  %-26s %8.3f ms %7.1f TFLOP/s %5.1f%% peak | ref max diff %.2e, vs baseline %.2e, non-finite %lld\n", name,
              med, tflops, 100 * tflops * 1e12 / kPeak, sampled_error(p, out), vs_base, static_cast<long long>(bad));
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
}

int main() {
  cudaStream_t st;
  CHECK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  Shape const shapes[] = {{4, 32, 32, 4096, 4096, true, 0, true},   {4, 32, 32, 4096, 4096, false, 0, true},
                          {1, 32, 32, 1024, 1024, true, 0, true},   {1, 32, 32, 1024, 1024, false, 0, true},
                          {2, 16, 4, 300, 1000, true, 0, false},    {1, 8, 2, 777, 777, false, -0.05f, false},
                          {3, 4, 4, 64, 130, true, 0, false}};
  for (Shape const& s : shapes) {
    Problem p(s);
    std::printf("B%lld H%lld Hkv%lld Sq%lld Skv%lld D128 %s scale %.4f\n", static_cast<long long>(s.b),
                static_cast<long long>(s.h), static_cast<long long>(s.hkv), static_cast<long long>(s.sq),
                static_cast<long long>(s.skv), s.causal ? "causal" : "full", p.scale());
    variant("paired rows (baseline)", run_rows<FlashPairedRowsConfig<128>>, p, nullptr, st);
    std::vector<float> const base = host_floats(p.out, p.elems);
    if (s.timed) variant("8x16 rows", run_rows<FlashRowsConfig<128>>, p, &base, st);
    variant("wgmma, 2 stages", run_rows<FlashWgmmaConfig<2>, true>, p, &base, st);
    variant("wgmma, 3 stages", run_rows<FlashWgmmaConfig<3>, true>, p, &base, st);
    for (T* d : {p.q, p.k, p.v, p.out}) CHECK(cudaFree(d));
    if (p.ws != nullptr) CHECK(cudaFree(p.ws));
  }
  return 0;
}
