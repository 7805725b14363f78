// Batch layer: validation, layouts, the choice of kAuto, threading and the fallback.
#include "tridiag/tridiag.h"

#include <algorithm>
#include <array>
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

Result<SolveReport> solve_batch(const BatchShape& shape, const BatchArrays& arrays,
                                const SolveOptions& options) {
  STRIPESOLVE_RETURN_IF_ERROR(validate_batch(shape, arrays));
  const unsigned threads = resolve_threads(options.threads);
  const bool automatic = options.algorithm == Algorithm::kAuto;
  SolveReport report;
  report.algorithm = automatic ? choose_cpu_algorithm(shape, options) : options.algorithm;
  const Algorithm alg = report.algorithm;
  const std::size_t systems = shape.systems();
  std::vector<std::size_t> offsets(systems + 1, 0);
  for (std::size_t j = 0; j < systems; ++j) {
    offsets[j + 1] = offsets[j] + (shape.layout == BatchLayout::kRagged ? shape.sizes[j] : shape.n);
  }
  if (automatic) {
    report.notes.push_back("auto chose " + std::string(algorithm_name(alg)) + " (" +
                           (options.require_stable ? "stable" : "unpivoted") + " requested, " +
                           std::to_string(systems) + " systems, " +
                           std::to_string(offsets[systems]) + " unknowns, CPU)");
  }
  std::vector<std::string> fallback(systems);
  std::vector<Workspace> work(threads);
  std::vector<std::array<std::vector<double>, 5>> gather(threads);
  auto solve_one = [&](std::size_t j, unsigned worker, unsigned inner_threads) -> Status {
    const std::size_t n = offsets[j + 1] - offsets[j];
    SystemRef s{};
    if (shape.layout == BatchLayout::kInterleaved) {
      auto& g = gather[worker];
      const double* src[4] = {arrays.dl, arrays.d, arrays.du, arrays.f};
      for (int k = 0; k < 5; ++k) g[k].resize(n);
      for (int k = 0; k < 4; ++k) {
        for (std::size_t i = 0; i < n; ++i) g[k][i] = src[k][i * systems + j];
      }
      s = {g[0].data(), g[1].data(), g[2].data(), g[3].data(), g[4].data(), n};
    } else {
      const std::size_t o = offsets[j];
      s = {arrays.dl + o, arrays.d + o, arrays.du + o, arrays.f + o, arrays.x + o, n};
      if (automatic && alg != Algorithm::kGepp && s.x == s.f) {
        // In place: keep f so that a fallback can start again from it.
        auto& keep = gather[worker][3];
        keep.assign(s.f, s.f + n);
        s.f = keep.data();
      }
    }
    Status st = alg == Algorithm::kSpike ? solve_spike(s, inner_threads)
                                         : solve_system(alg, s, options.pivot_tolerance, work[worker]);
    if (!st.is_ok() && automatic && st.code() == StatusCode::kNumerical && alg != Algorithm::kGepp) {
      fallback[j] = st.message();
      st = solve_gepp(s, work[worker]);
    }
    if (!st.is_ok()) return st.with_context("system " + std::to_string(j));
    if (shape.layout == BatchLayout::kInterleaved) {
      for (std::size_t i = 0; i < n; ++i) arrays.x[i * systems + j] = s.x[i];
    }
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
  std::size_t fell_back = 0;
  for (std::size_t j = 0; j < systems; ++j) {
    if (fallback[j].empty()) continue;
    if (++fell_back <= kMaxFallbackNotes) {
      report.notes.push_back("system " + std::to_string(j) + ": " + std::string(algorithm_name(alg)) +
                             " broke down (" + fallback[j] + "); solved again with gepp");
    }
  }
  if (fell_back > kMaxFallbackNotes) {
    report.notes.push_back(std::to_string(fell_back) + " systems in all fell back to gepp");
  }
  return report;
}

}  // namespace stripesolve::tridiag
