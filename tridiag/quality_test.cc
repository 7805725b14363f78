// The quality check of solve_batch (tridiag.h, issue 17) on the matrices that defeat
// elimination without pivoting: nearly singular and Toeplitz (1, 1e-8, 1) systems, in ragged
// batches. Every outcome is within 10x of LAPACK dgtsv's relative residual, or carries a warning
// naming the cause; only the affected systems fall back to gepp.
#include <cmath>
#include <numeric>

#include <gtest/gtest.h>

#include "tridiag/gallery.h"
#include "tridiag/lapack_reference.h"
#include "tridiag/system_solvers.h"
#include "tridiag/tridiag.h"

namespace stripesolve::tridiag {
namespace {

// Systems one after another, each with its LAPACK residual.
struct RaggedBatch {
  std::vector<std::size_t> sizes;
  std::vector<double> dl, d, du, f, lapack;

  void add(const TridiagonalMatrix& m, std::uint64_t seed) {
    const std::size_t n = m.d.size();
    std::vector<double> rhs = random_vector(n, seed), ref;
    EXPECT_EQ(lapack_dgtsv(m.dl.data(), m.d.data(), m.du.data(), rhs.data(), n, ref), 0);
    lapack.push_back(
        relative_residual(m.dl.data(), m.d.data(), m.du.data(), ref.data(), rhs.data(), n));
    sizes.push_back(n);
    dl.insert(dl.end(), m.dl.begin(), m.dl.end());
    d.insert(d.end(), m.d.begin(), m.d.end());
    du.insert(du.end(), m.du.begin(), m.du.end());
    f.insert(f.end(), rhs.begin(), rhs.end());
  }
  std::size_t offset(std::size_t j) const {
    return std::accumulate(sizes.begin(), sizes.begin() + static_cast<std::ptrdiff_t>(j),
                           std::size_t{0});
  }
  Result<SolveReport> solve(std::vector<double>& x, SolveOptions opt) const {
    x.assign(f.size(), 0.0);
    opt.threads = 2;
    return solve_batch({BatchLayout::kRagged, 0, 0, sizes},
                       {dl.data(), d.data(), du.data(), f.data(), x.data()}, opt);
  }
  double residual(const std::vector<double>& x, std::size_t j) const {
    const std::size_t o = offset(j);
    return relative_residual(&dl[o], &d[o], &du[o], &x[o], &f[o], sizes[j]);
  }
  double eta(const std::vector<double>& x, std::size_t j) const {
    const std::size_t o = offset(j);
    return backward_error(&dl[o], &d[o], &du[o], &x[o], &f[o], sizes[j]);
  }
};

// Sizes odd and even, below and above the hybrids' and spike's thresholds.
constexpr std::size_t kMixedSizes[] = {2, 3, 5, 8, 9, 64, 100, 255, 512};

RaggedBatch named_batch(bool near_singular) {
  RaggedBatch b;
  for (std::size_t n : kMixedSizes) {
    b.add(near_singular ? near_singular_matrix(n, n) : toeplitz_matrix(n, 1.0, 1e-8, 1.0), n + 7);
  }
  return b;
}

std::vector<SolveOptions> every_request() {
  std::vector<SolveOptions> out(2);
  out[1].require_stable = false;  // --unstable-ok
  for (Algorithm a : all_algorithms()) {
    SolveOptions o;
    o.algorithm = a;
    out.push_back(o);
    o.fallback = true;
    out.push_back(o);
  }
  return out;
}

std::string describe(const SolveOptions& o) {
  return std::string(algorithm_name(o.algorithm)) + (o.require_stable ? "" : " unstable ok") +
         (o.fallback ? " with fallback" : "");
}

void expect_within_ten_times_lapack_or_warned(const RaggedBatch& b) {
  for (const SolveOptions& opt : every_request()) {
    SCOPED_TRACE(describe(opt));
    std::vector<double> x;
    auto r = b.solve(x, opt);
    const bool may_fail =
        !is_pivoting(opt.algorithm) && opt.algorithm != Algorithm::kAuto && !opt.fallback;
    if (!r.is_ok()) {
      EXPECT_TRUE(may_fail) << r.status().to_string();
      EXPECT_EQ(r.status().code(), StatusCode::kNumerical);
      continue;
    }
    const bool allowed_fallback = !may_fail;
    std::size_t off = 0, above = 0;
    for (std::size_t j = 0; j < b.sizes.size(); ++j) {
      if (!(b.residual(x, j) <= 10 * b.lapack[j] + 1e-16)) ++off;
      if (!(b.eta(x, j) <= backward_error_tolerance(b.sizes[j]))) ++above;
    }
    if (allowed_fallback) {
      // A fallback makes every system as good as LAPACK's: no warning.
      EXPECT_EQ(off, 0u);
      EXPECT_TRUE(r->warning.empty()) << r->warning;
    } else if (off > 0 || above > 0) {
      // Never a plain success above the tolerance or far from LAPACK.
      EXPECT_GE(r->warned, above);
      EXPECT_NE(r->warning.find("may be inaccurate"), std::string::npos) << r->warning;
    }
    if (r->warning.empty()) {
      EXPECT_LE(r->max_backward_error, r->tolerance);
    }
    EXPECT_EQ(r->fell_back.empty(), r->notes.size() <= (opt.algorithm == Algorithm::kAuto));
  }
}

TEST(QualityTest, ToeplitzTinyDiagonalEveryAlgorithm) {
  expect_within_ten_times_lapack_or_warned(named_batch(false));
}

TEST(QualityTest, NearlySingularEveryAlgorithm) {
  expect_within_ten_times_lapack_or_warned(named_batch(true));
}

TEST(QualityTest, OnlyTheAffectedSystemsFallBack) {
  RaggedBatch b;
  b.add(diagonally_dominant_matrix(50, 1), 2);
  b.add(toeplitz_matrix(40, 1.0, 1e-8, 1.0), 3);
  b.add(diagonally_dominant_matrix(30, 4), 5);
  b.add(near_singular_matrix(20, 6), 7);
  SolveOptions opt;
  opt.require_stable = false;  // auto picks thomas
  std::vector<double> x;
  auto r = b.solve(x, opt);
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_EQ(r->algorithm, Algorithm::kThomas);
  EXPECT_EQ(r->fell_back, (std::vector<std::size_t>{1, 3}));
  EXPECT_TRUE(r->warning.empty()) << r->warning;
  ASSERT_EQ(r->notes.size(), 3u);
  EXPECT_NE(r->notes[1].find("system 1: thomas broke down (thomas: zero or tiny pivot 1e-08 at "
                             "row 0)"),
            std::string::npos)
      << r->notes[1];
  // The others keep thomas's own result, bit for bit.
  for (std::size_t j : {0u, 2u}) {
    const std::size_t o = b.offset(j), n = b.sizes[j];
    std::vector<double> own(n);
    Workspace w;
    ASSERT_TRUE(
        solve_thomas({{&b.dl[o], &b.d[o], &b.du[o], &b.f[o], own.data()}, n}, 2.2e-16, w).is_ok());
    for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(x[o + i], own[i]) << j << " " << i;
  }
  for (std::size_t j = 0; j < 4; ++j) EXPECT_LE(b.residual(x, j), 10 * b.lapack[j] + 1e-16);
}

TEST(QualityTest, InterleavedFallbackWritesItsSystemOnly) {
  // Three systems of 9, element i of every system together; system 1 is Toeplitz (1, 1e-8, 1).
  const std::size_t n = 9, m = 3;
  const TridiagonalMatrix parts[m] = {diagonally_dominant_matrix(n, 1),
                                      toeplitz_matrix(n, 1.0, 1e-8, 1.0),
                                      diagonally_dominant_matrix(n, 2)};
  std::vector<double> dl(n * m), d(n * m), du(n * m), f = random_vector(n * m, 3), x(n * m);
  for (std::size_t j = 0; j < m; ++j) {
    for (std::size_t i = 0; i < n; ++i) {
      dl[i * m + j] = parts[j].dl[i];
      d[i * m + j] = parts[j].d[i];
      du[i * m + j] = parts[j].du[i];
    }
  }
  SolveOptions opt;
  opt.require_stable = false;
  auto r = solve_batch({BatchLayout::kInterleaved, n, m, {}},
                       {dl.data(), d.data(), du.data(), f.data(), x.data()}, opt);
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_EQ(r->fell_back, std::vector<std::size_t>{1});
  EXPECT_TRUE(r->warning.empty()) << r->warning;
  for (std::size_t j = 0; j < m; ++j) {
    std::vector<double> fj(n), xj(n), ref;
    for (std::size_t i = 0; i < n; ++i) {
      fj[i] = f[i * m + j];
      xj[i] = x[i * m + j];
    }
    const TridiagonalMatrix& a = parts[j];
    ASSERT_EQ(lapack_dgtsv(a.dl.data(), a.d.data(), a.du.data(), fj.data(), n, ref), 0);
    EXPECT_LE(
        relative_residual(a.dl.data(), a.d.data(), a.du.data(), xj.data(), fj.data(), n),
        10 * relative_residual(a.dl.data(), a.d.data(), a.du.data(), ref.data(), fj.data(), n) +
            1e-16)
        << j;
  }
}

// check_solution: the check of a solution another solver (the GPU) left. Here the "other
// solver" is gepp with one system's solution spoiled: only that system is solved again, the
// others keep their bits; without the fallback it is a warning and nothing changes.
TEST(QualityTest, CheckingAnotherSolversSolutionFallsBackPerSystem) {
  RaggedBatch b;
  for (std::uint64_t k = 0; k < 4; ++k)
    b.add(stability_matrix(1, 33 + k, 10 + k), 20 + k);  // U(-1,1)
  std::vector<double> good;
  SolveOptions gepp;
  gepp.algorithm = Algorithm::kGepp;
  ASSERT_TRUE(b.solve(good, gepp).is_ok());
  const BatchShape shape{BatchLayout::kRagged, 0, 0, b.sizes};
  for (bool may_fall_back : {true, false}) {
    std::vector<double> x = good;
    const std::size_t o = b.offset(2);
    x[o + 5] *= 1.0 + 1e-6;  // system 2 now misses the tolerance by far
    const std::vector<double> spoiled = x;
    SolveReport report;
    report.notes.push_back("from the GPU");
    ASSERT_TRUE(check_solution(shape, {b.dl.data(), b.d.data(), b.du.data(), b.f.data(), x.data()},
                               Algorithm::kSpike, may_fall_back, 2, report)
                    .is_ok());
    EXPECT_EQ(report.notes.front(), "from the GPU");
    if (may_fall_back) {
      EXPECT_EQ(report.fell_back, std::vector<std::size_t>{2});
      EXPECT_TRUE(report.warning.empty()) << report.warning;
      EXPECT_EQ(x, good);  // gepp again gives gepp's bits; the others were not touched
      EXPECT_LE(report.max_backward_error, report.tolerance);
    } else {
      EXPECT_TRUE(report.fell_back.empty());
      EXPECT_EQ(report.warned, 1u);
      EXPECT_NE(report.warning.find("system 2"), std::string::npos) << report.warning;
      EXPECT_EQ(x, spoiled);
      EXPECT_EQ(report.worst_system, 2u);
    }
  }
  std::vector<double> x = good;
  SolveReport ignored;
  EXPECT_EQ(check_solution(shape, {b.dl.data(), b.d.data(), b.du.data(), x.data(), x.data()},
                           Algorithm::kSpike, true, 1, ignored)
                .message(),
            "check_solution: x must not alias f");
}

TEST(QualityTest, CheckingAnInterleavedSolutionScattersTheRedoneSystem) {
  const std::size_t n = 17, m = 4;
  std::vector<double> dl(n * m), d(n * m), du(n * m), f = random_vector(n * m, 9), x(n * m);
  for (std::size_t j = 0; j < m; ++j) {
    const TridiagonalMatrix a = stability_matrix(1, n, 30 + j);
    for (std::size_t i = 0; i < n; ++i) {
      dl[i * m + j] = a.dl[i];
      d[i * m + j] = a.d[i];
      du[i * m + j] = a.du[i];
    }
  }
  const BatchShape shape{BatchLayout::kInterleaved, n, m, {}};
  const BatchArrays arrays{dl.data(), d.data(), du.data(), f.data(), x.data()};
  SolveOptions gepp;
  gepp.algorithm = Algorithm::kGepp;
  ASSERT_TRUE(solve_batch(shape, arrays, gepp).is_ok());
  const std::vector<double> good = x;
  x[3 * m + 1] += 1e-3;  // element 3 of system 1
  SolveReport report;
  ASSERT_TRUE(check_solution(shape, arrays, Algorithm::kThomas, true, 1, report).is_ok());
  EXPECT_EQ(report.fell_back, std::vector<std::size_t>{1});
  EXPECT_EQ(x, good);
}

TEST(QualityTest, ExplicitAlgorithmWarnsNamingTheCause) {
  RaggedBatch b;
  b.add(diagonally_dominant_matrix(64, 1), 2);
  b.add(toeplitz_matrix(512, 1.0, 1e-8, 1.0), 3);
  SolveOptions opt;
  opt.algorithm = Algorithm::kPcr;
  std::vector<double> x;
  auto r = b.solve(x, opt);
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_TRUE(r->fell_back.empty());
  EXPECT_EQ(r->warned, 1u);
  EXPECT_EQ(r->worst_system, 1u);
  EXPECT_GT(r->max_backward_error, r->tolerance);
  EXPECT_NE(r->warning.find("1 of 2 systems may be inaccurate (worst: system 1: backward error"),
            std::string::npos)
      << r->warning;
  EXPECT_NE(r->warning.find("pcr does not pivot"), std::string::npos) << r->warning;
  // thomas passes the pivot check's old tolerance but not the near-breakdown one.
  opt.algorithm = Algorithm::kThomas;
  r = b.solve(x, opt);
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_NE(r->warning.find("system 1:"), std::string::npos) << r->warning;
  // In place (x aliases f) with the fallback allowed: the fallback starts again from f.
  opt.fallback = true;
  std::vector<double> inplace = b.f;
  auto r2 =
      solve_batch({BatchLayout::kRagged, 0, 0, b.sizes},
                  {b.dl.data(), b.d.data(), b.du.data(), inplace.data(), inplace.data()}, opt);
  ASSERT_TRUE(r2.is_ok()) << r2.status().to_string();
  EXPECT_EQ(r2->fell_back, std::vector<std::size_t>{1});
  EXPECT_TRUE(r2->warning.empty()) << r2->warning;
  for (std::size_t j = 0; j < 2; ++j) EXPECT_LE(b.residual(inplace, j), 10 * b.lapack[j] + 1e-16);
}

TEST(QualityTest, BackwardErrorOfExactAndBrokenSolutions) {
  // [[2, 1], [1, 3]] x = [3, 4] has x = [1, 1].
  std::vector<double> dl = {0, 1}, d = {2, 3}, du = {1, 0}, f = {3, 4}, x = {1, 1};
  EXPECT_EQ(backward_error(dl.data(), d.data(), du.data(), x.data(), f.data(), 2), 0.0);
  x = {1, 1.5};  // residual (0.5, 1.5): 1.5 / (4 * 1.5 + 4)
  EXPECT_DOUBLE_EQ(backward_error(dl.data(), d.data(), du.data(), x.data(), f.data(), 2), 0.15);
  x = {NAN, 1};
  EXPECT_EQ(backward_error(dl.data(), d.data(), du.data(), x.data(), f.data(), 2), INFINITY);
  EXPECT_DOUBLE_EQ(backward_error_tolerance(16), 2 * 2.220446049250313e-16);
  EXPECT_DOUBLE_EQ(backward_error_tolerance(1 << 20), 10 * 2.220446049250313e-16);
}

}  // namespace
}  // namespace stripesolve::tridiag
