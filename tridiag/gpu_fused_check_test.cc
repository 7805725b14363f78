// The quality check inside the one-pass SPIKE kernels (cuda/group_check.cuh): each system's
// verdict from the solve itself against the separate device check on the same x and against the
// CPU's backward_error, to the bit, for spike and thomas, strided and interleaved batches of
// systems of one row, a few, a warp's step and more, a whole warp, and several warps (strided;
// interleaved ones that large go through the separate check, which must agree all the same).
// Systems made to fail (a pivot thomas cannot take, a NaN right-hand side) must come out as
// suspects. Every test skips with a message when no CUDA device is present.
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#if defined(STRIPESOLVE_HAVE_CUDA)
#include "tridiag/cuda/device_solve.h"
#include "tridiag/cuda/interleaved_gepp.cuh"
#include "tridiag/cuda/kernel_limits.h"
#include "tridiag/cuda/quality_check.h"
#endif
#include "tridiag/gallery.h"
#include "tridiag/gpu.h"
#include "tridiag/gpu_test_batch.h"
#include "tridiag/tridiag.h"

namespace stripesolve::tridiag {
namespace {

#if defined(STRIPESOLVE_HAVE_CUDA)
// What the check must find: the CPU's verdicts on x.
struct Expected {
  double worst = 0.0;
  std::size_t worst_system = 0;
  std::vector<Suspect> suspects;
};

Expected expected_verdicts(const StridedSystems& b, const std::vector<double>& x, std::size_t n,
                           std::size_t count) {
  Expected e;
  const double tolerance = backward_error_tolerance(n);
  for (std::size_t j = 0; j < count; ++j) {
    const std::size_t o = j * n;
    const double error = backward_error(&b.dl[o], &b.d[o], &b.du[o], &x[o], &b.f[o], n);
    if (!(error <= tolerance)) {
      e.suspects.push_back({j, error});
    } else if (error > e.worst) {
      e.worst = error;
      e.worst_system = j;
    }
  }
  return e;
}

// Every system's error as the device check left it (CheckTarget::errors, -1 for a suspect).
std::vector<double> device_errors(const gpu::CheckTarget& target, std::size_t count) {
  std::vector<double> errors(count);
  EXPECT_EQ(
      cudaMemcpy(errors.data(), target.errors, count * sizeof(double), cudaMemcpyDeviceToHost),
      cudaSuccess);
  return errors;
}

// `errors` (device_errors) against the CPU's on the same x: a row left out of the check shows
// wherever it holds one of its system's maxima.
void expect_errors(const std::vector<double>& errors, const StridedSystems& b,
                   const std::vector<double>& x, std::size_t n, std::size_t count) {
  const double tolerance = backward_error_tolerance(n);
  std::size_t wrong = 0, first = count;
  for (std::size_t j = 0; j < count; ++j) {
    const std::size_t o = j * n;
    const double error = backward_error(&b.dl[o], &b.d[o], &b.du[o], &x[o], &b.f[o], n);
    if (errors[j] != (error <= tolerance ? error : -1.0)) {
      ++wrong;
      if (first == count) first = j;
    }
  }
  EXPECT_EQ(wrong, 0u) << "systems whose error differs, the first " << first;
}

void expect_verdicts(const gpu::DeviceCheck& check, const Expected& e) {
  EXPECT_EQ(check.worst_clean_error, e.worst);
  EXPECT_EQ(check.worst_clean_system, e.worst_system);
  ASSERT_EQ(check.suspects.size(), e.suspects.size());
  for (std::size_t k = 0; k < e.suspects.size(); ++k) {
    EXPECT_EQ(check.suspects[k].system, e.suspects[k].system);
    EXPECT_EQ(check.suspects[k].backward_error, e.suspects[k].backward_error);
  }
}

TEST(GpuFusedCheckTest, VerdictsOfTheSolveMatchTheSeparateCheckAndTheCpu) {
  SKIP_WITHOUT_GPU();
  for (Algorithm alg : {Algorithm::kSpike, Algorithm::kThomas}) {
    for (std::size_t n : {1, 3, 31, 33, 100, 288, 289, 700, 4608}) {
      for (BatchLayout layout : {BatchLayout::kStrided, BatchLayout::kInterleaved}) {
        SCOPED_TRACE(std::string(algorithm_name(alg)) + " n=" + std::to_string(n) + " layout " +
                     std::to_string(static_cast<int>(layout)));
        const std::size_t count = 300;
        StridedSystems b;
        for (std::size_t j = 0; j < count; ++j) {
          b.append(stability_matrix(1, n, 31 * j + 7), random_vector(n, 3 * j + 1));
        }
        // System 7: a first pivot thomas cannot take without growth (spike pivots past it);
        // system 20: a NaN right-hand side, a non-finite x.
        if (n > 1) b.d[7 * n] = 1e-9 * std::fabs(b.dl[7 * n + 1]);
        b.f[20 * n + n / 2] = std::numeric_limits<double>::quiet_NaN();
        const bool il = layout == BatchLayout::kInterleaved;
        auto arrange = [&](const std::vector<double>& v) {
          return il ? interleave(v, n, count) : v;
        };
        DeviceCopy dl(arrange(b.dl)), d(arrange(b.d)), du(arrange(b.du)), f(arrange(b.f)),
            dx(std::vector<double>(b.f.size()));
        const gpu::DeviceBatch batch{
            {dl.as<double>(), d.as<double>(), du.as<double>(), f.as<double>(), dx.as<double>()},
            b.f.size(),
            il ? 0 : n,
            count};
        DeviceCopy ws{std::vector<char>(gpu::workspace_bytes(alg, layout, b.f.size()))};
        const std::size_t bytes = gpu::check_workspace_bytes(layout, count);
        DeviceCopy check_ws{std::vector<char>(bytes)};
        auto target = gpu::prepare_check(layout, count, n, check_ws.as<void>(), bytes, nullptr);
        ASSERT_TRUE(target.is_ok()) << target.status().to_string();
        const Status solved = gpu::solve_device(alg, layout, batch, ws.as<void>(),
                                                gpu::workspace_bytes(alg, layout, b.f.size()),
                                                2.220446049250313e-16, nullptr, &*target);
        // The NaN (and thomas's pivot) are breakdowns the solve reports; the kernels go on.
        EXPECT_EQ(solved.code(), StatusCode::kNumerical) << solved.to_string();
        // Interleaved batches are checked apart (device_solve.cu).
        EXPECT_EQ(target->rows_checked, !il);
        gpu::DeviceCheck fused, separate;
        ASSERT_TRUE(gpu::check_on_device(layout, batch, count, nullptr, check_ws.as<void>(), bytes,
                                         nullptr, fused, &*target)
                        .is_ok());
        const std::vector<double> fused_errors = device_errors(*target, count);
        ASSERT_TRUE(gpu::check_on_device(layout, batch, count, nullptr, check_ws.as<void>(), bytes,
                                         nullptr, separate)
                        .is_ok());
        const std::vector<double> separate_errors = device_errors(*target, count);
        std::vector<double> x(b.f.size());
        ASSERT_EQ(cudaMemcpy(x.data(), dx.as<double>(), x.size() * sizeof(double),
                             cudaMemcpyDeviceToHost),
                  cudaSuccess);
        if (il) x = interleave(x, n, count, /*back=*/true);
        const Expected e = expected_verdicts(b, x, n, count);
        EXPECT_GT(e.worst, 0.0);
        ASSERT_FALSE(e.suspects.empty());
        {
          SCOPED_TRACE("fused");
          expect_verdicts(fused, e);
          expect_errors(fused_errors, b, x, n, count);
        }
        {
          SCOPED_TRACE("separate");
          expect_verdicts(separate, e);
          expect_errors(separate_errors, b, x, n, count);
        }
      }
    }
  }
}

// The paths the one-pass kernels do not take leave the rows to the separate check.
TEST(GpuFusedCheckTest, TwoPassSystemsAreCheckedApart) {
  SKIP_WITHOUT_GPU();
  const std::size_t n = 5000, count = 3;
  StridedSystems b;
  for (std::size_t j = 0; j < count; ++j) {
    b.append(stability_matrix(1, n, 5 * j + 3), random_vector(n, j + 11));
  }
  DeviceCopy dl(b.dl), d(b.d), du(b.du), f(b.f), dx(std::vector<double>(b.f.size()));
  const gpu::DeviceBatch batch{
      {dl.as<double>(), d.as<double>(), du.as<double>(), f.as<double>(), dx.as<double>()},
      b.f.size(),
      n,
      count};
  const std::size_t ws_bytes =
      gpu::workspace_bytes(Algorithm::kSpike, BatchLayout::kStrided, b.f.size());
  DeviceCopy ws{std::vector<char>(ws_bytes)};
  const std::size_t bytes = gpu::check_workspace_bytes(BatchLayout::kStrided, count);
  DeviceCopy check_ws{std::vector<char>(bytes)};
  auto target =
      gpu::prepare_check(BatchLayout::kStrided, count, n, check_ws.as<void>(), bytes, nullptr);
  ASSERT_TRUE(target.is_ok());
  ASSERT_TRUE(gpu::solve_device(Algorithm::kSpike, BatchLayout::kStrided, batch, ws.as<void>(),
                                ws_bytes, 2.220446049250313e-16, nullptr, &*target)
                  .is_ok());
  EXPECT_FALSE(target->rows_checked);
  gpu::DeviceCheck check;
  ASSERT_TRUE(gpu::check_on_device(BatchLayout::kStrided, batch, count, nullptr,
                                   check_ws.as<void>(), bytes, nullptr, check, &*target)
                  .is_ok());
  std::vector<double> x(b.f.size());
  ASSERT_EQ(
      cudaMemcpy(x.data(), dx.as<double>(), x.size() * sizeof(double), cudaMemcpyDeviceToHost),
      cudaSuccess);
  expect_verdicts(check, expected_verdicts(b, x, n, count));
  EXPECT_TRUE(check.suspects.empty());
}

// gepp on interleaved batches checks each system as it solves in the variants whose
// substitution reads through a ring: chunks of 16 (the chunks' rows brought again by the
// elimination's ring), the tail's or every pivot row in device memory, and the shared-memory
// variant where named (each row as given beside its pivot row): the verdicts equal the CPU's on
// the same x to the bit, a NaN right-hand side and a singular system come out as suspects; the
// other variants, and a solve in place (x over f), leave the check to the separate pass. Through
// solve_device a batch of kMinRecomputedGeppSystems, or of systems above n = 64, is marked
// checked with the separate check's verdicts (but at 32 < n <= 64), a smaller one of 64 or less
// is not.
TEST(GpuFusedCheckTest, GeppChecksInterleavedBatchesAsItSubstitutes) {
  SKIP_WITHOUT_GPU();
  using gpu::GeppKernel;
  ASSERT_EQ(gpu::set_interleaved_gepp_limits(), cudaSuccess);
  for (std::size_t n : {1, 2, 16, 17, 18, 33, 100, 401}) {
    for (std::size_t count : {std::size_t{203}, gpu::kMinRecomputedGeppSystems}) {
      if (count > 203 && n != 1 && n != 16 && n != 33 && n != 100 && n != 401) continue;
      const std::size_t rows = n * count;
      StridedSystems b;
      for (std::size_t j = 0; j < count; ++j) {
        b.append(stability_matrix(1, n, 31 * j + 7), random_vector(n, 3 * j + 1));
      }
      // Row j % n of system j scaled by 1e6 (its x unchanged): it holds that system's maxima, so
      // a row position the check leaves out shows in some system's error (expect_errors).
      for (std::size_t j = 0; j < count; ++j) {
        const std::size_t at = j * n + j % n;
        for (std::vector<double>* v : {&b.dl, &b.d, &b.du, &b.f}) (*v)[at] *= 1e6;
      }
      b.f[20 * n + n / 2] = std::numeric_limits<double>::quiet_NaN();  // system 20: x not finite
      if (n > 2) {  // system 40 singular: column n / 2 zero
        const std::size_t o = 40 * n, c = n / 2;
        b.du[o + c - 1] = 0.0;
        b.d[o + c] = 0.0;
        b.dl[o + c + 1] = 0.0;
      }
      const DeviceCopy dl(interleave(b.dl, n, count)), d(interleave(b.d, n, count)),
          du(interleave(b.du, n, count)), f(interleave(b.f, n, count));
      DeviceCopy dx{std::vector<double>(rows)}, flags{std::vector<unsigned long long>(2)};
      const std::size_t bytes = gpu::check_workspace_bytes(BatchLayout::kInterleaved, count);
      DeviceCopy check_ws{std::vector<char>(bytes)};
      const gpu::DeviceBatch batch{
          {dl.as<double>(), d.as<double>(), du.as<double>(), f.as<double>(), dx.as<double>()},
          rows,
          0,
          count};
      auto verdicts = [&](gpu::DeviceCheck& found, const gpu::CheckTarget* solved) {
        ASSERT_TRUE(gpu::check_on_device(BatchLayout::kInterleaved, batch, count, nullptr,
                                         check_ws.as<void>(), bytes, nullptr, found, solved)
                        .is_ok());
      };
      auto solution = [&] {  // x as the systems' rows
        std::vector<double> x(rows);
        EXPECT_EQ(
            cudaMemcpy(x.data(), dx.as<double>(), rows * sizeof(double), cudaMemcpyDeviceToHost),
            cudaSuccess);
        return interleave(x, n, count, /*back=*/true);
      };
      // The NaN's and the singular system among the suspects.
      auto expect_suspects = [&](const Expected& e) {
        std::vector<std::size_t> systems;
        for (const Suspect& s : e.suspects) systems.push_back(s.system);
        EXPECT_NE(std::find(systems.begin(), systems.end(), 20u), systems.end());
        if (n > 2) {
          EXPECT_NE(std::find(systems.begin(), systems.end(), 40u), systems.end());
        }
      };
      SCOPED_TRACE("n=" + std::to_string(n) + " count " + std::to_string(count));
      if (count == 203) {
        // The most any variant declares: every pivot row in device memory.
        const DeviceCopy pivot_rows{std::vector<double>(
            gpu::interleaved_gepp_workspace_bytes(n, count, GeppKernel::kPivotRowsInDeviceMemory) /
                8 +
            1)};
        for (GeppKernel kernel :
             {GeppKernel::kRecomputedChunksOf16InRegisters, GeppKernel::kRowsInSharedMemory,
              GeppKernel::kTailInDeviceMemory, GeppKernel::kPivotRowsInDeviceMemory,
              GeppKernel::kRecomputedChunksOf32LastOf48, GeppKernel::kRowsInRegisters,
              GeppKernel::kTwistedChunksOf32LastOf48}) {
          if ((kernel == GeppKernel::kRowsInRegisters && n > 64) ||
              (kernel == GeppKernel::kRowsInSharedMemory && n > 288)) {
            continue;
          }
          // The variants that check inside when named (interleaved_gepp.cuh).
          const bool can = kernel != GeppKernel::kRecomputedChunksOf32LastOf48 &&
                           kernel != GeppKernel::kRowsInRegisters &&
                           kernel != GeppKernel::kTwistedChunksOf32LastOf48;
          for (bool in_place : {false, true}) {
            SCOPED_TRACE(std::string("kernel ") + std::to_string(static_cast<int>(kernel)) +
                         (in_place ? " in place" : ""));
            if (in_place) {
              ASSERT_EQ(cudaMemcpy(dx.as<double>(), f.as<double>(), rows * sizeof(double),
                                   cudaMemcpyDeviceToDevice),
                        cudaSuccess);
            }
            auto target = gpu::prepare_check(BatchLayout::kInterleaved, count, n,
                                             check_ws.as<void>(), bytes, nullptr);
            ASSERT_TRUE(target.is_ok()) << target.status().to_string();
            gpu::InterleavedGepp a{dl.as<double>(),
                                   d.as<double>(),
                                   du.as<double>(),
                                   in_place ? dx.as<double>() : f.as<double>(),
                                   dx.as<double>(),
                                   n,
                                   count,
                                   flags.as<unsigned long long>(),
                                   flags.as<unsigned long long>() + 1,
                                   pivot_rows.as<double>()};
            a.check = *target;
            const bool checked = gpu::launch_interleaved_gepp(a, kernel, nullptr);
            ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
            EXPECT_EQ(checked, !in_place && can);
            if (!checked) continue;
            target->rows_checked = true;
            gpu::DeviceCheck fused;
            verdicts(fused, &*target);
            const std::vector<double> x = solution();
            const Expected e = expected_verdicts(b, x, n, count);
            EXPECT_GT(e.worst, 0.0);
            expect_suspects(e);
            expect_verdicts(fused, e);
            expect_errors(device_errors(*target, count), b, x, n, count);
          }
        }
      }
      // Through solve_device.
      const std::size_t ws_bytes =
          gpu::workspace_bytes(Algorithm::kGepp, BatchLayout::kInterleaved, rows, n);
      DeviceCopy ws{std::vector<char>(ws_bytes)};
      auto target = gpu::prepare_check(BatchLayout::kInterleaved, count, n, check_ws.as<void>(),
                                       bytes, nullptr);
      ASSERT_TRUE(target.is_ok());
      const Status solved =
          gpu::solve_device(Algorithm::kGepp, BatchLayout::kInterleaved, batch, ws.as<void>(),
                            ws_bytes, 2.220446049250313e-16, nullptr, &*target);
      EXPECT_EQ(solved.code(), StatusCode::kNumerical) << solved.to_string();
      const bool shared_rows = n > gpu::kMaxRegisterGeppSystem && n <= gpu::kMaxSharedGeppSystem;
      EXPECT_EQ(target->rows_checked,
                n > gpu::kMaxSharedGeppSystem ||
                    (count >= gpu::kMinRecomputedGeppSystems && !shared_rows));
      gpu::DeviceCheck fused, separate;
      verdicts(fused, &*target);
      const std::vector<double> x = solution();
      const Expected e = expected_verdicts(b, x, n, count);
      expect_suspects(e);
      expect_verdicts(fused, e);
      expect_errors(device_errors(*target, count), b, x, n, count);
      verdicts(separate, nullptr);
      expect_verdicts(separate, e);
      expect_errors(device_errors(*target, count), b, x, n, count);
    }
  }
}
#else
TEST(GpuFusedCheckTest, VerdictsOfTheSolveMatchTheSeparateCheckAndTheCpu) {
  GTEST_SKIP() << "built without CUDA: the fused device check is not compiled";
}
#endif

}  // namespace
}  // namespace stripesolve::tridiag
