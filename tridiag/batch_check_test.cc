// The quality check's shared remedy and report (batch_check.h), as the GPU path uses them: the
// systems an outside check singled out are solved again with gepp (only those) or warned about,
// and the report reads exactly as check_solution's on the CPU.
#include "tridiag/batch_check.h"

#include <cmath>
#include <cstring>

#include <gtest/gtest.h>

#include "tridiag/gallery.h"

namespace stripesolve::tridiag {
namespace {

// Four U(-1,1) systems one after another, solved by gepp, then systems 1 and 3 spoiled.
struct Spoiled {
  std::vector<std::size_t> sizes = {20, 33, 7, 50};
  std::vector<double> dl, d, du, f, good, x;

  Spoiled() {
    for (std::size_t j = 0; j < sizes.size(); ++j) {
      const TridiagonalMatrix m = stability_matrix(1, sizes[j], 40 + j);
      const std::vector<double> rhs = random_vector(sizes[j], 50 + j);
      dl.insert(dl.end(), m.dl.begin(), m.dl.end());
      d.insert(d.end(), m.d.begin(), m.d.end());
      du.insert(du.end(), m.du.begin(), m.du.end());
      f.insert(f.end(), rhs.begin(), rhs.end());
    }
    good.assign(f.size(), 0.0);
    SolveOptions gepp;
    gepp.algorithm = Algorithm::kGepp;
    EXPECT_TRUE(solve_batch(shape(), arrays(good), gepp).is_ok());
    x = good;
    x[20 + 4] *= 1.0 + 1e-6;            // system 1
    x[20 + 33 + 7 + 9] = std::nan("");  // system 3
  }
  BatchShape shape() const { return {BatchLayout::kRagged, 0, 0, sizes}; }
  BatchArrays arrays(std::vector<double>& out) const {
    return {dl.data(), d.data(), du.data(), f.data(), out.data()};
  }
  double eta(const std::vector<double>& v, std::size_t j) const {
    std::size_t o = 0;
    for (std::size_t k = 0; k < j; ++k) o += sizes[k];
    return backward_error(&dl[o], &d[o], &du[o], &v[o], &f[o], sizes[j]);
  }
  // What a device check reports: the suspects and the worst of the others.
  BatchOutcome outside_check(std::vector<Suspect>& suspects) const {
    BatchOutcome out;
    out.systems = sizes.size();
    out.tolerance = backward_error_tolerance(50);
    for (std::size_t j : {std::size_t{0}, std::size_t{2}}) {
      if (eta(x, j) > out.worst_clean_error) {
        out.worst_clean_error = eta(x, j);
        out.worst_clean_system = j;
      }
    }
    suspects = {{1, eta(x, 1)}, {3, INFINITY}};
    return out;
  }
};

TEST(BatchCheckTest, SuspectsFallBackAloneAndTheReportMatchesCheckSolution) {
  for (bool may_fall_back : {true, false}) {
    SCOPED_TRACE(may_fall_back ? "fallback" : "warning");
    Spoiled b;
    std::vector<Suspect> suspects;
    BatchOutcome outcome = b.outside_check(suspects);
    std::vector<double> x = b.x;
    ASSERT_TRUE(settle_suspects(b.shape(), b.arrays(x), Algorithm::kPcr, may_fall_back, 2, suspects,
                                outcome.noted)
                    .is_ok());
    ASSERT_EQ(outcome.noted.size(), 2u);
    EXPECT_EQ(outcome.noted[0].system, 1u);
    EXPECT_EQ(outcome.noted[1].system, 3u);
    SolveReport report;
    summarize(Algorithm::kPcr, outcome, report);

    std::vector<double> cpu_x = b.x;
    SolveReport cpu;
    ASSERT_TRUE(
        check_solution(b.shape(), b.arrays(cpu_x), Algorithm::kPcr, may_fall_back, 1, cpu).is_ok());
    EXPECT_EQ(report.fell_back, cpu.fell_back);
    EXPECT_EQ(report.notes, cpu.notes);
    EXPECT_EQ(report.warning, cpu.warning);
    EXPECT_EQ(report.warned, cpu.warned);
    EXPECT_EQ(report.max_backward_error, cpu.max_backward_error);
    EXPECT_EQ(report.worst_system, cpu.worst_system);
    EXPECT_EQ(report.tolerance, cpu.tolerance);
    ASSERT_EQ(x.size(), cpu_x.size());
    EXPECT_EQ(std::memcmp(x.data(), cpu_x.data(), x.size() * sizeof(double)), 0);  // NaN kept
    if (may_fall_back) {
      EXPECT_EQ(report.fell_back, (std::vector<std::size_t>{1, 3}));
      EXPECT_EQ(x, b.good);  // gepp again gives gepp's bits; systems 0 and 2 were not touched
      EXPECT_LE(report.max_backward_error, report.tolerance);
      EXPECT_GT(report.max_backward_error, 0.0);
    } else {
      EXPECT_TRUE(report.fell_back.empty());
      EXPECT_EQ(report.warned, 2u);
      EXPECT_EQ(report.worst_system, 3u);
      EXPECT_EQ(report.max_backward_error, INFINITY);
      EXPECT_NE(report.warning.find("2 of 4 systems may be inaccurate (worst: system 3: "
                                    "backward error inf above the tolerance"),
                std::string::npos)
          << report.warning;
      EXPECT_NE(report.warning.find("pcr does not pivot"), std::string::npos) << report.warning;
    }
  }
}

// The worst system is the first of equals, across the clean systems and the noted ones, and
// system 0 when every backward error is 0 (as solve_batch always reported it).
TEST(BatchCheckTest, WorstSystemIsTheFirstOfEquals) {
  BatchOutcome outcome;
  outcome.systems = 6;
  outcome.worst_clean_error = 1e-16;
  outcome.worst_clean_system = 4;
  SystemOutcome redone;
  redone.backward_error = 1e-16;
  redone.tolerance = 4e-16;
  redone.fallback = "left a backward error 1.00e-10 above the tolerance 4.00e-16";
  outcome.noted = {{2, redone}, {5, redone}};
  SolveReport report;
  summarize(Algorithm::kThomas, outcome, report);
  EXPECT_EQ(report.worst_system, 2u);
  EXPECT_EQ(report.max_backward_error, 1e-16);
  EXPECT_EQ(report.tolerance, 4e-16);
  EXPECT_EQ(report.fell_back, (std::vector<std::size_t>{2, 5}));
  EXPECT_EQ(report.notes.front(),
            "system 2: thomas " + redone.fallback + "; solved again with gepp");

  outcome.worst_clean_error = 0.0;
  outcome.worst_clean_system = 0;
  outcome.noted[0].outcome.backward_error = outcome.noted[1].outcome.backward_error = 0.0;
  SolveReport zero;
  summarize(Algorithm::kThomas, outcome, zero);
  EXPECT_EQ(zero.worst_system, 0u);
  EXPECT_EQ(zero.max_backward_error, 0.0);
}

// Parts of a batch (solve_batch_gpus: one per device) merge into the whole batch's outcome:
// the worst of the parts (the earlier part on equals), their noted systems renumbered in order.
TEST(BatchCheckTest, PartsMergeIntoTheBatchsOutcome) {
  SystemOutcome redone;
  redone.backward_error = 2e-16;
  redone.tolerance = 8e-16;
  redone.fallback = "left a backward error 1.00e-03 above the tolerance 8.00e-16";
  BatchOutcome first{3, 8e-16, 3e-16, 1, {{2, redone}}, WorstSystem{2e-16, 2}};
  BatchOutcome second{5, 1e-15, 3e-16, 4, {{0, redone}, {3, redone}}, WorstSystem{2e-16, 1}};
  BatchOutcome merged;
  merge_outcome(first, 0, merged);
  merge_outcome(second, 3, merged);
  EXPECT_EQ(merged.systems, 8u);
  EXPECT_EQ(merged.tolerance, 1e-15);
  EXPECT_EQ(merged.worst_clean_error, 3e-16);
  EXPECT_EQ(merged.worst_clean_system, 1u);
  ASSERT_TRUE(merged.worst_residual.has_value());
  EXPECT_EQ(merged.worst_residual->value, 2e-16);  // the earlier part's on equals
  EXPECT_EQ(merged.worst_residual->system, 2u);
  SolveReport report;
  summarize(Algorithm::kSpike, merged, report);
  EXPECT_EQ(report.fell_back, (std::vector<std::size_t>{2, 3, 6}));
  EXPECT_EQ(report.worst_system, 1u);
  EXPECT_EQ(report.above_tolerance, 0u);
  ASSERT_TRUE(report.relative_residual.has_value());
  EXPECT_EQ(report.relative_residual->system, 2u);
  second.worst_clean_error = 5e-16;
  second.worst_residual->value = 5e-16;
  merged = BatchOutcome{};
  merge_outcome(first, 0, merged);
  merge_outcome(second, 3, merged);
  EXPECT_EQ(merged.worst_clean_system, 7u);
  EXPECT_EQ(merged.worst_residual->system, 4u);
  // A part whose check did not compute residuals (a GPU's) leaves the whole without.
  second.worst_residual.reset();
  merged = BatchOutcome{};
  merge_outcome(first, 0, merged);
  merge_outcome(second, 3, merged);
  EXPECT_FALSE(merged.worst_residual.has_value());
}

}  // namespace
}  // namespace stripesolve::tridiag
