// How fast a forward + backward substitution by row stripes (h x n parts, ld = h, as the GPU
// tier keeps a factor) runs with each choice of cuBLAS call, beside cuSOLVER's getrs-shaped pass
// (two dtrsm over the whole n x n factor). Standalone: the figures decide how DeviceLane's
// substitution is written (docs/performance.md).
//
//   build/release/bench/dense_gpu/bench_substitution_ops [n=32768] [h=1024] [nrhs=1]
#include <cstdio>
#include <cstdlib>
#include <vector>

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "bench/common/cuda_timing.h"
#include "bench_device.cuh"
#include "cuda_check.cuh"

// Well-conditioned triangles: 1 + small values, diagonal 2 + |.| (the upper one non-unit).
__global__ void fill_triangles(double* p, size_t count, size_t ld, size_t diag_row0,
                               unsigned seed) {
  for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < count; i += gridDim.x * blockDim.x) {
    double v = hashed_uniform(i, seed) * 1e-3;
    if (i % ld + diag_row0 == i / ld) v += 2.0;
    p[i] = v;
  }
}

// The best of 5 runs of f (ms).
template <typename F>
double best_ms(cudaStream_t s, F&& f) {
  return stripesolve::bench::best_cuda_ms(
      s, 5, [] {}, f);
}

struct Parts {
  std::vector<double*> stripes;  // h x n each, ld h
};

enum class Choice { kGemmTrsmSync, kGemmTrsm, kGemvTrsv, kGemvTrsm };

const char* name(Choice c) {
  switch (c) {
    case Choice::kGemmTrsmSync:
      return "dgemm + dtrsm, sync per stripe";
    case Choice::kGemmTrsm:
      return "dgemm + dtrsm, one sync";
    case Choice::kGemvTrsv:
      return "dgemv + dtrsv, one sync";
    case Choice::kGemvTrsm:
      return "dgemv + dtrsm, one sync";
  }
  return "";
}

void pass(cublasHandle_t blas, cudaStream_t s, const Parts& parts, int n, int h, int nrhs,
          double* x, Choice c) {
  const double one = 1.0, minus_one = -1.0;
  const int stripes = n / h;
  const bool gemv = (c == Choice::kGemvTrsv || c == Choice::kGemvTrsm) && nrhs == 1;
  const bool trsv = c == Choice::kGemvTrsv && nrhs == 1;
  for (int i = 0; i < stripes; ++i) {
    const double* a = parts.stripes[i];
    const int rb = i * h;
    double* z = x + rb;
    if (rb > 0) {
      if (gemv) {
        CK(cublasDgemv(blas, CUBLAS_OP_N, h, rb, &minus_one, a, h, x, 1, &one, z, 1));
      } else {
        CK(cublasDgemm(blas, CUBLAS_OP_N, CUBLAS_OP_N, h, nrhs, rb, &minus_one, a, h, x, n, &one, z,
                       n));
      }
    }
    if (trsv) {
      CK(cublasDtrsv(blas, CUBLAS_FILL_MODE_LOWER, CUBLAS_OP_N, CUBLAS_DIAG_UNIT, h,
                     a + size_t(rb) * h, h, z, 1));
    } else {
      CK(cublasDtrsm(blas, CUBLAS_SIDE_LEFT, CUBLAS_FILL_MODE_LOWER, CUBLAS_OP_N, CUBLAS_DIAG_UNIT,
                     h, nrhs, &one, a + size_t(rb) * h, h, z, n));
    }
    if (c == Choice::kGemmTrsmSync) CK(cudaStreamSynchronize(s));
  }
  for (int i = stripes - 1; i >= 0; --i) {
    const double* a = parts.stripes[i];
    const int rb = i * h;
    const int right = n - rb - h;
    double* xi = x + rb;
    const double* diag = a + size_t(rb) * h;
    if (right > 0) {
      if (gemv) {
        CK(cublasDgemv(blas, CUBLAS_OP_N, h, right, &minus_one, diag + size_t(h) * h, h, xi + h, 1,
                       &one, xi, 1));
      } else {
        CK(cublasDgemm(blas, CUBLAS_OP_N, CUBLAS_OP_N, h, nrhs, right, &minus_one,
                       diag + size_t(h) * h, h, xi + h, n, &one, xi, n));
      }
    }
    if (trsv) {
      CK(cublasDtrsv(blas, CUBLAS_FILL_MODE_UPPER, CUBLAS_OP_N, CUBLAS_DIAG_NON_UNIT, h, diag, h,
                     xi, 1));
    } else {
      CK(cublasDtrsm(blas, CUBLAS_SIDE_LEFT, CUBLAS_FILL_MODE_UPPER, CUBLAS_OP_N,
                     CUBLAS_DIAG_NON_UNIT, h, nrhs, &one, diag, h, xi, n));
    }
    if (c == Choice::kGemmTrsmSync) CK(cudaStreamSynchronize(s));
  }
}

int main(int argc, char** argv) {
  const int n = argc > 1 ? std::atoi(argv[1]) : 32768;
  const int h = argc > 2 ? std::atoi(argv[2]) : 1024;
  const int nrhs = argc > 3 ? std::atoi(argv[3]) : 1;
  if (n % h != 0) {
    std::fprintf(stderr, "n must be a multiple of h\n");
    return 2;
  }
  cudaStream_t s;
  CK(cudaStreamCreate(&s));
  cublasHandle_t blas;
  CK(cublasCreate(&blas));
  CK(cublasSetStream(blas, s));
  Parts parts;
  for (int i = 0; i < n / h; ++i) {
    double* p = nullptr;
    CK(cudaMalloc(&p, sizeof(double) * size_t(h) * n));
    fill_triangles<<<1024, 256, 0, s>>>(p, size_t(h) * n, h, size_t(i) * h, 17u + i);
    parts.stripes.push_back(p);
  }
  double* x = nullptr;
  CK(cudaMalloc(&x, sizeof(double) * size_t(n) * nrhs));
  fill_triangles<<<256, 256, 0, s>>>(x, size_t(n) * nrhs, size_t(n) + 1, 0, 5u);
  double* whole = nullptr;  // getrs's shape: one n x n factor, ld n
  CK(cudaMalloc(&whole, sizeof(double) * size_t(n) * n));
  fill_triangles<<<4096, 256, 0, s>>>(whole, size_t(n) * n, n, 0, 99u);
  CK(cudaStreamSynchronize(s));

  std::printf("n %d, stripes of %d rows, nrhs %d (best of 5, ms)\n", n, h, nrhs);
  const double one = 1.0;
  const double getrs = best_ms(s, [&] {
    CK(cublasDtrsm(blas, CUBLAS_SIDE_LEFT, CUBLAS_FILL_MODE_LOWER, CUBLAS_OP_N, CUBLAS_DIAG_UNIT, n,
                   nrhs, &one, whole, n, x, n));
    CK(cublasDtrsm(blas, CUBLAS_SIDE_LEFT, CUBLAS_FILL_MODE_UPPER, CUBLAS_OP_N,
                   CUBLAS_DIAG_NON_UNIT, n, nrhs, &one, whole, n, x, n));
  });
  std::printf("  %-34s %8.2f\n", "two dtrsm over n x n (getrs)", getrs);
  for (Choice c :
       {Choice::kGemmTrsmSync, Choice::kGemmTrsm, Choice::kGemvTrsv, Choice::kGemvTrsm}) {
    const double ms = best_ms(s, [&] { pass(blas, s, parts, n, h, nrhs, x, c); });
    std::printf("  %-34s %8.2f  (%.2fx getrs)\n", name(c), ms, getrs / ms);
  }
  // The pieces alone, stripe in the middle.
  const int mid = (n / h) / 2;
  const double* a = parts.stripes[mid];
  const int rb = mid * h;
  const double minus_one = -1.0;
  std::printf("  pieces at row %d:\n", rb);
  std::printf("    dgemm h x nrhs x rb %8.3f\n", best_ms(s, [&] {
                CK(cublasDgemm(blas, CUBLAS_OP_N, CUBLAS_OP_N, h, nrhs, rb, &minus_one, a, h, x, n,
                               &one, x + rb, n));
              }));
  std::printf("    dgemv h x rb        %8.3f\n", best_ms(s, [&] {
                CK(cublasDgemv(blas, CUBLAS_OP_N, h, rb, &minus_one, a, h, x, 1, &one, x + rb, 1));
              }));
  std::printf("    dtrsm h x nrhs      %8.3f\n", best_ms(s, [&] {
                CK(cublasDtrsm(blas, CUBLAS_SIDE_LEFT, CUBLAS_FILL_MODE_LOWER, CUBLAS_OP_N,
                               CUBLAS_DIAG_UNIT, h, nrhs, &one, a + size_t(rb) * h, h, x + rb, n));
              }));
  std::printf("    dtrsv h             %8.3f\n", best_ms(s, [&] {
                CK(cublasDtrsv(blas, CUBLAS_FILL_MODE_LOWER, CUBLAS_OP_N, CUBLAS_DIAG_UNIT, h,
                               a + size_t(rb) * h, h, x + rb, 1));
              }));
  return 0;
}
