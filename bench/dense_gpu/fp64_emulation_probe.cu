// Whether cuBLAS's FP64 emulation on the integer tensor cores
// (CUBLAS_FP64_EMULATED_FIXEDPOINT_MATH, the Ozaki scheme, cuBLAS 13) would speed up the GPU tier's
// updates on this GPU: DGEMM at the sweeps' shapes, native and emulated (eager strategy), best of
// 5, and how far the emulated C = C - A B lands from the native one. Standalone;
// docs/performance.md (twenty-fourth session) has the H200's answer: 3x slower, so the engine keeps
// native DGEMM.
//   build/release/bench/dense_gpu/bench_fp64_emulation
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "cuda_check.cuh"

namespace {

// U(-1, 1) from a hash of the index.
__global__ void fill(double* a, size_t count, unsigned long long seed) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < count;
       i += size_t{gridDim.x} * blockDim.x) {
    unsigned long long x = (i + 1) * 0x9E3779B97F4A7C15ull ^ seed;
    x ^= x >> 31;
    x *= 0xBF58476D1CE4E5B9ull;
    x ^= x >> 29;
    a[i] = static_cast<double>(x >> 11) / 9007199254740992.0 * 2 - 1;
  }
}

// out[0] = max |a - b|, out[1] = max |b| (doubles >= 0 compare as their bit patterns).
__global__ void max_difference(const double* a, const double* b, size_t count,
                               unsigned long long* out) {
  double diff = 0, mag = 0;
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < count;
       i += size_t{gridDim.x} * blockDim.x) {
    diff = fmax(diff, fabs(a[i] - b[i]));
    mag = fmax(mag, fabs(b[i]));
  }
  atomicMax(&out[0], static_cast<unsigned long long>(__double_as_longlong(diff)));
  atomicMax(&out[1], static_cast<unsigned long long>(__double_as_longlong(mag)));
}

struct Shape {
  int m, n, k;
};

}  // namespace

int main() {
  cublasHandle_t blas;
  CK(cublasCreate(&blas));
  int version = 0;
  CK(cublasGetVersion(blas, &version));
  std::printf("cuBLAS %d\n", version);
  for (const Shape s : {Shape{1024, 49152, 8192}, Shape{8192, 8192, 8192}, Shape{1024, 49152, 1024},
                        Shape{2048, 49152, 8192}}) {
    const size_t na = size_t(s.m) * s.k, nb = size_t(s.k) * s.n, nc = size_t(s.m) * s.n;
    double *a, *b, *c[2];
    unsigned long long* out;
    CK(cudaMalloc(&a, na * 8));
    CK(cudaMalloc(&b, nb * 8));
    CK(cudaMalloc(&c[0], nc * 8));
    CK(cudaMalloc(&c[1], nc * 8));
    CK(cudaMalloc(&out, 16));
    fill<<<1024, 256>>>(a, na, 1);
    fill<<<1024, 256>>>(b, nb, 2);
    fill<<<1024, 256>>>(c[0], nc, 3);
    CK(cudaMemcpy(c[1], c[0], nc * 8, cudaMemcpyDeviceToDevice));
    const double alpha = -1, beta = 1;
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    for (int emulated = 0; emulated < 2; ++emulated) {
      CK(cublasSetMathMode(blas,
                           emulated ? CUBLAS_FP64_EMULATED_FIXEDPOINT_MATH : CUBLAS_DEFAULT_MATH));
      if (emulated) CK(cublasSetEmulationStrategy(blas, CUBLAS_EMULATION_STRATEGY_EAGER));
      float best = 1e30f;
      for (int rep = 0; rep < 6; ++rep) {  // the first a warm-up; each C gets the same 6 updates
        CK(cudaEventRecord(e0));
        CK(cublasDgemm(blas, CUBLAS_OP_N, CUBLAS_OP_N, s.m, s.n, s.k, &alpha, a, s.m, b, s.k, &beta,
                       c[emulated], s.m));
        CK(cudaEventRecord(e1));
        CK(cudaEventSynchronize(e1));
        float ms = 0;
        CK(cudaEventElapsedTime(&ms, e0, e1));
        if (rep > 0) best = std::min(best, ms);
      }
      std::printf("%5d x %5d x %5d %s: %.3f ms, %.1f TFLOP/s\n", s.m, s.n, s.k,
                  emulated ? "emulated" : "native  ", best, 2.0 * s.m * s.n * s.k / best / 1e9);
    }
    CK(cublasSetMathMode(blas, CUBLAS_DEFAULT_MATH));
    CK(cudaMemset(out, 0, 16));
    max_difference<<<1024, 256>>>(c[1], c[0], nc, out);
    unsigned long long bits[2];
    CK(cudaMemcpy(bits, out, 16, cudaMemcpyDeviceToHost));
    double diff, mag;
    std::memcpy(&diff, &bits[0], 8);
    std::memcpy(&mag, &bits[1], 8);
    std::printf("   max |emulated - native| / max |C| = %.2e\n", diff / mag);
    for (void* p : {static_cast<void*>(a), static_cast<void*>(b), static_cast<void*>(c[0]),
                    static_cast<void*>(c[1]), static_cast<void*>(out)})
      CK(cudaFree(p));
    CK(cudaEventDestroy(e0));
    CK(cudaEventDestroy(e1));
  }
  CK(cublasDestroy(blas));
  return 0;
}
