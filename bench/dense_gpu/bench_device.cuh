// Reproducible pseudo-random values on the device, for the standalone CUDA benches.
#pragma once

#include <cstddef>

#include <cuda_runtime.h>

// A value in [-0.5, 0.5) hashed from the index i and the seed.
__device__ __forceinline__ double hashed_uniform(size_t i, unsigned seed) {
  unsigned x = static_cast<unsigned>(i) * 2654435761u + seed;
  x ^= x >> 13;
  x *= 0x5bd1e995u;
  x ^= x >> 15;
  return (x & 0xffffff) / double(0x1000000) - 0.5;
}

// p[i] = hashed_uniform(i, seed) for i < count (a grid-stride loop).
static __global__ void fill(double* p, size_t count, unsigned seed) {
  for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < count; i += gridDim.x * blockDim.x) {
    p[i] = hashed_uniform(i, seed);
  }
}
