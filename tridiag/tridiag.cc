// Batch layer: validation, layouts, the choice of kAuto, threading and the fallback.
#include "tridiag/tridiag.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <numeric>

#include <fmt/format.h>

#include "tridiag/batch_check.h"
#include "tridiag/interleaved_runs.h"
#include "tridiag/lanes.h"
#include "tridiag/parallel_for.h"
#include "tridiag/system_solvers.h"

namespace stripesolve::tridiag {

namespace {

constexpr std::array<Algorithm, 9> kAlgorithms = {
    Algorithm::kThomas,  Algorithm::kCr,        Algorithm::kPcr,
    Algorithm::kCrPcr,   Algorithm::kPcrThomas, Algorithm::kCrPcrThomas,
    Algorithm::kBondeli, Algorithm::kSpike,     Algorithm::kGepp};

// A single system at least this large, with fewer systems than threads, runs SPIKE partitions
// in parallel instead of one system per thread.
constexpr std::size_t kParallelSpikeSize = std::size_t{1} << 16;
// A pivot below this times its row's scale is a near breakdown (sqrt(eps), see solve_batch).
constexpr double kNearBreakdownPivot = 1.4901161193847656e-08;

}  // namespace

std::string_view algorithm_name(Algorithm algorithm) {
  switch (algorithm) {
    case Algorithm::kAuto:
      return "auto";
    case Algorithm::kThomas:
      return "thomas";
    case Algorithm::kCr:
      return "cr";
    case Algorithm::kPcr:
      return "pcr";
    case Algorithm::kCrPcr:
      return "cr_pcr";
    case Algorithm::kPcrThomas:
      return "pcr_thomas";
    case Algorithm::kCrPcrThomas:
      return "cr_pcr_thomas";
    case Algorithm::kBondeli:
      return "bondeli";
    case Algorithm::kSpike:
      return "spike";
    case Algorithm::kGepp:
      return "gepp";
  }
  return "unknown";
}

Result<Algorithm> parse_algorithm(std::string_view name) {
  if (name == "auto") return Algorithm::kAuto;
  for (Algorithm a : kAlgorithms) {
    if (algorithm_name(a) == name) return a;
  }
  return Status::invalid_argument(
      "unknown tridiagonal algorithm '" + std::string(name) +
      "' (expected auto, thomas, cr, pcr, cr_pcr, pcr_thomas, cr_pcr_thomas, bondeli, spike or "
      "gepp)");
}

std::span<const Algorithm> all_algorithms() {
  return kAlgorithms;
}

bool is_pivoting(Algorithm algorithm) {
  return algorithm == Algorithm::kSpike || algorithm == Algorithm::kGepp;
}

std::size_t BatchShape::systems() const {
  return layout == BatchLayout::kRagged ? sizes.size() : count;
}

std::size_t BatchShape::unknowns() const {
  if (layout == BatchLayout::kRagged)
    return std::accumulate(sizes.begin(), sizes.end(), std::size_t{0});
  return n * count;
}

Status validate_batch(const BatchShape& shape, const BatchArrays& arrays) {
  if (shape.layout == BatchLayout::kRagged) {
    if (shape.sizes.empty()) return Status::invalid_argument("ragged batch: sizes is empty");
    for (std::size_t j = 0; j < shape.sizes.size(); ++j) {
      if (shape.sizes[j] == 0) {
        return Status::invalid_argument("ragged batch: system " + std::to_string(j) +
                                        " has size 0 (must be >= 1)");
      }
    }
  } else {
    if (shape.n == 0) return Status::invalid_argument("batch: n must be >= 1");
    if (shape.count == 0) return Status::invalid_argument("batch: count must be >= 1");
  }
  const std::array<std::pair<const void*, const char*>, 5> ptrs = {
      {{arrays.dl, "dl"}, {arrays.d, "d"}, {arrays.du, "du"}, {arrays.f, "f"}, {arrays.x, "x"}}};
  for (const auto& [ptr, name] : ptrs) {
    if (ptr == nullptr) return Status::invalid_argument(std::string("batch: ") + name + " is null");
  }
  return Status::ok();
}

Algorithm choose_cpu_algorithm(const BatchShape& shape, const SolveOptions& options) {
  (void)shape;
  // Partial pivoting costs little more than Thomas on a CPU and matches LAPACK's accuracy
  // exactly; SPIKE only pays on a CPU with many cores (it does ~2x the flops).
  return options.require_stable ? Algorithm::kGepp : Algorithm::kThomas;
}

Status solve_system(Algorithm algorithm, const SystemRef& s, double tol, Workspace& work) {
  switch (algorithm) {
    case Algorithm::kThomas:
      return solve_thomas(s, tol, work);
    case Algorithm::kCr:
      return solve_cr(s, tol, work);
    case Algorithm::kPcr:
      return solve_pcr(s, tol, work);
    case Algorithm::kCrPcr:
      return solve_cr_pcr(s, tol, work);
    case Algorithm::kPcrThomas:
      return solve_pcr_thomas(s, tol, work);
    case Algorithm::kCrPcrThomas:
      return solve_cr_pcr_thomas(s, tol, work);
    case Algorithm::kBondeli:
      return solve_bondeli(s, tol, work);
    case Algorithm::kSpike:
      return solve_spike(s, 1);
    case Algorithm::kGepp:
      return solve_gepp(s, work);
    case Algorithm::kAuto:
      break;
  }
  return Status::invalid_argument("solve_system: no concrete algorithm given");
}

namespace {

// Solves one system with `alg` and checks it (tridiag.h: the quality check), solving it again
// with gepp where `may_fall_back`; fills `out`. s.f must not alias s.x.
Status solve_checked(Algorithm alg, const SystemRef& s, const SolveOptions& options,
                     bool may_fall_back, unsigned inner_threads, Workspace& work,
                     SystemOutcome& out) {
  out.tolerance = backward_error_tolerance(s.n);
  if (options.refuse_non_finite) STRIPESOLVE_RETURN_IF_ERROR(check_finite_inputs(s, s.n));
  // First with the near-breakdown pivot tolerance: a pivot below sqrt(eps) of its row means
  // multipliers above 1/sqrt(eps) (the dense side's unstable growth) that the backward error
  // can miss on an ill-conditioned system (Toeplitz (1, 1e-8, 1) of odd n: thomas within the
  // tolerance, 20x LAPACK's residual).
  const double near_tol = std::max(options.pivot_tolerance, kNearBreakdownPivot);
  Status st = alg == Algorithm::kSpike ? solve_spike(s, inner_threads)
                                       : solve_system(alg, s, near_tol, work);
  std::string near_breakdown;
  if (st.code() == StatusCode::kNumerical && !may_fall_back && !is_pivoting(alg)) {
    // Not allowed to fall back: keep what the algorithm gives down to the breakdown tolerance,
    // with a warning.
    near_breakdown = st.message();
    st = solve_system(alg, s, options.pivot_tolerance, work);
  }
  // The check's figures of the solution in s.x (+inf where the solve failed).
  auto check = [&s, &out](bool solved) {
    const SolutionQuality q = solved ? solution_quality(s.dl, s.d, s.du, s.x, s.f, s.n)
                                     : SolutionQuality{INFINITY, INFINITY};
    out.backward_error = q.backward_error;
    out.relative_residual = q.relative_residual;
  };
  check(st.is_ok());
  const bool broke_down = st.code() == StatusCode::kNumerical;
  if (may_fall_back && (broke_down || (st.is_ok() && !(out.backward_error <= out.tolerance)))) {
    out.fallback = broke_down
                       ? "broke down (" + st.message() + ")"
                       : fmt::format("left a backward error {:.2e} above the tolerance {:.2e}",
                                     out.backward_error, out.tolerance);
    st = solve_gepp(s, work);
    out.by_gepp = true;
    if (st.is_ok()) check(true);
  }
  out.by_gepp = out.by_gepp || alg == Algorithm::kGepp;
  if (!st.is_ok()) return st;
  if (!(out.backward_error <= out.tolerance)) {
    out.warning = above_tolerance(out.backward_error, out.tolerance);
  } else if (!near_breakdown.empty()) {
    out.warning = "near breakdown: " + near_breakdown;
  }
  return Status::ok();
}

// What solve_checked gives for a system `alg` (gepp or thomas) has solved in the lanes with
// the check `q` (lanes.h): thomas's systems above the tolerance do not come here.
void lane_outcome(Algorithm alg, std::size_t n, const SolutionQuality& q, SystemOutcome& out) {
  out.tolerance = backward_error_tolerance(n);
  out.backward_error = q.backward_error;
  out.relative_residual = q.relative_residual;
  out.by_gepp = alg == Algorithm::kGepp;
  if (!(out.backward_error <= out.tolerance))
    out.warning = above_tolerance(out.backward_error, out.tolerance);
}

}  // namespace

Status check_batch(const BatchShape& shape, const BatchArrays& arrays, Algorithm algorithm,
                   bool may_fall_back, unsigned threads, BatchOutcome& outcome) {
  threads = resolve_threads(threads);
  const std::vector<std::size_t> offsets = system_offsets(shape);
  const std::size_t systems = offsets.size() - 1;
  std::vector<double> errors(systems);
  std::vector<std::array<std::vector<double>, 5>> gather(threads);
  const std::size_t grain = std::max<std::size_t>(
      1, (std::size_t{1} << 16) / std::max<std::size_t>(1, offsets[systems] / systems));
  Status st = parallel_for(
      systems, threads, grain, [&](std::size_t b, std::size_t e, unsigned worker) -> Status {
        if (shape.layout == BatchLayout::kInterleaved) {  // runs of systems (interleaved_runs.h)
          const std::size_t n = shape.n, run = interleaved_run(n);
          std::array<std::vector<double>, 5>& g = gather[worker];
          for (std::size_t j0 = b; j0 < e; j0 += run) {
            const std::size_t count = std::min(run, e - j0);
            gather_run(n, systems, {arrays.dl, arrays.d, arrays.du, arrays.f, arrays.x}, j0, count,
                       g);
            for (std::size_t k = 0; k < count; ++k) {
              const std::size_t o = k * n;
              errors[j0 + k] = backward_error(&g[0][o], &g[1][o], &g[2][o], &g[4][o], &g[3][o], n);
            }
          }
          return Status::ok();
        }
        for (std::size_t j = b; j < e; ++j) {
          const SystemRef s = system_ref(shape, arrays, offsets, j, gather[worker], true);
          errors[j] = backward_error(s.dl, s.d, s.du, s.x, s.f, s.n);
        }
        return Status::ok();
      });
  if (!st.is_ok()) return st;
  outcome.systems = systems;
  std::vector<Suspect> suspects;
  for (std::size_t j = 0; j < systems; ++j) {
    const double tolerance = backward_error_tolerance(offsets[j + 1] - offsets[j]);
    outcome.tolerance = std::max(outcome.tolerance, tolerance);
    if (!(errors[j] <= tolerance)) {
      suspects.push_back({j, errors[j]});
    } else if (errors[j] > outcome.worst_clean_error) {
      outcome.worst_clean_error = errors[j];
      outcome.worst_clean_system = j;
    }
  }
  return settle_suspects(shape, arrays, algorithm, may_fall_back, threads, suspects, outcome.noted);
}

Status check_solution(const BatchShape& shape, const BatchArrays& arrays, Algorithm algorithm,
                      bool may_fall_back, unsigned threads, SolveReport& report) {
  STRIPESOLVE_RETURN_IF_ERROR(validate_batch(shape, arrays));
  if (arrays.x == arrays.f) return Status::invalid_argument("check_solution: x must not alias f");
  BatchOutcome outcome;
  STRIPESOLVE_RETURN_IF_ERROR(
      check_batch(shape, arrays, algorithm, may_fall_back, threads, outcome));
  summarize(algorithm, outcome, report);
  return Status::ok();
}

Status solve_batch_checked(const BatchShape& shape, const BatchArrays& arrays,
                           const SolveOptions& options, SolveReport& report,
                           BatchOutcome& outcome) {
  STRIPESOLVE_RETURN_IF_ERROR(validate_batch(shape, arrays));
  const unsigned threads = resolve_threads(options.threads);
  const bool automatic = options.algorithm == Algorithm::kAuto;
  report.algorithm = automatic ? choose_cpu_algorithm(shape, options) : options.algorithm;
  const Algorithm alg = report.algorithm;
  // gepp is the fallback; spike promises a stable result like it, so it may always use it.
  const bool may_fall_back =
      alg != Algorithm::kGepp && (automatic || options.fallback || alg == Algorithm::kSpike);
  const std::vector<std::size_t> offsets = system_offsets(shape);
  const std::size_t systems = offsets.size() - 1;
  if (automatic) {
    report.notes.push_back(fmt::format(
        "auto chose {} ({} requested, {} systems, {} unknowns, CPU)", algorithm_name(alg),
        options.require_stable ? "stable" : "unpivoted", systems, offsets[systems]));
  }
  std::vector<SystemOutcome> outcomes(systems);
  std::vector<Workspace> work(threads);
  std::vector<std::array<std::vector<double>, 5>> gather(threads);
  auto solve_one = [&](std::size_t j, unsigned worker, unsigned inner_threads) -> Status {
    const SystemRef s = system_ref(shape, arrays, offsets, j, gather[worker], false);
    Status st =
        solve_checked(alg, s, options, may_fall_back, inner_threads, work[worker], outcomes[j]);
    if (!st.is_ok()) return st.with_context(fmt::format("system {}", j));
    scatter_x(shape, arrays, systems, j, s);
    return Status::ok();
  };
  const bool parallel_inside = alg == Algorithm::kSpike && systems < threads &&
                               offsets[systems] / systems >= kParallelSpikeSize;
  if (parallel_inside) {
    for (std::size_t j = 0; j < systems; ++j) STRIPESOLVE_RETURN_IF_ERROR(solve_one(j, 0, threads));
  } else {
    // Runs of systems: gepp's and thomas's solved kLanes at a time where they have one size
    // (lanes.h), other algorithms' interleaved systems gathered into contiguous rows
    // (interleaved_runs.h).
    const bool interleaved = shape.layout == BatchLayout::kInterleaved;
    // Only where every thread gets whole runs: a run costs about as much with one system as
    // with eight, so a few systems go faster one a thread.
    const bool lanes = (alg == Algorithm::kGepp || alg == Algorithm::kThomas) &&
                       shape.layout != BatchLayout::kRagged && systems >= kLanes * threads &&
                       shape.n <= kLanesMaxRows;
    // About 64 Ki unknowns a chunk of work, whole runs of lanes.
    std::size_t grain = std::max<std::size_t>(
        1, (std::size_t{1} << 16) / std::max<std::size_t>(1, offsets[systems] / systems));
    if (lanes) grain = (grain + kLanes - 1) / kLanes * kLanes;
    std::vector<LaneWork> lane_work(threads);  // a worker's, as gather
    auto solve_lanes = [&](std::size_t j0, std::size_t count, unsigned worker) -> Status {
      const std::size_t n = shape.n;
      const std::size_t first = interleaved ? j0 : offsets[j0];
      const LaneRun lane_run{{arrays.dl + first, arrays.d + first, arrays.du + first,
                              arrays.f + first, arrays.x + first},
                             n,
                             count,
                             interleaved ? systems : 1,
                             interleaved ? 1 : n};
      LaneChecks checks;
      LaneWork& w = lane_work[worker];
      // thomas with solve_checked's first tolerance, near breakdown.
      const std::uint32_t failed =
          alg == Algorithm::kGepp
              ? solve_gepp_lanes(lane_run, w, checks)
              : solve_thomas_lanes(lane_run, std::max(options.pivot_tolerance, kNearBreakdownPivot),
                                   backward_error_tolerance(n), w, checks);
      if (options.refuse_non_finite && checks.non_finite_input != 0) {
        // The first such system, as solve_checked would have refused it before its solve.
        const std::size_t k = static_cast<std::size_t>(std::countr_zero(checks.non_finite_input));
        const std::size_t o = k * lane_run.lane_stride;
        const BatchArrays system{lane_run.dl + o, lane_run.d + o, lane_run.du + o, lane_run.f + o,
                                 nullptr};
        return check_finite_inputs(system, n, lane_run.row_stride)
            .with_context(fmt::format("system {}", j0 + k));
      }
      for (std::size_t k = 0; k < count; ++k) {
        // A failed lane (for thomas also one above the tolerance): solve_checked, which says
        // why, warns or falls back.
        if ((failed >> k & 1u) != 0) {
          STRIPESOLVE_RETURN_IF_ERROR(solve_one(j0 + k, worker, 1));
        } else {
          lane_outcome(alg, n, {checks.backward_error[k], checks.relative_residual[k]},
                       outcomes[j0 + k]);
        }
      }
      return Status::ok();
    };
    auto solve_run = [&](std::size_t j0, std::size_t count, unsigned worker) -> Status {
      if (lanes) return solve_lanes(j0, count, worker);
      const std::size_t n = shape.n;
      std::array<std::vector<double>, 5>& g = gather[worker];
      gather_run(n, systems, {arrays.dl, arrays.d, arrays.du, arrays.f, nullptr}, j0, count, g);
      for (std::size_t k = 0; k < count; ++k) {
        const std::size_t o = k * n;
        const SystemRef s{{&g[0][o], &g[1][o], &g[2][o], &g[3][o], &g[4][o]}, n};
        Status st =
            solve_checked(alg, s, options, may_fall_back, 1, work[worker], outcomes[j0 + k]);
        if (!st.is_ok()) return st.with_context(fmt::format("system {}", j0 + k));
      }
      scatter_run_x(n, systems, arrays.x, j0, count, g);
      return Status::ok();
    };
    const bool runs = interleaved || lanes;
    const std::size_t run = lanes ? kLanes : interleaved ? interleaved_run(shape.n) : 1;
    Status st = parallel_for(
        systems, threads, grain, [&](std::size_t b, std::size_t e, unsigned worker) -> Status {
          for (std::size_t j = b; j < e; j += run) {
            STRIPESOLVE_RETURN_IF_ERROR(runs ? solve_run(j, std::min(run, e - j), worker)
                                             : solve_one(j, worker, 1));
          }
          return Status::ok();
        });
    if (!st.is_ok()) return st;
  }
  outcome.systems = systems;
  WorstSystem worst_residual;
  for (std::size_t j = 0; j < systems; ++j) {
    SystemOutcome& o = outcomes[j];
    if (o.relative_residual > worst_residual.value) worst_residual = {o.relative_residual, j};
    outcome.tolerance = std::max(outcome.tolerance, o.tolerance);
    if (!o.fallback.empty() || !o.warning.empty()) {
      outcome.noted.push_back({j, std::move(o)});
    } else if (o.backward_error > outcome.worst_clean_error) {
      outcome.worst_clean_error = o.backward_error;
      outcome.worst_clean_system = j;
    }
  }
  outcome.worst_residual = worst_residual;
  return Status::ok();
}

Result<SolveReport> solve_batch(const BatchShape& shape, const BatchArrays& arrays,
                                const SolveOptions& options) {
  return summarized([&](SolveReport& report, BatchOutcome& outcome) {
    return solve_batch_checked(shape, arrays, options, report, outcome);
  });
}

}  // namespace stripesolve::tridiag
