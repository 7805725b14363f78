// The 1-norm condition estimate of a dense solve (LAPACK dgecon's estimator) and the quality
// figures a solve reports beside its solution.
//
// InverseNormEstimate is Higham's refinement of Hager's method (Higham 1988, "FORTRAN codes
// for estimating the one-norm of a real or complex matrix", Algorithm 4.1; LAPACK dlacn2): it
// needs only products with A^-1 and A^-T, here solves with the stored factors: 3 for its first
// part, usually 4 or 5 in all (at most 11). The estimate is a lower bound of ||A^-1||_1, in
// practice within a factor 3 of it once sharpened.
//
// Thread-safety: plain functions and a value type; the callbacks run on the calling thread.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "base/status.h"
#include "stripe/stripe_ops.h"

namespace stripesolve::scheduler {

// A solve with one right-hand side of n values, in place.
using VectorSolve = std::function<Status(double* v)>;

// The two vectors the estimator solves with whatever the matrix (n x 2, column-major): the
// start (1/n, ..., 1/n) and the alternating (-1)^k (1 + k / (n - 1)) it ends with. A caller may
// solve them beside its own right-hand sides (same passes over the factors) and pass the result.
std::vector<double> estimator_fixed_vectors(int64_t n);

// The ±1 vector (pseudo-random signs, the same for a given n) whose transposed solve
// InverseNormEstimate::from_transposed starts from. Known before the factors are, so that the
// first pass of that solve (U^T) can run during the factorization as each stripe's U rows become
// final (factor_run.h), where they are in RAM anyway. Signs rather than all ones: the sum of a
// column of A^-1 may cancel where its signed sum does not.
std::vector<double> estimator_transposed_start(int64_t n);

// Where |z| is largest (the first of equals): the unit vector e_j that Hager's iteration solves
// with after the transposed solve z.
int64_t estimator_unit_column(const std::vector<double>& z);

// Higham's Algorithm 4.1 in two parts, so that a caller may leave out the second where the
// estimate decides nothing (scheduler/solve_phases.cc).
//   start(): the fixed vectors (`solved_fixed`: A^-1 times estimator_fixed_vectors(n), n x 2, or
//     null to solve them here) and one transposed solve. Three lower bounds of ||A^-1||_1:
//     ||A^-1 v||_1 for v = (1/n, ..., 1/n) (Hager's start), ||z||_inf for z = A^-T sign(A^-1 v)
//     (||A^-T||_inf >= ||z||_inf / ||sign||_inf, and ||A^-T||_inf = ||A^-1||_1), and the
//     alternating vector's. On uniform, graded and nearly singular test matrices (n = 2 to 2000)
//     their largest was 0.19-1.0 of ||A^-1||_1, against 0.58-1.0 after one unit solve.
//   sharpen(): Hager's iteration from there, `max_unit_solves` solves with a unit vector e_j at
//     most, each but the first preceded by a transposed solve: dlacn2 allows 4 (its ITMAX = 5)
//     and usually stops after 2. Once only.
// value() is the largest lower bound so far, in practice within a factor 3 of ||A^-1||_1 once
// sharpened.
class InverseNormEstimate {
 public:
  static Result<InverseNormEstimate> start(int64_t n, const VectorSolve& solve,
                                           const VectorSolve& solve_transposed,
                                           const double* solved_fixed = nullptr);
  // The same bounds with the transposed solve first, so that no solve waits for another's
  // result and every one rides on passes the solve makes anyway: `z` = A^-T
  // estimator_transposed_start(n), `solved` = A^-1 times [estimator_fixed_vectors(n), e_j]
  // (n x 3, j = estimator_unit_column(z)). Four lower bounds: Hager's start, ||z||_inf, the
  // alternating vector's and ||A^-1 e_j||_1, the first step of Hager's iteration (which
  // counts as one of sharpen()'s unit solves; sharpen(1) then ends it without a solve).
  static InverseNormEstimate from_transposed(int64_t n, const std::vector<double>& z,
                                             const double* solved);
  Status sharpen(const VectorSolve& solve, const VectorSolve& solve_transposed,
                 int max_unit_solves);
  double value() const;
  bool sharpened() const { return done_; }

 private:
  // What both starts share: Hager's start and the alternating vector's bounds from A^-1 times
  // estimator_fixed_vectors(n), and the signs of the first.
  static InverseNormEstimate from_fixed(int64_t n, const double* solved_fixed);

  int64_t n_ = 0;
  double hager_ = 0;            // Hager's estimate: ||A^-1 x||_1 of the last x solved with
  double transposed_ = 0;       // ||z||_inf of the first transposed solve
  double alternating_ = 0;      // the alternating vector's bound
  double unit_ = 0;             // ||A^-1 e_j||_1 solved by from_transposed's caller
  std::vector<double> unit_x_;  // that A^-1 e_j, for sharpen() to go on from (empty: none)
  std::vector<double> sign_;
  int64_t j_ = 0;  // where |z| is largest: the unit vector the iteration solves with next
  bool done_ = false;
};

// start() and sharpen(max_unit_solves) in one call: with 1 unit solve the estimate is Hager's
// first step, which already finds the maximizing column of most matrices and is within 10x of
// ||A^-1||_1 on every matrix of the tests, at 2 solves instead of 4; with 0, start() alone.
Result<double> estimate_inverse_norm_1(int64_t n, const VectorSolve& solve,
                                       const VectorSolve& solve_transposed,
                                       const double* solved_fixed = nullptr,
                                       int max_unit_solves = 4);

// The normwise backward error a solve should reach: max(2, sqrt(n) / 4) eps (3.5 eps at n = 200,
// 16 eps at 4096, 60 eps at 57344, 250 eps at 10^6). A backward-stable solve (GEPP, LAPACK
// dgesv) lands well below the worst-case bound gamma_n (Higham 2002 §9.3), but not at eps
// whatever n: the rounding of the n-term sums grows like sqrt(n) on random data. Measured on the
// GPU tier with row pivoting (random U(-1,1) matrices, this norm): 21 eps at n = 32768, 30 eps at
// 57344, where cuSOLVER dgetrf + dgetrs gets 34 and 45 eps; a bound of log2(n) / 2 eps (7.9 eps
// at 57344) sent every such solve to a warning. It is still tight enough that `--refine auto`
// refines the solves of `local` and `none` that lost digits (one or two steps repair them on
// benign matrices), and a solve still above it ends COMPLETED_WITH_WARNING.
double backward_error_tolerance(int64_t n);

// Pivot growth max|U| / max|A| above which the factorization is called unstable in a warning:
// 1 / sqrt(eps) (= 6.7e7), where the rounding errors of U alone may exceed sqrt(eps) ||A||.
constexpr double kUnstableGrowth = 6.7108864e7;

// rcond below which a solve that misses the tolerance is called ill-conditioned: sqrt(eps), where
// refinement with the stored factors stops converging for pivoting that is not quite stable.
constexpr double kIllConditioned = 1.4901161193847656e-08;

// rcond below which the dense solve sharpens its estimate (InverseNormEstimate::sharpen): ten
// times kIllConditioned, so that the thresholds that decide (kIllConditioned, and eps for
// "singular") see the sharpened figure, where start()'s bound may be 5x low; above it the
// estimate decides nothing and is reported as start() left it.
constexpr double kSharpenRcondBelow = 10 * kIllConditioned;

struct SolveQuality {
  int64_t n = 0;
  double backward_error = -1;  // -1: not computed (in place)
  double rcond = -1;           // -1: not estimated
  double growth = -1;          // -1: not tracked
  int refinement_steps = 0;    // steps made before the backward error above
  stripe::PivotMode pivot = stripe::PivotMode::kRow;
};

// True when the backward error is above the tolerance and the pivoting is to blame, not the
// matrix: the growth is above kUnstableGrowth (then the rcond estimate proves nothing), or A is
// neither singular nor ill-conditioned by the estimate (rcond >= kIllConditioned). False when
// neither figure is known. The dense solve then re-solves a kRow solve with kGepp
// (scheduler/transposed_solve.h).
bool pivoting_to_blame(const SolveQuality& q);

// Empty when the solve may end COMPLETED; otherwise the warning naming the cause: "singular to
// working precision (rcond R)" whenever rcond < eps (even with a small backward error, as LAPACK
// dgesvx's info = n + 1); a backward error above the tolerance names "unstable pivoting (growth
// G)" (growth > kUnstableGrowth: then the rcond of these factors proves nothing and is not
// used) or "ill-conditioned (rcond R)" (rcond < kIllConditioned) and says which --pivot to try:
// gepp after row, row after any other mode.
std::string quality_warning(const SolveQuality& q);

}  // namespace stripesolve::scheduler
