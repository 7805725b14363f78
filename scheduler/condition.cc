#include "scheduler/condition.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <span>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "backend/backend.h"

namespace stripesolve::scheduler {
namespace {

constexpr double kEps = std::numeric_limits<double>::epsilon() / 2;  // LAPACK's dlamch('E')

double norm_1(std::span<const double> v) {
  double s = 0;
  for (double x : v) s += std::fabs(x);
  return s;
}

std::string figure(double v) {
  return v < 0 ? std::string("not known") : fmt::format("{:.2e}", v);
}

int64_t first_argmax_abs(const std::vector<double>& v) {
  int64_t best = 0;
  for (size_t k = 1; k < v.size(); ++k) {
    if (std::fabs(v[k]) > std::fabs(v[static_cast<size_t>(best)])) best = static_cast<int64_t>(k);
  }
  return best;
}

}  // namespace

std::vector<double> estimator_fixed_vectors(int64_t n) {
  std::vector<double> v(static_cast<size_t>(2 * std::max<int64_t>(n, 0)));
  for (int64_t k = 0; k < n; ++k) {
    v[static_cast<size_t>(k)] = 1.0 / static_cast<double>(n);
    const double alt = n > 1 ? 1.0 + static_cast<double>(k) / static_cast<double>(n - 1) : 1.0;
    v[static_cast<size_t>(n + k)] = k % 2 == 0 ? alt : -alt;
  }
  return v;
}

std::vector<double> estimator_transposed_start(int64_t n) {
  std::vector<double> v(static_cast<size_t>(std::max<int64_t>(n, 0)));
  uint64_t state = 0x9e3779b97f4a7c15ull ^ static_cast<uint64_t>(n);
  for (double& x : v) {
    // splitmix64: a sign per row from the top bit.
    state += 0x9e3779b97f4a7c15ull;
    uint64_t z = state;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    x = (z >> 63) != 0 ? -1.0 : 1.0;
  }
  return v;
}

int64_t estimator_unit_column(const std::vector<double>& z) {
  return z.empty() ? 0 : first_argmax_abs(z);
}

InverseNormEstimate InverseNormEstimate::from_fixed(int64_t n, const double* solved_fixed) {
  InverseNormEstimate e;
  e.n_ = n;
  if (n < 1) return e;
  const size_t un = static_cast<size_t>(n);
  // The alternating vector guards against the rare matrices that fool the iteration.
  const std::span<const double> x(solved_fixed, un);
  e.alternating_ =
      2.0 * norm_1(std::span<const double>(solved_fixed + n, un)) / (3.0 * static_cast<double>(n));
  e.hager_ = norm_1(x);
  if (n == 1) {
    e.done_ = true;
    return e;
  }
  e.sign_.resize(un);
  for (size_t k = 0; k < un; ++k) e.sign_[k] = x[k] >= 0 ? 1.0 : -1.0;
  return e;
}

InverseNormEstimate InverseNormEstimate::from_transposed(int64_t n, const std::vector<double>& z,
                                                         const double* solved) {
  InverseNormEstimate e = from_fixed(n, solved);
  if (n < 1) return e;
  e.j_ = estimator_unit_column(z);
  e.transposed_ = std::fabs(z[static_cast<size_t>(e.j_)]);  // ||start||_inf = 1
  e.unit_x_.assign(solved + 2 * n, solved + 3 * n);
  e.unit_ = norm_1(e.unit_x_);
  if (e.done_) e.unit_x_.clear();  // n = 1: nothing to sharpen
  return e;
}

Result<InverseNormEstimate> InverseNormEstimate::start(int64_t n, const VectorSolve& solve,
                                                       const VectorSolve& solve_transposed,
                                                       const double* solved_fixed) {
  std::vector<double> fixed;
  if (solved_fixed == nullptr && n > 0) {
    fixed = estimator_fixed_vectors(n);
    STRIPESOLVE_RETURN_IF_ERROR(solve(fixed.data()));
    STRIPESOLVE_RETURN_IF_ERROR(solve(fixed.data() + n));
    solved_fixed = fixed.data();
  }
  InverseNormEstimate e = from_fixed(n, solved_fixed);
  if (n < 2) return e;
  std::vector<double> x = e.sign_;
  STRIPESOLVE_RETURN_IF_ERROR(solve_transposed(x.data()));
  e.j_ = first_argmax_abs(x);
  e.transposed_ = std::fabs(x[static_cast<size_t>(e.j_)]);
  return e;
}

double InverseNormEstimate::value() const {
  return std::max({hager_, transposed_, alternating_, unit_});
}

Status InverseNormEstimate::sharpen(const VectorSolve& solve, const VectorSolve& solve_transposed,
                                    int max_unit_solves) {
  if (done_ || n_ < 2 || max_unit_solves < 1) return Status::ok();
  done_ = true;
  const size_t un = static_cast<size_t>(n_);
  std::vector<double> x(un);
  int64_t j = j_;
  double est = hager_;
  for (int iter = 2;; ++iter) {
    if (!unit_x_.empty()) {  // from_transposed: the first unit solve is made
      x = std::move(unit_x_);
      unit_x_.clear();
    } else {
      std::fill(x.begin(), x.end(), 0.0);
      x[static_cast<size_t>(j)] = 1.0;
      STRIPESOLVE_RETURN_IF_ERROR(solve(x.data()));
    }
    const double est_old = est;
    est = norm_1(x);
    bool same_signs = true;
    for (size_t k = 0; k < un && same_signs; ++k) {
      same_signs = (x[k] >= 0 ? 1.0 : -1.0) == sign_[k];
    }
    if (same_signs || est <= est_old || iter - 1 >= max_unit_solves) {
      est = std::max(est, est_old);
      break;
    }
    for (size_t k = 0; k < un; ++k) sign_[k] = x[k] >= 0 ? 1.0 : -1.0;
    x = sign_;
    STRIPESOLVE_RETURN_IF_ERROR(solve_transposed(x.data()));
    const int64_t j_last = j;
    j = first_argmax_abs(x);
    if (x[static_cast<size_t>(j_last)] == std::fabs(x[static_cast<size_t>(j)])) break;
  }
  hager_ = est;
  return Status::ok();
}

Result<double> estimate_inverse_norm_1(int64_t n, const VectorSolve& solve,
                                       const VectorSolve& solve_transposed,
                                       const double* solved_fixed, int max_unit_solves) {
  STRIPESOLVE_ASSIGN_OR_RETURN(
      InverseNormEstimate e, InverseNormEstimate::start(n, solve, solve_transposed, solved_fixed));
  STRIPESOLVE_RETURN_IF_ERROR(e.sharpen(solve, solve_transposed, max_unit_solves));
  return e.value();
}

double backward_error_tolerance(int64_t n) {
  return std::max(2.0, std::sqrt(static_cast<double>(std::max<int64_t>(n, 1))) / 4) *
         std::numeric_limits<double>::epsilon();
}

bool pivoting_to_blame(const SolveQuality& q) {
  if (q.backward_error <= backward_error_tolerance(q.n)) return false;
  if (q.growth > kUnstableGrowth) return true;
  return q.rcond >= kIllConditioned;
}

std::string quality_warning(const SolveQuality& q) {
  const double tol = backward_error_tolerance(q.n);
  // Factors that grew past kUnstableGrowth are too inaccurate to estimate the condition with:
  // their rcond is no evidence of singularity (the transposed Wilkinson matrix, condition 160,
  // estimates 1e-32 from factors grown by 2^159).
  const bool unstable = q.growth > kUnstableGrowth;
  const bool singular = q.rcond >= 0 && q.rcond < kEps && !unstable;
  const bool inaccurate = q.backward_error > tol;
  if (!singular && !inaccurate) return "";
  if (!inaccurate) {
    return fmt::format(
        "singular to working precision (rcond {:.2e}): the solution is not "
        "determined by the data",
        q.rcond);
  }
  std::vector<std::string> causes;
  if (singular) {
    causes.push_back(fmt::format("singular to working precision (rcond {:.2e})", q.rcond));
  } else if (!unstable && q.rcond >= 0 && q.rcond < kIllConditioned) {
    causes.push_back(fmt::format("ill-conditioned (rcond {:.2e})", q.rcond));
  }
  if (unstable) {
    causes.push_back(
        fmt::format("unstable pivoting (growth {:.2e}; the rcond estimate from "
                    "these factors is unreliable)",
                    q.growth));
  }
  if (causes.empty()) {
    causes.push_back(
        fmt::format("pivoting (growth {}, rcond {})", figure(q.growth), figure(q.rcond)));
  }
  // The advice is a mode whose pivot choice the same matrix does not defeat the same way: row
  // pivoting is GEPP of A^T, gepp that of A (the Wilkinson matrix defeats one, its transpose the
  // other), and row is the stable one to try after local or none.
  const char* other = q.pivot == stripe::PivotMode::kRow ? "gepp" : "row";
  const std::string after = q.refinement_steps == 0 ? "without refinement"
                            : q.refinement_steps == 1
                                ? "after 1 refinement step"
                                : fmt::format("after {} refinement steps", q.refinement_steps);
  return fmt::format("backward error {:.2e} above the tolerance {:.2e} {}: {}; try --pivot {}",
                     q.backward_error, tol, after, fmt::join(causes, ", "), other);
}

}  // namespace stripesolve::scheduler
