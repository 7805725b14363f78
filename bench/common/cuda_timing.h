// The best time of a repeated CUDA operation, for the CUDA benchmarks (.cc and .cu alike): events
// around each run on a stream, a warm-up run first. A failing CUDA call prints itself and exits:
// a benchmark has nothing to recover.
#pragma once

#include <cstdio>
#include <cstdlib>

#include <cuda_runtime.h>

namespace stripesolve::bench {

inline void check_cuda(cudaError_t e, const char* call) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "%s: %s\n", call, cudaGetErrorString(e));
    std::exit(1);
  }
}

// The best time (ms) of `reps` runs of body() on `stream`, after a warm-up run. Before each run,
// untimed: prepare() (e.g. restoring an input that body() overwrites), then a device
// synchronization.
template <typename Prepare, typename Body>
double best_cuda_ms(cudaStream_t stream, int reps, Prepare&& prepare, Body&& body) {
  cudaEvent_t start, stop;
  check_cuda(cudaEventCreate(&start), "cudaEventCreate");
  check_cuda(cudaEventCreate(&stop), "cudaEventCreate");
  float best = 1e30f;
  for (int r = 0; r < reps + 1; ++r) {  // the first warms up
    prepare();
    check_cuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    check_cuda(cudaEventRecord(start, stream), "cudaEventRecord");
    body();
    check_cuda(cudaEventRecord(stop, stream), "cudaEventRecord");
    check_cuda(cudaEventSynchronize(stop), "cudaEventSynchronize");
    float ms = 0;
    check_cuda(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime");
    if (r > 0 && ms < best) best = ms;
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return best;
}

}  // namespace stripesolve::bench
