// The GPU kernels on each side of every size limit of cuda/kernel_limits.h (the sides at which
// cuda/kernel_choice_test.cc checks the choice): a few diagonally dominant systems per size,
// each solution against LAPACK's. A size past a kernel family's limit must fail with
// kUnimplemented. Every test skips with a message when no CUDA device is present.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tridiag/gallery.h"
#include "tridiag/gpu.h"
#include "tridiag/gpu_test_batch.h"
#include "tridiag/lapack_reference.h"
#include "tridiag/tridiag.h"

namespace stripesolve::tridiag {
namespace {

// Both sides of every limit: the ragged single system (9), a warp's rows a lane (32 .. 256),
// a one-warp SPIKE group (288), the block sizes (512 .. 4096) and SPIKE's one pass (4608).
constexpr std::size_t kBoundarySizes[] = {9,    10,   32,   33,   64,   65,  128,  129,
                                          256,  257,  288,  289,  512,  513, 1024, 1025,
                                          2048, 2049, 4096, 4097, 4608, 4609};
constexpr std::size_t kSystems = 3;  // a few a size: the boundaries, not the grid, are tested

constexpr Algorithm kGpuAlgorithms[] = {
    Algorithm::kSpike, Algorithm::kThomas,    Algorithm::kCr,         Algorithm::kPcr,
    Algorithm::kCrPcr, Algorithm::kPcrThomas, Algorithm::kCrPcrThomas};

StridedSystems diagonally_dominant_batch(const std::vector<std::size_t>& sizes,
                                         std::uint64_t seed) {
  StridedSystems b;
  for (std::size_t j = 0; j < sizes.size(); ++j) {
    b.append(diagonally_dominant_matrix(sizes[j], seed + 31 * j),
             random_vector(sizes[j], seed + 31 * j + 7));
  }
  return b;
}

bool is_spike_family(Algorithm a) {
  return a == Algorithm::kSpike || a == Algorithm::kThomas;
}

// Solves the batch on the GPU with `alg` and holds each system to the CPU's solution with the
// same algorithm and to LAPACK's dgtsv: a residual within 10 times the larger of theirs (plus
// a few ulps), a solution within 1e-12 of LAPACK's (the matrices are diagonally dominant, so
// well conditioned) and not zero, and no system solved again on the CPU (which would hide a
// wrong kernel).
void expect_like_lapack(Algorithm alg, BatchLayout layout, const std::vector<std::size_t>& sizes) {
  const StridedSystems b = diagonally_dominant_batch(sizes, 1000 + sizes[0]);
  BatchShape shape{layout, sizes[0], sizes.size(), {}};
  if (layout == BatchLayout::kRagged) shape.sizes = sizes;
  std::vector<double> x(b.f.size()), xc(b.f.size());
  GpuOptions options;
  options.solve.algorithm = alg;
  const auto rc = solve_batch(shape, b.arrays(xc), options.solve);
  ASSERT_TRUE(rc.is_ok()) << rc.status().to_string();
  const auto r = solve_batch_gpu(shape, b.arrays(x), options);
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_TRUE(r->fell_back.empty()) << r->fell_back.size() << " systems solved again on the CPU";
  EXPECT_EQ(r->warned, 0u) << r->warning;
  std::size_t o = 0;
  for (std::size_t j = 0; j < sizes.size(); ++j) {
    const std::size_t n = sizes[j];
    SCOPED_TRACE("system " + std::to_string(j) + " of " + std::to_string(n) + " rows");
    std::vector<double> ref;
    ASSERT_EQ(lapack_dgtsv(&b.dl[o], &b.d[o], &b.du[o], &b.f[o], n, ref), 0);
    const double res_ref = relative_residual(&b.dl[o], &b.d[o], &b.du[o], ref.data(), &b.f[o], n);
    const double res_cpu = relative_residual(&b.dl[o], &b.d[o], &b.du[o], &xc[o], &b.f[o], n);
    const double res = relative_residual(&b.dl[o], &b.d[o], &b.du[o], &x[o], &b.f[o], n);
    EXPECT_LE(res, 10 * std::max(res_ref, res_cpu) + 1e-15)
        << "LAPACK's " << res_ref << ", the CPU's " << res_cpu;
    double err = 0, norm = 0;
    for (std::size_t i = 0; i < n; ++i) {
      err = std::max(err, std::abs(x[o + i] - ref[i]));
      norm = std::max(norm, std::abs(ref[i]));
    }
    EXPECT_GT(norm, 0.0);
    EXPECT_LE(err, 1e-12 * norm);
    o += n;
  }
}

TEST(GpuBoundariesTest, StridedBatchesOnEachSideOfEveryLimit) {
  SKIP_WITHOUT_GPU();
  for (Algorithm alg : kGpuAlgorithms) {
    for (std::size_t n : kBoundarySizes) {
      if (!is_spike_family(alg) && n > 4096) continue;  // the next test
      SCOPED_TRACE(std::string(algorithm_name(alg)) + " n=" + std::to_string(n));
      expect_like_lapack(alg, BatchLayout::kStrided, std::vector<std::size_t>(kSystems, n));
    }
  }
}

// One system (a strided batch of one) takes the same kernels as a batch of its size.
TEST(GpuBoundariesTest, OneSystemOnEachSideOfTheSpikeLimits) {
  SKIP_WITHOUT_GPU();
  for (Algorithm alg : {Algorithm::kSpike, Algorithm::kThomas}) {
    for (std::size_t n : {9, 10, 288, 289, 4608, 4609}) {
      SCOPED_TRACE(std::string(algorithm_name(alg)) + " n=" + std::to_string(n));
      expect_like_lapack(alg, BatchLayout::kStrided, {n});
    }
  }
}

TEST(GpuBoundariesTest, CrFamilyBeyondItsLimitIsUnimplemented) {
  SKIP_WITHOUT_GPU();
  for (Algorithm alg : kGpuAlgorithms) {
    if (is_spike_family(alg)) continue;
    for (std::size_t n : {4097, 4608, 4609}) {
      SCOPED_TRACE(std::string(algorithm_name(alg)) + " n=" + std::to_string(n));
      const StridedSystems b = diagonally_dominant_batch(std::vector<std::size_t>(kSystems, n), 5);
      std::vector<double> x(b.f.size());
      GpuOptions options;
      options.solve.algorithm = alg;
      const auto r =
          solve_batch_gpu({BatchLayout::kStrided, n, kSystems, {}}, b.arrays(x), options);
      ASSERT_FALSE(r.is_ok());
      EXPECT_EQ(r.status().code(), StatusCode::kUnimplemented) << r.status().to_string();
    }
  }
}

// A ragged batch is one system of all its rows to the kernels: at most 9 rows one small
// system, then the one-warp group, the multi-warp group up to 4608 rows and two passes above.
TEST(GpuBoundariesTest, RaggedBatchesOnEachSideOfTheirRowsInAll) {
  SKIP_WITHOUT_GPU();
  const std::vector<std::vector<std::size_t>> batches = {
      {2, 3, 4},             // 9 rows
      {2, 3, 5},             // 10
      {100, 1, 187},         // 288
      {100, 2, 187},         // 289
      {1000, 7, 3000, 601},  // 4608
      {1000, 8, 3000, 601},  // 4609
      {4608, 1},             // 4609, the first system a whole group's
      {2000, 4000, 300},     // 6300
  };
  for (Algorithm alg : {Algorithm::kSpike, Algorithm::kThomas}) {
    for (const auto& sizes : batches) {
      std::size_t rows = 0;
      for (std::size_t n : sizes) rows += n;
      SCOPED_TRACE(std::string(algorithm_name(alg)) + " ragged, " + std::to_string(rows) +
                   " rows in all");
      expect_like_lapack(alg, BatchLayout::kRagged, sizes);
    }
  }
}

}  // namespace
}  // namespace stripesolve::tridiag
