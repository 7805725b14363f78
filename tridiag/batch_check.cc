// The quality check's fallback and report, shared by the CPU and GPU paths (batch_check.h).
#include "tridiag/batch_check.h"

#include <algorithm>

#include <fmt/format.h>

#include "tridiag/parallel_for.h"

namespace stripesolve::tridiag {

namespace {

// Notes name at most this many fallen-back systems, then a count.
constexpr std::size_t kMaxFallbackNotes = 8;

}  // namespace

std::string above_tolerance(double backward_error, double tolerance) {
  return fmt::format("backward error {:.2e} above the tolerance {:.2e}", backward_error, tolerance);
}

std::vector<std::size_t> system_offsets(const BatchShape& shape) {
  const std::size_t systems = shape.systems();
  std::vector<std::size_t> offsets(systems + 1, 0);
  for (std::size_t j = 0; j < systems; ++j) {
    offsets[j + 1] = offsets[j] + (shape.layout == BatchLayout::kRagged ? shape.sizes[j] : shape.n);
  }
  return offsets;
}

SystemRef system_ref(const BatchShape& shape, const BatchArrays& arrays,
                     const std::vector<std::size_t>& offsets, std::size_t j,
                     std::array<std::vector<double>, 5>& g, bool with_x) {
  const std::size_t systems = offsets.size() - 1, n = offsets[j + 1] - offsets[j];
  if (shape.layout == BatchLayout::kInterleaved) {
    const double* src[5] = {arrays.dl, arrays.d, arrays.du, arrays.f, arrays.x};
    for (int k = 0; k < 5; ++k) g[k].resize(n);
    for (int k = 0; k < (with_x ? 5 : 4); ++k) {
      for (std::size_t i = 0; i < n; ++i) g[k][i] = src[k][i * systems + j];
    }
    return {{g[0].data(), g[1].data(), g[2].data(), g[3].data(), g[4].data()}, n};
  }
  const std::size_t o = offsets[j];
  SystemRef s{{arrays.dl + o, arrays.d + o, arrays.du + o, arrays.f + o, arrays.x + o}, n};
  if (s.x == s.f) {
    g[3].assign(s.f, s.f + n);
    s.f = g[3].data();
  }
  return s;
}

void scatter_x(const BatchShape& shape, const BatchArrays& arrays, std::size_t systems,
               std::size_t j, const SystemRef& s) {
  if (shape.layout != BatchLayout::kInterleaved) return;
  for (std::size_t i = 0; i < s.n; ++i) arrays.x[i * systems + j] = s.x[i];
}

Status settle_suspects(const BatchShape& shape, const BatchArrays& arrays, Algorithm algorithm,
                       bool may_fall_back, unsigned threads, std::span<const Suspect> suspects,
                       std::vector<NotedSystem>& noted) {
  const std::size_t first = noted.size();
  noted.resize(first + suspects.size());
  if (suspects.empty()) return Status::ok();
  const std::vector<std::size_t> offsets = system_offsets(shape);
  const std::size_t systems = offsets.size() - 1;
  threads = static_cast<unsigned>(std::min<std::size_t>(resolve_threads(threads), suspects.size()));
  std::vector<Workspace> work(threads);
  std::vector<std::array<std::vector<double>, 5>> gather(threads);
  return parallel_for(
      suspects.size(), threads, 1, [&](std::size_t b, std::size_t e, unsigned worker) -> Status {
        for (std::size_t k = b; k < e; ++k) {
          const std::size_t j = suspects[k].system;
          NotedSystem& out = noted[first + k];
          out.system = j;
          SystemOutcome& o = out.outcome;
          o.tolerance = backward_error_tolerance(offsets[j + 1] - offsets[j]);
          o.backward_error = suspects[k].backward_error;
          o.by_gepp = algorithm == Algorithm::kGepp;
          if (!may_fall_back) {
            o.warning = above_tolerance(o.backward_error, o.tolerance);
            continue;
          }
          o.fallback = "left a " + above_tolerance(o.backward_error, o.tolerance);
          const SystemRef s = system_ref(shape, arrays, offsets, j, gather[worker], false);
          STRIPESOLVE_RETURN_IF_ERROR(
              solve_gepp(s, work[worker]).with_context(fmt::format("system {}", j)));
          o.by_gepp = true;
          const SolutionQuality q = solution_quality(s.dl, s.d, s.du, s.x, s.f, s.n);
          o.backward_error = q.backward_error;
          o.relative_residual = q.relative_residual;
          if (!(o.backward_error <= o.tolerance)) {
            o.warning = above_tolerance(o.backward_error, o.tolerance);
          }
          scatter_x(shape, arrays, systems, j, s);
        }
        return Status::ok();
      });
}

void merge_outcome(const BatchOutcome& part, std::size_t first_system, BatchOutcome& into) {
  // The residual is known for the whole only where every part knows its own.
  if (into.systems == 0) {
    into.worst_residual = part.worst_residual;
    if (into.worst_residual) into.worst_residual->system += first_system;
  } else if (!into.worst_residual || !part.worst_residual) {
    into.worst_residual.reset();
  } else if (part.worst_residual->value > into.worst_residual->value) {
    into.worst_residual = {part.worst_residual->value, first_system + part.worst_residual->system};
  }
  if (part.worst_clean_error > into.worst_clean_error) {
    into.worst_clean_error = part.worst_clean_error;
    into.worst_clean_system = first_system + part.worst_clean_system;
  }
  into.tolerance = std::max(into.tolerance, part.tolerance);
  for (const NotedSystem& s : part.noted)
    into.noted.push_back({first_system + s.system, s.outcome});
  into.systems += part.systems;
}

void summarize(Algorithm algorithm, const BatchOutcome& outcome, SolveReport& report) {
  report.tolerance = outcome.tolerance;
  report.max_backward_error = outcome.worst_clean_error;
  report.worst_system = outcome.worst_clean_system;
  report.relative_residual = outcome.worst_residual;
  report.above_tolerance = 0;
  report.warned = 0;
  report.warning.clear();
  const NotedSystem* worst_warned = nullptr;
  std::size_t fell_back = 0;
  for (const NotedSystem& s : outcome.noted) {
    const SystemOutcome& o = s.outcome;
    report.tolerance = std::max(report.tolerance, o.tolerance);
    // The first system of equals (a non-finite error is +inf and counts as the largest).
    if (o.backward_error > report.max_backward_error ||
        (o.backward_error == report.max_backward_error && s.system < report.worst_system &&
         o.backward_error > 0.0)) {
      report.max_backward_error = o.backward_error;
      report.worst_system = s.system;
    }
    if (!(o.backward_error <= o.tolerance)) ++report.above_tolerance;
    if (!o.warning.empty()) {
      if (report.warned++ == 0 || o.backward_error > worst_warned->outcome.backward_error) {
        worst_warned = &s;
      }
    }
    if (o.fallback.empty()) continue;
    report.fell_back.push_back(s.system);
    if (++fell_back <= kMaxFallbackNotes) {
      report.notes.push_back(fmt::format("system {}: {} {}; solved again with gepp", s.system,
                                         algorithm_name(algorithm), o.fallback));
    }
  }
  if (fell_back > kMaxFallbackNotes) {
    report.notes.push_back(fmt::format("{} systems in all fell back to gepp", fell_back));
  }
  if (report.warned == 0) return;
  const SystemOutcome& w = worst_warned->outcome;
  const std::string hint =
      w.by_gepp
          ? "even with partial pivoting (gepp, the operations of LAPACK dgtsv, which "
            "leaves the same): the system is nearly singular, badly scaled, or accumulates "
            "rounding beyond the tolerance (Toeplitz (1, 1e-8, 1) at n = 2^20: 100 eps)"
          : fmt::format("{} does not pivot; use algorithm gepp or auto, or allow the fallback",
                        algorithm_name(algorithm));
  report.warning =
      fmt::format("{} of {} systems may be inaccurate (worst: system {}: {}): {}", report.warned,
                  outcome.systems, worst_warned->system, w.warning, hint);
}

}  // namespace stripesolve::tridiag
