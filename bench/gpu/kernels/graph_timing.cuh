// Timing for the standalone sweeps: `launch` (which enqueues on `st`) captured 10 times in a CUDA
// graph, the graph replayed once to warm up, then 9 timed replays; the median, in us per call.
#pragma once

#include <algorithm>
#include <vector>

#include <cuda_runtime.h>

#include "check_status.cuh"

template <class Launch>
float graph_median_us(Launch launch, cudaStream_t st) {
  constexpr int kCalls = 10;
  cudaGraph_t g;
  cudaGraphExec_t ge;
  CHECK(cudaStreamBeginCapture(st, cudaStreamCaptureModeGlobal));
  for (int i = 0; i < kCalls; ++i) launch();
  CHECK(cudaStreamEndCapture(st, &g));
  CHECK(cudaGraphInstantiate(&ge, g, 0));
  CHECK(cudaGraphLaunch(ge, st));
  CHECK(cudaStreamSynchronize(st));
  cudaEvent_t a, b;
  CHECK(cudaEventCreate(&a));
  CHECK(cudaEventCreate(&b));
  std::vector<float> ms;
  for (int r = 0; r < 9; ++r) {
    CHECK(cudaEventRecord(a, st));
    CHECK(cudaGraphLaunch(ge, st));
    CHECK(cudaEventRecord(b, st));
    CHECK(cudaEventSynchronize(b));
    float t = 0;
    CHECK(cudaEventElapsedTime(&t, a, b));
    ms.push_back(t);
  }
  std::sort(ms.begin(), ms.end());
  CHECK(cudaGraphExecDestroy(ge));
  CHECK(cudaGraphDestroy(g));
  CHECK(cudaEventDestroy(a));
  CHECK(cudaEventDestroy(b));
  return ms[ms.size() / 2] * 1000.0f / kCalls;
}
