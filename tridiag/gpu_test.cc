// GPU results against CPU results (same algorithm) and LAPACK, with the CPU tests' bounds
// (breakdowns and fallbacks: gpu_breakdown_test.cc). Every test skips with a message when no
// CUDA device is present.
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#if defined(STRIPESOLVE_HAVE_CUDA)
#include <cuda_runtime.h>

#include "tridiag/cuda/quality_check.h"
#endif
#include "gpu/devices.h"
#include "tridiag/gallery.h"
#include "tridiag/gpu.h"
#include "tridiag/gpu_test_batch.h"
#include "tridiag/lapack_reference.h"
#include "tridiag/tridiag.h"

namespace stripesolve::tridiag {
namespace {

void compare(Algorithm alg, const std::vector<std::size_t>& sizes, int type, BatchLayout layout) {
  StridedSystems b = make_strided_batch(sizes, type);
  const std::size_t rows = b.f.size();
  BatchShape shape{layout, sizes[0], sizes.size(), {}};
  if (layout == BatchLayout::kRagged) shape.sizes = sizes;
  std::vector<double> xc(rows), xg(rows);
  SolveOptions opt;
  opt.algorithm = alg;
  auto rc = solve_batch(shape, b.arrays(xc), opt);
  ASSERT_TRUE(rc.is_ok()) << rc.status().to_string();
  GpuOptions gopt;
  gopt.solve = opt;
  auto rg = solve_batch_gpu(shape, b.arrays(xg), gopt);
  ASSERT_TRUE(rg.is_ok()) << rg.status().to_string();
  double nx = 0;
  for (double v : xg) nx += v * v;
  EXPECT_GT(nx, 0.0);
  const double res_c = max_residual(b, sizes, xc), res_g = max_residual(b, sizes, xg);
  EXPECT_LE(res_g, 10 * res_c + 1e-15) << "CPU " << res_c;
}

TEST(GpuTest, StridedBatchesEveryGpuAlgorithm) {
  SKIP_WITHOUT_GPU();
  for (Algorithm alg : {Algorithm::kSpike, Algorithm::kThomas, Algorithm::kCr, Algorithm::kPcr,
                        Algorithm::kCrPcr, Algorithm::kPcrThomas, Algorithm::kCrPcrThomas}) {
    for (std::size_t n : {1, 2, 3, 5, 33, 34, 64, 100, 257, 1000, 2048, 3000, 4096}) {
      SCOPED_TRACE(std::string(algorithm_name(alg)) + " n=" + std::to_string(n));
      compare(alg, std::vector<std::size_t>(129, n), 0, BatchLayout::kStrided);
    }
  }
}

// More systems than the blocks that loop over them (several a block for n > 1024, where each
// copies its next system while it solves one).
TEST(GpuTest, ReductionBlocksLoopingOverSystems) {
  SKIP_WITHOUT_GPU();
  for (Algorithm alg : {Algorithm::kCr, Algorithm::kPcr, Algorithm::kCrPcr, Algorithm::kPcrThomas,
                        Algorithm::kCrPcrThomas}) {
    for (std::size_t n : {1500, 2048, 3000, 3001, 4096}) {
      SCOPED_TRACE(std::string(algorithm_name(alg)) + " n=" + std::to_string(n));
      compare(alg, std::vector<std::size_t>(700, n), 0, BatchLayout::kStrided);
    }
  }
}

TEST(GpuTest, SpikeOnRandomMatricesAndRaggedBatches) {
  SKIP_WITHOUT_GPU();
  compare(Algorithm::kSpike, std::vector<std::size_t>(64, 1000), 1, BatchLayout::kStrided);
  compare(Algorithm::kSpike, {(std::size_t{1} << 20) + 7}, 1, BatchLayout::kStrided);
  const std::vector<std::size_t> sizes = {1, 2, 3, 100, 33, 1, 5170, 64, 2, 1000, 70000};
  for (Algorithm alg : {Algorithm::kSpike, Algorithm::kThomas}) {
    SCOPED_TRACE(algorithm_name(alg));
    compare(alg, sizes, 0, BatchLayout::kRagged);
  }
  compare(Algorithm::kSpike, sizes, 1, BatchLayout::kRagged);
}

// Interleaved batches run the strided batches' kernels, reading and writing in place: the
// solution must be as good as the CPU's spike on the same systems (the strided tests' rule)
// for every kernel choice (whole systems per warp, a warp's 288 rows, several warps, two
// passes), and thomas exact on diagonally dominant systems.
TEST(GpuTest, InterleavedBatches) {
  SKIP_WITHOUT_GPU();
  for (Algorithm alg : {Algorithm::kSpike, Algorithm::kThomas}) {
    for (std::size_t n : {1, 2, 3, 17, 64, 256, 288, 289, 1001, 4608, 5000}) {
      SCOPED_TRACE(std::string(algorithm_name(alg)) + " n=" + std::to_string(n));
      const std::size_t m = 300;
      const std::vector<std::size_t> sizes(m, n);
      StridedSystems b = make_strided_batch(sizes, alg == Algorithm::kSpike ? 1 : 0);
      const StridedSystems il = interleaved(b, n, m);
      std::vector<double> xg(m * n), x(m * n), xc(m * n);
      SolveOptions opt;
      opt.algorithm = alg;
      auto rc = solve_batch(BatchShape{BatchLayout::kStrided, n, m, {}}, b.arrays(xc), opt);
      ASSERT_TRUE(rc.is_ok()) << rc.status().to_string();
      GpuOptions gopt;
      gopt.solve = opt;
      auto r = solve_interleaved_on_gpu(il, n, m, gopt, xg);
      ASSERT_TRUE(r.is_ok()) << r.status().to_string();
      for (std::size_t j = 0; j < m; ++j)
        for (std::size_t i = 0; i < n; ++i) x[j * n + i] = xg[i * m + j];
      const double res_c = max_residual(b, sizes, xc), res_g = max_residual(b, sizes, x);
      EXPECT_LE(res_g, 10 * res_c + 1e-15) << "CPU " << res_c;
      if (alg == Algorithm::kThomas) {
        EXPECT_LT(res_g, 1e-14);
      }
      double nx = 0;
      for (double v : x) nx += v * v;
      EXPECT_GT(nx, 0.0);
    }
  }
}

// Strided batches of sizes around the SPIKE tile (1152 rows) and partition (9 rows) edges,
// diagonally dominant and random.
TEST(GpuTest, StridedBatchesAroundTheTileEdges) {
  SKIP_WITHOUT_GPU();
  for (std::size_t n : {8, 9, 10, 127, 1151, 1152, 1153, 2305, 4095, 4608, 4609}) {
    for (Algorithm alg : {Algorithm::kSpike, Algorithm::kThomas}) {
      SCOPED_TRACE(std::string(algorithm_name(alg)) + " n=" + std::to_string(n));
      compare(alg, std::vector<std::size_t>(7, n), 0, BatchLayout::kStrided);
    }
    SCOPED_TRACE("random, spike, n=" + std::to_string(n));
    compare(Algorithm::kSpike, std::vector<std::size_t>(5, n), 1, BatchLayout::kStrided);
  }
}

// The one-pass kernel (group_spike.cu) around its edges: systems packed 288 / n to a warp
// (n <= 288), one system over several warps (289..4608), last block partly empty.
TEST(GpuTest, OnePassGroupsAroundTheirEdges) {
  SKIP_WITHOUT_GPU();
  for (std::size_t n : {4, 7, 143, 144, 145, 287, 288, 289, 575, 576, 577, 1000, 2880, 4607}) {
    for (std::size_t count : {std::size_t{1}, std::size_t{11}}) {
      for (Algorithm alg : {Algorithm::kSpike, Algorithm::kThomas}) {
        SCOPED_TRACE(std::string(algorithm_name(alg)) + " n=" + std::to_string(n) +
                     " count=" + std::to_string(count));
        compare(alg, std::vector<std::size_t>(count, n), 0, BatchLayout::kStrided);
      }
      SCOPED_TRACE("random, spike, n=" + std::to_string(n));
      compare(Algorithm::kSpike, std::vector<std::size_t>(count, n), 1, BatchLayout::kStrided);
    }
  }
}

// Every stability type as a strided batch of `count` systems of n: the GPU spike within 10x of
// the CPU spike wherever the CPU spike succeeds.
void expect_stability_suite_within_ten_times_cpu(std::size_t n, std::size_t count) {
  for (int type = 1; type <= kStabilityTypes; ++type) {
    SCOPED_TRACE("type " + std::to_string(type) + " n=" + std::to_string(n));
    const std::vector<std::size_t> sizes(count, n);
    StridedSystems b = make_strided_batch(sizes, type);
    std::vector<double> xc(n * count), xg(n * count);
    BatchShape shape{BatchLayout::kStrided, n, count, {}};
    SolveOptions opt;
    opt.algorithm = Algorithm::kSpike;
    auto rc = solve_batch(shape, b.arrays(xc), opt);
    if (!rc.is_ok()) continue;  // CPU spike reports a breakdown
    const double res_c = max_residual(b, sizes, xc);
    if (!std::isfinite(res_c)) continue;
    GpuOptions gopt;
    gopt.solve = opt;
    const BatchArrays arrays = b.arrays(xg);
    auto rg = solve_batch_gpu(shape, arrays, gopt);
    ASSERT_TRUE(rg.is_ok()) << rg.status().to_string();
    EXPECT_LE(max_residual(b, sizes, xg), 10 * res_c + 1e-15) << "CPU spike " << res_c;
  }
}

// The one-pass kernel: n = 1000 (4 warps in one block, several groups to a block) and n = 4096
// (15 warps in one block).
TEST(GpuTest, OnePassStabilitySuiteBatches) {
  SKIP_WITHOUT_GPU();
  expect_stability_suite_within_ten_times_cpu(1000, 4);
  expect_stability_suite_within_ten_times_cpu(4096, 4);
}

// Systems larger than a group go through two passes of the kernel around the system of their
// warp separators (288 rows a warp), which is solved the same way: one level below 1.3 M rows,
// two above. Every stability type at n = 20000 as well.
TEST(GpuTest, TwoPassesForSystemsLargerThanAGroup) {
  SKIP_WITHOUT_GPU();
  compare(Algorithm::kSpike, {1500007}, 1, BatchLayout::kStrided);
  compare(Algorithm::kThomas, {1500007}, 0, BatchLayout::kStrided);
  compare(Algorithm::kSpike, std::vector<std::size_t>(3, 9001), 1, BatchLayout::kStrided);
  expect_stability_suite_within_ten_times_cpu(20000, 1);
}

// "The same bound" as on the CPU: within 10x of the better of LAPACK dgtsv and the CPU SPIKE.
TEST(GpuTest, StabilitySuiteSpikeWithinTenTimesCpuSpike) {
  SKIP_WITHOUT_GPU();
  for (int type = 1; type <= kStabilityTypes; ++type) {
    SCOPED_TRACE("type " + std::to_string(type));
    const std::size_t n = 512;
    TridiagonalMatrix m = stability_matrix(type, n, 1000 + type);
    std::vector<double> f = random_vector(n, 77 + type), xc(n), xg(n), ref;
    BatchShape shape{BatchLayout::kStrided, n, 1, {}};
    SolveOptions opt;
    opt.algorithm = Algorithm::kSpike;
    auto rc = solve_batch(shape, {m.dl.data(), m.d.data(), m.du.data(), f.data(), xc.data()}, opt);
    if (!rc.is_ok()) continue;  // CPU spike reports a breakdown (types 15, 16)
    const double res_c =
        relative_residual(m.dl.data(), m.d.data(), m.du.data(), xc.data(), f.data(), n);
    if (!std::isfinite(res_c)) continue;
    double bound = res_c;
    if (lapack_dgtsv(m.dl.data(), m.d.data(), m.du.data(), f.data(), n, ref) == 0) {
      bound = std::max(
          bound, relative_residual(m.dl.data(), m.d.data(), m.du.data(), ref.data(), f.data(), n));
    }
    GpuOptions gopt;
    gopt.solve = opt;
    auto rg =
        solve_batch_gpu(shape, {m.dl.data(), m.d.data(), m.du.data(), f.data(), xg.data()}, gopt);
    ASSERT_TRUE(rg.is_ok()) << rg.status().to_string();
    const double res_g =
        relative_residual(m.dl.data(), m.d.data(), m.du.data(), xg.data(), f.data(), n);
    double nx = 0;
    for (double v : xg) nx += v * v;
    EXPECT_GT(nx, 0.0);
    EXPECT_LE(res_g, 10 * bound) << "CPU spike " << res_c;
  }
}

#if defined(STRIPESOLVE_HAVE_CUDA)
// The device check against the CPU's backward_error, system by system: the worst clean system
// and its error to the bit, the suspects (a spoiled and a NaN solution) with their errors, in the
// three layouts, for systems within a warp's step, across steps and over several warps. The
// ragged batch's couplings across systems are left non-zero: the check ignores them.
TEST(GpuTest, DeviceCheckMatchesTheCpuBackwardError) {
  SKIP_WITHOUT_GPU();
  for (std::size_t n : {1, 3, 31, 33, 700, 5000}) {
    for (BatchLayout layout :
         {BatchLayout::kStrided, BatchLayout::kInterleaved, BatchLayout::kRagged}) {
      SCOPED_TRACE("n=" + std::to_string(n) + " layout " +
                   std::to_string(static_cast<int>(layout)));
      const std::size_t count = 40;
      std::vector<std::size_t> sizes(count, n);
      if (layout == BatchLayout::kRagged) {
        for (std::size_t j = 0; j < count; ++j) sizes[j] = n + j % 3;
      }
      StridedSystems b = make_strided_batch(sizes, 1);
      std::vector<double> x(b.f.size());
      SolveOptions gepp;
      gepp.algorithm = Algorithm::kGepp;
      ASSERT_TRUE(solve_batch({BatchLayout::kRagged, 0, 0, sizes}, b.arrays(x), gepp).is_ok());
      std::vector<std::size_t> offsets = {0};
      for (std::size_t size : sizes) offsets.push_back(offsets.back() + size);
      x[offsets[7] + sizes[7] / 2] *= 1.0 + 1e-3;
      x[offsets[20] + sizes[20] - 1] = std::numeric_limits<double>::quiet_NaN();
      double worst = 0.0;
      std::size_t worst_system = 0;
      std::vector<double> errors(count);
      for (std::size_t j = 0; j < count; ++j) {
        const std::size_t o = offsets[j];
        errors[j] = backward_error(&b.dl[o], &b.d[o], &b.du[o], &x[o], &b.f[o], sizes[j]);
        if (j != 7 && j != 20 && errors[j] > worst) {
          worst = errors[j];
          worst_system = j;
        }
      }
      const bool il = layout == BatchLayout::kInterleaved;
      auto arrange = [&](const std::vector<double>& v) { return il ? interleave(v, n, count) : v; };
      DeviceCopy dl(arrange(b.dl)), d(arrange(b.d)), du(arrange(b.du)), f(arrange(b.f)),
          dx(arrange(x)), dev_offsets(offsets);
      const gpu::DeviceBatch batch{
          {dl.as<double>(), d.as<double>(), du.as<double>(), f.as<double>(), dx.as<double>()},
          b.f.size(),
          layout == BatchLayout::kStrided ? n : 0,
          count};
      const std::size_t bytes = gpu::check_workspace_bytes(layout, count);
      DeviceCopy ws{std::vector<char>(bytes)};
      gpu::DeviceCheck check;
      ASSERT_TRUE(gpu::check_on_device(
                      layout, batch, count,
                      layout == BatchLayout::kRagged ? dev_offsets.as<std::size_t>() : nullptr,
                      ws.as<void>(), bytes, nullptr, check)
                      .is_ok());
      EXPECT_EQ(check.worst_clean_error, worst);
      EXPECT_GT(check.worst_clean_error, 0.0);
      EXPECT_EQ(check.worst_clean_system, worst_system);
      ASSERT_EQ(check.suspects.size(), 2u);
      EXPECT_EQ(check.suspects[0].system, 7u);
      EXPECT_EQ(check.suspects[0].backward_error, errors[7]);
      EXPECT_EQ(check.suspects[1].system, 20u);
      EXPECT_EQ(check.suspects[1].backward_error, INFINITY);
      EXPECT_GT(check.seconds, 0.0);
    }
  }
}
#endif

TEST(GpuTest, OneSystemLargerThanTheDeviceBudgetInChunks) {
  SKIP_WITHOUT_GPU();
  const std::size_t n = 1'000'003;  // 40 MB of arrays through a 24 MB device budget
  TridiagonalMatrix m = stability_matrix(1, n, 3);
  std::vector<double> f = random_vector(n, 4), xg(n), ref;
  ASSERT_EQ(lapack_dgtsv(m.dl.data(), m.d.data(), m.du.data(), f.data(), n, ref), 0);
  const double rl =
      relative_residual(m.dl.data(), m.d.data(), m.du.data(), ref.data(), f.data(), n);
  GpuOptions gopt;
  gopt.device_memory_budget = 24 << 20;
  BatchShape shape{BatchLayout::kStrided, n, 1, {}};
  auto r =
      solve_batch_gpu(shape, {m.dl.data(), m.d.data(), m.du.data(), f.data(), xg.data()}, gopt);
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  ASSERT_GE(r->notes.size(), 2u);
  EXPECT_NE(r->notes[1].find("chunks of"), std::string::npos) << r->notes[1];
  const double rg = relative_residual(m.dl.data(), m.d.data(), m.du.data(), xg.data(), f.data(), n);
  EXPECT_LE(rg, 10 * rl) << "LAPACK " << rl;
}

}  // namespace
}  // namespace stripesolve::tridiag

namespace stripesolve::tridiag {
namespace {

// The largest difference of two solutions against the first's largest value.
double scaled_max_difference(const std::vector<double>& a, const std::vector<double>& b) {
  double diff = 0, scale = 0;
  for (std::size_t k = 0; k < a.size(); ++k) {
    diff = std::max(diff, std::fabs(a[k] - b[k]));
    scale = std::max(scale, std::fabs(a[k]));
  }
  return scale > 0 ? diff / scale : 1.0;
}

// A batch shared by two devices (solve_batch_gpus) agrees with the one-device solve to rounding
// (a part's kernel and tiling follow its own number of systems, so not bit for bit), the devices
// named in either order.
TEST(GpuTest, TwoDevicesShareStridedAndRaggedBatches) {
  SKIP_WITHOUT_GPU();
  if (::stripesolve::gpu::device_count() < 2)
    GTEST_SKIP() << "fewer than two CUDA devices: runs on a 2-GPU host";
  const std::vector<std::size_t> strided(37, 700);
  std::vector<std::size_t> ragged;
  for (std::size_t j = 0; j < 41; ++j) ragged.push_back(100 + 97 * j);
  for (BatchLayout layout : {BatchLayout::kStrided, BatchLayout::kRagged}) {
    const std::vector<std::size_t>& sizes = layout == BatchLayout::kStrided ? strided : ragged;
    StridedSystems b = make_strided_batch(sizes, 0);
    BatchShape shape{layout, sizes[0], sizes.size(), {}};
    if (layout == BatchLayout::kRagged) shape.sizes = sizes;
    std::vector<double> one(b.f.size()), two(b.f.size()), reversed(b.f.size());
    GpuOptions o;
    ASSERT_TRUE(solve_batch_gpu(shape, b.arrays(one), o).is_ok());
    auto r = solve_batch_gpus(shape, b.arrays(two), o, std::vector<int>{0, 1});
    ASSERT_TRUE(r.is_ok()) << r.status().to_string();
    EXPECT_LE(scaled_max_difference(one, two), 1e-12);
    EXPECT_LT(max_residual(b, sizes, two), 1e-12);
    EXPECT_NE(r->notes.back().find("2 devices"), std::string::npos);
    r = solve_batch_gpus(shape, b.arrays(reversed), o, std::vector<int>{1, 0});
    ASSERT_TRUE(r.is_ok()) << r.status().to_string();
    EXPECT_LE(scaled_max_difference(one, reversed), 1e-12);
  }
}

// An interleaved batch shared by two devices: each copies its run of systems' columns and solves
// them as a batch of its own. The solution agrees with the one-device solve to rounding, for
// systems several to a warp and over several warps, an odd count (parts of 18 and 19), and x in
// place of f; a system that breaks down on the second device is solved again with gepp and
// reported under its number in the batch.
TEST(GpuTest, TwoDevicesShareInterleavedBatches) {
  SKIP_WITHOUT_GPU();
  if (::stripesolve::gpu::device_count() < 2)
    GTEST_SKIP() << "fewer than two CUDA devices: runs on a 2-GPU host";
  const std::size_t m = 37;
  for (std::size_t n : {100, 700}) {
    SCOPED_TRACE("n=" + std::to_string(n));
    const std::vector<std::size_t> sizes(m, n);
    StridedSystems b = make_strided_batch(sizes, 0);
    StridedSystems il = interleaved(b, n, m);
    const BatchShape shape{BatchLayout::kInterleaved, n, m, {}};
    std::vector<double> one(m * n), two(m * n);
    GpuOptions o;
    const std::vector<int> both{0, 1};
    ASSERT_TRUE(solve_batch_gpu(shape, il.arrays(one), o).is_ok());
    auto r = solve_batch_gpus(shape, il.arrays(two), o, both);
    ASSERT_TRUE(r.is_ok()) << r.status().to_string();
    EXPECT_LE(scaled_max_difference(one, two), 1e-12);
    EXPECT_LT(max_residual(b, sizes, interleave(two, n, m, true)), 1e-12);
    const auto on_two = std::find_if(r->notes.begin(), r->notes.end(), [](const std::string& s) {
      return s.find("on 2 devices") != std::string::npos;
    });
    EXPECT_NE(on_two, r->notes.end());

    // x in place of f.
    std::vector<double> in_place = il.f;
    ASSERT_TRUE(solve_batch_gpus(
                    shape,
                    {il.dl.data(), il.d.data(), il.du.data(), in_place.data(), in_place.data()}, o,
                    both)
                    .is_ok());
    EXPECT_EQ(in_place, two);

    // System 30 (on device 1) breaks down under thomas: a zero first pivot.
    il.d[0 * m + 30] = 0.0;
    il.du[0 * m + 30] = 1.0;
    GpuOptions t;
    t.solve.algorithm = Algorithm::kThomas;
    t.solve.fallback = true;
    std::vector<double> x(m * n), x1(m * n);
    const auto r1 = solve_batch_gpu(shape, il.arrays(x1), t);
    ASSERT_TRUE(r1.is_ok()) << r1.status().to_string();
    r = solve_batch_gpus(shape, il.arrays(x), t, both);
    ASSERT_TRUE(r.is_ok()) << r.status().to_string();
    // The systems that fell back (30, and any that shared its warp's levels) are numbered in the
    // batch, as on one device.
    EXPECT_EQ(r->fell_back, r1->fell_back);
    EXPECT_NE(std::find(r->fell_back.begin(), r->fell_back.end(), 30u), r->fell_back.end());
    EXPECT_EQ(r->warned, 0u);
    EXPECT_LE(r->max_backward_error, r->tolerance);
    const auto broke = std::find_if(r->notes.begin(), r->notes.end(), [](const std::string& s) {
      return s.find("on device 1") != std::string::npos;
    });
    EXPECT_NE(broke, r->notes.end());

    // The devices named the other way round: system 30's part is on device 0 now.
    std::vector<double> x_reversed(m * n);
    r = solve_batch_gpus(shape, il.arrays(x_reversed), t, std::vector<int>{1, 0});
    ASSERT_TRUE(r.is_ok()) << r.status().to_string();
    EXPECT_EQ(r->fell_back, r1->fell_back);
    EXPECT_LE(scaled_max_difference(x, x_reversed), 1e-12);
    EXPECT_NE(std::find_if(
                  r->notes.begin(), r->notes.end(),
                  [](const std::string& s) { return s.find("on device 0") != std::string::npos; }),
              r->notes.end());
  }
}

// Systems of 4096 rows take the one-pass kernel with more than the default 48 KB of shared
// memory, whose limit is raised per device: a process that raised it on device 0 only failed
// every such launch on device 1 (the daemon's tridiagonal jobs on a 2-GPU host).
TEST(GpuTest, LargeSystemsSolveOnEveryDevice) {
  SKIP_WITHOUT_GPU();
  const int devices = ::stripesolve::gpu::device_count();
  if (devices < 2) GTEST_SKIP() << "fewer than two CUDA devices: runs on a 2-GPU host";
  const std::vector<std::size_t> sizes(16, 4096);
  StridedSystems b = make_strided_batch(sizes, 0);
  const BatchShape shape{BatchLayout::kStrided, sizes[0], sizes.size(), {}};
  for (int d = 0; d < devices; ++d) {
    std::vector<double> x(b.f.size());
    GpuOptions o;
    o.device = d;
    const auto r = solve_batch_gpu(shape, b.arrays(x), o);
    ASSERT_TRUE(r.is_ok()) << "device " << d << ": " << r.status().to_string();
    EXPECT_LT(max_residual(b, sizes, x), 1e-12) << "device " << d;
  }
}

}  // namespace
}  // namespace stripesolve::tridiag
