// For the GPU tests: systems one after another (strided order), and the skip without a device.
#pragma once

#include <vector>

#include <gtest/gtest.h>

#include "tridiag/gallery.h"
#include "tridiag/gpu.h"

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
};

}  // namespace stripesolve::tridiag
