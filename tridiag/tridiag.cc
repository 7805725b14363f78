// Batch layer: validation, layouts, the choice of kAuto, threading and the fallback.
#include "tridiag/tridiag.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <numeric>

#include "tridiag/parallel_for.h"
#include "tridiag/system_solvers.h"

namespace stripesolve::tridiag {

namespace {

constexpr std::array<Algorithm, 9> kAlgorithms = {
    Algorithm::kThomas,    Algorithm::kCr,          Algorithm::kPcr,
    Algorithm::kCrPcr,     Algorithm::kPcrThomas,   Algorithm::kCrPcrThomas,
    Algorithm::kBondeli,   Algorithm::kSpike,       Algorithm::kGepp};

// A single system at least this large, with fewer systems than threads, runs SPIKE partitions
// in parallel instead of one system per thread.
constexpr std::size_t kParallelSpikeSize = std::size_t{1} << 16;
// A pivot below this times its row's scale is a near breakdown (sqrt(eps), see solve_batch).
constexpr double kNearBreakdownPivot = 1.4901161193847656e-08;
// Notes name at most this many fallen-back systems, then a count.
constexpr std::size_t kMaxFallbackNotes = 8;

}  // namespace

std::string_view algorithm_name(Algorithm algorithm) {
  switch (algorithm) {
    case Algorithm::kAuto: return "auto";
    case Algorithm::kThomas: return "thomas";
    case Algorithm::kCr: return "cr";
    case Algorithm::kPcr: return "pcr";
    case Algorithm::kCrPcr: return "cr_pcr";
    case Algorithm::kPcrThomas: return "pcr_thomas";
    case Algorithm::kCrPcrThomas: return "cr_pcr_thomas";
    case Algorithm::kBondeli: return "bondeli";
    case Algorithm::kSpike: return "spike";
    case Algorithm::kGepp: return "gepp";
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

std::span<const Algorithm> all_algorithms() { return kAlgorithms; }

bool is_pivoting(Algorithm algorithm) {
  return algorithm == Algorithm::kSpike || algorithm == Algorithm::kGepp;
}

std::size_t BatchShape::systems() const {
  return layout == BatchLayout::kRagged ? sizes.size() : count;
}

std::size_t BatchShape::unknowns() const {
  if (layout == BatchLayout::kRagged) return std::accumulate(sizes.begin(), sizes.end(), std::size_t{0});
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
  const std::array<std::pair<const void*, const char*>, 5> ptrs = {{{arrays.dl, "dl"},
                                                                    {arrays.d, "d"},
                                                                    {arrays.du, "du"},
                                                                    {arrays.f, "f"},
                                                                    {arrays.x, "x"}}};
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
    case Algorithm::kThomas: return solve_thomas(s, tol, work);
    case Algorithm::kCr: return solve_cr(s, tol, work);
    case Algorithm::kPcr: return solve_pcr(s, tol, work);
    case Algorithm::kCrPcr: return solve_cr_pcr(s, tol, work);
    case Algorithm::kPcrThomas: return solve_pcr_thomas(s, tol, work);
    case Algorithm::kCrPcrThomas: return solve_cr_pcr_thomas(s, tol, work);
    case Algorithm::kBondeli: return solve_bondeli(s, tol, work);
    case Algorithm::kSpike: return solve_spike(s, 1);
    case Algorithm::kGepp: return solve_gepp(s, work);
    case Algorithm::kAuto: break;
  }
  return Status::invalid_argument("solve_system: no concrete algorithm given");
}

namespace {

// What happened to one system of the batch.
struct SystemOutcome {
  double backward_error = 0.0;
  double tolerance = 0.0;
  std::string fallback;  // why it was solved again with gepp ("broke down (...)"); or empty
  std::string warning;   // why its kept result may be inaccurate; or empty
  bool by_gepp = false;  // the kept result is gepp's
};

// Fills the report's figures, notes and warning from the outcomes, in system order (so that
// nothing depends on the threads).
void summarize(Algorithm alg, const std::vector<SystemOutcome>& outcomes, SolveReport& report) {
  std::size_t worst_warned = outcomes.size();
  for (std::size_t j = 0; j < outcomes.size(); ++j) {
    const SystemOutcome& o = outcomes[j];
    report.tolerance = std::max(report.tolerance, o.tolerance);
    if (o.backward_error > report.max_backward_error) {
      report.max_backward_error = o.backward_error;
      report.worst_system = j;
    }
    if (!o.warning.empty()) {
      if (report.warned++ == 0 || o.backward_error > outcomes[worst_warned].backward_error) {
        worst_warned = j;
      }
    }
    if (o.fallback.empty()) continue;
    report.fell_back.push_back(j);
    if (report.fell_back.size() <= kMaxFallbackNotes) {
      report.notes.push_back(fmt::format("system {}: {} {}; solved again with gepp", j,
                                         algorithm_name(alg), o.fallback));
    }
  }
  if (report.fell_back.size() > kMaxFallbackNotes) {
    report.notes.push_back(
        fmt::format("{} systems in all fell back to gepp", report.fell_back.size()));
  }
  if (report.warned == 0) return;
  const SystemOutcome& w = outcomes[worst_warned];
  const std::string hint =
      w.by_gepp ? "even with partial pivoting (gepp, the operations of LAPACK dgtsv, which "
                  "leaves the same): the system is nearly singular, badly scaled, or accumulates "
                  "rounding beyond the tolerance (Toeplitz (1, 1e-8, 1) at n = 2^20: 100 eps)"
                : fmt::format("{} does not pivot; use algorithm gepp or auto, or allow the fallback",
                              algorithm_name(alg));
  report.warning = fmt::format("{} of {} systems may be inaccurate (worst: system {}: {}): {}",
                               report.warned, outcomes.size(), worst_warned, w.warning, hint);
}

// Solves one system with `alg` and checks it (tridiag.h: the quality check), solving it again
// with gepp where `may_fall_back`; fills `out`. s.f must not alias s.x.
Status solve_checked(Algorithm alg, const SystemRef& s, const SolveOptions& options,
                     bool may_fall_back, unsigned inner_threads, Workspace& work,
                     SystemOutcome& out) {
  out.tolerance = backward_error_tolerance(s.n);
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
  out.backward_error = st.is_ok() ? backward_error(s.dl, s.d, s.du, s.x, s.f, s.n) : INFINITY;
  const bool broke_down = st.code() == StatusCode::kNumerical;
  if (may_fall_back && (broke_down || (st.is_ok() && !(out.backward_error <= out.tolerance)))) {
    out.fallback = broke_down ? "broke down (" + st.message() + ")"
                              : fmt::format("left a backward error {:.2e} above the tolerance {:.2e}",
                                            out.backward_error, out.tolerance);
    st = solve_gepp(s, work);
    out.by_gepp = true;
    if (st.is_ok()) out.backward_error = backward_error(s.dl, s.d, s.du, s.x, s.f, s.n);
  }
  out.by_gepp = out.by_gepp || alg == Algorithm::kGepp;
  if (!st.is_ok()) return st;
  if (!(out.backward_error <= out.tolerance)) {
    out.warning = fmt::format("backward error {:.2e} above the tolerance {:.2e}",
                              out.backward_error, out.tolerance);
  } else if (!near_breakdown.empty()) {
    out.warning = "near breakdown: " + near_breakdown;
  }
  return Status::ok();
}

// offsets[j]: where system j starts (strided and ragged; interleaved uses j * n only for its
// size); offsets[systems]: the unknowns.
std::vector<std::size_t> system_offsets(const BatchShape& shape) {
  const std::size_t systems = shape.systems();
  std::vector<std::size_t> offsets(systems + 1, 0);
  for (std::size_t j = 0; j < systems; ++j) {
    offsets[j + 1] = offsets[j] + (shape.layout == BatchLayout::kRagged ? shape.sizes[j] : shape.n);
  }
  return offsets;
}

// System j as a SystemRef. Interleaved systems are gathered into `g` (x too when `with_x`:
// the check reads it) and their x must be scattered back (scatter_x); the others point into
// the arrays, with f copied to g[3] when x aliases it (in place: f stays for the check and
// for a fallback that starts again from it).
SystemRef system_ref(const BatchShape& shape, const BatchArrays& arrays, const std::vector<std::size_t>& offsets,
                     std::size_t j, std::array<std::vector<double>, 5>& g, bool with_x) {
  const std::size_t systems = offsets.size() - 1, n = offsets[j + 1] - offsets[j];
  if (shape.layout == BatchLayout::kInterleaved) {
    const double* src[5] = {arrays.dl, arrays.d, arrays.du, arrays.f, arrays.x};
    for (int k = 0; k < 5; ++k) g[k].resize(n);
    for (int k = 0; k < (with_x ? 5 : 4); ++k) {
      for (std::size_t i = 0; i < n; ++i) g[k][i] = src[k][i * systems + j];
    }
    return {g[0].data(), g[1].data(), g[2].data(), g[3].data(), g[4].data(), n};
  }
  const std::size_t o = offsets[j];
  SystemRef s{arrays.dl + o, arrays.d + o, arrays.du + o, arrays.f + o, arrays.x + o, n};
  if (s.x == s.f) {
    g[3].assign(s.f, s.f + n);
    s.f = g[3].data();
  }
  return s;
}

void scatter_x(const BatchShape& shape, const BatchArrays& arrays, std::size_t systems, std::size_t j,
               const SystemRef& s) {
  if (shape.layout != BatchLayout::kInterleaved) return;
  for (std::size_t i = 0; i < s.n; ++i) arrays.x[i * systems + j] = s.x[i];
}

}  // namespace

Status check_solution(const BatchShape& shape, const BatchArrays& arrays, Algorithm algorithm,
                      bool may_fall_back, unsigned threads, SolveReport& report) {
  STRIPESOLVE_RETURN_IF_ERROR(validate_batch(shape, arrays));
  if (arrays.x == arrays.f) return Status::invalid_argument("check_solution: x must not alias f");
  threads = resolve_threads(threads);
  const std::vector<std::size_t> offsets = system_offsets(shape);
  const std::size_t systems = offsets.size() - 1;
  std::vector<SystemOutcome> outcomes(systems);
  std::vector<Workspace> work(threads);
  std::vector<std::array<std::vector<double>, 5>> gather(threads);
  const std::size_t grain = std::max<std::size_t>(1, (std::size_t{1} << 16) / std::max<std::size_t>(1, offsets[systems] / systems));
  Status st = parallel_for(systems, threads, grain, [&](std::size_t b, std::size_t e, unsigned worker) -> Status {
    for (std::size_t j = b; j < e; ++j) {
      const SystemRef s = system_ref(shape, arrays, offsets, j, gather[worker], true);
      SystemOutcome& out = outcomes[j];
      out.tolerance = backward_error_tolerance(s.n);
      out.backward_error = backward_error(s.dl, s.d, s.du, s.x, s.f, s.n);
      out.by_gepp = algorithm == Algorithm::kGepp;
      if (out.backward_error <= out.tolerance) continue;
      if (!may_fall_back) {
        out.warning = fmt::format("backward error {:.2e} above the tolerance {:.2e}", out.backward_error,
                                  out.tolerance);
        continue;
      }
      out.fallback = fmt::format("left a backward error {:.2e} above the tolerance {:.2e}", out.backward_error,
                                 out.tolerance);
      STRIPESOLVE_RETURN_IF_ERROR(solve_gepp(s, work[worker]).with_context(fmt::format("system {}", j)));
      out.by_gepp = true;
      out.backward_error = backward_error(s.dl, s.d, s.du, s.x, s.f, s.n);
      if (!(out.backward_error <= out.tolerance)) {
        out.warning = fmt::format("backward error {:.2e} above the tolerance {:.2e}", out.backward_error,
                                  out.tolerance);
      }
      scatter_x(shape, arrays, systems, j, s);
    }
    return Status::ok();
  });
  if (!st.is_ok()) return st;
  SolveReport checked;
  summarize(algorithm, outcomes, checked);
  report.max_backward_error = checked.max_backward_error;
  report.worst_system = checked.worst_system;
  report.tolerance = checked.tolerance;
  report.fell_back.insert(report.fell_back.end(), checked.fell_back.begin(), checked.fell_back.end());
  report.notes.insert(report.notes.end(), checked.notes.begin(), checked.notes.end());
  report.warned = checked.warned;
  report.warning = checked.warning;
  return Status::ok();
}

Result<SolveReport> solve_batch(const BatchShape& shape, const BatchArrays& arrays,
                                const SolveOptions& options) {
  STRIPESOLVE_RETURN_IF_ERROR(validate_batch(shape, arrays));
  const unsigned threads = resolve_threads(options.threads);
  const bool automatic = options.algorithm == Algorithm::kAuto;
  SolveReport report;
  report.algorithm = automatic ? choose_cpu_algorithm(shape, options) : options.algorithm;
  const Algorithm alg = report.algorithm;
  // gepp is the fallback; spike promises a stable result like it, so it may always use it.
  const bool may_fall_back = alg != Algorithm::kGepp &&
                             (automatic || options.fallback || alg == Algorithm::kSpike);
  const std::vector<std::size_t> offsets = system_offsets(shape);
  const std::size_t systems = offsets.size() - 1;
  if (automatic) {
    report.notes.push_back(fmt::format("auto chose {} ({} requested, {} systems, {} unknowns, CPU)",
                                       algorithm_name(alg),
                                       options.require_stable ? "stable" : "unpivoted", systems,
                                       offsets[systems]));
  }
  std::vector<SystemOutcome> outcomes(systems);
  std::vector<Workspace> work(threads);
  std::vector<std::array<std::vector<double>, 5>> gather(threads);
  auto solve_one = [&](std::size_t j, unsigned worker, unsigned inner_threads) -> Status {
    const SystemRef s = system_ref(shape, arrays, offsets, j, gather[worker], false);
    Status st = solve_checked(alg, s, options, may_fall_back, inner_threads, work[worker],
                              outcomes[j]);
    if (!st.is_ok()) return st.with_context(fmt::format("system {}", j));
    scatter_x(shape, arrays, systems, j, s);
    return Status::ok();
  };
  const bool parallel_inside =
      alg == Algorithm::kSpike && systems < threads && offsets[systems] / systems >= kParallelSpikeSize;
  if (parallel_inside) {
    for (std::size_t j = 0; j < systems; ++j) STRIPESOLVE_RETURN_IF_ERROR(solve_one(j, 0, threads));
  } else {
    const std::size_t grain = std::max<std::size_t>(1, (std::size_t{1} << 16) / std::max<std::size_t>(1, offsets[systems] / systems));
    Status st = parallel_for(systems, threads, grain,
        [&](std::size_t b, std::size_t e, unsigned worker) -> Status {
          for (std::size_t j = b; j < e; ++j) STRIPESOLVE_RETURN_IF_ERROR(solve_one(j, worker, 1));
          return Status::ok();
        });
    if (!st.is_ok()) return st;
  }
  summarize(alg, outcomes, report);
  return report;
}

}  // namespace stripesolve::tridiag
