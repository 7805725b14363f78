// The GPU tier's end-to-end tests' fixture (scheduler/gpu_dense_test.cc says what they cover,
// gpu_residual_test.cc the residual on the device): each test runs on the CUDA device (skipped
// with a message on a host without one) and on the host engine, and the helpers that compare
// solves with LAPACK.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <utility>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "backend/cpu/cpu_backend.h"
#include "backend/host_device_engine.h"
#include "base/units.h"
#include "gpu/devices.h"
#include "scheduler/arena_pinning.h"
#include "scheduler/dense_solve.h"
#include "scheduler/lapack_checks.h"
#include "scheduler/test_store.h"
#include "storage/generators.h"
#include "stripe/dense_reference.h"

namespace stripesolve::scheduler {

using stripe::PivotMode;

// The parameter: "cuda" (the device) or "host" (the host engine).
class GpuDenseTest : public ::testing::TestWithParam<std::string>, protected TestStore {
 protected:
  void SetUp() override {
    if (GetParam() == "cuda") {
      if (gpu::device_count() == 0) {
        GTEST_SKIP() << "no CUDA device on this host (or a build without CUDA): the GPU tier's "
                        "tests on the device run on the GPU machine (scripts/device-check.sh); "
                        "the host engine's run of the same test covers its logic here";
      }
      engine_ = backend::DeviceEngine::open(0).value();
    } else {
      engine_ = backend::make_host_device_engine();
    }
    open_store("gpu_dense_test");
  }
  void TearDown() override { close_store(); }

  std::vector<double> generated(const std::string& name, int64_t n, const std::string& generator,
                                uint64_t seed = 7) {
    return TestStore::generated(name, n, 64, generator, seed);
  }

  // The factor object's values (n x n, column-major) as stored.
  std::vector<double> stored(const std::string& name, int64_t n) {
    auto m = store_->open_factor(name).value();
    const storage::StripeGeometry& g = m->geometry();
    std::vector<double> a(static_cast<size_t>(n * n));
    for (int64_t i = 0; i < g.stripes; ++i) {
      const storage::PartLayout l = m->part_layout(i, 0);
      std::byte* buf = static_cast<std::byte*>(std::aligned_alloc(4096, l.buffer_bytes));
      EXPECT_TRUE(m->read_part(i, 0, buf).is_ok());
      const double* d = reinterpret_cast<const double*>(buf + l.data_offset);
      for (int64_t c = 0; c < n; ++c)
        for (int64_t r = 0; r < g.rows(i); ++r)
          a[(g.row_begin(i) + r) + c * n] = d[r + c * g.rows(i)];
      std::free(buf);
    }
    return a;
  }

  Result<SolveReport> solve(const std::string& name, const std::vector<double>& b, int64_t nrhs,
                            const DenseSolveOptions& o, const EngineConfig& c) {
    CancelToken cancel;
    return solve_dense(cpu_, c.backend == ComputeBackend::kCpu ? nullptr : engine_.get(), *store_,
                       name, b.data(), nrhs, o, c, cancel, {}, nullptr);
  }

  // streaming: a device budget below matrix + working set (J parts stream through segments).
  static EngineConfig gpu_engine(bool streaming) {
    EngineConfig c;
    c.backend = ComputeBackend::kCuda;
    c.ram_budget = 16 * kMiB;
    c.elim_j_workers = 2;
    c.meta_stripes = 3;
    c.gpu_memory = streaming ? 5 * kMiB : 256 * kMiB;
    c.segment_columns = streaming ? 128 : 0;
    c.progress_interval_seconds = 0.01;
    return c;
  }
  // gpu_engine(true) in the shape of the RAM tier: a 64 MiB cache, S^m = 4, and J parts streaming
  // in segments of 512 columns through a device budget of `gpu_memory`.
  static EngineConfig ram_tier_engine(uint64_t gpu_memory) {
    EngineConfig c = gpu_engine(true);
    c.ram_budget = 64 * kMiB;
    c.meta_stripes = 4;
    c.segment_columns = 512;
    c.gpu_memory = gpu_memory;
    return c;
  }

  // With engine_ as set by the test: a uniform n x n matrix (seed `seed`) and `nrhs` right-hand
  // sides solved at S^m = 4 with J parts streaming through an 18 MiB device budget, then
  // resident; both match LAPACK.
  void expect_streaming_and_resident_match_lapack(int64_t n, uint64_t seed, int64_t nrhs,
                                                  const std::string& label);

  backend::CpuBackend cpu_;
  std::unique_ptr<backend::DeviceEngine> engine_;
};

inline void expect_matches_lapack(const std::vector<double>& a, int64_t n,
                                  const std::vector<double>& b, int64_t nrhs,
                                  const SolveReport& rep, double bound, const std::string& what) {
  expect_solution_near_lapack(a, n, b, nrhs, rep, bound, what);
  EXPECT_NE(rep.backend, "cpu") << what;
}

// A solve with strategy s and pivot mode p that makes its factors anew.
inline DenseSolveOptions fresh_factors(Strategy s, PivotMode p) {
  DenseSolveOptions o;
  o.pivot = p;
  o.strategy = s;
  o.reuse_factors = false;
  return o;
}

// A solve that makes its factors anew and does not keep them.
inline DenseSolveOptions throwaway_factors() {
  DenseSolveOptions o;
  o.reuse_factors = false;
  o.store_factors = false;
  return o;
}

// "strategy / pivot mode / streaming or resident", what a failed check names.
inline std::string run_label(Strategy s, PivotMode p, bool streaming) {
  return std::string(strategy_name(s)) + " / " + std::string(backend::pivot_mode_name(p)) +
         (streaming ? " / streaming" : " / resident");
}

// The largest |a - reference| and the largest |reference| entry.
inline std::pair<double, double> difference(const std::vector<double>& a,
                                            const std::vector<double>& reference) {
  double worst = 0, scale = 0;
  for (size_t k = 0; k < reference.size(); ++k) {
    worst = std::max(worst, std::fabs(a[k] - reference[k]));
    scale = std::max(scale, std::fabs(reference[k]));
  }
  return {worst, scale};
}

inline std::vector<double> random_rhs(int64_t n, int64_t nrhs) {
  std::vector<double> b(static_cast<size_t>(n * nrhs));
  for (size_t k = 0; k < b.size(); ++k) b[k] = std::sin(0.37 * static_cast<double>(k) + 1.0);
  return b;
}

}  // namespace stripesolve::scheduler
