// GPU breakdowns and their remedies: a failed pivot named by its system and row (or its system,
// in an elimination level), non-finite solutions, and the fallback of the systems affected (and
// only those) to a pivoting solver, or a warning. Every test skips with a message when no CUDA
// device is present. (gpu_test.cc has the results against the CPU and LAPACK.)
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "tridiag/gallery.h"
#include "tridiag/gpu.h"
#include "tridiag/gpu_test_batch.h"
#include "tridiag/tridiag.h"

namespace stripesolve::tridiag {
namespace {

// A breakdown deep in a batch names its system and row, at each level of the one-pass kernel:
// an interior row, a lane separator (row 8 of a lane) and a warp separator (row 287); at
// n = 3000 (11 warps), the fourth warp's separator (row 1151), the next warp's first row and
// the system's last.
TEST(GpuTest, OnePassBreakdownNamesSystemAndRow) {
  SKIP_WITHOUT_GPU();
  const std::size_t count = 5;
  const std::pair<std::size_t, std::size_t> cases[] = {
      {600, 3}, {600, 8}, {600, 287}, {600, 599}, {3000, 1151}, {3000, 1152}, {3000, 2999}};
  for (auto [n, bad_row] : cases) {
    SCOPED_TRACE("n=" + std::to_string(n) + " row " + std::to_string(bad_row));
    StridedSystems b = make_strided_batch(std::vector<std::size_t>(count, n), 0);
    const std::size_t o = 3 * n + bad_row;
    b.d[o] = std::numeric_limits<double>::quiet_NaN();
    std::vector<double> x(n * count);
    BatchShape shape{BatchLayout::kStrided, n, count, {}};
    GpuOptions gopt;
    gopt.solve.algorithm = Algorithm::kThomas;
    auto r = solve_batch_gpu(shape, b.arrays(x), gopt);
    ASSERT_FALSE(r.is_ok());
    EXPECT_NE(r.status().message().find("system 3: thomas (GPU)"), std::string::npos)
        << r.status().message();
    EXPECT_TRUE(r.status().message().ends_with("pivot at row " + std::to_string(bad_row)))
        << r.status().message();
  }
}

// CR, PCR and the hybrids report a NaN pivot, a tiny one (finite: only the tolerance fails it)
// and an infinite right-hand side at their rows (rows in the middle and at both ends of a lane,
// a warp and the system), in one warp (n <= 256) and in a block of several. The kernels test the
// input rows after a lane's last (divide_input()), and name the row by testing its rows again.
TEST(GpuTest, ReductionBreakdownNamesSystemAndRow) {
  SKIP_WITHOUT_GPU();
  const std::size_t count = 4;
  const std::pair<std::size_t, std::size_t> cases[] = {
      {5, 0},       {100, 37},    {256, 7},  {256, 8},     {256, 255},  {1000, 511},
      {3001, 1234}, {3001, 3000}, {4096, 0}, {4096, 2303}, {4096, 4095}};
  for (Algorithm alg : {Algorithm::kCr, Algorithm::kPcr, Algorithm::kCrPcr, Algorithm::kPcrThomas,
                        Algorithm::kCrPcrThomas}) {
    for (auto [n, bad_row] : cases) {
      for (const char* what : {"NaN pivot", "tiny pivot", "right-hand side"}) {
        SCOPED_TRACE(std::string(algorithm_name(alg)) + " n=" + std::to_string(n) + " row " +
                     std::to_string(bad_row) + " (" + what + ")");
        const bool pivot = what[0] != 'r';
        StridedSystems b = make_strided_batch(std::vector<std::size_t>(count, n), 0);
        const std::size_t o = 2 * n + bad_row;
        if (what[0] == 'N') {
          b.d[o] = std::numeric_limits<double>::quiet_NaN();
        } else if (pivot) {
          b.d[o] = 1e-300;  // the couplings over it near 1e300, finite
        } else {
          b.f[o] = std::numeric_limits<double>::infinity();
        }
        std::vector<double> x(n * count);
        BatchShape shape{BatchLayout::kStrided, n, count, {}};
        GpuOptions gopt;
        gopt.solve.algorithm = alg;
        const BatchArrays arrays = b.arrays(x);
        auto r = solve_batch_gpu(shape, arrays, gopt);
        ASSERT_FALSE(r.is_ok());
        const std::string& m = r.status().message();
        EXPECT_NE(m.find("system 2: " + std::string(algorithm_name(alg)) + " (GPU)"),
                  std::string::npos)
            << m;
        EXPECT_TRUE(m.ends_with("at row " + std::to_string(bad_row))) << m;
        EXPECT_NE(m.find(pivot ? "pivot" : "non-finite solution"), std::string::npos) << m;
      }
    }
  }
}

// A pivot that fails in an elimination level, its input rows all passing, names the system: the
// rows of tridiag(1, 1, 1) divide to couplings of 1, and the first level of PCR (or the last of
// CR, on two rows) divides row 0 by 1 - 1 * 1 = 0; with its first diagonal 1 + 1e-12 that
// pivot is 1e-12, tiny against the tolerance 1e-10 (couplings of 1e12 after the division).
TEST(GpuTest, ReductionLevelBreakdownNamesTheSystem) {
  SKIP_WITHOUT_GPU();
  const std::size_t n = 256, count = 4;
  for (Algorithm alg : {Algorithm::kCr, Algorithm::kPcr, Algorithm::kCrPcr, Algorithm::kPcrThomas,
                        Algorithm::kCrPcrThomas}) {
    for (double first_diagonal : {1.0, 1.0 + 1e-12}) {
      SCOPED_TRACE(std::string(algorithm_name(alg)) + (first_diagonal == 1.0 ? " zero" : " tiny"));
      StridedSystems b = make_strided_batch(std::vector<std::size_t>(count, n), 0);
      for (std::size_t i = 2 * n; i < 3 * n; ++i) b.dl[i] = b.d[i] = b.du[i] = 1.0;
      b.d[2 * n] = first_diagonal;
      std::vector<double> x(n * count);
      const BatchShape shape{BatchLayout::kStrided, n, count, {}};
      GpuOptions gopt;
      gopt.solve.algorithm = alg;
      gopt.solve.pivot_tolerance = 1e-10;
      auto r = solve_batch_gpu(shape, b.arrays(x), gopt);
      ASSERT_FALSE(r.is_ok());
      EXPECT_EQ(r.status().code(), StatusCode::kNumerical);
      EXPECT_EQ(r.status().message(),
                "system 2: " + std::string(algorithm_name(alg)) +
                    " (GPU): zero, tiny or non-finite pivot in an elimination level");
    }
  }
}

// In two passes, a breakdown names its row too: an interior row, a warp separator (whose row
// fails in the system of separators) and a row in the second level's separators' warps.
TEST(GpuTest, TwoPassBreakdownNamesTheRow) {
  SKIP_WITHOUT_GPU();
  const std::size_t n = 1500007;
  for (std::size_t bad_row :
       {std::size_t{100003}, std::size_t{288 * 10 + 287}, std::size_t{288 * 288 * 3 - 1}, n - 1}) {
    for (Algorithm alg : {Algorithm::kSpike, Algorithm::kThomas}) {
      SCOPED_TRACE(std::string(algorithm_name(alg)) + " row " + std::to_string(bad_row));
      StridedSystems b = make_strided_batch({n}, 0);
      b.d[bad_row] = std::numeric_limits<double>::quiet_NaN();
      std::vector<double> x(n);
      BatchShape shape{BatchLayout::kStrided, n, 1, {}};
      GpuOptions gopt;
      gopt.solve.algorithm = alg;
      const BatchArrays arrays = b.arrays(x);
      auto r = solve_batch_gpu(shape, arrays, gopt);
      ASSERT_FALSE(r.is_ok());
      EXPECT_TRUE(r.status().message().ends_with("pivot at row " + std::to_string(bad_row)))
          << r.status().message();
    }
  }
}

// Issue 17's Toeplitz (1, 1e-8, 1) systems among diagonally dominant ones. The pcr family (strided
// batches on the GPU) leaves them far above the tolerance: with the fallback allowed exactly
// those systems are solved again with gepp and land within it; without, the result is kept and
// the report warns like the CPU's (or the solve stops at a breakdown naming one of them).
TEST(GpuTest, PcrFamilyOnToeplitzSystemsFallsBackOrWarns) {
  SKIP_WITHOUT_GPU();
  const std::size_t n = 512, count = 8;
  const std::vector<std::size_t> toeplitz = {2, 5};
  StridedSystems b = make_strided_batch(std::vector<std::size_t>(count, n), 0);
  const TridiagonalMatrix t = toeplitz_matrix(n, 1.0, 1e-8, 1.0);
  for (std::size_t j : toeplitz) {
    std::copy(t.dl.begin(), t.dl.end(), b.dl.begin() + static_cast<std::ptrdiff_t>(j * n));
    std::copy(t.d.begin(), t.d.end(), b.d.begin() + static_cast<std::ptrdiff_t>(j * n));
    std::copy(t.du.begin(), t.du.end(), b.du.begin() + static_cast<std::ptrdiff_t>(j * n));
  }
  const BatchShape shape{BatchLayout::kStrided, n, count, {}};
  for (Algorithm alg : {Algorithm::kCr, Algorithm::kPcr, Algorithm::kCrPcr, Algorithm::kPcrThomas,
                        Algorithm::kCrPcrThomas}) {
    for (bool fallback : {true, false}) {
      SCOPED_TRACE(std::string(algorithm_name(alg)) + (fallback ? ", fallback" : ", no fallback"));
      std::vector<double> x(n * count);
      GpuOptions gopt;
      gopt.solve.algorithm = alg;
      gopt.solve.fallback = fallback;
      auto r = solve_batch_gpu(shape, b.arrays(x), gopt);
      if (!fallback && !r.is_ok()) {  // a breakdown stays an error without the fallback
        EXPECT_EQ(r.status().code(), StatusCode::kNumerical);
        EXPECT_TRUE(r.status().message().starts_with("system 2:") ||
                    r.status().message().starts_with("system 5:"))
            << r.status().message();
        continue;
      }
      ASSERT_TRUE(r.is_ok()) << r.status().to_string();
      EXPECT_GT(r->check_seconds, 0.0);
      EXPECT_EQ(r->tolerance, backward_error_tolerance(n));
      if (fallback) {
        EXPECT_EQ(r->fell_back, toeplitz);
        EXPECT_EQ(r->warned, 0u) << r->warning;
        EXPECT_LE(r->max_backward_error, r->tolerance);
        for (std::size_t j = 0; j < count; ++j) {
          const std::size_t o = j * n;
          EXPECT_LE(backward_error(&b.dl[o], &b.d[o], &b.du[o], &x[o], &b.f[o], n), r->tolerance)
              << j;
        }
      } else {
        EXPECT_TRUE(r->fell_back.empty());
        EXPECT_EQ(r->warned, 2u);
        EXPECT_TRUE(r->worst_system == 2 || r->worst_system == 5) << r->worst_system;
        EXPECT_GT(r->max_backward_error, r->tolerance);
        EXPECT_NE(r->warning.find("2 of 8 systems may be inaccurate"), std::string::npos)
            << r->warning;
        EXPECT_NE(r->warning.find(std::string(algorithm_name(alg)) + " does not pivot"),
                  std::string::npos)
            << r->warning;
      }
    }
  }
}

// A ragged batch of Toeplitz (1, 1e-8, 1) and diagonally dominant systems through the GPU's
// ragged algorithms: whatever falls back is a Toeplitz system, and every system ends within its
// tolerance (the CPU's rule: spike always falls back, thomas when asked to).
TEST(GpuTest, RaggedToeplitzBatchFallsBackOnlyTheBadSystems) {
  SKIP_WITHOUT_GPU();
  const std::vector<std::size_t> sizes = {1,  2,   3,   5,   8,    9,    17,
                                          64, 100, 255, 512, 1000, 4097, 20000};
  StridedSystems b;
  std::vector<std::size_t> offsets = {0};
  for (std::size_t j = 0; j < sizes.size(); ++j) {
    const TridiagonalMatrix m = j % 2 == 1 ? toeplitz_matrix(sizes[j], 1.0, 1e-8, 1.0)
                                           : diagonally_dominant_matrix(sizes[j], 17 * j + 1);
    b.append(m, random_vector(sizes[j], 5 * j + 2));
    offsets.push_back(offsets.back() + sizes[j]);
  }
  const BatchShape shape{BatchLayout::kRagged, 0, 0, sizes};
  for (Algorithm alg : {Algorithm::kSpike, Algorithm::kThomas}) {
    SCOPED_TRACE(algorithm_name(alg));
    std::vector<double> x(b.f.size());
    GpuOptions gopt;
    gopt.solve.algorithm = alg;
    gopt.solve.fallback = true;
    auto r = solve_batch_gpu(shape, b.arrays(x), gopt);
    ASSERT_TRUE(r.is_ok()) << r.status().to_string();
    for (std::size_t j : r->fell_back) EXPECT_EQ(j % 2, 1u) << "system " << j << " fell back";
    EXPECT_EQ(r->warned, 0u) << r->warning;
    EXPECT_LE(r->max_backward_error, r->tolerance);
    for (std::size_t j = 0; j < sizes.size(); ++j) {
      const std::size_t o = offsets[j];
      EXPECT_LE(backward_error(&b.dl[o], &b.d[o], &b.du[o], &x[o], &b.f[o], sizes[j]),
                backward_error_tolerance(sizes[j]))
          << "system " << j;
    }
  }
}

// A system whose unpivoted solve divides by zero (its x is inf or NaN): caught, and with the
// fallback solved again with gepp alone; the others keep the GPU's result.
TEST(GpuTest, NonFiniteSolutionIsCaughtAndSolvedAgain) {
  SKIP_WITHOUT_GPU();
  const std::size_t n = 300, count = 6;
  StridedSystems b = make_strided_batch(std::vector<std::size_t>(count, n), 0);
  b.d[3 * n] = 0.0;  // system 3 starts with a zero pivot; [[0, c], [a, d]] is nonsingular
  const BatchShape shape{BatchLayout::kStrided, n, count, {}};
  for (Algorithm alg : {Algorithm::kThomas, Algorithm::kPcr}) {
    SCOPED_TRACE(algorithm_name(alg));
    std::vector<double> x(n * count);
    GpuOptions gopt;
    gopt.solve.algorithm = alg;
    gopt.solve.fallback = true;
    auto r = solve_batch_gpu(shape, b.arrays(x), gopt);
    ASSERT_TRUE(r.is_ok()) << r.status().to_string();
    EXPECT_EQ(r->fell_back, std::vector<std::size_t>{3});
    EXPECT_LE(r->max_backward_error, r->tolerance);
    for (double v : x) ASSERT_TRUE(std::isfinite(v));
    EXPECT_LT(max_residual(b, std::vector<std::size_t>(count, n), x), 1e-13);
    gopt.solve.fallback = false;
    r = solve_batch_gpu(shape, b.arrays(x), gopt);
    ASSERT_FALSE(r.is_ok());
    EXPECT_TRUE(r.status().message().starts_with("system 3:")) << r.status().message();
  }
}

// A batch the GPU solves well: nothing falls back, nothing is warned about, the backward error
// is below the tolerance and not trivially 0, in every layout.
TEST(GpuTest, AllGoodBatchReportsNoFallback) {
  SKIP_WITHOUT_GPU();
  const std::size_t n = 1000, count = 64;
  StridedSystems b = make_strided_batch(std::vector<std::size_t>(count, n), 0);
  std::vector<std::size_t> sizes;
  for (std::size_t j = 0; j < count; ++j) sizes.push_back(1 + 31 * j);
  StridedSystems ragged = make_strided_batch(sizes, 0);
  const StridedSystems il = interleaved(b, n, count);
  for (BatchLayout layout :
       {BatchLayout::kStrided, BatchLayout::kInterleaved, BatchLayout::kRagged}) {
    for (Algorithm alg : {Algorithm::kAuto, Algorithm::kThomas}) {
      SCOPED_TRACE(std::string(algorithm_name(alg)) + " layout " +
                   std::to_string(static_cast<int>(layout)));
      const StridedSystems& in = layout == BatchLayout::kRagged        ? ragged
                                 : layout == BatchLayout::kInterleaved ? il
                                                                       : b;
      BatchShape shape{layout, n, count, {}};
      if (layout == BatchLayout::kRagged) shape.sizes = sizes;
      std::vector<double> x(in.f.size());
      GpuOptions gopt;
      gopt.solve.algorithm = alg;
      auto r = solve_batch_gpu(
          shape, {in.dl.data(), in.d.data(), in.du.data(), in.f.data(), x.data()}, gopt);
      ASSERT_TRUE(r.is_ok()) << r.status().to_string();
      EXPECT_TRUE(r->fell_back.empty());
      EXPECT_EQ(r->warned, 0u) << r->warning;
      EXPECT_GT(r->max_backward_error, 0.0);
      EXPECT_LE(r->max_backward_error, r->tolerance);
      EXPECT_GT(r->check_seconds, 0.0);
    }
  }
}

TEST(GpuTest, BreakdownFallbackAndUnsupported) {
  SKIP_WITHOUT_GPU();
  std::vector<double> dl = {0, 1, 0, 1}, d = {2, 3, 0, 0}, du = {1, 0, 1, 0}, f = {1, 1, 1, 2};
  std::vector<double> x(4);
  BatchShape shape{BatchLayout::kStrided, 2, 2, {}};
  GpuOptions gopt;
  gopt.solve.algorithm = Algorithm::kThomas;
  auto r = solve_batch_gpu(shape, {dl.data(), d.data(), du.data(), f.data(), x.data()}, gopt);
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().message(),
            "system 1: thomas (GPU): zero, tiny or non-finite pivot at row 0");
  gopt.solve.algorithm = Algorithm::kAuto;
  gopt.solve.require_stable = false;
  r = solve_batch_gpu(shape, {dl.data(), d.data(), du.data(), f.data(), x.data()}, gopt);
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  ASSERT_EQ(r->notes.size(), 2u);
  EXPECT_EQ(r->notes[1],
            "thomas broke down (system 1: thomas (GPU): zero, tiny or non-finite "
            "pivot at row 0); solved again with spike");
  EXPECT_DOUBLE_EQ(x[2], 2.0);
  EXPECT_DOUBLE_EQ(x[3], 1.0);
  gopt.solve.algorithm = Algorithm::kBondeli;
  r = solve_batch_gpu(shape, {dl.data(), d.data(), du.data(), f.data(), x.data()}, gopt);
  EXPECT_EQ(r.status().code(), StatusCode::kUnimplemented);
}

}  // namespace
}  // namespace stripesolve::tridiag
