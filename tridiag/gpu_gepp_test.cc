// gepp on the GPU: interleaved batches, a thread a system (tridiag/cuda/interleaved_gepp.cu),
// against the CPU's gepp, and kAuto's choice of it. Every test skips with a message when no CUDA
// device is present.
#include <algorithm>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#if defined(STRIPESOLVE_HAVE_CUDA)
#include <climits>
#include <cuda_runtime.h>

#include "tridiag/cuda/interleaved_gepp.cuh"
#include "tridiag/cuda/quality_check.h"
#endif
#include "tridiag/cuda/kernel_limits.h"
#include "tridiag/gallery.h"
#include "tridiag/gpu.h"
#include "tridiag/gpu_test_batch.h"
#include "tridiag/tridiag.h"

namespace stripesolve::tridiag {
namespace {

// gepp on interleaved batches (a thread a system, interleaved_gepp.cu) against the CPU's gepp,
// dgtsv's algorithm, on random and ill-conditioned systems, through each of the kernel's
// variants kChoose takes for small batches (rows ahead in registers to n = 32, in shared memory
// to 64, every pivot row in device memory above; the others in the tests below): the same
// pivots, so the residuals agree within rounding (a reciprocal where dgtsv divides).
TEST(GpuTest, InterleavedGeppMatchesTheCpuGepp) {
  SKIP_WITHOUT_GPU();
  for (int type : {1, 5, 9, 14}) {
    for (std::size_t n : {1, 2, 3, 8, 17, 32, 33, 64, 65, 128, 256, 288, 1000}) {
      // Type 9's generator takes time quadratic in n (50 s for 300 systems of 1000 on the VM).
      if (type == 9 && n > 129) continue;
      SCOPED_TRACE("type " + std::to_string(type) + " n=" + std::to_string(n));
      const std::size_t m = 300;  // not a multiple of the kernel's blocks
      const std::vector<std::size_t> sizes(m, n);
      StridedSystems b = make_strided_batch(sizes, type);
      const StridedSystems il = interleaved(b, n, m);
      std::vector<double> xg(m * n), xc(m * n);
      SolveOptions opt;
      opt.algorithm = Algorithm::kGepp;
      auto rc = solve_batch(BatchShape{BatchLayout::kStrided, n, m, {}}, b.arrays(xc), opt);
      // Type 14 (diagonal 1e-8) overflows gepp in one system of 300 at n = 288 (x non-finite):
      // LAPACK's algorithm cannot solve such a system either, so there is nothing to compare.
      if (!rc.is_ok() && rc.status().code() == StatusCode::kNumerical) continue;
      ASSERT_TRUE(rc.is_ok()) << rc.status().to_string();
      GpuOptions gopt;
      gopt.solve = opt;
      auto r = solve_interleaved_on_gpu(il, n, m, gopt, xg);
      ASSERT_TRUE(r.is_ok()) << r.status().to_string();
      EXPECT_EQ(r->algorithm, Algorithm::kGepp);
      const std::vector<double> x = interleave(xg, n, m, /*back=*/true);
      const double res_c = max_residual(b, sizes, xc), res_g = max_residual(b, sizes, x);
      EXPECT_LE(res_g, 10 * res_c + 1e-15) << "CPU " << res_c;
      double nx = 0;
      for (double v : x) nx += v * v;
      EXPECT_GT(nx, 0.0);
    }
  }
}

// An interleaved batch of m systems of n (random U(-1,1)) solved by kAuto on the GPU with
// `options`: the algorithm that ran is `expected`, named in the first note as `note` says, and
// the solution is as accurate as the CPU's default on the same systems.
void expect_auto(std::size_t n, std::size_t m, const GpuOptions& options, Algorithm expected,
                 const std::string& note) {
  const std::vector<std::size_t> sizes(m, n);
  StridedSystems b = make_strided_batch(sizes, 1);
  const StridedSystems il = interleaved(b, n, m);
  std::vector<double> xg(m * n), xc(m * n);
  auto rc = solve_batch(BatchShape{BatchLayout::kStrided, n, m, {}}, b.arrays(xc), {});
  ASSERT_TRUE(rc.is_ok()) << rc.status().to_string();
  auto r = solve_interleaved_on_gpu(il, n, m, options, xg);
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_EQ(r->algorithm, expected);
  ASSERT_FALSE(r->notes.empty());
  EXPECT_EQ(r->notes[0], note);
  const std::vector<double> x = interleave(xg, n, m, /*back=*/true);
  EXPECT_LE(max_residual(b, sizes, x), 10 * max_residual(b, sizes, xc) + 1e-15);
}

// kAuto takes gepp for interleaved batches, through each of the kernel's variants here, but for
// a few large systems, which spike spreads over the device.
TEST(GpuTest, AutoTakesGeppForInterleavedBatches) {
  SKIP_WITHOUT_GPU();
  const std::string gepp = "auto chose gepp (stable requested, GPU)";
  for (std::size_t n : {32, 100}) {
    SCOPED_TRACE("n=" + std::to_string(n));
    expect_auto(n, 1000, {}, Algorithm::kGepp, gepp);
  }
  SCOPED_TRACE("n=200");
  expect_auto(200, gpu::kMinGeppSystems, {}, Algorithm::kGepp, gepp);
  expect_auto(200, 64, {}, Algorithm::kSpike, "auto chose spike (stable requested, GPU)");
}

// A singular system of an interleaved gepp batch is named with its row, as the CPU's gepp names
// it, in each of the variants kChoose takes for batches below kMinRecomputedGeppSystems (n = 200
// in a batch of kMinTailGeppSystems: the tail's); strided batches are refused, naming what the
// GPU offers.
TEST(GpuTest, InterleavedGeppNamesASingularSystemAndRefusesStridedBatches) {
  SKIP_WITHOUT_GPU();
  GpuOptions gopt;
  gopt.solve.algorithm = Algorithm::kGepp;
  for (std::size_t n : {6, 40, 200, 300}) {
    SCOPED_TRACE("n=" + std::to_string(n));
    const std::size_t m = n == 200 ? gpu::kMinTailGeppSystems : 70;
    StridedSystems b = make_strided_batch(std::vector<std::size_t>(m, n), 1);
    const std::size_t j = 65, row = n / 2;  // column n / 2 of system 65 zero
    b.du[j * n + row - 1] = 0.0;
    b.d[j * n + row] = 0.0;
    b.dl[j * n + row + 1] = 0.0;
    const StridedSystems il = interleaved(b, n, m);
    std::vector<double> x(m * n);
    auto r = solve_interleaved_on_gpu(il, n, m, gopt, x);
    ASSERT_FALSE(r.is_ok());
    EXPECT_EQ(
        r.status().message(),
        "system 65: gepp (GPU): matrix is singular: zero pivot at row " + std::to_string(row));
  }
  StridedSystems strided = make_strided_batch(std::vector<std::size_t>(2, 10), 1);
  std::vector<double> y(20);
  auto r = solve_batch_gpu(BatchShape{BatchLayout::kStrided, 10, 2, {}}, strided.arrays(y), gopt);
  EXPECT_EQ(r.status().code(), StatusCode::kUnimplemented);
  EXPECT_NE(r.status().message().find("gepp for interleaved batches"), std::string::npos)
      << r.status().message();
}

// Batches of kMinRecomputedGeppSystems systems take the variants that eliminate each chunk
// again for the substitution (chunks of 32 in shared memory, the last of 48, to n = 384, of 16
// in registers above): as accurate as the CPU's gepp, and a singular system named with its row,
// in the last chunk (n = 100: row 60 of steps 51-98) or an earlier one (n = 200: row 50).
TEST(GpuTest, LargeInterleavedGeppBatchesRecomputeTheirPivotRows) {
  SKIP_WITHOUT_GPU();
  GpuOptions gopt;
  gopt.solve.algorithm = Algorithm::kGepp;
  const std::size_t m = gpu::kMinRecomputedGeppSystems;
  for (std::size_t n : {100, 200, 401}) {
    SCOPED_TRACE("n=" + std::to_string(n));
    const std::vector<std::size_t> sizes(m, n);
    StridedSystems b = make_strided_batch(sizes, 1);
    std::vector<double> xg(m * n), xc(m * n);
    ASSERT_TRUE(
        solve_batch(BatchShape{BatchLayout::kStrided, n, m, {}}, b.arrays(xc), gopt.solve).is_ok());
    auto r = solve_interleaved_on_gpu(interleaved(b, n, m), n, m, gopt, xg);
    ASSERT_TRUE(r.is_ok()) << r.status().to_string();
    const std::vector<double> x = interleave(xg, n, m, /*back=*/true);
    EXPECT_LE(max_residual(b, sizes, x), 10 * max_residual(b, sizes, xc) + 1e-15);
    const std::size_t j = m - 3;  // the third system from the end: column `row` zero
    const std::size_t row = n == 200 ? 50 : n - 40;
    b.du[j * n + row - 1] = 0.0;
    b.d[j * n + row] = 0.0;
    b.dl[j * n + row + 1] = 0.0;
    auto singular = solve_interleaved_on_gpu(interleaved(b, n, m), n, m, gopt, xg);
    ASSERT_FALSE(singular.is_ok());
    EXPECT_EQ(singular.status().message(),
              "system " + std::to_string(j) +
                  ": gepp (GPU): matrix is singular: zero pivot at row " + std::to_string(row));
  }
}

#if defined(STRIPESOLVE_HAVE_CUDA)
// Where gepp's pivot rows in device memory alone would break the device budget, kAuto takes spike
// and says why.
TEST(GpuTest, AutoTakesSpikeWhereGeppsPivotRowsDoNotFit) {
  SKIP_WITHOUT_GPU();
  const std::size_t n = 300, m = gpu::kMinGeppSystems, rows = n * m;
  const std::size_t base =
      5 * rows * sizeof(double) + gpu::check_workspace_bytes(BatchLayout::kInterleaved, m);
  GpuOptions options;
  options.device_memory_budget =
      base + gpu::workspace_bytes(Algorithm::kSpike, BatchLayout::kInterleaved, rows, n);
  ASSERT_GT(base + gpu::workspace_bytes(Algorithm::kGepp, BatchLayout::kInterleaved, rows, n),
            options.device_memory_budget);
  expect_auto(n, m, options, Algorithm::kSpike,
              "auto chose spike (stable requested, GPU; gepp's pivot rows do not fit the device "
              "budget)");
}
#endif

#if defined(STRIPESOLVE_HAVE_CUDA)
// Which variant kChoose takes at each size and batch, and the device workspace each declares:
// 24 bytes for every row whose pivot row waits in device memory, or for every chunk's starting
// row. Host functions: no device needed.
TEST(GpuGeppKernelTest, ChoiceAndWorkspaceBySize) {
  using gpu::GeppKernel;
  const std::size_t few = gpu::kMinRecomputedGeppSystems - 1, many = gpu::kMinRecomputedGeppSystems;
  const std::size_t fewest = gpu::kMinTailGeppSystems - 1;
  struct Choice {
    std::size_t n, count;
    GeppKernel kernel;
  };
  const Choice chosen[] = {
      {1, few, GeppKernel::kRowsInRegisters},
      {gpu::kMaxRegisterGeppSystem, many, GeppKernel::kRowsInRegisters},
      {gpu::kMaxRegisterGeppSystem + 1, many, GeppKernel::kRowsInSharedMemory},
      {gpu::kMaxSharedGeppSystem, many, GeppKernel::kRowsInSharedMemory},
      {gpu::kMaxSharedGeppSystem + 1, few, GeppKernel::kTailInDeviceMemory},
      {gpu::kMaxTailGeppSystem, few, GeppKernel::kTailInDeviceMemory},
      {gpu::kMaxTailGeppSystem + 1, few, GeppKernel::kPivotRowsInDeviceMemory},
      {gpu::kMaxSharedGeppSystem + 1, gpu::kMinTailGeppSystems, GeppKernel::kTailInDeviceMemory},
      {gpu::kMaxSharedGeppSystem + 1, fewest, GeppKernel::kPivotRowsInDeviceMemory},
      {gpu::kMaxTailGeppSystem, fewest, GeppKernel::kPivotRowsInDeviceMemory},
      {16384, 1, GeppKernel::kPivotRowsInDeviceMemory},
      {gpu::kMaxSharedGeppSystem + 1, many, GeppKernel::kTwistedChunksOf32LastOf48},
      {gpu::kMaxTwistedGeppSystem, many, GeppKernel::kTwistedChunksOf32LastOf48},
      {gpu::kMaxTwistedGeppSystem + 1, many, GeppKernel::kRecomputedChunksOf32LastOf48},
      {256, many, GeppKernel::kTwistedChunksOf32LastOf48},
      {255, many, GeppKernel::kRecomputedChunksOf32LastOf48},
      {gpu::kMaxSharedChunkGeppSystem, many, GeppKernel::kRecomputedChunksOf32LastOf48},
      {gpu::kMaxSharedChunkGeppSystem + 1, many, GeppKernel::kRecomputedChunksOf16InRegisters},
      {16384, many, GeppKernel::kRecomputedChunksOf16InRegisters}};
  for (const auto& c : chosen) {
    EXPECT_EQ(gpu::choose_gepp_kernel(c.n, c.count), c.kernel) << c.n << " x " << c.count;
  }
  // A batch checked as it is solved: chunks of 16 where it is large but at 32 < n <= 64, the
  // variants that eliminate once above n = 64 where it is not, and elsewhere the unchecked choice.
  EXPECT_EQ(gpu::choose_gepp_kernel(64, many, /*checked=*/true), GeppKernel::kRowsInSharedMemory);
  EXPECT_EQ(gpu::choose_gepp_kernel(33, many, /*checked=*/true), GeppKernel::kRowsInSharedMemory);
  for (std::size_t n : {1, 16, 32, 65, 200, 16384}) {
    EXPECT_EQ(gpu::choose_gepp_kernel(n, many, /*checked=*/true),
              GeppKernel::kRecomputedChunksOf16InRegisters)
        << n;
  }
  EXPECT_EQ(gpu::choose_gepp_kernel(200, few, /*checked=*/true), GeppKernel::kTailInDeviceMemory);
  EXPECT_EQ(gpu::choose_gepp_kernel(2000, few, /*checked=*/true),
            GeppKernel::kPivotRowsInDeviceMemory);
  EXPECT_EQ(gpu::choose_gepp_kernel(16, few, /*checked=*/true), GeppKernel::kRowsInRegisters);
  EXPECT_EQ(gpu::choose_gepp_kernel(64, few, /*checked=*/true), GeppKernel::kRowsInSharedMemory);
  // kChoose's workspace: the most either choice needs (at n = 200, the checked one's 13 chunks
  // against 7; at n = 16, its one chunk against none).
  EXPECT_EQ(gpu::interleaved_gepp_workspace_bytes(200, many), 24 * ((200 - 1 + 15) / 16) * many);
  EXPECT_EQ(gpu::interleaved_gepp_workspace_bytes(16, many), 24 * many);
  EXPECT_EQ(gpu::interleaved_gepp_workspace_bytes(2000, many), 24 * ((2000 - 1 + 15) / 16) * many);
  const std::size_t count = 1000;
  EXPECT_EQ(gpu::interleaved_gepp_workspace_bytes(64, count), 0u);
  EXPECT_EQ(gpu::interleaved_gepp_workspace_bytes(200, count), 24 * 200 * count);
  EXPECT_EQ(gpu::interleaved_gepp_workspace_bytes(200, gpu::kMinTailGeppSystems),
            24 * (200 - 32) * gpu::kMinTailGeppSystems);
  EXPECT_EQ(gpu::interleaved_gepp_workspace_bytes(2000, count), 24 * 2000 * count);
  EXPECT_EQ(gpu::interleaved_gepp_workspace_bytes(20, count, GeppKernel::kTailInDeviceMemory), 0u);
  EXPECT_EQ(gpu::interleaved_gepp_workspace_bytes(20, count, GeppKernel::kPivotRowsInDeviceMemory),
            24 * 20 * count);
  // Chunks of 32 steps, the last of 48: a start for every 32 steps, rounded up (more than the
  // chunks before the last: n = 33 has none but counts one, n = 34 two).
  for (const auto& [n, chunks] : {std::pair<std::size_t, std::size_t>{1, 0},
                                  {33, 1},
                                  {34, 2},
                                  {1024, 32},
                                  {1025, 32},
                                  {1026, 33}}) {
    EXPECT_EQ(
        gpu::interleaved_gepp_workspace_bytes(n, count, GeppKernel::kRecomputedChunksOf32LastOf48),
        24 * chunks * count)
        << n;
  }
  EXPECT_EQ(gpu::interleaved_gepp_workspace_bytes(129, count,
                                                  GeppKernel::kRecomputedChunksOf16InRegisters),
            24 * 8 * count);
  // From both ends: the upper half's chunks of 32, then the lower half's (n = 5: one each).
  EXPECT_EQ(
      gpu::interleaved_gepp_workspace_bytes(256, count, GeppKernel::kTwistedChunksOf32LastOf48),
      24 * 8 * count);
  EXPECT_EQ(gpu::interleaved_gepp_workspace_bytes(5, count, GeppKernel::kTwistedChunksOf32LastOf48),
            24 * 2 * count);
}

// The kernel's arguments for the batch (dl, d, du, f on the device) solved into x, the pivot
// flag and the non-finite flag in flags[0] and flags[1].
gpu::InterleavedGepp gepp_args(const DeviceCopy& dl, const DeviceCopy& d, const DeviceCopy& du,
                               const DeviceCopy& f, const DeviceCopy& x, std::size_t n,
                               std::size_t m, const DeviceCopy& flags,
                               const DeviceCopy& pivot_rows) {
  return {dl.as<double>(),
          d.as<double>(),
          du.as<double>(),
          f.as<double>(),
          x.as<double>(),
          n,
          m,
          flags.as<unsigned long long>(),
          flags.as<unsigned long long>() + 1,
          pivot_rows.as<double>()};
}

// Each of the kernel's variants launched directly, those kChoose never takes included, against
// the CPU's gepp on the same systems (where its shared memory holds them: all pivot rows there
// up to n = 288, registers' rows ahead measured up to 64). 203 systems: rows of the pivot rows in
// device memory that start mid-line and a last warp of 11; each kernel gets the workspace it
// declares (interleaved_gepp_workspace_bytes) and must not write past it, and solves in place
// too.
TEST(GpuTest, EveryGeppKernelMatchesTheCpuGepp) {
  SKIP_WITHOUT_GPU();
  using gpu::GeppKernel;
  ASSERT_EQ(gpu::set_interleaved_gepp_limits(), cudaSuccess);
  for (std::size_t n : {5, 49, 50, 64, 100, 128, 300}) {
    const std::size_t m = 203, rows = n * m;
    const std::vector<std::size_t> sizes(m, n);
    StridedSystems b = make_strided_batch(sizes, 1);
    std::vector<double> xc(rows);
    SolveOptions opt;
    opt.algorithm = Algorithm::kGepp;
    ASSERT_TRUE(
        solve_batch(BatchShape{BatchLayout::kStrided, n, m, {}}, b.arrays(xc), opt).is_ok());
    const StridedSystems il = interleaved(b, n, m);
    const DeviceCopy dl(il.dl), d(il.d), du(il.du), f(il.f), x{std::vector<double>(rows)};
    const DeviceCopy flags{std::vector<unsigned long long>(2, ULLONG_MAX)};
    for (GeppKernel kernel :
         {GeppKernel::kRowsInRegisters, GeppKernel::kRowsInSharedMemory,
          GeppKernel::kPivotRowsInDeviceMemory, GeppKernel::kTailInDeviceMemory,
          GeppKernel::kRecomputedChunksOf32LastOf48, GeppKernel::kRecomputedChunksOf16InRegisters,
          GeppKernel::kTwistedChunksOf32LastOf48}) {
      if ((kernel == GeppKernel::kRowsInRegisters && n > 64) ||
          (kernel == GeppKernel::kRowsInSharedMemory && n > 288)) {
        continue;
      }
      SCOPED_TRACE("n=" + std::to_string(n) + " kernel " +
                   std::to_string(static_cast<int>(kernel)));
      // The workspace the kernel declares, then a guard it must leave alone.
      const std::size_t declared = gpu::interleaved_gepp_workspace_bytes(n, m, kernel) / 8;
      constexpr std::size_t kGuard = 64;
      constexpr double kUntouched = 1234.5;
      const DeviceCopy pivot_rows{std::vector<double>(declared + kGuard, kUntouched)};
      const gpu::InterleavedGepp a = gepp_args(dl, d, du, f, x, n, m, flags, pivot_rows);
      ASSERT_EQ(cudaMemset(x.as<double>(), 0, rows * sizeof(double)), cudaSuccess);
      gpu::launch_interleaved_gepp(a, kernel, nullptr);
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      std::vector<double> xg(rows);
      unsigned long long found[2] = {0, 0};
      ASSERT_EQ(
          cudaMemcpy(xg.data(), x.as<double>(), rows * sizeof(double), cudaMemcpyDeviceToHost),
          cudaSuccess);
      ASSERT_EQ(
          cudaMemcpy(found, flags.as<unsigned long long>(), sizeof found, cudaMemcpyDeviceToHost),
          cudaSuccess);
      EXPECT_EQ(found[0], ULLONG_MAX) << "a pivot flagged";
      EXPECT_EQ(found[1], ULLONG_MAX) << "a non-finite x flagged";
      const std::vector<double> xs = interleave(xg, n, m, /*back=*/true);
      EXPECT_LE(max_residual(b, sizes, xs), 10 * max_residual(b, sizes, xc) + 1e-15);
      std::vector<double> guard(kGuard);
      ASSERT_EQ(cudaMemcpy(guard.data(), pivot_rows.as<double>() + declared, kGuard * 8,
                           cudaMemcpyDeviceToHost),
                cudaSuccess);
      EXPECT_EQ(guard, std::vector<double>(kGuard, kUntouched)) << "written past its workspace";
      // In place, x over f: the same bits (the recomputing variants read f again after the
      // substitution has begun).
      ASSERT_EQ(cudaMemcpy(x.as<double>(), f.as<double>(), rows * sizeof(double),
                           cudaMemcpyDeviceToDevice),
                cudaSuccess);
      gpu::InterleavedGepp in_place = a;
      in_place.f = x.as<double>();
      gpu::launch_interleaved_gepp(in_place, kernel, nullptr);
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      std::vector<double> xp(rows);
      ASSERT_EQ(
          cudaMemcpy(xp.data(), x.as<double>(), rows * sizeof(double), cudaMemcpyDeviceToHost),
          cudaSuccess);
      EXPECT_EQ(xp, xg) << "in place";
    }
  }
}

// gepp from both ends (two threads a system) names a singular system's zero column wherever it
// lies: in the upper half, in the lower half, or in either column where the halves meet; in a
// whole group of 32 systems and in the rest that block 0 solves whole (system 200 of 203). The
// other systems still solve.
TEST(GpuTest, GeppFromBothEndsNamesASingularColumnInEitherHalf) {
  SKIP_WITHOUT_GPU();
  ASSERT_EQ(gpu::set_interleaved_gepp_limits(), cudaSuccess);
  const std::size_t m = 203;
  for (std::size_t n : {7, 100, 256}) {
    for (std::size_t column : {std::size_t{2}, n / 2 - 1, n / 2, n - 2}) {
      for (std::size_t j : {std::size_t{65}, std::size_t{200}}) {
        SCOPED_TRACE("n=" + std::to_string(n) + " column " + std::to_string(column) + " system " +
                     std::to_string(j));
        const std::size_t rows = n * m;
        StridedSystems b = make_strided_batch(std::vector<std::size_t>(m, n), 1);
        b.du[j * n + column - 1] = 0.0;
        b.d[j * n + column] = 0.0;
        b.dl[j * n + column + 1] = 0.0;
        const StridedSystems il = interleaved(b, n, m);
        const DeviceCopy dl(il.dl), d(il.d), du(il.du), f(il.f), x{std::vector<double>(rows)};
        const DeviceCopy flags{std::vector<unsigned long long>(2, ULLONG_MAX)};
        const std::size_t declared = gpu::interleaved_gepp_workspace_bytes(
                                         n, m, gpu::GeppKernel::kTwistedChunksOf32LastOf48) /
                                     8;
        const DeviceCopy pivot_rows{std::vector<double>(declared)};
        const gpu::InterleavedGepp a = gepp_args(dl, d, du, f, x, n, m, flags, pivot_rows);
        gpu::launch_interleaved_gepp(a, gpu::GeppKernel::kTwistedChunksOf32LastOf48, nullptr);
        ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
        unsigned long long found[2] = {0, 0};
        ASSERT_EQ(
            cudaMemcpy(found, flags.as<unsigned long long>(), sizeof found, cudaMemcpyDeviceToHost),
            cudaSuccess);
        EXPECT_EQ(found[0], j * n + column);
        std::vector<double> xg(rows);
        ASSERT_EQ(
            cudaMemcpy(xg.data(), x.as<double>(), rows * sizeof(double), cudaMemcpyDeviceToHost),
            cudaSuccess);
        const std::vector<double> xs = interleave(xg, n, m, /*back=*/true);
        double worst = 0.0;
        for (std::size_t k = 0; k < m; ++k) {
          const std::size_t o = k * n;
          if (k != j) {
            worst =
                std::max(worst, relative_residual(&b.dl[o], &b.d[o], &b.du[o], &xs[o], &b.f[o], n));
          }
        }
        EXPECT_LE(worst, 1e-11);
      }
    }
  }
}
#endif

}  // namespace
}  // namespace stripesolve::tridiag
