// Sweep of how a generated element-grid kernel spreads its 16-byte packs over threads, on the two
// memory rows that still trail torch.compile (bench.gpu, H200, 2026-12-02): gelu_chain
// (gelu_tanh(x * 1.702 + y) * y - x, 32768 x 4096 bf16: 0.224 ms, 84% of copy, 0.91x) and the
// embedding gather (32768 random rows of a 151936 x 4096 bf16 table: 0.141 ms, 89%, 0.94x).
//
// The code generator emits one pack a thread, 256 threads a CTA, a grid covering every pack
// (`pack` below; its body is the generated one). A thread issues its loads, waits, computes and
// stores, so an SM's bytes in flight are bounded by its resident threads; gelu_chain's ~40
// instructions an element and the gather's dependent id load lengthen each thread's wait. Forms:
//   pack        the generated form
//   u2, u4      U packs a thread, CTA-strided, every load written before any arithmetic
//   .6, .4      registers capped for 6 or 4 CTAs an SM instead of 8 (the default cap)
//   .128        128-thread CTAs
//   stride      a grid of 8 CTAs an SM looping over packs, the next pack loaded before this
//               pack's arithmetic (a register double buffer); stride4: 4 CTAs an SM
//   .cs         streaming stores (st.global.cs: evict-first)
//   pack.na     loads that skip L1 (ld.global.nc.L1::no_allocate)
//   .t          gelu_chain's packs tied (tie below): the first pack's arithmetic waits on every
//               later pack's load, so ptxas issues all of them first (u2.t, u4.t at 6 and 4 CTAs
//               an SM, u2.t8 at 8); the gather needs no tie
// Each prints us per call (median of 9 CUDA-graph replays of 10 calls), TB/s (bytes read plus
// written) and how many outputs differ from `pack`'s (every form must be bit-identical), after a
// 2 GiB cudaMemcpyAsync timed the same way (on the H100 it reached 2.46 TB/s, below bench.gpu's
// copy and below these kernels, so it is no roof).
//
// What it showed on the H100 (2026-12-06, bench/results/elementwise-sweep-nvidia-h100-*.txt): every
// pack and u form streams at the same 3.0-3.1 TB/s on both rows (the H100's HBM bounds them), and
// the stride forms lose (gelu_chain 277-304 against 261 us). In gelu_chain's untied u forms ptxas
// places the later packs' loads after the first pack's arithmetic (cuobjdump -sass) at any register
// cap tried (32-64), and neither an empty asm nor a CTA fence (ptxas moves arithmetic above it)
// keeps them up; the .t forms do, at 40 registers with 8 bytes spilled, bit-identical, and on the
// H100 (memory-bound) 1-3% slower (u2.t 263.6, u4.t 264.7, u2.t8 268.6 against 261.3 us); what
// they do on the H200, where gelu_chain is not at copy speed, is the open question. Only the gather gets its packs in flight together untied; that is where the code
// generator's grid_packs=auto gives two packs a thread.
//
//   nvcc -std=c++17 -O3 -gencode arch=compute_90a,code=sm_90a --expt-relaxed-constexpr -DNDEBUG \
//        -I cpp/runtime/include -I third_party/cutlass/include bench/gpu/kernels/elementwise_sweep.cu \
//        -o .devbin/elementwise_sweep
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

#include <cuda_runtime.h>

#include <tilefoundry/runtime/cuda/atoms/scalar.cuh>
#include <tilefoundry/runtime/cuda/atoms/vector_access.cuh>

#include "check_status.cuh"
#include "graph_timing.cuh"
#include "random_fill.cuh"

using tilefoundry::atoms::bf16;
using tilefoundry::atoms::cast;
using tilefoundry::atoms::load_pack;
using tilefoundry::atoms::store_pack;

constexpr int64_t kRows = 32768;
constexpr int64_t kCols = 4096;
constexpr int64_t kVocab = 151936;
constexpr int64_t kPacksPerRow = kCols / 8;
constexpr int64_t kPacks = kRows * kPacksPerRow;

enum class Access { plain, stream_store, no_l1_load, tied };

/// Ties every word of `first` to `later`'s first word (w ^ (b & zero): one LOP3 a word, `zero` a
/// kernel argument the host sets to 0, which no compiler can see through), so none of the first
/// pack's arithmetic can start before the later pack's load has landed, and ptxas must issue that
/// load first. (A zero from gridDim.x or %dynamic_smem_size was folded away.)
__device__ __forceinline__ void tie(bf16 (&first)[8], bf16 const (&later)[8], uint32_t zero) {
  uint32_t w[4], b;
  std::memcpy(w, first, 16);
  std::memcpy(&b, later, 4);
#pragma unroll
  for (int i = 0; i < 4; ++i) w[i] ^= b & zero;
  std::memcpy(first, w, 16);
}

template <Access A>
__device__ __forceinline__ void load8(bf16 const* src, bf16 (&out)[8]) {
  if constexpr (A == Access::no_l1_load) {
    uint4 w;
    asm volatile("ld.global.nc.L1::no_allocate.v4.b32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(w.x), "=r"(w.y), "=r"(w.z), "=r"(w.w)
                 : "l"(src));
    std::memcpy(out, &w, 16);
  } else {
    load_pack<8>(src, out);
  }
}

template <Access A>
__device__ __forceinline__ void store8(bf16* dst, bf16 const (&in)[8]) {
  if constexpr (A == Access::stream_store) {
    uint4 w;
    std::memcpy(&w, in, 16);
    asm volatile("st.global.cs.v4.b32 [%0], {%1, %2, %3, %4};" ::"l"(dst), "r"(w.x), "r"(w.y), "r"(w.z), "r"(w.w)
                 : "memory");
  } else {
    store_pack<8>(dst, in);
  }
}

// ---------------------------------------------------------------- the two bodies

/// gelu_chain's pack body as the code generator writes it: the evaluator's four bf16 roundings.
__device__ __forceinline__ void gelu_pack(bf16 const (&x)[8], bf16 const (&y)[8], bf16 (&o)[8]) {
#pragma unroll
  for (int l = 0; l < 8; ++l) {
    float const v0 = cast<float>(cast<bf16>((cast<float>(cast<bf16>((cast<float>(x[l]) * 1.702f))) + cast<float>(y[l]))));
    o[l] = cast<bf16>((cast<float>(cast<bf16>(
                           (cast<float>(cast<bf16>(((0.5f * v0) * (1.0f + std::tanh((0.7978845608028654f * (v0 + (0.044715f * ((v0 * v0) * v0))))))))) *
                            cast<float>(y[l])))) -
                       cast<float>(x[l])));
  }
}

struct Gelu {
  bf16 const* x;
  bf16 const* y;
  bf16* out;
  uint32_t zero;  // 0, for tie()
  static constexpr char const* name = "gelu_chain 32768 x 4096 bf16 (3 x 256 MiB moved)";
  static constexpr double bytes = 3.0 * kRows * kCols * 2;

  template <Access A, int U>
  __device__ __forceinline__ void run(int64_t const (&p)[U]) const {
    bf16 a[U][8], b[U][8], o[8];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      load8<A>(x + p[u] * 8, a[u]);
      load8<A>(y + p[u] * 8, b[u]);
    }
    if constexpr (A == Access::tied) {
#pragma unroll
      for (int u = 1; u < U; ++u) {
        tie(a[0], a[u], zero);
        tie(b[0], b[u], zero);
      }
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      gelu_pack(a[u], b[u], o);
      store8<A>(out + p[u] * 8, o);
    }
  }

  // The stride form's double buffer: what one pack's loads leave in registers.
  struct Held {
    bf16 a[8], b[8];
  };
  __device__ __forceinline__ void load(int64_t p, Held& h) const {
    load_pack<8>(x + p * 8, h.a);
    load_pack<8>(y + p * 8, h.b);
  }
  __device__ __forceinline__ void finish(int64_t p, Held const& h) const {
    bf16 o[8];
    gelu_pack(h.a, h.b, o);
    store_pack<8>(out + p * 8, o);
  }
};

struct Gather {
  bf16 const* table;
  int64_t const* ids;
  bf16* out;
  static constexpr char const* name = "embedding 32768 random rows of 151936 x 4096 bf16 (2 x 256 MiB moved)";
  static constexpr double bytes = 2.0 * kRows * kCols * 2 + kRows * 8;

  template <Access A, int U>
  __device__ __forceinline__ void run(int64_t const (&p)[U]) const {
    int64_t id[U];
#pragma unroll
    for (int u = 0; u < U; ++u) id[u] = ids[p[u] / kPacksPerRow];
    bf16 a[U][8];
#pragma unroll
    for (int u = 0; u < U; ++u) load8<A>(table + id[u] * kCols + (p[u] % kPacksPerRow) * 8, a[u]);
#pragma unroll
    for (int u = 0; u < U; ++u) store8<A>(out + p[u] * 8, a[u]);
  }

  struct Held {
    bf16 a[8];
  };
  __device__ __forceinline__ void load(int64_t p, Held& h) const {
    load_pack<8>(table + ids[p / kPacksPerRow] * kCols + (p % kPacksPerRow) * 8, h.a);
  }
  __device__ __forceinline__ void finish(int64_t p, Held const& h) const { store_pack<8>(out + p * 8, h.a); }
};

// ---------------------------------------------------------------- the forms

/// U packs a thread: CTA c owns packs [c * T * U, (c + 1) * T * U), thread t packs t + u * T.
/// Registers are capped for `Resident` CTAs an SM (the generated gelu_chain holds 32: 8 CTAs).
template <class Body, Access A, int T, int U, int Resident = 2048 / T>
__global__ void __launch_bounds__(T, Resident) packs_kernel(Body body) {
  int64_t const base = static_cast<int64_t>(blockIdx.x) * T * U + threadIdx.x;
  int64_t p[U];
#pragma unroll
  for (int u = 0; u < U; ++u) p[u] = base + u * T;
  body.template run<A, U>(p);
}

/// packs_kernel on a grid covering every pack once.
template <class Body, Access A, int T, int U, int Resident = 2048 / T>
void launch_packs(Body const& body, cudaStream_t st) {
  packs_kernel<Body, A, T, U, Resident><<<kPacks / (T * U), T, 0, st>>>(body);
}

/// A grid of a few CTAs an SM; each thread loads its next pack before finishing this one.
template <class Body>
__global__ void __launch_bounds__(256) stride_kernel(Body body) {
  int64_t const step = static_cast<int64_t>(gridDim.x) * 256;
  int64_t p = static_cast<int64_t>(blockIdx.x) * 256 + threadIdx.x;
  typename Body::Held cur, next;
  if (p < kPacks) body.load(p, cur);
  for (; p < kPacks; p += step) {
    if (p + step < kPacks) body.load(p + step, next);
    body.finish(p, cur);
    cur = next;
  }
}

// ---------------------------------------------------------------- the sweep

template <class Body>
void sweep(Body body, int sms, cudaStream_t st) {
  int64_t const n = kRows * kCols;
  std::vector<uint16_t> want(n), got(n);
  auto run = [&](char const* form, auto launch) {
    CHECK(cudaMemsetAsync(body.out, 0xff, n * sizeof(bf16), st));  // NaN: an unwritten pack differs
    float const us = graph_median_us(launch, st);
    CHECK(cudaGetLastError());
    bool const first = std::strcmp(form, "pack") == 0;
    CHECK(cudaMemcpy((first ? want : got).data(), body.out, n * sizeof(bf16), cudaMemcpyDeviceToHost));
    int64_t differ = 0;
    if (!first) {
      for (int64_t i = 0; i < n; ++i) differ += got[i] != want[i];
    }
    std::printf("  %-8s %8.1f us  %5.2f TB/s  %lld of %lld outputs differ from pack\n", form, us,
                Body::bytes / us * 1e-6, static_cast<long long>(differ), static_cast<long long>(n));
  };
  std::printf("%s\n", Body::name);
  run("pack", [&] { launch_packs<Body, Access::plain, 256, 1>(body, st); });
  run("pack128", [&] { launch_packs<Body, Access::plain, 128, 1>(body, st); });
  run("pack.6", [&] { launch_packs<Body, Access::plain, 256, 1, 6>(body, st); });
  run("u2", [&] { launch_packs<Body, Access::plain, 256, 2>(body, st); });
  run("u2.6", [&] { launch_packs<Body, Access::plain, 256, 2, 6>(body, st); });
  run("u4", [&] { launch_packs<Body, Access::plain, 256, 4>(body, st); });
  run("u4.4", [&] { launch_packs<Body, Access::plain, 256, 4, 4>(body, st); });
  run("u2.128", [&] { launch_packs<Body, Access::plain, 128, 2>(body, st); });
  run("stride", [&] { stride_kernel<Body><<<sms * 8, 256, 0, st>>>(body); });
  run("stride4", [&] { stride_kernel<Body><<<sms * 4, 256, 0, st>>>(body); });
  run("pack.cs", [&] { launch_packs<Body, Access::stream_store, 256, 1>(body, st); });
  run("pack.na", [&] { launch_packs<Body, Access::no_l1_load, 256, 1>(body, st); });
  run("u2.t", [&] { launch_packs<Body, Access::tied, 256, 2, 6>(body, st); });
  run("u2.t8", [&] { launch_packs<Body, Access::tied, 256, 2>(body, st); });
  run("u4.t", [&] { launch_packs<Body, Access::tied, 256, 4, 4>(body, st); });
  run("u2.cs", [&] { launch_packs<Body, Access::stream_store, 256, 2>(body, st); });
}

__global__ void random_ids(int64_t* ids, int64_t n, int64_t vocab) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    uint64_t h = (i + 7) * 0x9E3779B97F4A7C15ull;
    h ^= h >> 29;
    h *= 0xBF58476D1CE4E5B9ull;
    h ^= h >> 32;
    ids[i] = static_cast<int64_t>(h % vocab);
  }
}

int main() {
  int sms = 0;
  CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  cudaDeviceProp prop;
  CHECK(cudaGetDeviceProperties(&prop, 0));
  std::printf("%s, %d SMs\n", prop.name, sms);
  cudaStream_t st;
  CHECK(cudaStreamCreate(&st));

  size_t const copy_bytes = size_t(1) << 31;
  void *src, *dst;
  CHECK(cudaMalloc(&src, copy_bytes));
  CHECK(cudaMalloc(&dst, copy_bytes));
  fill_random<<<1024, 256>>>(static_cast<bf16*>(src), copy_bytes / 2, 3);
  float const copy_us = graph_median_us([&] { CHECK(cudaMemcpyAsync(dst, src, copy_bytes, cudaMemcpyDeviceToDevice, st)); }, st);
  std::printf("copy 2 GiB: %.1f us, %.2f TB/s read + write\n", copy_us, 2.0 * copy_bytes / copy_us * 1e-6);
  CHECK(cudaFree(src));
  CHECK(cudaFree(dst));

  int64_t const n = kRows * kCols;
  bf16 *x, *y, *out, *table;
  int64_t* ids;
  CHECK(cudaMalloc(&x, n * sizeof(bf16)));
  CHECK(cudaMalloc(&y, n * sizeof(bf16)));
  CHECK(cudaMalloc(&out, n * sizeof(bf16)));
  CHECK(cudaMalloc(&table, kVocab * kCols * sizeof(bf16)));
  CHECK(cudaMalloc(&ids, kRows * sizeof(int64_t)));
  fill_random<<<1024, 256>>>(x, n, 1);
  fill_random<<<1024, 256>>>(y, n, 2);
  fill_random<<<1024, 256>>>(table, kVocab * kCols, 4);
  random_ids<<<128, 256>>>(ids, kRows, kVocab);
  CHECK(cudaDeviceSynchronize());

  sweep(Gelu{x, y, out, 0}, sms, st);
  sweep(Gather{table, ids, out}, sms, st);
  return 0;
}
