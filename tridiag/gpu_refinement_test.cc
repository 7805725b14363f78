// The GPU path's refinement step (cuda/refinement.h): its residual kernel against the CPU's in
// every layout, and the step on the stability suite's systems where SPIKE alone misses LAPACK's
// residual by more than 10x (n = 2^20, types 5 and 10). Every test skips with a message when no
// CUDA device is present.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#if defined(STRIPESOLVE_HAVE_CUDA)
#include "tridiag/cuda/refinement.h"
#endif
#include "tridiag/gallery.h"
#include "tridiag/gpu.h"
#include "tridiag/gpu_test_batch.h"
#include "tridiag/lapack_reference.h"
#include "tridiag/tridiag.h"

namespace stripesolve::tridiag {
namespace {

#if defined(STRIPESOLVE_HAVE_CUDA)
// r = f - A x on the device, row by row against the CPU's in long double, for systems of one
// row, a few and many, strided, interleaved and ragged (its couplings across systems zeroed, as
// the GPU path leaves them).
TEST(GpuRefinementTest, ResidualMatchesTheCpuInEveryLayout) {
  SKIP_WITHOUT_GPU();
  for (std::size_t n : {1, 5, 700}) {
    for (BatchLayout layout :
         {BatchLayout::kStrided, BatchLayout::kInterleaved, BatchLayout::kRagged}) {
      SCOPED_TRACE("n=" + std::to_string(n) + " layout " +
                   std::to_string(static_cast<int>(layout)));
      const std::size_t count = 7;
      std::vector<std::size_t> sizes(count, n);
      if (layout == BatchLayout::kRagged) {
        for (std::size_t j = 0; j < count; ++j) sizes[j] = n + j % 3;
      }
      StridedSystems b;
      std::vector<std::size_t> first;  // each system's first row
      for (std::size_t j = 0, o = 0; j < count; o += sizes[j++]) {
        first.push_back(o);
        b.append(stability_matrix(1, sizes[j], 11 + j), random_vector(sizes[j], 40 + j));
        b.dl[o] = 0.0;
        b.du[o + sizes[j] - 1] = 0.0;
      }
      const std::size_t rows = b.f.size();
      const std::vector<double> x = random_vector(rows, 99);
      std::vector<double> expected(rows), scale(rows);
      for (std::size_t j = 0; j < count; ++j) {
        for (std::size_t i = 0; i < sizes[j]; ++i) {
          const std::size_t g = first[j] + i;
          long double s = b.f[g] - static_cast<long double>(b.d[g]) * x[g];
          double sum = std::fabs(b.f[g]) + std::fabs(b.d[g] * x[g]);
          if (i > 0) {
            s -= static_cast<long double>(b.dl[g]) * x[g - 1];
            sum += std::fabs(b.dl[g] * x[g - 1]);
          }
          if (i + 1 < sizes[j]) {
            s -= static_cast<long double>(b.du[g]) * x[g + 1];
            sum += std::fabs(b.du[g] * x[g + 1]);
          }
          expected[g] = static_cast<double>(s);
          scale[g] = sum;
        }
      }
      const bool il = layout == BatchLayout::kInterleaved;
      auto arrange = [&](const std::vector<double>& v) {
        if (!il) return v;
        std::vector<double> out(v.size());
        for (std::size_t j = 0; j < count; ++j)
          for (std::size_t i = 0; i < n; ++i) out[i * count + j] = v[j * n + i];
        return out;
      };
      DeviceCopy dl(arrange(b.dl)), d(arrange(b.d)), du(arrange(b.du)), f(arrange(b.f)),
          dx(arrange(x)), r(std::vector<double>(rows, -7.0));
      const gpu::DeviceBatch batch{
          {dl.as<double>(), d.as<double>(), du.as<double>(), f.as<double>(), dx.as<double>()},
          rows,
          layout == BatchLayout::kStrided ? n : 0,
          count};
      ASSERT_TRUE(gpu::residual_on_device(layout, batch, r.as<double>(), nullptr).is_ok());
      std::vector<double> got(rows);
      ASSERT_EQ(
          cudaMemcpy(got.data(), r.as<double>(), rows * sizeof(double), cudaMemcpyDeviceToHost),
          cudaSuccess);
      if (il) {  // back to system order
        std::vector<double> back(rows);
        for (std::size_t j = 0; j < count; ++j)
          for (std::size_t i = 0; i < n; ++i) back[j * n + i] = got[i * count + j];
        got = back;
      }
      for (std::size_t g = 0; g < rows; ++g) {
        ASSERT_NEAR(got[g], expected[g], 4 * 2.2e-16 * scale[g]) << "row " << g;
      }
    }
  }
}
#endif

// The stability suite's batches at n = 2^20 (the seeds of tridiag_stability_table --gpu): with
// the refinement (the default) every system's relative residual is within 10x LAPACK's and the
// report says the batch was refined; without it some system is not (so the step is what
// brings them there).
TEST(GpuRefinementTest, BringsTheLargeStabilitySystemsToLapack) {
  SKIP_WITHOUT_GPU();
  const std::size_t n = std::size_t{1} << 20, count = 4;
  for (int type : {5, 10}) {
    SCOPED_TRACE("type " + std::to_string(type));
    StridedSystems b;
    for (std::size_t j = 0; j < count; ++j) {
      b.append(stability_matrix(type, n, 1000 + type + 31 * j),
               random_vector(n, 77 + type + 31 * j));
    }
    std::vector<double> lapack(count);
    for (std::size_t j = 0; j < count; ++j) {
      const std::size_t o = j * n;
      std::vector<double> ref;
      ASSERT_EQ(lapack_dgtsv(&b.dl[o], &b.d[o], &b.du[o], &b.f[o], n, ref), 0);
      lapack[j] = relative_residual(&b.dl[o], &b.d[o], &b.du[o], ref.data(), &b.f[o], n);
    }
    double worst_ratio[2] = {0.0, 0.0};
    for (bool refine : {false, true}) {
      std::vector<double> x(b.f.size());
      GpuOptions options;
      options.refine = refine;
      auto r = solve_batch_gpu({BatchLayout::kStrided, n, count, {}}, b.arrays(x), options);
      ASSERT_TRUE(r.is_ok()) << r.status().to_string();
      const bool refined = std::any_of(r->notes.begin(), r->notes.end(), [](const auto& note) {
        return note.starts_with("refined once on the device");
      });
      EXPECT_EQ(refined, refine);
      EXPECT_LE(r->max_backward_error, r->tolerance);
      for (std::size_t j = 0; j < count; ++j) {
        const std::size_t o = j * n;
        const double res = relative_residual(&b.dl[o], &b.d[o], &b.du[o], &x[o], &b.f[o], n);
        EXPECT_GT(res, 0.0);
        worst_ratio[refine] = std::max(worst_ratio[refine], res / lapack[j]);
      }
    }
    EXPECT_GT(worst_ratio[0], 10.0);
    EXPECT_LE(worst_ratio[1], 10.0);
  }
}

}  // namespace
}  // namespace stripesolve::tridiag
