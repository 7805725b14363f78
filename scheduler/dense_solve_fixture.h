// The fixture of the dense solve's end-to-end tests (dense_solve_test.cc, dense_quality_test.cc):
// a real store in a temp directory, engines small enough to go out of core, and the check of a
// solution against LAPACK dgesv.
#pragma once

#include <cmath>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "scheduler/dense_solve.h"
#include "scheduler/lapack_checks.h"
#include "scheduler/test_store.h"
#include "stripe/dense_reference.h"

namespace stripesolve::scheduler {

class DenseSolveTest : public ::testing::Test, protected TestStore {
 protected:
  void SetUp() override { open_store("dense_solve_test"); }
  void TearDown() override { close_store(); }

  Result<SolveReport> solve(const std::string& name, const std::vector<double>& b, int64_t nrhs,
                            const DenseSolveOptions& o, const EngineConfig& c,
                            const SolveCallbacks& cb = {}, TraceRecorder* trace = nullptr) {
    CancelToken cancel;
    return solve_dense(*store_, name, b.data(), nrhs, o, c, cancel, cb, trace);
  }

  static EngineConfig small_engine(uint64_t budget, int64_t workers = 2) {
    EngineConfig c;
    c.ram_budget = budget;
    c.elim_j_workers = workers;
    c.cores = 2;
    c.progress_interval_seconds = 0.01;
    // On a GPU machine: a device budget of its own per solve (the default takes 90% of the free
    // memory), so that the tests run side by side (ctest -j) on one card.
    c.gpu_memory = kTestGpuMemory;
    return c;
  }
  // small_engine on the CPU whatever the machine has: for the tests of what the CPU engine does
  // (its trace's roles and phases, its bits); gpu_dense_test has the GPU tier's.
  static EngineConfig cpu_engine(uint64_t budget) {
    EngineConfig c = small_engine(budget);
    c.backend = ComputeBackend::kCpu;
    return c;
  }

  // `name` solved with the quality contract off, then on (`o` otherwise as given): the two
  // reports, or none after a failure (reported).
  std::vector<SolveReport> off_then_on(const std::string& name, const std::vector<double>& b,
                                       DenseSolveOptions o, const EngineConfig& c) {
    std::vector<SolveReport> reps;
    for (const bool quality : {false, true}) {
      o.check_quality = quality;
      auto rep = solve(name, b, 1, o, c);
      EXPECT_TRUE(rep.is_ok()) << name << ": " << rep.status().to_string();
      if (!rep.is_ok()) return {};
      reps.push_back(std::move(*rep));
    }
    return reps;
  }

  // The resume tests' setting: a uniform 640 x 640 "A" in stripes of 64 (made by the call), one
  // right-hand side b, factors made anew and four stripes of RAM, so that dirty stripes go back
  // to the factor object all along.
  struct ResumeSetting {
    std::vector<double> b;
    DenseSolveOptions options;
    EngineConfig config;
  };
  ResumeSetting resume_setting() {
    const int64_t n = 640, s = 64;
    generated("A", n, s, "uniform");
    ResumeSetting r{stripe::uniform_matrix(n, 1, 5), {}, cpu_engine(4 * 8ull * s * n + 8 * 4096)};
    r.options.reuse_factors = false;
    return r;
  }
};

// Checks x against LAPACK: scaled residual small, x close to dgesv's, not trivially zero.
inline void expect_matches_lapack(const std::vector<double>& a, int64_t n,
                                  const std::vector<double>& b, int64_t nrhs,
                                  const SolveReport& rep, double bound, const std::string& what) {
  const std::vector<double> ref = expect_solution_near_lapack(a, n, b, nrhs, rep, bound, what);
  if (ref.empty()) return;
  double diff = 0;
  for (size_t k = 0; k < ref.size(); ++k) diff = std::max(diff, std::fabs(rep.x[k] - ref[k]));
  EXPECT_LT(diff, 1e-6 * stripe::max_abs(ref) + 1e-12) << what;
}

}  // namespace stripesolve::scheduler
