// For the GPU tests: systems one after another (strided order), the skip without a device, and
// device copies of host vectors.
#pragma once

#include <algorithm>
#include <cstddef>
#include <vector>

#include <gtest/gtest.h>
#if defined(STRIPESOLVE_HAVE_CUDA)
#include <cuda_runtime.h>
#endif

#include "tridiag/gallery.h"
#include "tridiag/gpu.h"
#include "tridiag/tridiag.h"

namespace stripesolve::tridiag {

#define SKIP_WITHOUT_GPU()                                              \
  if (!gpu_available())                                                 \
  GTEST_SKIP() << "no CUDA device (or a build without CUDA): GPU path " \
                  "not tested here"

struct StridedSystems {
  std::vector<double> dl, d, du, f;

  void append(const TridiagonalMatrix& m, const std::vector<double>& rhs) {
    dl.insert(dl.end(), m.dl.begin(), m.dl.end());
    d.insert(d.end(), m.d.begin(), m.d.end());
    du.insert(du.end(), m.du.begin(), m.du.end());
    f.insert(f.end(), rhs.begin(), rhs.end());
  }
  // The arrays of a solve of these systems into x.
  BatchArrays arrays(std::vector<double>& x) const {
    return {dl.data(), d.data(), du.data(), f.data(), x.data()};
  }
};

// Systems of `sizes` one after another: diagonally dominant (type 0) or of 000 Table III's
// stability type `type`, each with a random right-hand side (seeds by position).
inline StridedSystems make_strided_batch(const std::vector<std::size_t>& sizes, int type) {
  StridedSystems b;
  for (std::size_t j = 0; j < sizes.size(); ++j) {
    b.append(type == 0 ? diagonally_dominant_matrix(sizes[j], 17 * j + 1)
                       : stability_matrix(type, sizes[j], 17 * j + 1),
             random_vector(sizes[j], 5 * j + 2));
  }
  return b;
}

// Residual of each system (strided order); the largest.
inline double max_residual(const StridedSystems& b, const std::vector<std::size_t>& sizes,
                           const std::vector<double>& x) {
  double worst = 0;
  std::size_t o = 0;
  for (std::size_t n : sizes) {
    worst = std::max(worst, relative_residual(&b.dl[o], &b.d[o], &b.du[o], &x[o], &b.f[o], n));
    o += n;
  }
  return worst;
}

// Systems of n rows moved from strided to interleaved order, or back (gallery.h: interleave).
inline std::vector<double> interleave(const std::vector<double>& v, std::size_t n,
                                      std::size_t count, bool back = false) {
  std::vector<double> out(v.size());
  interleave(v.data(), n, count, out.data(), back);
  return out;
}

// The same systems in interleaved order.
inline StridedSystems interleaved(const StridedSystems& b, std::size_t n, std::size_t count) {
  return {interleave(b.dl, n, count), interleave(b.d, n, count), interleave(b.du, n, count),
          interleave(b.f, n, count)};
}

// The interleaved systems `il` (count systems of n rows) solved on the GPU into x.
inline Result<SolveReport> solve_interleaved_on_gpu(const StridedSystems& il, std::size_t n,
                                                    std::size_t count, const GpuOptions& options,
                                                    std::vector<double>& x) {
  return solve_batch_gpu(BatchShape{BatchLayout::kInterleaved, n, count, {}},
                         {il.dl.data(), il.d.data(), il.du.data(), il.f.data(), x.data()}, options);
}

#if defined(STRIPESOLVE_HAVE_CUDA)
// A device copy of a host vector, freed with it.
class DeviceCopy {
 public:
  template <typename T>
  explicit DeviceCopy(const std::vector<T>& v) {
    EXPECT_EQ(cudaMalloc(&p_, v.size() * sizeof(T)), cudaSuccess);
    EXPECT_EQ(cudaMemcpy(p_, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice), cudaSuccess);
  }
  DeviceCopy(const DeviceCopy&) = delete;
  DeviceCopy& operator=(const DeviceCopy&) = delete;
  ~DeviceCopy() { cudaFree(p_); }
  template <typename T>
  T* as() const {
    return static_cast<T*>(p_);
  }

 private:
  void* p_ = nullptr;
};
#endif

}  // namespace stripesolve::tridiag
