// The one-pass GPU kernel's serial solves (tridiag/cuda/small_solves.h) and its group level's
// warp solve (group_solve.h, on an emulated warp) compiled for the host
// and checked against LAPACK dgtsv: the arithmetic of the GPU path is tested on every machine,
// with or without a GPU (the kernel around them is tested by gpu_test.cc on the GPU machine).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tridiag/cuda/gepp_rows.h"
#include "tridiag/cuda/group_solve.h"
#include "tridiag/cuda/small_solves.h"
#include "tridiag/diagonal_pivoting.h"
#include "tridiag/emulated_warp.h"
#include "tridiag/gallery.h"
#include "tridiag/lapack_reference.h"

namespace stripesolve::tridiag {
namespace {

constexpr double kEps = std::numeric_limits<double>::epsilon();

double residual(const TridiagonalMatrix& m, const std::vector<double>& x,
                const std::vector<double>& f) {
  return relative_residual(m.dl.data(), m.d.data(), m.du.data(), x.data(), f.data(), f.size());
}

// LAPACK's relative residual on the same system, or NaN when dgtsv fails.
double lapack_residual(const TridiagonalMatrix& m, const std::vector<double>& f) {
  std::vector<double> x;
  if (lapack_dgtsv(m.dl.data(), m.d.data(), m.du.data(), f.data(), f.size(), x) != 0) return NAN;
  return residual(m, x, f);
}

TEST(CudaSolvesTest, ThomasMatchesLapackOnDominantSystems) {
  for (int q = 1; q <= 32; ++q) {
    SCOPED_TRACE("q = " + std::to_string(q));
    const TridiagonalMatrix m = diagonally_dominant_matrix(q, 100 + q);
    const std::vector<double> f = random_vector(q, 200 + q);
    std::vector<double> z = f, cp(q);
    EXPECT_EQ(gpu::thomas_solve(m.dl.data(), m.d.data(), m.du.data(), z.data(), cp.data(), q, kEps),
              -1);
    EXPECT_LE(residual(m, z, f), 10 * lapack_residual(m, f) + 4 * kEps);
  }
}

// The CPU's diagonal pivoting (dp_factor, dp_solve: the same algorithm with divisions) on the
// same system; NaN when it reports a zero pivot.
double cpu_pivoting_residual(const TridiagonalMatrix& m, const std::vector<double>& f) {
  const std::size_t q = f.size();
  std::vector<double> piv(q), x = f;
  std::vector<std::uint8_t> kinds(q);
  if (!dp_factor(m.dl.data(), m.d.data(), m.du.data(), q, piv.data(), kinds.data()).is_ok()) {
    return NAN;
  }
  dp_solve(m.dl.data(), m.du.data(), piv.data(), kinds.data(), q, x.data());
  return residual(m, x, f);
}

// The residual a pivoting solve of the system may leave: 10x the larger of LAPACK's (partial
// pivoting) and the CPU diagonal pivoting's residual, and 100x where that reference is above
// 1e-10: on the ill-conditioned types (8-14 here) the residuals of different elimination orders
// differ by more than rounding (type 14, diagonal 1e-8, q = 7: 12x LAPACK's). NaN where LAPACK
// finds the system singular.
double pivoting_bound(const TridiagonalMatrix& m, const std::vector<double>& f) {
  const double lapack = lapack_residual(m, f);
  if (!std::isfinite(lapack)) return NAN;
  const double cpu = cpu_pivoting_residual(m, f);
  const double reference = std::isfinite(cpu) ? std::max(lapack, cpu) : lapack;
  return (reference > 1e-10 ? 100.0 : 10.0) * reference + 4 * kEps;
}

// Solves every stability type of 000 Table III at each q (matrix seed seed + q, right-hand side
// seed + 100 + q) by solve(m, f, x), which returns a reported breakdown row or -1, and expects
// the result within pivoting_bound where LAPACK's is finite and nothing was reported. Returns
// the number of systems checked.
template <typename Solve>
int expect_stability_types_within_bound(std::initializer_list<int> qs, std::uint64_t seed,
                                        Solve&& solve) {
  int checked = 0;
  for (int type = 1; type <= kStabilityTypes; ++type) {
    for (int q : qs) {
      SCOPED_TRACE("type " + std::to_string(type) + " q = " + std::to_string(q));
      const TridiagonalMatrix m = stability_matrix(type, q, seed + q);
      const std::vector<double> f = random_vector(q, seed + 100 + q);
      const double bound = pivoting_bound(m, f);
      if (!std::isfinite(bound)) continue;  // singular for LAPACK too
      std::vector<double> x;
      if (solve(m, f, x) >= 0) continue;  // a zero pivot is reported, not solved through
      EXPECT_LE(residual(m, x, f), bound);
      ++checked;
    }
  }
  return checked;
}

// Random U(-1,1) systems need 2x2 pivots; every stability type of 000 Table III as well.
TEST(CudaSolvesTest, DiagonalPivotingWithinTenTimesLapackOrTheCpuPivoting) {
  const int checked = expect_stability_types_within_bound(
      {2, 3, 7, 8, 31, 32}, 300,
      [](const TridiagonalMatrix& m, const std::vector<double>& f, std::vector<double>& x) {
        const int q = static_cast<int>(f.size());
        std::vector<double> piv(q), rinv(q);
        x = f;
        return gpu::pivot_solve(m.dl.data(), m.d.data(), m.du.data(), x.data(), piv.data(),
                                rinv.data(), q);
      });
  EXPECT_GE(checked, 80) << "of 96 systems; the rest are singular or break down";
}

// The interleaved gepp kernel's row steps (gepp_rows.h) take dgtsv's pivots: within 10x of LAPACK
// on every stability type, up to the largest system the kernel takes, and a singular matrix
// names the row dgtsv names.
TEST(CudaSolvesTest, GeppRowStepsWithinTenTimesLapack) {
  const int checked = expect_stability_types_within_bound(
      {1, 2, 3, 7, 8, 31, 64, 288}, 700,
      [](const TridiagonalMatrix& m, const std::vector<double>& f, std::vector<double>& x) {
        const long q = static_cast<long>(f.size());
        std::vector<gpu::GeppSaved> saved(q);
        x.resize(q);
        return static_cast<int>(gpu::gepp_rows_solve(m.dl.data(), m.d.data(), m.du.data(), f.data(),
                                                     x.data(), q, saved.data()));
      });
  EXPECT_GE(checked, 110) << "of 128 systems; the rest are singular for LAPACK too";
  for (long q : {5L, 40L}) {
    TridiagonalMatrix m = stability_matrix(1, q, 9);
    const long row = q - 2;  // column q - 2 zero
    m.du[row - 1] = 0.0;
    m.d[row] = 0.0;
    m.dl[row + 1] = 0.0;
    const std::vector<double> f = random_vector(q, 10);
    std::vector<double> x(q), reference;
    std::vector<gpu::GeppSaved> saved(q);
    EXPECT_EQ(gpu::gepp_rows_solve(m.dl.data(), m.d.data(), m.du.data(), f.data(), x.data(), q,
                                   saved.data()),
              lapack_dgtsv(m.dl.data(), m.d.data(), m.du.data(), f.data(), q, reference) - 1);
  }
}

// Eliminating from both ends at once (the interleaved kernel's twisted variant, two threads a
// system) is partial pivoting in another order: within 10x of LAPACK on every stability type,
// odd and even n, in place too, and a singular column named in either half or where they meet.
TEST(CudaSolvesTest, GeppFromBothEndsWithinTenTimesLapack) {
  auto twisted = [](const TridiagonalMatrix& m, const std::vector<double>& f,
                    std::vector<double>& x) {
    const long q = static_cast<long>(f.size());
    std::vector<gpu::GeppSaved> saved(q);
    x.resize(q);
    return static_cast<int>(gpu::gepp_rows_solve_twisted(m.dl.data(), m.d.data(), m.du.data(),
                                                         f.data(), x.data(), q, saved.data()));
  };
  const int checked =
      expect_stability_types_within_bound({2, 3, 4, 7, 8, 31, 64, 257, 288}, 710, twisted);
  EXPECT_GE(checked, 125) << "of 144 systems; the rest are singular for LAPACK too";
  // The same x in place (over f).
  const TridiagonalMatrix m = stability_matrix(1, 101, 11);
  const std::vector<double> f = random_vector(101, 12);
  std::vector<double> x, in_place = f;
  std::vector<gpu::GeppSaved> saved(101);
  ASSERT_EQ(twisted(m, f, x), -1);
  ASSERT_EQ(gpu::gepp_rows_solve_twisted(m.dl.data(), m.d.data(), m.du.data(), in_place.data(),
                                         in_place.data(), 101, saved.data()),
            -1);
  EXPECT_EQ(in_place, x);
  EXPECT_LE(residual(m, x, f), 1e-13);
  // A zero column in the upper half, the lower half and each of the two columns that meet.
  for (long q : {6L, 41L}) {
    for (long column : {1L, q / 2 - 1, q / 2, q - 2}) {
      SCOPED_TRACE("q = " + std::to_string(q) + " column " + std::to_string(column));
      TridiagonalMatrix s = stability_matrix(1, q, 13);
      s.du[column - 1] = s.d[column] = s.dl[column + 1] = 0.0;
      std::vector<double> xs;
      EXPECT_GE(twisted(s, random_vector(q, 14), xs), 0);
    }
  }
}

// Keeping one chunk of pivot rows and eliminating each earlier chunk again from its saved start
// (the interleaved kernel's recomputing variant) gives the bits of the whole solve, singular
// rows named alike.
TEST(CudaSolvesTest, GeppRowStepsRecomputedByChunksGiveTheSameBits) {
  for (int type : {1, 5, 9, 14}) {
    for (long q : {1L, 2L, 3L, 31L, 32L, 33L, 64L, 65L, 97L, 300L}) {
      for (long chunk : {16L, 32L, 64L}) {
        SCOPED_TRACE("type " + std::to_string(type) + " q = " + std::to_string(q) + " chunk " +
                     std::to_string(chunk));
        TridiagonalMatrix m = stability_matrix(type, q, 700 + q);
        const bool singular = q == 97;  // column q / 2 zero: every x NaN from there
        if (singular) m.du[q / 2 - 1] = m.d[q / 2] = m.dl[q / 2 + 1] = 0.0;
        const std::vector<double> f = random_vector(q, 800 + q);
        std::vector<double> x(q), xc(q);
        std::vector<gpu::GeppSaved> saved(q), window(chunk);
        std::vector<gpu::GeppCarry> starts(q / chunk + 1);
        const long bad = gpu::gepp_rows_solve(m.dl.data(), m.d.data(), m.du.data(), f.data(),
                                              x.data(), q, saved.data());
        EXPECT_EQ(bad >= 0, singular);
        EXPECT_EQ(gpu::gepp_rows_solve_chunked(m.dl.data(), m.d.data(), m.du.data(), f.data(),
                                               xc.data(), q, chunk, window.data(), starts.data()),
                  bad);
        // In place (x over f), as the kernels may be asked to solve.
        std::vector<double> in_place = f;
        EXPECT_EQ(
            gpu::gepp_rows_solve_chunked(m.dl.data(), m.d.data(), m.du.data(), in_place.data(),
                                         in_place.data(), q, chunk, window.data(), starts.data()),
            bad);
        for (long i = 0; i < q; ++i) {
          if (std::isnan(x[i])) {
            EXPECT_TRUE(std::isnan(xc[i])) << i;
            EXPECT_TRUE(std::isnan(in_place[i])) << i;
          } else {
            EXPECT_EQ(xc[i], x[i]) << i;
            EXPECT_EQ(in_place[i], x[i]) << i;
          }
        }
      }
    }
  }
}

// The register-held variant (pivot_solve<kMax>, q <= kMax) does the same arithmetic.
TEST(CudaSolvesTest, RegisterHeldPivotingGivesTheSameBits) {
  for (int type = 1; type <= kStabilityTypes; ++type) {
    for (int q : {1, 2, 3, 7, 11, 15, 16}) {
      SCOPED_TRACE("type " + std::to_string(type) + " q = " + std::to_string(q));
      const TridiagonalMatrix m = stability_matrix(type, q, 500 + q);
      const std::vector<double> f = random_vector(q, 600 + q);
      std::vector<double> z = f, piv(q), rinv(q), z16 = f, piv16(q), rinv16(q);
      const int bad = gpu::pivot_solve(m.dl.data(), m.d.data(), m.du.data(), z.data(), piv.data(),
                                       rinv.data(), q);
      const int bad16 = gpu::pivot_solve<16>(m.dl.data(), m.d.data(), m.du.data(), z16.data(),
                                             piv16.data(), rinv16.data(), q);
      EXPECT_EQ(bad, bad16);
      for (int i = 0; i < q; ++i) {
        if (!std::isnan(z[i])) {
          EXPECT_EQ(z[i], z16[i]) << "row " << i;
        }
      }
    }
  }
}

// pcr_first_solve (the group level's solve, on an emulated warp): the solution of m for f in x;
// returns its report.
int pcr_first(const TridiagonalMatrix& m, const std::vector<double>& f, std::vector<double>& x) {
  const int q = static_cast<int>(f.size());
  gpu::GroupSystem s{};
  const int bad = run_on_emulated_warp([&](int lane, EmulatedWarp& warp) {
    const bool row = lane < q;
    return gpu::pcr_first_solve(s, q, lane, row ? m.dl[lane] : 0.0, row ? m.d[lane] : 1.0,
                                row ? m.du[lane] : 0.0, row ? f[lane] : 0.0, warp);
  });
  x.assign(s.G, s.G + q);
  return bad;
}

// Every stability type at q = 2..16 is within the bound of
// DiagonalPivotingWithinTenTimesLapackOrTheCpuPivoting, whichever way the solve went.
TEST(CudaSolvesTest, PcrFirstSolveWithinTenTimesLapackOrTheCpuPivoting) {
  EXPECT_GE(expect_stability_types_within_bound({2, 3, 5, 8, 15, 16}, 700, pcr_first), 80)
      << "of 96 systems";
}

// PCR's result stands where it is backward stable: on diagonally dominant systems of every q it
// matches LAPACK; where PCR meets a zero pivot (a zero diagonal) or growth (a tiny first pivot)
// the result is pivot_solve's bit for bit, and a zero row is reported where pivot_solve reports
// it.
TEST(CudaSolvesTest, PcrFirstSolveFallsBackToPivoting) {
  for (int q = 1; q <= gpu::kMaxGroupRows; ++q) {
    SCOPED_TRACE("q = " + std::to_string(q));
    const TridiagonalMatrix m = diagonally_dominant_matrix(q, 9 + q);
    const std::vector<double> f = random_vector(q, 10 + q);
    std::vector<double> x, ref;
    ASSERT_EQ(pcr_first(m, f, x), -1);
    ASSERT_EQ(lapack_dgtsv(m.dl.data(), m.d.data(), m.du.data(), f.data(), q, ref), 0);
    for (int i = 0; i < q; ++i) EXPECT_NEAR(x[i], ref[i], 1e-14 * std::fabs(ref[i]) + 1e-300);
    EXPECT_LE(residual(m, x, f), 4 * kEps);
  }
  auto pivoted = [](const TridiagonalMatrix& m, const std::vector<double>& f) {
    const int q = static_cast<int>(f.size());
    std::vector<double> x, ref = f, piv(q), rinv(q);
    EXPECT_EQ(pcr_first(m, f, x), -1);
    gpu::pivot_solve(m.dl.data(), m.d.data(), m.du.data(), ref.data(), piv.data(), rinv.data(), q);
    for (int i = 0; i < q; ++i) EXPECT_EQ(x[i], ref[i]) << "row " << i;
    EXPECT_LE(residual(m, x, f), 4 * kEps);
  };
  pivoted(TridiagonalMatrix{{0, 1, 3, 1}, {0, 0, 0, 0}, {1, 2, 1, 0}}, {1, 2, 3, 4});
  pivoted(TridiagonalMatrix{{0, 1, 1}, {1e-10, 2, 1}, {1, 1, 0}}, {1, 1, 1});
  TridiagonalMatrix singular{{0, 0, 0}, {1, 0, 1}, {0, 0, 0}};
  std::vector<double> x;
  EXPECT_EQ(pcr_first(singular, {1, 1, 1}, x), 1);
}

TEST(CudaSolvesTest, ZeroDiagonalTakesTwoByTwoPivots) {
  // [[0, 1, 0, 0], [1, 0, 2, 0], [0, 3, 0, 1], [0, 0, 1, 0]]: every 1x1 pivot would be zero.
  TridiagonalMatrix m{{0, 1, 3, 1}, {0, 0, 0, 0}, {1, 2, 1, 0}};
  const std::vector<double> f = {1, 2, 3, 4};
  std::vector<double> z = f, piv(4), rinv(4);
  ASSERT_EQ(
      gpu::pivot_solve(m.dl.data(), m.d.data(), m.du.data(), z.data(), piv.data(), rinv.data(), 4),
      -1);
  EXPECT_LE(residual(m, z, f), 4 * kEps);
}

TEST(CudaSolvesTest, BreakdownsNameTheRow) {
  TridiagonalMatrix m{{0, 1, 1}, {1, 1, 5}, {1, 1, 0}};  // second pivot of Thomas: 1 - 1 = 0
  std::vector<double> z = {1, 1, 1}, cp(3), piv(3), rinv(3);
  EXPECT_EQ(gpu::thomas_solve(m.dl.data(), m.d.data(), m.du.data(), z.data(), cp.data(), 3, kEps),
            1);
  TridiagonalMatrix singular{{0, 0, 0}, {1, 0, 1}, {0, 0, 0}};  // a zero row: no pivot helps
  z = {1, 1, 1};
  EXPECT_EQ(gpu::pivot_solve(singular.dl.data(), singular.d.data(), singular.du.data(), z.data(),
                             piv.data(), rinv.data(), 3),
            1);
}

// lane_solve: the 8 interior rows of a 9-row partition, solved for f and both spikes at once,
// against LAPACK on the interior for the same three right-hand sides.
// Returns whether the system was checked (false: a breakdown LAPACK shares, or one reported).
template <bool kPivot>
bool check_lane_solve(int type) {
  const TridiagonalMatrix m = type == 0 ? diagonally_dominant_matrix(gpu::kLaneRows, 7)
                                        : stability_matrix(type, gpu::kLaneRows, 7);
  const std::vector<double> f = random_vector(gpu::kLaneRows, 8);
  constexpr int kQ = gpu::kLaneQ;
  TridiagonalMatrix interior{{m.dl.begin(), m.dl.begin() + kQ},
                             {m.d.begin(), m.d.begin() + kQ},
                             {m.du.begin(), m.du.begin() + kQ}};
  std::vector<double> rhs[3] = {
      {f.begin(), f.begin() + kQ}, std::vector<double>(kQ, 0.0), std::vector<double>(kQ, 0.0)};
  rhs[1][0] = -m.dl[0];
  rhs[2][kQ - 1] = -m.du[kQ - 1];
  std::vector<double> a = m.dl, c = m.du;
  double b[gpu::kLaneRows], y[gpu::kLaneRows], sl[kQ], sr[kQ];
  for (int k = 0; k < gpu::kLaneRows; ++k) {
    b[k] = m.d[k];
    y[k] = f[k];
  }
  if (gpu::lane_solve<kPivot>(a.data(), b, c.data(), y, sl, sr, kEps) >= 0) return false;
  const double* got[3] = {y, sl, sr};
  for (int r = 0; r < 3; ++r) {
    SCOPED_TRACE("right-hand side " + std::to_string(r));
    const std::vector<double> x(got[r], got[r] + kQ);
    const double reference = lapack_residual(interior, rhs[r]);
    if (!std::isfinite(reference)) return false;
    EXPECT_LE(residual(interior, x, rhs[r]), 10 * reference + 8 * kEps);
  }
  EXPECT_EQ(y[kQ], f[kQ]) << "the separator row is not the lane solve's";
  return true;
}

TEST(CudaSolvesTest, LaneSolveMatchesLapackOnTheInterior) {
  EXPECT_TRUE(check_lane_solve<false>(0));
  int checked = 0;
  for (int type = 0; type <= kStabilityTypes; ++type) {
    SCOPED_TRACE("type " + std::to_string(type));
    checked += check_lane_solve<true>(type) ? 1 : 0;
  }
  EXPECT_GE(checked, 14) << "of 17 types";
}

}  // namespace
}  // namespace stripesolve::tridiag
