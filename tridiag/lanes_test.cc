#include "tridiag/lanes.h"

#include <array>
#include <cmath>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tridiag/gallery.h"
#include "tridiag/system_solvers.h"
#include "tridiag/tridiag.h"

namespace stripesolve::tridiag {
namespace {

// A batch of `count` systems of n rows, strided: random U(-1,1) ones (gepp interchanges rows
// about half the time) and every third diagonally dominant (no interchange).
struct LaneBatch {
  std::size_t n = 0, count = 0;
  std::vector<double> dl, d, du, f, x;

  LaneBatch(std::size_t rows, std::size_t systems, std::uint64_t seed, bool all_dominant = false)
      : n(rows), count(systems) {
    for (std::size_t j = 0; j < count; ++j) {
      const TridiagonalMatrix a = all_dominant || j % 3 == 2
                                      ? diagonally_dominant_matrix(n, seed + j)
                                      : stability_matrix(1, n, seed + j);
      const std::vector<double> rhs = random_vector(n, seed + 1000 + j);
      dl.insert(dl.end(), a.dl.begin(), a.dl.end());
      d.insert(d.end(), a.d.begin(), a.d.end());
      du.insert(du.end(), a.du.begin(), a.du.end());
      f.insert(f.end(), rhs.begin(), rhs.end());
    }
    x.assign(n * count, 0.0);
  }
  SystemRef system(std::size_t j) {
    const std::size_t o = j * n;
    return {{&dl[o], &d[o], &du[o], &f[o], &x[o]}, n};
  }
  // Systems [first, first + lanes) as a run of the strided batch, x into `out`.
  LaneRun run(std::size_t first, std::size_t lanes, double* out) const {
    const std::size_t o = first * n;
    return {{&dl[o], &d[o], &du[o], &f[o], out + o}, n, lanes, 1, n};
  }
  // solve_gepp's (or solve_thomas's with pivot tolerance tol) x of system j, or its error.
  Result<std::vector<double>> scalar(std::size_t j, Algorithm alg = Algorithm::kGepp,
                                     double tol = 0.0) {
    std::vector<double> out(n);
    SystemRef s = system(j);
    s.x = out.data();
    Workspace w;
    STRIPESOLVE_RETURN_IF_ERROR(alg == Algorithm::kGepp ? solve_gepp(s, w)
                                                        : solve_thomas(s, tol, w));
    return out;
  }
  // The batch interleaved (row i of system j at i * count + j): dl, d, du, f.
  std::array<std::vector<double>, 4> interleaved() const {
    std::array<std::vector<double>, 4> out;
    const std::vector<double>* src[4] = {&dl, &d, &du, &f};
    for (int k = 0; k < 4; ++k) {
      out[k].resize(n * count);
      for (std::size_t j = 0; j < count; ++j)
        for (std::size_t i = 0; i < n; ++i) out[k][i * count + j] = (*src[k])[j * n + i];
    }
    return out;
  }
  SolutionQuality scalar_quality(std::size_t j, const std::vector<double>& xj) {
    const std::size_t o = j * n;
    const SolutionQuality q = solution_quality(&dl[o], &d[o], &du[o], xj.data(), &f[o], n);
    EXPECT_EQ(q.backward_error, backward_error(&dl[o], &d[o], &du[o], xj.data(), &f[o], n));
    return q;
  }
};

// Bit for bit unless the compiler may fuse a multiply-add in one path and not the other.
void expect_same(const std::vector<double>& want, const double* got, const std::string& what) {
  for (std::size_t i = 0; i < want.size(); ++i) {
#ifdef __FMA__
    EXPECT_NEAR(got[i], want[i], 1e-13 * std::abs(want[i])) << what << " row " << i;
#else
    EXPECT_EQ(got[i], want[i]) << what << " row " << i;
#endif
  }
}

constexpr double kThomasTolerance = 1.4901161193847656e-08;  // solve_checked's first, sqrt(eps)

// Every lane of a run of `count` systems of n rows against the one-system solve `alg` and its
// check: the same x and the same figures, to the bit.
void expect_lanes_equal_scalar(LaneBatch& b, const LaneChecks& c, std::size_t n, std::size_t count,
                               Algorithm alg) {
  const double tol = alg == Algorithm::kThomas ? kThomasTolerance : 0.0;
  for (std::size_t j = 0; j < count; ++j) {
    auto want = b.scalar(j, alg, tol);
    ASSERT_TRUE(want.is_ok()) << want.status().to_string();
    const std::string what = "n=" + std::to_string(n) + " lane " + std::to_string(j);
    expect_same(*want, &b.x[j * n], what);
    const SolutionQuality q = b.scalar_quality(j, *want);
    EXPECT_EQ(c.backward_error[j], q.backward_error) << what;
    EXPECT_EQ(c.relative_residual[j], q.relative_residual) << what;
  }
}

TEST(GeppLanes, EachLaneEqualsSolveGeppAndItsCheck) {
  for (std::size_t n : {1, 2, 3, 4, 7, 64, 333}) {
    for (std::size_t count : {1, 3, 8}) {
      LaneBatch b(n, count, n * 31 + count);
      LaneWork w;
      LaneChecks c;
      ASSERT_EQ(solve_gepp_lanes(b.run(0, count, b.x.data()), w, c), 0u) << "n=" << n;
      EXPECT_EQ(c.non_finite_input, 0u);
      expect_lanes_equal_scalar(b, c, n, count, Algorithm::kGepp);
      for (std::size_t j = 0; j < count && n >= 64; ++j) {  // small systems may come out exact
        EXPECT_GT(c.backward_error[j], 0.0) << "n=" << n << " lane " << j;
        EXPECT_GT(c.relative_residual[j], 0.0) << "n=" << n << " lane " << j;
      }
    }
  }
}

TEST(GeppLanes, InPlaceAndInterleavedEqualStrided) {
  const std::size_t n = 100, count = 5;
  LaneBatch b(n, count, 7);
  LaneWork w;
  LaneChecks c, in_place_c, interleaved_c;
  ASSERT_EQ(solve_gepp_lanes(b.run(0, count, b.x.data()), w, c), 0u);
  std::vector<double> f = b.f;
  LaneRun in_place = b.run(0, count, f.data());
  in_place.f = f.data();
  ASSERT_EQ(solve_gepp_lanes(in_place, w, in_place_c), 0u);
  const std::array<std::vector<double>, 4> il = b.interleaved();
  std::vector<double> xi(n * count);
  const LaneRun inter{
      {il[0].data(), il[1].data(), il[2].data(), il[3].data(), xi.data()}, n, count, count, 1};
  ASSERT_EQ(solve_gepp_lanes(inter, w, interleaved_c), 0u);
  for (std::size_t j = 0; j < count; ++j) {
    for (std::size_t i = 0; i < n; ++i) {
      EXPECT_EQ(f[j * n + i], b.x[j * n + i]) << "in place, system " << j << " row " << i;
      EXPECT_EQ(xi[i * count + j], b.x[j * n + i]) << "interleaved, system " << j << " row " << i;
    }
    EXPECT_EQ(in_place_c.backward_error[j], c.backward_error[j]);
    EXPECT_EQ(interleaved_c.backward_error[j], c.backward_error[j]);
    EXPECT_EQ(in_place_c.relative_residual[j], c.relative_residual[j]);
    EXPECT_EQ(interleaved_c.relative_residual[j], c.relative_residual[j]);
  }
}

TEST(GeppLanes, SingularAndOverflowingLanesAreFlaggedAlone) {
  const std::size_t n = 50;
  LaneBatch b(n, 6, 11);
  // System 2: rows 10 on all zero (singular at row 10). System 4: a tiny diagonal and a huge
  // right-hand side, x overflows.
  for (std::size_t i = 10; i < n; ++i) b.dl[2 * n + i] = b.d[2 * n + i] = b.du[2 * n + i] = 0;
  for (std::size_t i = 0; i < n; ++i) {
    b.dl[4 * n + i] = b.du[4 * n + i] = 0;
    b.d[4 * n + i] = 1e-300;
    b.f[4 * n + i] = 1e300;
  }
  std::vector<double> x(6 * n, -7.0);
  LaneWork w;
  LaneChecks c;
  EXPECT_EQ(solve_gepp_lanes(b.run(0, 6, x.data()), w, c), (1u << 2) | (1u << 4));
  EXPECT_EQ(c.non_finite_input, 0u);
  EXPECT_EQ(b.scalar(2).status().message(), "gepp: matrix is singular: zero pivot at row 10");
  EXPECT_EQ(b.scalar(4).status().message(), "gepp: non-finite solution at row 0");
  for (std::size_t i = 0; i < n; ++i) {  // the failed lanes' x untouched
    EXPECT_EQ(x[2 * n + i], -7.0);
    EXPECT_EQ(x[4 * n + i], -7.0);
  }
  for (std::size_t j : {0, 1, 3, 5}) {
    auto want = b.scalar(j);
    ASSERT_TRUE(want.is_ok());
    expect_same(*want, &x[j * n], "lane " + std::to_string(j));
  }
}

// A lane whose residual's squares are out of range (A and f scaled by 2^600) is left to the
// one-system path, which takes solution_quality's scaled pass; the others come out as usual.
TEST(GeppLanes, ScaledLanesAreLeftToTheOneSystemPath) {
  const std::size_t n = 20;
  LaneBatch b(n, 4, 13);
  for (std::vector<double>* v : {&b.dl, &b.d, &b.du, &b.f})
    for (std::size_t i = 0; i < n; ++i) (*v)[2 * n + i] = std::ldexp((*v)[2 * n + i], 600);
  std::vector<double> x(4 * n, -7.0);
  LaneWork w;
  LaneChecks c;
  EXPECT_EQ(solve_gepp_lanes(b.run(0, 4, x.data()), w, c), 1u << 2);
  for (std::size_t i = 0; i < n; ++i) EXPECT_EQ(x[2 * n + i], -7.0);
  for (std::size_t j : {0, 1, 3}) {
    auto want = b.scalar(j);
    ASSERT_TRUE(want.is_ok());
    EXPECT_EQ(c.relative_residual[j], b.scalar_quality(j, *want).relative_residual);
  }
}

// Through solve_batch: runs of 8, 8 and 3 systems, in place, on two threads, strided and
// interleaved; a singular system stops the batch with solve_gepp's message.
TEST(GeppLanes, BatchesGoThroughTheLanes) {
  const std::size_t n = 129, count = 19;
  LaneBatch b(n, count, 5);
  SolveOptions opt;
  opt.algorithm = Algorithm::kGepp;
  opt.threads = 2;
  std::vector<double> in_place = b.f;
  BatchShape strided{BatchLayout::kStrided, n, count, {}};
  auto r = solve_batch(
      strided, {b.dl.data(), b.d.data(), b.du.data(), in_place.data(), in_place.data()}, opt);
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_TRUE(r->fell_back.empty());
  EXPECT_EQ(r->warned, 0u);
  EXPECT_GT(r->max_backward_error, 0.0);
  const std::array<std::vector<double>, 4> il = b.interleaved();
  std::vector<double> xi(n * count);
  BatchShape inter{BatchLayout::kInterleaved, n, count, {}};
  r = solve_batch(inter, {il[0].data(), il[1].data(), il[2].data(), il[3].data(), xi.data()}, opt);
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  for (std::size_t j = 0; j < count; ++j) {
    auto want = b.scalar(j);
    ASSERT_TRUE(want.is_ok());
    expect_same(*want, &in_place[j * n], "strided system " + std::to_string(j));
    std::vector<double> col(n);
    for (std::size_t i = 0; i < n; ++i) col[i] = xi[i * count + j];
    expect_same(*want, col.data(), "interleaved system " + std::to_string(j));
  }
  for (std::size_t i = 40; i < n; ++i) b.d[9 * n + i] = b.dl[9 * n + i] = b.du[9 * n + i] = 0;
  r = solve_batch(strided, {b.dl.data(), b.d.data(), b.du.data(), b.f.data(), b.x.data()}, opt);
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().message(), "system 9: gepp: matrix is singular: zero pivot at row 40");
}

TEST(ThomasLanes, EachLaneEqualsSolveThomasAndItsCheck) {
  for (std::size_t n : {1, 2, 3, 4, 7, 64, 333}) {
    for (std::size_t count : {1, 3, 8}) {
      LaneBatch b(n, count, n * 17 + count, true);
      LaneWork w;
      LaneChecks c;
      ASSERT_EQ(solve_thomas_lanes(b.run(0, count, b.x.data()), kThomasTolerance, INFINITY, w, c),
                0u)
          << "n=" << n;
      expect_lanes_equal_scalar(b, c, n, count, Algorithm::kThomas);
    }
  }
}

TEST(ThomasLanes, TinyPivotsAndLargeErrorsFailTheirLanesAlone) {
  const std::size_t n = 40;
  LaneBatch b(n, 5, 3, true);
  b.d[1 * n] = 0.0;  // system 1: a zero first pivot
  std::vector<double> x(5 * n, -7.0);
  LaneWork w;
  LaneChecks c;
  EXPECT_EQ(solve_thomas_lanes(b.run(0, 5, x.data()), kThomasTolerance, INFINITY, w, c), 1u << 1);
  EXPECT_EQ(b.scalar(1, Algorithm::kThomas, kThomasTolerance).status().message(),
            "thomas: zero or tiny pivot 0 at row 0");
  for (std::size_t i = 0; i < n; ++i) EXPECT_EQ(x[n + i], -7.0);
  // Every lane above a bound of 0 fails too, its x untouched; the errors still come back.
  std::vector<double> y(5 * n, -7.0);
  LaneChecks again;
  EXPECT_EQ(solve_thomas_lanes(b.run(0, 5, y.data()), kThomasTolerance, 0.0, w, again), 0b11111u);
  for (std::size_t i = 0; i < 5 * n; ++i) EXPECT_EQ(y[i], -7.0);
  for (std::size_t j : {0, 2, 3, 4}) EXPECT_EQ(again.backward_error[j], c.backward_error[j]);
}

// auto without the stability requirement (thomas, falling back to gepp) through the lanes: a
// system with a zero first pivot falls back alone, in place and interleaved alike.
TEST(ThomasLanes, BatchesFallBackSystemBySystem) {
  const std::size_t n = 65, count = 24;
  LaneBatch b(n, count, 9, true);
  b.d[5 * n] = 0.0;
  SolveOptions opt;
  opt.require_stable = false;
  opt.threads = 2;
  std::vector<double> in_place = b.f;
  auto r =
      solve_batch(BatchShape{BatchLayout::kStrided, n, count, {}},
                  {b.dl.data(), b.d.data(), b.du.data(), in_place.data(), in_place.data()}, opt);
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_EQ(r->algorithm, Algorithm::kThomas);
  EXPECT_EQ(r->fell_back, std::vector<std::size_t>{5});
  const std::array<std::vector<double>, 4> il = b.interleaved();
  std::vector<double> xi(n * count);
  auto ri = solve_batch(BatchShape{BatchLayout::kInterleaved, n, count, {}},
                        {il[0].data(), il[1].data(), il[2].data(), il[3].data(), xi.data()}, opt);
  ASSERT_TRUE(ri.is_ok()) << ri.status().to_string();
  EXPECT_EQ(ri->fell_back, std::vector<std::size_t>{5});
  EXPECT_EQ(ri->max_backward_error, r->max_backward_error);
  for (std::size_t j = 0; j < count; ++j) {
    auto want = j == 5 ? b.scalar(j) : b.scalar(j, Algorithm::kThomas, kThomasTolerance);
    ASSERT_TRUE(want.is_ok());
    expect_same(*want, &in_place[j * n], "in place, system " + std::to_string(j));
    std::vector<double> col(n);
    for (std::size_t i = 0; i < n; ++i) col[i] = xi[i * count + j];
    expect_same(*want, col.data(), "interleaved, system " + std::to_string(j));
  }
}

}  // namespace
}  // namespace stripesolve::tridiag
