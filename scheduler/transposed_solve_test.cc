// --pivot gepp end to end on a real store (the transpose, its factor, the transposed solve) and
// the safety net's switch to it, against LAPACK dgesv (whose pivoting gepp is).
#include "scheduler/transposed_solve.h"

#include <cstdlib>
#include <cstring>
#include <filesystem>

#include <gtest/gtest.h>

#include "scheduler/condition.h"
#include "scheduler/lapack_checks.h"
#include "scheduler/test_store.h"
#include "storage/generators.h"
#include "stripe/dense_reference.h"

namespace stripesolve::scheduler {
namespace {

using stripe::PivotMode;

class GeppSolveTest : public ::testing::Test, protected TestStore {
 protected:
  void SetUp() override { open_store("transposed_solve_test"); }
  void TearDown() override { close_store(); }

  Result<SolveReport> solve(const std::string& name, const std::vector<double>& b, int64_t nrhs,
                            const DenseSolveOptions& o, uint64_t budget,
                            const SolveCallbacks& cb = {}) {
    EngineConfig c;
    c.ram_budget = budget;
    c.elim_j_workers = 2;
    c.cores = 2;
    c.progress_interval_seconds = 0.01;
    c.gpu_memory = kTestGpuMemory;  // test_store.h
    CancelToken cancel;
    return solve_dense(*store_, name, b.data(), nrhs, o, c, cancel, cb, nullptr);
  }

  static DenseSolveOptions gepp() {
    DenseSolveOptions o;
    o.pivot = PivotMode::kGepp;
    return o;
  }
};

// A budget of a few stripes: the transpose goes in several groups, every pass streams.
uint64_t few_stripes(int64_t n, int64_t s) {
  return static_cast<uint64_t>(5 * s * n * 8) + (64 << 10);
}

TEST_F(GeppSolveTest, MatchesLapackOnRaggedOrdersWithEveryStrategy) {
  const int64_t s = 32;
  for (int64_t n : {1, 5, 77, 200, 333}) {
    const std::string name = std::string("U").append(std::to_string(n));
    const auto a = generated(name, n, s, "uniform", n);
    const auto b = stripe::uniform_matrix(n, 2, 99);
    for (Strategy st : {Strategy::kBasic, Strategy::kZigzag, Strategy::kMetaZigzag}) {
      const std::string what = name + " " + std::string(strategy_name(st));
      DenseSolveOptions o = gepp();
      o.strategy = st;
      o.reuse_factors = false;
      auto rep = solve(name, b, 2, o, few_stripes(n, s));
      ASSERT_TRUE(rep.is_ok()) << what << ": " << rep.status().to_string();
      EXPECT_EQ(rep->factor_name, name + ".lu.gepp") << what;
      EXPECT_EQ(rep->pivot, PivotMode::kGepp) << what;
      EXPECT_TRUE(rep->warning.empty()) << what << ": " << rep->warning;
      EXPECT_TRUE(rep->pivot_switch.empty()) << what;
      expect_solution_near_lapack(a, n, b, 2, *rep, 1e-13, what);
    }
    auto t = store_->info(transpose_name_for(name));
    ASSERT_TRUE(t.is_ok()) << t.status().to_string();
    EXPECT_EQ(t->kind, "transpose");
  }
}

// The transposed Wilkinson matrix grows row pivoting by 2^(n-1) and gepp not at all; the
// Wilkinson matrix itself the other way round. The default switches to gepp on its own.
TEST_F(GeppSolveTest, WilkinsonTransposedIsStableWithGeppAndTheDefaultSwitches) {
  const int64_t n = 160;
  const int64_t s = 16;
  const auto a = generated("W", n, s, "wilkinson_t");
  const auto b = stripe::uniform_matrix(n, 1, 42);
  const double lapack =
      stripe::scaled_residual(a.data(), n, stripe::lapack_solve(a, n, b, 1).data(), b.data(), 1);

  auto g = solve("W", b, 1, gepp(), few_stripes(n, s));
  ASSERT_TRUE(g.is_ok()) << g.status().to_string();
  EXPECT_TRUE(g->warning.empty()) << g->warning;
  EXPECT_LE(g->residual, g->tolerance);
  EXPECT_LE(g->growth, 2.0);
  EXPECT_GT(g->rcond, 1e-4);  // condition 160: the estimate is trustworthy from stable factors
  expect_solution_near_lapack(a, n, b, 1, *g, 10 * std::max(lapack, 1e-16), "gepp");

  // Row pivoting without refinement: no switch, the warning points to gepp.
  DenseSolveOptions row;
  row.refinement_steps = 0;
  auto plain = solve("W", b, 1, row, few_stripes(n, s));
  ASSERT_TRUE(plain.is_ok()) << plain.status().to_string();
  EXPECT_GT(plain->growth, kUnstableGrowth);
  EXPECT_NE(plain->warning.find("try --pivot gepp"), std::string::npos) << plain->warning;
  EXPECT_TRUE(plain->pivot_switch.empty());

  // The default (row, auto refinement): re-solved with gepp, said so, no warning left. The
  // solution chunks are the final x's.
  std::vector<double> chunked(static_cast<size_t>(n), 0.0);
  SolveCallbacks cb;
  cb.on_solution_chunk = [&](int64_t r0, int64_t rows, const double* x) {
    std::memcpy(chunked.data() + r0, x, sizeof(double) * static_cast<size_t>(rows));
    return Status::ok();
  };
  auto switched = solve("W", b, 1, DenseSolveOptions{}, few_stripes(n, s), cb);
  ASSERT_TRUE(switched.is_ok()) << switched.status().to_string();
  EXPECT_EQ(switched->pivot, PivotMode::kGepp);
  EXPECT_TRUE(switched->warning.empty()) << switched->warning;
  EXPECT_NE(switched->pivot_switch.find("row pivoting grew by"), std::string::npos)
      << switched->pivot_switch;
  EXPECT_NE(switched->pivot_switch.find("re-solved with gepp"), std::string::npos);
  EXPECT_TRUE(switched->reused_factors);  // W.lu.gepp from the first solve
  expect_solution_near_lapack(a, n, b, 1, *switched, 10 * std::max(lapack, 1e-16), "switched");
  EXPECT_EQ(chunked, switched->x);

  // The Wilkinson matrix: row pivoting is stable, gepp grows and says to try row.
  const auto w = generated("V", n, s, "wilkinson");
  auto v = solve("V", b, 1, gepp(), few_stripes(n, s));
  ASSERT_TRUE(v.is_ok()) << v.status().to_string();
  EXPECT_GT(v->growth, kUnstableGrowth);
  if (!v->warning.empty()) {
    EXPECT_NE(v->warning.find("try --pivot row"), std::string::npos) << v->warning;
  }
}

TEST_F(GeppSolveTest, GradedMatchesLapackAndEstimatesTheCondition) {
  const int64_t n = 200;
  const int64_t s = 32;
  const auto a = generated("G", n, s, "graded", 3);
  const auto b = stripe::uniform_matrix(n, 1, 4);
  const double true_rcond = 1.0 / (stripe::norm_1(a, n) * stripe::inverse_norm_1(a, n));
  auto rep = solve("G", b, 1, gepp(), few_stripes(n, s));
  ASSERT_TRUE(rep.is_ok()) << rep.status().to_string();
  expect_solution_near_lapack(a, n, b, 1, *rep, 1e-13, "graded");
  EXPECT_GE(rep->growth, 1.0);
  EXPECT_GT(rep->rcond, true_rcond * 0.999);
  EXPECT_LT(rep->rcond, true_rcond * 10);
}

TEST_F(GeppSolveTest, FactorAndTransposeAreReusedRemadeAndRemovedWithTheMatrix) {
  const int64_t n = 150;
  const int64_t s = 32;
  const auto a = generated("A", n, s, "uniform", 1);
  const auto b = stripe::uniform_matrix(n, 1, 2);
  auto first = solve("A", b, 1, gepp(), 64 << 20);
  ASSERT_TRUE(first.is_ok()) << first.status().to_string();
  EXPECT_FALSE(first->reused_factors);
  auto second = solve("A", b, 1, gepp(), 64 << 20);
  ASSERT_TRUE(second.is_ok()) << second.status().to_string();
  EXPECT_TRUE(second->reused_factors);
  EXPECT_EQ(second->io_written_bytes, 0u);
  // A made again under its name: the transpose and the factor are made again from it.
  ASSERT_TRUE(store_->remove("A").is_ok());
  const auto a2 = generated("A", n, s, "uniform", 1234);
  auto third = solve("A", b, 1, gepp(), 64 << 20);
  ASSERT_TRUE(third.is_ok()) << third.status().to_string();
  EXPECT_FALSE(third->reused_factors);
  expect_solution_near_lapack(a2, n, b, 1, *third, 1e-13, "after replacement");
  auto t = store_->info("A.t");
  auto m = store_->info("A");
  ASSERT_TRUE(t.is_ok() && m.is_ok());
  EXPECT_TRUE(storage::is_factor_of(*t, *m));
  auto removed = store_->remove_with_factors("A");
  ASSERT_TRUE(removed.is_ok()) << removed.status().to_string();
  EXPECT_EQ(removed->size(), 2u);
  EXPECT_TRUE(store_->list()->empty());
}

TEST_F(GeppSolveTest, SingularMatrixIsStillANumericalError) {
  const int64_t n = 100;
  // Row 70 zero (written over an identity by store_values): a zero column of A^T, whose
  // elimination meets a zero pivot.
  const storage::GeneratorSpec spec{"uniform", 31};
  std::vector<double> a(static_cast<size_t>(n * n));
  for (int64_t c = 0; c < n; ++c)
    for (int64_t r = 0; r < n; ++r)
      a[r + c * n] = r == 70 ? 0.0 : storage::generated_value(spec, n, r, c);
  ASSERT_NO_FATAL_FAILURE(store_values("S", n, 32, a));
  const auto b = stripe::uniform_matrix(n, 1, 32);
  auto rep = solve("S", b, 1, gepp(), 64 << 20);
  ASSERT_FALSE(rep.is_ok());
  EXPECT_EQ(rep.status().code(), StatusCode::kNumerical);
  EXPECT_EQ(rep.status().message().rfind("zero pivot at row", 0), 0u) << rep.status().to_string();
  EXPECT_EQ(store_->info("S.lu.gepp").status().code(), StatusCode::kNotFound);
}

TEST_F(GeppSolveTest, InPlaceIsRefused) {
  generated("A", 40, 16, "uniform");
  DenseSolveOptions o = gepp();
  o.in_place = true;
  auto rep = solve("A", stripe::uniform_matrix(40, 1, 1), 1, o, 64 << 20);
  EXPECT_EQ(rep.status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace stripesolve::scheduler
