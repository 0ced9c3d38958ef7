// The definitions of Sm90Ops (gemm_sm90.cuh): what the runtime asks of one sm90 GEMM collective.
// gemm_sm90.cuh includes this at its end; a module built split (TILEFOUNDRY_SM90_SPLIT) includes it
// only in the sources that build its collectives, so its main source compiles none of them.
#pragma once

#include <tilefoundry/runtime/cuda/atoms/gemm_sm90.cuh>

namespace tilefoundry::atoms::detail {

template <class G, class T>
bool Sm90Ops<G, T>::fits(T const* A, T const* B, T* C, int64_t batch, int64_t M, int64_t N, int64_t K) {
  return G::Device::can_implement(G::arguments(A, B, C, batch, M, N, K)) == cutlass::Status::kSuccess;
}

template <class G, class T>
size_t Sm90Ops<G, T>::workspace_bytes(T const* A, T const* B, T* C, int64_t batch, int64_t M, int64_t N, int64_t K) {
  return G::Device::get_workspace_size(G::arguments(A, B, C, batch, M, N, K));
}

template <class G, class T>
cudaError_t Sm90Ops<G, T>::run(T const* A, T const* B, T* C, int64_t batch, int64_t M, int64_t N, int64_t K,
                               void* workspace, cudaStream_t stream) {
  typename G::Device gemm;
  auto args = G::arguments(A, B, C, batch, M, N, K);
  if (gemm.initialize(args, workspace, stream) != cutlass::Status::kSuccess) return cudaErrorInvalidValue;
  if (gemm.run(stream) != cutlass::Status::kSuccess) return cudaErrorLaunchFailure;
  return cudaGetLastError();
}

}  // namespace tilefoundry::atoms::detail
