#include "tridiag/tridiag.h"

#include <cmath>
#include <numeric>

#include <gtest/gtest.h>

#include "tridiag/gallery.h"
#include "tridiag/lapack_reference.h"
#include "tridiag/system_solvers.h"

namespace stripesolve::tridiag {
namespace {

double norm2(const std::vector<double>& v) {
  double s = 0;
  for (double e : v) s += e * e;
  return std::sqrt(s);
}

double relative_difference(const std::vector<double>& x, const std::vector<double>& ref) {
  double s = 0;
  for (std::size_t i = 0; i < x.size(); ++i) s += (x[i] - ref[i]) * (x[i] - ref[i]);
  return std::sqrt(s) / norm2(ref);
}

struct Problem {
  TridiagonalMatrix a;
  std::vector<double> f;
};

Problem dominant(std::size_t n, std::uint64_t seed) {
  return {diagonally_dominant_matrix(n, seed), random_vector(n, seed + 1000)};
}

Problem random_problem(std::size_t n, std::uint64_t seed) {
  return {stability_matrix(1, n, seed), random_vector(n, seed + 1000)};
}

Result<SolveReport> solve_one(const Problem& p, std::vector<double>& x, Algorithm alg,
                              bool stable = true) {
  x.assign(p.f.size(), 0.0);
  BatchShape shape{BatchLayout::kStrided, p.f.size(), 1, {}};
  BatchArrays arrays{p.a.dl.data(), p.a.d.data(), p.a.du.data(), p.f.data(), x.data()};
  SolveOptions opt;
  opt.algorithm = alg;
  opt.require_stable = stable;
  opt.threads = 1;
  return solve_batch(shape, arrays, opt);
}

constexpr std::size_t kSizes[] = {1,  2,  3,  4,   5,   7,   8,    31,  33,
                                  34, 64, 65, 100, 257, 513, 1000, 4097};

TEST(TridiagTest, EveryAlgorithmMatchesLapackOnDiagonallyDominantSystems) {
  for (Algorithm alg : all_algorithms()) {
    for (std::size_t n : kSizes) {
      SCOPED_TRACE(std::string(algorithm_name(alg)) + " n=" + std::to_string(n));
      Problem p = dominant(n, n * 7 + 1);
      std::vector<double> ref, x;
      ASSERT_EQ(lapack_dgtsv(p.a.dl.data(), p.a.d.data(), p.a.du.data(), p.f.data(), n, ref), 0);
      auto r = solve_one(p, x, alg);
      ASSERT_TRUE(r.is_ok()) << r.status().to_string();
      EXPECT_EQ(r->algorithm, alg);
      EXPECT_GT(norm2(x), 0.0);
      EXPECT_LT(relative_difference(x, ref), 1e-13);
      EXPECT_LT(
          relative_residual(p.a.dl.data(), p.a.d.data(), p.a.du.data(), x.data(), p.f.data(), n),
          1e-14);
    }
  }
}

TEST(TridiagTest, RandomSystemsPivotingWithinTenTimesLapackOthersAccurateOrBreakDown) {
  for (Algorithm alg : all_algorithms()) {
    for (std::size_t n : kSizes) {
      SCOPED_TRACE(std::string(algorithm_name(alg)) + " n=" + std::to_string(n));
      Problem p = random_problem(n, n * 13 + 5);
      std::vector<double> ref, x;
      ASSERT_EQ(lapack_dgtsv(p.a.dl.data(), p.a.d.data(), p.a.du.data(), p.f.data(), n, ref), 0);
      const double ref_res =
          relative_residual(p.a.dl.data(), p.a.d.data(), p.a.du.data(), ref.data(), p.f.data(), n);
      auto r = solve_one(p, x, alg);
      if (!is_pivoting(alg) && !r.is_ok()) {
        EXPECT_EQ(r.status().code(), StatusCode::kNumerical) << r.status().to_string();
        continue;
      }
      ASSERT_TRUE(r.is_ok()) << r.status().to_string();
      const double res =
          relative_residual(p.a.dl.data(), p.a.d.data(), p.a.du.data(), x.data(), p.f.data(), n);
      EXPECT_GT(norm2(x), 0.0);
      if (is_pivoting(alg)) {
        EXPECT_LE(res, 10 * ref_res + 1e-15);
      } else {
        EXPECT_LT(res, 1e-6);
      }
    }
  }
}

TEST(TridiagTest, GeppReproducesLapackDgtsv) {
  for (std::size_t n : kSizes) {
    Problem p = random_problem(n, n + 99);
    std::vector<double> ref, x;
    ASSERT_EQ(lapack_dgtsv(p.a.dl.data(), p.a.d.data(), p.a.du.data(), p.f.data(), n, ref), 0);
    ASSERT_TRUE(solve_one(p, x, Algorithm::kGepp).is_ok());
    EXPECT_LT(relative_difference(x, ref), 1e-12) << "n=" << n;
  }
}

TEST(TridiagTest, SmallSystemsExact) {
  // n = 1: 4 x = 2.
  Problem one{{{0.0}, {4.0}, {0.0}}, {2.0}};
  // n = 2: [[2, 1], [1, 3]] x = [3, 4] -> x = [1, 1].
  Problem two{{{0.0, 1.0}, {2.0, 3.0}, {1.0, 0.0}}, {3.0, 4.0}};
  for (Algorithm alg : all_algorithms()) {
    std::vector<double> x;
    ASSERT_TRUE(solve_one(one, x, alg).is_ok()) << algorithm_name(alg);
    EXPECT_DOUBLE_EQ(x[0], 0.5) << algorithm_name(alg);
    ASSERT_TRUE(solve_one(two, x, alg).is_ok()) << algorithm_name(alg);
    EXPECT_NEAR(x[0], 1.0, 1e-15) << algorithm_name(alg);
    EXPECT_NEAR(x[1], 1.0, 1e-15) << algorithm_name(alg);
  }
}

// Builds `count` systems of the given sizes in the strided (concatenated) order.
struct Batch {
  std::vector<std::size_t> sizes;
  std::vector<double> dl, d, du, f;
};

Batch make_batch(const std::vector<std::size_t>& sizes, bool dominant_systems) {
  Batch b;
  b.sizes = sizes;
  for (std::size_t j = 0; j < sizes.size(); ++j) {
    Problem p =
        dominant_systems ? dominant(sizes[j], 31 * j + 3) : random_problem(sizes[j], 31 * j + 3);
    b.dl.insert(b.dl.end(), p.a.dl.begin(), p.a.dl.end());
    b.d.insert(b.d.end(), p.a.d.begin(), p.a.d.end());
    b.du.insert(b.du.end(), p.a.du.begin(), p.a.du.end());
    b.f.insert(b.f.end(), p.f.begin(), p.f.end());
  }
  return b;
}

// Checks the strided-order solution x of batch b system by system against LAPACK.
void expect_batch_matches_lapack(const Batch& b, const std::vector<double>& x, double tol) {
  std::size_t o = 0;
  for (std::size_t j = 0; j < b.sizes.size(); ++j) {
    const std::size_t n = b.sizes[j];
    std::vector<double> ref;
    ASSERT_EQ(lapack_dgtsv(&b.dl[o], &b.d[o], &b.du[o], &b.f[o], n, ref), 0);
    std::vector<double> xs(x.begin() + o, x.begin() + o + n);
    EXPECT_LT(relative_difference(xs, ref), tol) << "system " << j;
    o += n;
  }
}

TEST(TridiagTest, LayoutsStridedInterleavedRaggedAllAlgorithmsThreaded) {
  for (Algorithm alg : all_algorithms()) {
    SCOPED_TRACE(algorithm_name(alg));
    SolveOptions opt;
    opt.algorithm = alg;
    opt.threads = 2;
    // Strided, 37 systems of n = 129.
    Batch s = make_batch(std::vector<std::size_t>(37, 129), true);
    std::vector<double> x(s.f.size());
    BatchShape strided{BatchLayout::kStrided, 129, 37, {}};
    ASSERT_TRUE(
        solve_batch(strided, {s.dl.data(), s.d.data(), s.du.data(), s.f.data(), x.data()}, opt)
            .is_ok());
    expect_batch_matches_lapack(s, x, 1e-13);
    // Interleaved: the same batch transposed.
    const std::size_t m = 37, n = 129;
    std::vector<double> il[4], xi(m * n);
    const std::vector<double>* src[4] = {&s.dl, &s.d, &s.du, &s.f};
    for (int k = 0; k < 4; ++k) {
      il[k].resize(m * n);
      for (std::size_t j = 0; j < m; ++j)
        for (std::size_t i = 0; i < n; ++i) il[k][i * m + j] = (*src[k])[j * n + i];
    }
    BatchShape inter{BatchLayout::kInterleaved, n, m, {}};
    ASSERT_TRUE(
        solve_batch(inter, {il[0].data(), il[1].data(), il[2].data(), il[3].data(), xi.data()}, opt)
            .is_ok());
    std::vector<double> back(m * n);
    for (std::size_t j = 0; j < m; ++j)
      for (std::size_t i = 0; i < n; ++i) back[j * n + i] = xi[i * m + j];
    expect_batch_matches_lapack(s, back, 1e-13);
    // Solved a run of systems at a time (37 = 4 runs of 8 and one of 5), each system as the
    // strided batch solves it, to the bit; in place too.
    EXPECT_EQ(back, x);
    std::vector<double> in_place = il[3];
    ASSERT_TRUE(
        solve_batch(inter,
                    {il[0].data(), il[1].data(), il[2].data(), in_place.data(), in_place.data()},
                    opt)
            .is_ok());
    EXPECT_EQ(in_place, xi);
    // Ragged, odd sizes including 1 and 2, solved in place (x = f).
    std::vector<std::size_t> sizes = {1, 2, 3, 100, 33, 1, 517, 64, 2, 1000};
    Batch r = make_batch(sizes, true);
    std::vector<double> xr = r.f;
    BatchShape ragged{BatchLayout::kRagged, 0, 0, sizes};
    ASSERT_TRUE(
        solve_batch(ragged, {r.dl.data(), r.d.data(), r.du.data(), xr.data(), xr.data()}, opt)
            .is_ok());
    expect_batch_matches_lapack(r, xr, 1e-13);
  }
}

TEST(TridiagTest, BreakdownNamesSystemAndRow) {
  // System 1 is [[0, 1], [1, 0]]: a zero first pivot for every unpivoted algorithm.
  std::vector<double> dl = {0, 1, 0, 1}, d = {2, 3, 0, 0}, du = {1, 0, 1, 0}, f = {1, 1, 1, 2};
  std::vector<double> x(4);
  BatchShape shape{BatchLayout::kStrided, 2, 2, {}};
  SolveOptions opt;
  opt.algorithm = Algorithm::kThomas;
  auto r = solve_batch(shape, {dl.data(), d.data(), du.data(), f.data(), x.data()}, opt);
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().code(), StatusCode::kNumerical);
  EXPECT_EQ(r.status().message(), "system 1: thomas: zero or tiny pivot 0 at row 0");
  opt.algorithm = Algorithm::kCr;
  r = solve_batch(shape, {dl.data(), d.data(), du.data(), f.data(), x.data()}, opt);
  EXPECT_EQ(r.status().message(), "system 1: cr: zero or tiny pivot 0 at row 0");
  // Non-finite input shows up as a non-finite pivot.
  std::vector<double> dn = d;
  dn[0] = NAN;
  opt.algorithm = Algorithm::kThomas;
  r = solve_batch(shape, {dl.data(), dn.data(), du.data(), f.data(), x.data()}, opt);
  EXPECT_EQ(r.status().message(), "system 0: thomas: non-finite pivot nan at row 0");
  // auto without the stability requirement falls back to gepp and says so.
  opt.algorithm = Algorithm::kAuto;
  opt.require_stable = false;
  r = solve_batch(shape, {dl.data(), d.data(), du.data(), f.data(), x.data()}, opt);
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_EQ(r->algorithm, Algorithm::kThomas);
  ASSERT_EQ(r->notes.size(), 2u);
  EXPECT_EQ(r->notes[1],
            "system 1: thomas broke down (thomas: zero or tiny pivot 0 at row 0); solved again "
            "with gepp");
  EXPECT_DOUBLE_EQ(x[2], 2.0);  // x1 = f1 = 2 (second row), x0 = 1
  EXPECT_DOUBLE_EQ(x[3], 1.0);
  // A singular matrix stops gepp.
  std::vector<double> zd = {1, 1, 0, 0}, zl = {0, 1, 0, 0}, zu = {1, 0, 0, 0};
  opt.algorithm = Algorithm::kGepp;
  r = solve_batch(shape, {zl.data(), zd.data(), zu.data(), f.data(), x.data()}, opt);
  EXPECT_EQ(r.status().message(), "system 0: gepp: matrix is singular: zero pivot at row 1");
}

TEST(TridiagTest, ValidationAndNames) {
  std::vector<double> v(4, 1.0);
  BatchArrays arrays{v.data(), v.data(), v.data(), v.data(), v.data()};
  EXPECT_EQ(validate_batch({BatchLayout::kStrided, 0, 1, {}}, arrays).message(),
            "batch: n must be >= 1");
  EXPECT_EQ(validate_batch({BatchLayout::kRagged, 0, 0, {}}, arrays).message(),
            "ragged batch: sizes is empty");
  std::vector<std::size_t> sizes = {2, 0};
  EXPECT_EQ(validate_batch({BatchLayout::kRagged, 0, 0, sizes}, arrays).message(),
            "ragged batch: system 1 has size 0 (must be >= 1)");
  arrays.du = nullptr;
  EXPECT_EQ(validate_batch({BatchLayout::kStrided, 2, 2, {}}, arrays).message(),
            "batch: du is null");
  for (Algorithm a : all_algorithms()) EXPECT_EQ(*parse_algorithm(algorithm_name(a)), a);
  EXPECT_EQ(parse_algorithm("lu").status().message(),
            "unknown tridiagonal algorithm 'lu' (expected auto, thomas, cr, pcr, cr_pcr, "
            "pcr_thomas, cr_pcr_thomas, bondeli, spike or gepp)");
}

TEST(TridiagTest, ParallelSpikeOnOneLargeSystem) {
  const std::size_t n = (1 << 17) + 3;
  Problem p = random_problem(n, 5);
  std::vector<double> ref, x(n);
  ASSERT_EQ(lapack_dgtsv(p.a.dl.data(), p.a.d.data(), p.a.du.data(), p.f.data(), n, ref), 0);
  const double ref_res =
      relative_residual(p.a.dl.data(), p.a.d.data(), p.a.du.data(), ref.data(), p.f.data(), n);
  SolveOptions opt;
  opt.algorithm = Algorithm::kSpike;
  opt.threads = 2;
  BatchShape shape{BatchLayout::kStrided, n, 1, {}};
  ASSERT_TRUE(
      solve_batch(shape, {p.a.dl.data(), p.a.d.data(), p.a.du.data(), p.f.data(), x.data()}, opt)
          .is_ok());
  const double res =
      relative_residual(p.a.dl.data(), p.a.d.data(), p.a.du.data(), x.data(), p.f.data(), n);
  EXPECT_GT(norm2(x), 0.0);
  EXPECT_LE(res, 10 * ref_res);
}

}  // namespace
}  // namespace stripesolve::tridiag
