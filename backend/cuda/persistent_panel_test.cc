// PersistentPanel (persistent_panel.h) against LAPACK's dgetrf on the same panels: the same
// pivots and factors to rounding, every shape limit it states, and a zero column reported as
// dgetrf reports it. Needs a CUDA device; skips with a message without one.
#include "backend/cuda/persistent_panel.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <tuple>
#include <vector>

#include <cuda_runtime.h>
#include <gtest/gtest.h>
#include <lapacke.h>

namespace stripesolve::backend::cuda {
namespace {

struct Factored {
  std::vector<double> lu;
  std::vector<int32_t> ipiv;
  int32_t info = -1;
  cudaError_t status = cudaSuccess;
};

// The panel's factorization on the device: m x h by rows, row stride ld.
Factored on_device(const std::vector<double>& panel, int64_t m, int64_t h, int64_t ld, int blocks) {
  Factored f;
  f.lu = panel;
  f.ipiv.assign(static_cast<size_t>(h), 0);
  double* a = nullptr;
  int32_t *ipiv = nullptr, *info = nullptr;
  void* scratch = nullptr;
  auto check = [&f](cudaError_t e) {
    if (f.status == cudaSuccess) f.status = e;
  };
  check(cudaMalloc(&a, sizeof(double) * panel.size()));
  check(cudaMalloc(&ipiv, sizeof(int32_t) * h));
  check(cudaMalloc(&info, sizeof(int32_t)));
  check(cudaMalloc(&scratch, PersistentPanel::scratch_bytes(h, blocks)));
  check(cudaMemcpy(a, panel.data(), sizeof(double) * panel.size(), cudaMemcpyHostToDevice));
  check(PersistentPanel::factor(a, ld, m, h, ipiv, info, blocks, scratch, nullptr));
  check(cudaDeviceSynchronize());
  check(cudaMemcpy(f.lu.data(), a, sizeof(double) * panel.size(), cudaMemcpyDeviceToHost));
  check(cudaMemcpy(f.ipiv.data(), ipiv, sizeof(int32_t) * h, cudaMemcpyDeviceToHost));
  check(cudaMemcpy(&f.info, info, sizeof(int32_t), cudaMemcpyDeviceToHost));
  for (void* p :
       {static_cast<void*>(a), static_cast<void*>(ipiv), static_cast<void*>(info), scratch}) {
    (void)cudaFree(p);
  }
  return f;
}

std::vector<double> random_panel(int64_t m, int64_t ld, unsigned seed) {
  std::vector<double> p(static_cast<size_t>(m * ld));
  unsigned x = seed * 2654435761u + 1;
  for (double& v : p) {
    x = x * 1664525u + 1013904223u;
    v = static_cast<double>(x >> 8) / static_cast<double>(1u << 24) - 0.5;
  }
  return p;
}

class PersistentPanelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
      GTEST_SKIP() << "no CUDA device on this host: the one-launch panel runs on the GPU machine";
    }
  }
};

TEST_F(PersistentPanelTest, MatchesLapackPivotsAndFactors) {
  struct Case {
    int64_t m, h, ld;
    int blocks;
  };
  // One block and several; a last column block narrower than 64; a row stride wider than the
  // panel; fewer blocks asked for than 2048 rows a block allow (4500 rows take 3).
  for (const Case c : {Case{64, 64, 64, 1}, Case{1000, 64, 64, 1}, Case{5000, 136, 136, 3},
                       Case{9000, 256, 260, 5}, Case{300, 8, 8, 2}, Case{4500, 64, 64, 1}}) {
    const std::string what = std::to_string(c.m) + " x " + std::to_string(c.h) + ", " +
                             std::to_string(c.blocks) + " blocks";
    const auto panel = random_panel(c.m, c.ld, static_cast<unsigned>(c.m + c.h));
    const Factored got = on_device(panel, c.m, c.h, c.ld, c.blocks);
    ASSERT_EQ(got.status, cudaSuccess) << what << ": " << cudaGetErrorString(got.status);
    std::vector<double> want = panel;
    std::vector<lapack_int> want_piv(static_cast<size_t>(c.h));
    const lapack_int info =
        LAPACKE_dgetrf(LAPACK_ROW_MAJOR, c.m, c.h, want.data(), c.ld, want_piv.data());
    EXPECT_EQ(info, 0) << what;
    EXPECT_EQ(got.info, 0) << what;
    int differ = 0;
    for (int64_t k = 0; k < c.h; ++k) differ += got.ipiv[k] != want_piv[k];
    EXPECT_EQ(differ, 0) << what;
    double worst = 0, scale = 0;
    for (int64_t r = 0; r < c.m; ++r) {
      for (int64_t col = 0; col < c.h; ++col) {
        const size_t at = static_cast<size_t>(r * c.ld + col);
        worst = std::max(worst, std::fabs(got.lu[at] - want[at]));
        scale = std::max(scale, std::fabs(want[at]));
      }
      for (int64_t col = c.h; col < c.ld; ++col) {  // past the panel: untouched
        const size_t at = static_cast<size_t>(r * c.ld + col);
        ASSERT_EQ(got.lu[at], panel[at]) << what << ", row " << r << ", column " << col;
      }
    }
    EXPECT_GT(scale, 0.0) << what;
    EXPECT_LT(worst, 1e-12 * scale) << what;
  }
}

// A column that is zero below the rows already chosen: dgetrf's info (1-based) and finite
// factors; the columns after it are still factored.
TEST_F(PersistentPanelTest, ZeroColumnReportedAsGetrfDoes) {
  const int64_t m = 700, h = 32;
  auto panel = random_panel(m, h, 7);
  for (int64_t r = 0; r < m; ++r) panel[static_cast<size_t>(r * h + 5)] = 0.0;
  const Factored got = on_device(panel, m, h, h, 2);
  ASSERT_EQ(got.status, cudaSuccess) << cudaGetErrorString(got.status);
  std::vector<double> want = panel;
  std::vector<lapack_int> want_piv(static_cast<size_t>(h));
  EXPECT_EQ(LAPACKE_dgetrf(LAPACK_ROW_MAJOR, m, h, want.data(), h, want_piv.data()), 6);
  EXPECT_EQ(got.info, 6);
  for (double v : got.lu) ASSERT_TRUE(std::isfinite(v));
}

TEST_F(PersistentPanelTest, RefusesShapesItDoesNotTake) {
  double* a = nullptr;
  ASSERT_EQ(cudaMalloc(&a, sizeof(double) * 64 * 64), cudaSuccess);
  for (const auto& [m, h, ld] : {std::tuple<int64_t, int64_t, int64_t>{64, 60, 64},  // h % 8
                                 {32, 64, 64},                                       // m < h
                                 {64, 1032, 1032},                                   // h too wide
                                 {64, 64, 63}}) {                                    // ld < h
    EXPECT_EQ(PersistentPanel::factor(a, ld, m, h, nullptr, nullptr, 1, nullptr, nullptr),
              cudaErrorInvalidValue)
        << m << " x " << h << ", ld " << ld;
  }
  EXPECT_GT(PersistentPanel::blocks_for(int64_t{64} * 2048 + 1, 1), PersistentPanel::kMaxBlocks);
  // A device of this class holds one block a multiprocessor at least.
  int sms = 0;
  ASSERT_EQ(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0), cudaSuccess);
  EXPECT_EQ(PersistentPanel::resident_blocks(0), std::min(sms, PersistentPanel::kMaxBlocks));
  (void)cudaFree(a);
}

}  // namespace
}  // namespace stripesolve::backend::cuda
