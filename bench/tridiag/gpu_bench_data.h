// tridiag_gpu_bench's data on the device and on the host: the five arrays of a batch, the best
// time of a body, the sampled residual of a device result, interleaving a strided batch, and
// the couplings cuSPARSE wants zero between systems.
#pragma once

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include <cuda_runtime.h>
#include <cusparse.h>

#include "bench/common/cuda_timing.h"
#include "tridiag/gallery.h"
#include "tridiag/tridiag.h"

#define CHECK_CUDA(call)                                                                         \
  do {                                                                                           \
    cudaError_t e_ = (call);                                                                     \
    if (e_ != cudaSuccess) {                                                                     \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_)); \
      std::exit(1);                                                                              \
    }                                                                                            \
  } while (0)
#define CHECK_SPARSE(call)                                                                        \
  do {                                                                                            \
    cusparseStatus_t s_ = (call);                                                                 \
    if (s_ != CUSPARSE_STATUS_SUCCESS) {                                                          \
      std::fprintf(stderr, "%s:%d %s: cusparse status %d\n", __FILE__, __LINE__, #call, int(s_)); \
      std::exit(1);                                                                               \
    }                                                                                             \
  } while (0)

namespace tridiag_gpu_bench {

using stripesolve::tridiag::relative_residual;
using stripesolve::tridiag::TridiagonalMatrix;

struct Dev {
  double *dl = nullptr, *d = nullptr, *du = nullptr, *f = nullptr, *x = nullptr;
  std::size_t rows = 0;
  void alloc(std::size_t n) {
    rows = n;
    for (double** p : {&dl, &d, &du, &f, &x}) CHECK_CUDA(cudaMalloc(p, n * sizeof(double)));
  }
  void upload(const TridiagonalMatrix& m, const std::vector<double>& rhs) {
    CHECK_CUDA(cudaMemcpy(dl, m.dl.data(), rows * 8, cudaMemcpyHostToDevice));
    CHECK_CUDA(cudaMemcpy(d, m.d.data(), rows * 8, cudaMemcpyHostToDevice));
    CHECK_CUDA(cudaMemcpy(du, m.du.data(), rows * 8, cudaMemcpyHostToDevice));
    CHECK_CUDA(cudaMemcpy(f, rhs.data(), rows * 8, cudaMemcpyHostToDevice));
  }
};

// Best time in seconds of `reps` runs of body; setup runs before each, untimed.
template <typename Setup, typename Body>
double best_time(int reps, Setup&& setup, Body&& body) {
  return stripesolve::bench::best_cuda_ms(nullptr, reps, setup, body) / 1000.0;
}

// Largest relative residual of the device result over 64 systems of size n spread over the
// batch (m in strided order; the result in strided or interleaved order). Only the sampled
// systems are gathered from an interleaved result: transposing all of x took about a second a
// call at 2^26 unknowns.
inline double residual(const TridiagonalMatrix& m, const std::vector<double>& f,
                       const double* dev_x, std::size_t n, bool interleaved, std::size_t count) {
  std::vector<double> x(f.size());
  CHECK_CUDA(cudaMemcpy(x.data(), dev_x, x.size() * 8, cudaMemcpyDeviceToHost));
  double worst = 0;
  std::vector<double> system(n);
  const std::size_t step = std::max<std::size_t>(1, (f.size() / n) / 64);
  for (std::size_t j = 0; j < f.size() / n; j += step) {
    const std::size_t o = j * n;
    const double* xj = &x[o];
    if (interleaved) {
      for (std::size_t i = 0; i < n; ++i) system[i] = x[i * count + j];
      xj = system.data();
    }
    worst = std::max(worst, relative_residual(&m.dl[o], &m.d[o], &m.du[o], xj, &f[o], n));
  }
  return worst;
}

inline TridiagonalMatrix interleave(const TridiagonalMatrix& m, std::size_t n, std::size_t count,
                                    std::vector<double>& f) {
  TridiagonalMatrix t{std::vector<double>(m.d.size()), std::vector<double>(m.d.size()),
                      std::vector<double>(m.d.size())};
  std::vector<double> tf(f.size());
  for (std::size_t j = 0; j < count; ++j)
    for (std::size_t i = 0; i < n; ++i) {
      t.dl[i * count + j] = i > 0 ? m.dl[j * n + i] : 0.0;
      t.d[i * count + j] = m.d[j * n + i];
      t.du[i * count + j] = i + 1 < n ? m.du[j * n + i] : 0.0;
      tf[i * count + j] = f[j * n + i];
    }
  f.swap(tf);
  return t;
}

// Zero couplings across system boundaries, as cuSPARSE requires (whole systems only: where n
// does not divide the rows, the rest belongs to none).
inline void zero_boundaries(TridiagonalMatrix& m, std::size_t n) {
  for (std::size_t o = 0; o + n <= m.d.size(); o += n) {
    m.dl[o] = 0.0;
    m.du[o + n - 1] = 0.0;
  }
}

}  // namespace tridiag_gpu_bench
