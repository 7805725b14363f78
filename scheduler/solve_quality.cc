// SolvePhases (solve_phases.h): the solve's quality contract. The condition estimate (a
// transposed solve while the factors are cached, sharpened by a unit solve only where rcond is
// small), the residual with its refinement steps (auto: LAPACK dgerfs's rule), the pivot growth,
// and the warning a solve that misses its tolerance ends with.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "base/logging.h"
#include "scheduler/condition.h"
#include "scheduler/solve_phases.h"
#include "scheduler/substitution.h"

namespace stripesolve::scheduler {
namespace {

double norm_inf(const double* v, int64_t n, int64_t nrhs) {
  double m = 0;
  for (int64_t k = 0; k < n * nrhs; ++k) m = std::max(m, std::fabs(v[k]));
  return m;
}

// LAPACK dgerfs's rule for auto refinement after the residual of step `step`: go on while above
// eps and each step at least halves the error. A step that made x worse is undone (x_before).
bool refinement_goes_on(int step, double berr, SolveReport& report, double* x,
                        std::vector<double>& x_before, int64_t size) {
  const double eps = std::numeric_limits<double>::epsilon() / 2;
  if ((step == 0 && berr <= report.tolerance) || berr <= eps) return false;
  if (step > 0) {
    const double before = report.residual_history[static_cast<size_t>(step - 1)];
    if (berr > before) {
      std::copy(x_before.begin(), x_before.end(), x);
      report.residual = before;
    }
    if (berr > 0.5 * before) return false;
  }
  x_before.assign(x, x + size);
  return true;
}

}  // namespace

// The first part of the condition estimate (a transposed solve), while the factors are still
// cached from the substitution (002's zigzag: each pass starts where the previous one ended).
// Its sharpening waits for ||A||_1 (residual_and_refinement), and is left out where the
// estimate decides nothing: a well-conditioned matrix's estimate costs one pass over the
// factors instead of about two.
Status SolvePhases::estimate_condition(const std::vector<double>& solved_fixed) {
  const auto t_condition = SolveClock::now();
  auto estimate = InverseNormEstimate::start(
      sv_.g.n, [&](double* v) { return solve_columns(v, 1, nullptr, "condition"); },
      [&](double* v) { return solve_transposed_column(v); }, solved_fixed.data());
  // A numerical error here (an overflow in a solve) has failed the cache, so it ends the solve
  // like one of the main substitution would.
  STRIPESOLVE_RETURN_IF_ERROR(estimate.status());
  inverse_norm_ = std::move(estimate).value();
  sv_.report.condition_seconds = seconds_since(t_condition);
  return Status::ok();
}

Status SolvePhases::sharpen_condition(double a_norm_1) {
  if (!inverse_norm_ || inverse_norm_->sharpened() ||
      1.0 / (a_norm_1 * inverse_norm_->value()) >= kSharpenRcondBelow) {
    return Status::ok();
  }
  const auto t_condition = SolveClock::now();
  // Cells of A the store's residual pass left must not serve reads of the factors. After a pass
  // on a copy of A (device or RAM) the cells still hold the factors: a flush would write out
  // factors that are not to be kept (24.5 GiB at n = 57344) and read them back. The device's
  // solves read no cells.
  if (sv_.report.residual_source == ResidualSource::kStore && !on_device_) {
    STRIPESOLVE_RETURN_IF_ERROR(cache_.flush());
  }
  STRIPESOLVE_RETURN_IF_ERROR(inverse_norm_->sharpen(
      [&](double* v) { return solve_columns(v, 1, nullptr, "condition"); },
      [&](double* v) { return solve_transposed_column(v); }, kConditionUnitSolves));
  sv_.report.condition_seconds += seconds_since(t_condition);
  return Status::ok();
}

Status SolvePhases::check() {
  SolveReport& report = sv_.report;
  report.tolerance = backward_error_tolerance(sv_.g.n);
  if (!req_.options.in_place) {
    STRIPESOLVE_RETURN_IF_ERROR(residual_and_refinement(report.x.data()));
  }
  if (req_.options.check_quality) {
    report.warning = quality_warning(
        {.n = sv_.g.n,
         .backward_error = report.residual,
         .rcond = report.rcond,
         .growth = report.growth,
         .refinement_steps = report.residual_history.empty()
                                 ? 0
                                 : static_cast<int>(report.residual_history.size()) - 1,
         .pivot = req_.options.pivot});
  }
  return Status::ok();
}

Status SolvePhases::residual_and_refinement(double* x) {
  const auto t_residual = SolveClock::now();
  const DenseSolveOptions& options = req_.options;
  const int64_t n = sv_.g.n;
  const int64_t nrhs = req_.nrhs;
  SolveReport& report = sv_.report;
  // The device's copy of A, where it kept one beside factors resident there, else the RAM
  // cache's: no second read of A from the store, and the factors stay where they are.
  report.residual_source = on_device_ && gpu_elim_->original_complete() ? ResidualSource::kDevice
                           : ram_original_                              ? ResidualSource::kRam
                                                                        : ResidualSource::kStore;
  // Factors neither stored nor resident on the device would have to be written out before the
  // residual pass just in case: auto refinement leaves them alone (explicit steps still write
  // them), and a solve above the tolerance then ends with its warning. Beside a copy of A in
  // RAM they stay cached (the residual reads no cells).
  const bool factors_kept = sv_.factor != nullptr || on_device_ || ram_original_ != nullptr;
  const bool refine_auto = options.refinement_steps == DenseSolveOptions::kRefineAuto &&
                           options.check_quality && factors_kept;
  const int max_steps =
      refine_auto ? DenseSolveOptions::kMaxAutoRefinement : std::max(0, options.refinement_steps);
  const bool factors_dropped = !sv_.factor && (on_device_ || max_steps == 0);
  if (factors_dropped) {
    cache_.discard_idle();  // factors not persisted and not needed from RAM any more
  } else if (!sv_.factor && !ram_original_) {
    STRIPESOLVE_RETURN_IF_ERROR(cache_.write_back());  // refinement reads them again
  }
  std::vector<double> r(static_cast<size_t>(n * nrhs));
  std::vector<double> x_before;  // the x before the last auto step, in case it got worse
  const double b_norm = norm_inf(req_.b, n, nrhs);
  ResidualResult res;
  for (int step = 0;; ++step) {
    if (report.residual_source == ResidualSource::kDevice) {
      ctx_.progress.begin_phase(
          "residual",
          2.0 * static_cast<double>(n) * static_cast<double>(n) * static_cast<double>(nrhs),
          sv_.g.stripes);
      auto on_device = gpu_elim_->residual(req_.b, x, nrhs, r.data(), gepp_);
      if (on_device.is_ok()) {
        res = *on_device;
      } else if (on_device.status().code() == StatusCode::kResourceExhausted) {
        // No room beside the factors for x and r (many right-hand sides): the store's pass.
        logger("scheduler")
            ->warn("the residual reads A from the store: {}", on_device.status().message());
        report.residual_source = ResidualSource::kStore;
      } else {
        return on_device.status();
      }
    }
    if (report.residual_source == ResidualSource::kRam) {
      res = ram_original_->residual(ctx_, req_.b, x, nrhs, r.data(), static_cast<int>(cores()));
    }
    if (report.residual_source == ResidualSource::kStore) {
      STRIPESOLVE_RETURN_IF_ERROR(cache_.flush());  // factor cells must not serve reads of A
      io_.set_sources(sv_.a.get(), nullptr);
      STRIPESOLVE_ASSIGN_OR_RETURN(res, residual(ctx_, *sv_.a, req_.b, x, nrhs, r.data()));
    }
    const double denom = res.a_norm_inf * norm_inf(x, n, nrhs) + b_norm;
    const double berr = denom > 0 ? res.r_norm_inf / denom : res.r_norm_inf;
    report.residual_history.push_back(berr);
    report.residual = berr;
    if (step == max_steps) break;
    if (refine_auto && !refinement_goes_on(step, berr, report, x, x_before, n * nrhs)) break;
    // Cells of A the store's pass left must not serve reads of the factors.
    if (report.residual_source == ResidualSource::kStore) {
      STRIPESOLVE_RETURN_IF_ERROR(cache_.flush());
    }
    STRIPESOLVE_RETURN_IF_ERROR(solve_columns(r.data(), nrhs, nullptr, ""));
    for (int64_t k = 0; k < n * nrhs; ++k) x[k] += r[static_cast<size_t>(k)];
  }
  ram_original_.reset();  // the residual is final: the cache has the memory back
  if (sv_.max_abs_u >= 0 && res.a_max_abs > 0) report.growth = sv_.max_abs_u / res.a_max_abs;
  report.residual_seconds = seconds_since(t_residual);
  if (inverse_norm_ && res.a_norm_1 > 0) {
    if (on_device_ || !factors_dropped) {
      STRIPESOLVE_RETURN_IF_ERROR(sharpen_condition(res.a_norm_1));
    }
    if (inverse_norm_->value() > 0) report.rcond = 1.0 / (res.a_norm_1 * inverse_norm_->value());
  }
  return Status::ok();
}

}  // namespace stripesolve::scheduler
