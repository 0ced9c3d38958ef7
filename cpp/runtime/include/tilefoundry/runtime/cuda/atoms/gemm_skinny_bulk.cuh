// The M = 1 GEMV over B (N, K) on sm_90, with B streamed by the bulk-copy engine
// (`cp.async.bulk`, the TMA's one-dimensional form) into a ring of shared-memory stages.
//
// Why: the register-streaming kernel (gemm_skinny_nk) keeps only the packs its lanes hold in
// flight, and each warp waits on its loads before issuing more. On the H200 (2026-11-30, a
// Qwen3-1.7B decode step, each kernel timed alone) its projections streamed at 1.4-3.2 TB/s
// against a copy's 4.1. Here one producer thread a CTA issues whole units (RU consecutive rows
// of each member, one contiguous copy each) as far ahead as the ring holds, without registers,
// and before the PDL wait when B is settled. It pays on long streams only (kBulkMinBytes).
//
// A CTA is kBulkWarps consumer warps and one producer warp. Units go to CTAs round robin; a
// unit's rows go to the consumer warps (RU rows: kBulkWarps / RU warps a row, each a slice of
// K). A lane adds its packs of the slice in K order, a butterfly adds the lanes, and the warps
// of a row add their slices in order, so results do not depend on timing. Lane 0 of the row's
// first warp hands the G results (rounded to T) to `out(member, m, n, N, c)`, as gemm_skinny_nk does.
#pragma once

#include <atomic>
#include <cstdint>

#include <cuda_runtime_api.h>

#include <tilefoundry/runtime/cuda/atoms/device_facts.cuh>
#include <tilefoundry/runtime/cuda/atoms/launch.cuh>
#include <tilefoundry/runtime/cuda/atoms/scalar.cuh>
#include <tilefoundry/runtime/cuda/atoms/vector_access.cuh>

namespace tilefoundry::atoms::detail {

inline constexpr int kBulkWarps = 8;  // consumer warps of a CTA; one more warp issues the copies
inline constexpr int kBulkThreads = (kBulkWarps + 1) * 32;
// The ring of one CTA. Two CTAs an SM (the launch bounds hold their registers) hold ~192 KB in
// flight, far past what HBM's latency needs, and a CTA of the kernel before or after (a norm,
// another GEMV) still fits beside one.
inline constexpr size_t kBulkRingBytes = 96 * 1024;
inline constexpr int kBulkCtasPerSm = 2;
inline constexpr int kBulkMaxStages = 8;
inline constexpr int kBulkMinStages = 3;  // one stage consumed, one landing, one being issued
// B bytes from which a launch takes this kernel: an LM head, not a decoder layer's projection.
// On the H200 (2026-11-30, skinny_sweep.cu) it streamed the LM head (622 MB) at 4.26 TB/s
// against 3.97, and Qwen3-1.7B's gate/up (50 MB) behind a spinning kernel in 11.0-12.4 us
// against 13.9. But in the decode step (bench/models/profile_decode.py, replayed) gate/up on it
// lost: 605 tok/s against 623, 598 with down (25 MB) too. Its copies, issued before the PDL wait,
// flood HBM while the RMS norm before it runs, and that latency-bound kernel took 1.3 us a layer
// longer. Smaller streams lost even alone: q/k/v (17 MB) 8.6 us against 7.0, o_proj (8 MB) 5.8
// against 4.9, down 12.3 against 9.7 behind a norm.
inline constexpr int64_t kBulkMinBytes = 128ll << 20;
// Barriers (full and empty, a stage each), then the row slices' partials (two iterations' worth).
inline constexpr size_t kBulkHeaderBytes = 2 * kBulkMaxStages * 8 + 2 * kBulkWarps * 4 * sizeof(float);
static_assert(kBulkHeaderBytes % 128 == 0, "gemm_skinny_bulk: the ring starts 128-byte aligned");

__device__ inline uint32_t shared_address(void const* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// mbarrier and bulk copy (PTX ISA 8.0, sm_90). The host launches this kernel only where this
// module's sm_90 code runs (device_facts().sm90_code).
__device__ inline void bulk_barrier_init(uint64_t* bar, uint32_t count) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(shared_address(bar)), "r"(count) : "memory");
#endif
}

__device__ inline void bulk_barrier_arrive(uint64_t* bar) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(shared_address(bar)) : "memory");
#endif
}

/// Arrives once and adds `bytes` to the transactions the barrier's phase waits for.
__device__ inline void bulk_barrier_expect(uint64_t* bar, uint32_t bytes) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(shared_address(bar)), "r"(bytes)
               : "memory");
#endif
}

/// Makes the barriers' initialization visible to the bulk-copy engine.
__device__ inline void bulk_barrier_fence_init() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
#endif
}

/// Spins until the barrier's phase of this parity has completed.
__device__ inline void bulk_barrier_wait(uint64_t* bar, uint32_t parity) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  uint32_t done = 0;
  while (!done) {
    asm volatile(
        "{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }"
        : "=r"(done)
        : "r"(shared_address(bar)), "r"(parity)
        : "memory");
  }
#endif
}

/// `bytes` (a multiple of 16, both ends 16-byte aligned) from global to shared memory,
/// completing as transactions on `bar`.
__device__ inline void bulk_copy(void* dst, void const* src, uint32_t bytes, uint64_t* bar) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
               ::"r"(shared_address(dst)), "l"(src), "r"(bytes), "r"(shared_address(bar))
               : "memory");
#else
  __trap();
#endif
}

/// C = A · Bᵀ rows for M = 1 and B (N, K) (see the file comment): `units` units of RU rows,
/// `stages` of them in the ring. Rows are SkinnyBtRows (G = 1: members end to end, each a
/// multiple of RU rows; G > 1: side by side).
template <class T, int G, int RU, class Rows, class Out>
__global__ void __launch_bounds__(kBulkThreads, kBulkCtasPerSm)
gemm_skinny_bulk(T const* __restrict__ A, __grid_constant__ Rows const rows, int64_t K, int64_t units, int stages,
                 __grid_constant__ Out const out) {
  static_assert(G <= 4 && kBulkWarps % RU == 0, "gemm_skinny_bulk: up to 4 members, RU dividing the warps");
  constexpr int WPR = kBulkWarps / RU;  // warps a row, each a slice of K
  extern __shared__ __align__(128) unsigned char bulk_smem_[];
  uint64_t* const full = reinterpret_cast<uint64_t*>(bulk_smem_);
  uint64_t* const empty = full + kBulkMaxStages;
  float* const parts = reinterpret_cast<float*>(empty + kBulkMaxStages);  // [2][kBulkWarps][G]
  T* const ring = reinterpret_cast<T*>(bulk_smem_ + kBulkHeaderBytes);
  int64_t const unit = RU * K;  // elements of one member's rows in a stage
  int const warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (threadIdx.x == 0) {
    for (int s = 0; s < stages; ++s) {
      bulk_barrier_init(&full[s], 1);
      bulk_barrier_init(&empty[s], kBulkWarps);
    }
    bulk_barrier_fence_init();
  }
  __syncthreads();
  if (warp == kBulkWarps) {  // the producer: settled weights are read before the PDL wait
    pdl_trigger();
    if (!rows.settled) pdl_wait();
    if (lane == 0) {
      // Stage st of round `phase` (its parity); from the second round on, a stage is refilled
      // once the consumers have read it in the round before. Counters, not it % stages: a
      // division by the run-time stage count is a 64-bit subroutine.
      int st = 0;
      uint32_t phase = 0;
      bool refill = false;
      for (int64_t u = blockIdx.x; u < units; u += gridDim.x) {
        if (refill) bulk_barrier_wait(&empty[st], phase ^ 1u);
        auto const [s, begin, N] = rows.template member<G>(u * RU);
        bulk_barrier_expect(&full[st], static_cast<uint32_t>(G * unit * sizeof(T)));
#pragma unroll
        for (int g = 0; g < G; ++g) {
          bulk_copy(ring + (st * G + g) * unit, rows.B[G == 1 ? s : g] + (u * RU - begin) * K,
                    static_cast<uint32_t>(unit * sizeof(T)), &full[st]);
        }
        if (++st == stages) {
          st = 0;
          phase ^= 1u;
          refill = true;
        }
      }
    }
    return;
  }
  pdl_begin();  // A is the output of the kernel before
  int const r = warp / WPR, part = warp % WPR;
  int64_t const slice = K / WPR;  // a multiple of 8 (skinny_bulk_plan, gemm_skinny.cuh)
  T const* const a = A + part * slice;
  int st = 0;  // the stage and its round's parity, as the producer counts them
  uint32_t phase = 0, odd = 0;  // odd: which of the two partial buffers this iteration uses
  for (int64_t u = blockIdx.x; u < units; u += gridDim.x, odd ^= 1u) {
    bulk_barrier_wait(&full[st], phase);
    T const* const b = ring + st * G * unit + r * K + part * slice;
    float acc[G] = {};
#pragma unroll 4
    for (int64_t k = lane * 8; k < slice; k += 256) {
      T w[G][8];
#pragma unroll
      for (int g = 0; g < G; ++g) load_pack<8>(b + g * unit + k, w[g]);
      T x[8];
      load_pack<8>(a + k, x);
#pragma unroll
      for (int g = 0; g < G; ++g) {
#pragma unroll
        for (int c = 0; c < 8; ++c) acc[g] = acc[g] + cast<float>(x[c]) * cast<float>(w[g][c]);
      }
    }
    __syncwarp();
    if (lane == 0) bulk_barrier_arrive(&empty[st]);  // the stage is read: the producer may refill it
    if (++st == stages) {
      st = 0;
      phase ^= 1u;
    }
#pragma unroll
    for (int g = 0; g < G; ++g) {
#pragma unroll
      for (int off = 16; off > 0; off /= 2) acc[g] = acc[g] + __shfl_xor_sync(0xffffffffu, acc[g], off);
    }
    auto const [s, begin, N] = rows.template member<G>(u * RU);
    int64_t const n = u * RU - begin + r;
    T c[G];
    if constexpr (WPR == 1) {
      if (lane == 0) {
#pragma unroll
        for (int g = 0; g < G; ++g) c[g] = cast<T>(acc[g]);
        out(s, int64_t(0), n, N, c);
      }
    } else {
      float* const p = parts + odd * kBulkWarps * G;  // two buffers: one barrier an iteration
      if (lane == 0) {
#pragma unroll
        for (int g = 0; g < G; ++g) p[warp * G + g] = acc[g];
      }
      asm volatile("bar.sync 1, %0;" ::"n"(kBulkWarps * 32) : "memory");  // the consumer warps only
      if (part == 0 && lane == 0) {
#pragma unroll
        for (int g = 0; g < G; ++g) {
          float total = 0.0f;
          for (int q = 0; q < WPR; ++q) total = total + p[(warp + q) * G + g];
          c[g] = cast<T>(total);
        }
        out(s, int64_t(0), n, N, c);
      }
    }
  }
}

/// How a bulk launch cuts B: rows a unit (0: the bulk kernel does not take the call) and stages.
struct BulkPlan {
  int ru = 0;
  int stages = 0;
};

template <class T, int G, int RU, class Rows, class Out>
inline cudaError_t launch_skinny_bulk(T const* A, Rows const& rows, int64_t K, int stages, Out const& out,
                                      cudaStream_t stream) {
  auto* const kernel = gemm_skinny_bulk<T, G, RU, Rows, Out>;
  // Opted into the full ring once per kernel and device (kernels of one signature, other RU, each).
  static std::atomic<int> opted[kMaxDevices];  // 1: done, 2: refused
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess || dev < 0 || dev >= kMaxDevices) return cudaErrorInvalidDevice;
  if (opted[dev].load() == 0) {
    int const most = static_cast<int>(kBulkHeaderBytes + kBulkRingBytes);
    cudaError_t const err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, most);
    opted[dev].store(err == cudaSuccess ? 1 : 2);
  }
  if (opted[dev].load() != 1) return cudaErrorInvalidConfiguration;
  int64_t const units = rows.template total<G>() / RU;
  int64_t const slots = static_cast<int64_t>(kBulkCtasPerSm) * device_facts().sms;
  dim3 const grid(static_cast<unsigned>(units < slots ? units : slots));
  size_t const smem = kBulkHeaderBytes + static_cast<size_t>(stages) * G * RU * K * sizeof(T);
  return launch_kernel(kernel, grid, dim3(kBulkThreads), smem, stream, A, rows, K, units, stages, out);
}

/// Launches the bulk GEMV for `plan` (plan.ru > 0).
template <class T, int G, class Rows, class Out>
inline cudaError_t skinny_bulk_rows(BulkPlan plan, T const* A, Rows const& rows, int64_t K, Out const& out,
                                    cudaStream_t stream) {
  switch (plan.ru) {
    case 8: return launch_skinny_bulk<T, G, 8>(A, rows, K, plan.stages, out, stream);
    case 4: return launch_skinny_bulk<T, G, 4>(A, rows, K, plan.stages, out, stream);
    default: return launch_skinny_bulk<T, G, 2>(A, rows, K, plan.stages, out, stream);
  }
}

}  // namespace tilefoundry::atoms::detail
