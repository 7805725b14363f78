#include "daemon/tridiag_auto_device.h"

#include <algorithm>
#include <chrono>
#include <limits>
#include <memory>
#include <vector>

#include <fmt/format.h>

namespace stripesolve::daemon {
namespace {

// The measurement's systems: 1024 rows each, strided, as the daemon's benchmark batch.
constexpr std::size_t kSystemRows = 1024;

// A value in [-1, 1) from a hash of k (splitmix64's finaliser): quicker than a random engine
// for the millions of values the measurement needs, and as irregular for the solvers.
double spread(uint64_t k) {
  k += 0x9e3779b97f4a7c15ull;
  k = (k ^ (k >> 30)) * 0xbf58476d1ce4e5b9ull;
  k = (k ^ (k >> 27)) * 0x94d049bb133111ebull;
  k ^= k >> 31;
  return static_cast<double>(k >> 11) * 0x1p-52 - 1.0;
}

// A strided batch of `unknowns` diagonally dominant rows (no fallback, no warning) and room
// for its solution.
struct SyntheticBatch {
  TridiagPlan plan;
  std::vector<double> dl, d, du, f, x;

  explicit SyntheticBatch(std::size_t unknowns)
      : dl(unknowns), d(unknowns), du(unknowns), f(unknowns), x(unknowns) {
    plan.n = kSystemRows;
    plan.count = unknowns / kSystemRows;
    plan.unknowns = plan.n * plan.count;
    plan.array_shape = {static_cast<int64_t>(plan.count), static_cast<int64_t>(plan.n)};
    for (std::size_t i = 0; i < unknowns; ++i) {
      dl[i] = spread(4 * i);
      du[i] = spread(4 * i + 1);
      d[i] = 4.0 + spread(4 * i + 2);
      f[i] = spread(4 * i + 3);
    }
  }
  tridiag::BatchArrays arrays() { return {dl.data(), d.data(), du.data(), f.data(), x.data()}; }
};

// The best of two runs of `path` on `batch`, in seconds.
Result<double> best_of_two(const PathRun& path, SyntheticBatch& batch) {
  double best = std::numeric_limits<double>::infinity();
  for (int rep = 0; rep < 2; ++rep) {
    const auto start = std::chrono::steady_clock::now();
    STRIPESOLVE_RETURN_IF_ERROR(path(batch.plan, batch.arrays()));
    best = std::min(
        best, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  return best;
}

Result<PathCost> measure(const PathRun& path, SyntheticBatch& small, SyntheticBatch& large) {
  STRIPESOLVE_RETURN_IF_ERROR(path(small.plan, small.arrays()));  // warm-up (CUDA context, pools)
  STRIPESOLVE_ASSIGN_OR_RETURN(const double small_s, best_of_two(path, small));
  STRIPESOLVE_ASSIGN_OR_RETURN(const double large_s, best_of_two(path, large));
  return PathCost::through(small.plan.unknowns, small_s, large.plan.unknowns, large_s);
}

double per_second(const PathCost& c) {
  return c.seconds_per_unknown > 0 ? 1.0 / c.seconds_per_unknown : 0.0;
}

}  // namespace

PathCost PathCost::through(std::size_t small, double small_seconds, std::size_t large,
                           double large_seconds) {
  PathCost c;
  const double span = static_cast<double>(large - small);
  c.seconds_per_unknown = std::max(0.0, (large_seconds - small_seconds) / span);
  c.fixed_seconds =
      std::max(0.0, large_seconds - c.seconds_per_unknown * static_cast<double>(large));
  return c;
}

AutoChoice choose_path(const PathCosts& costs, std::size_t unknowns) {
  const double cpu = costs.cpu.seconds(unknowns);
  const double gpu = costs.gpu.seconds(unknowns);
  AutoChoice choice;
  choice.gpu = gpu < cpu;
  choice.note = fmt::format(
      "device auto chose the {}: predicted {:.3g} s on the CPU, {:.3g} s on the GPU with the "
      "copies (this host's paths, measured at its first such job)",
      choice.gpu ? "GPU" : "CPU", cpu, gpu);
  return choice;
}

Result<PathCosts> measure_paths(const PathRun& cpu, const PathRun& gpu) {
  SyntheticBatch small(kMeasureSmall);
  SyntheticBatch large(kMeasureLarge);
  PathCosts costs;
  auto c = measure(cpu, small, large);
  if (!c.is_ok()) return c.status().with_context("measuring the CPU path");
  costs.cpu = c.value();
  auto g = measure(gpu, small, large);
  if (!g.is_ok()) return g.status().with_context("measuring the GPU path");
  costs.gpu = g.value();
  return costs;
}

AutoChoice AutoDevice::choose(std::size_t unknowns, const PathRun& cpu, const PathRun& gpu,
                              const std::function<void(const std::string&)>& log) {
  std::lock_guard lock(mutex_);
  const bool measured_now = !costs_;
  if (!costs_) {
    costs_ = measure_paths(cpu, gpu);
    if (costs_->is_ok()) {
      const PathCosts& c = costs_->value();
      log(fmt::format(
          "device auto measured this host's tridiagonal paths: CPU {:.0f} M unknowns/s + {:.2g} "
          "s, GPU with the copies {:.0f} M unknowns/s + {:.2g} s",
          per_second(c.cpu) / 1e6, c.cpu.fixed_seconds, per_second(c.gpu) / 1e6,
          c.gpu.fixed_seconds));
    } else {
      log("device auto: " + costs_->status().to_string() + "; batches go to the CPU");
    }
  }
  AutoChoice choice;
  if (!costs_->is_ok()) {
    choice.note = "device auto chose the CPU: the paths could not be measured (" +
                  costs_->status().message() + ")";
    // Device memory other jobs hold for now is no verdict on the path: the next job measures
    // again.
    if (costs_->status().code() == StatusCode::kResourceExhausted) costs_.reset();
  } else {
    choice = choose_path(costs_->value(), unknowns);
  }
  choice.measured_now = measured_now;
  return choice;
}

nlohmann::json AutoDevice::to_json() const {
  std::lock_guard lock(mutex_);
  if (!costs_) return {{"measured", false}};
  if (!costs_->is_ok()) return {{"measured", true}, {"error", costs_->status().to_string()}};
  const PathCosts& c = costs_->value();
  auto path = [](const PathCost& p) {
    return nlohmann::json{{"seconds_per_unknown", p.seconds_per_unknown},
                          {"fixed_seconds", p.fixed_seconds},
                          {"unknowns_per_second", per_second(p)}};
  };
  return {{"measured", true}, {"cpu", path(c.cpu)}, {"gpu", path(c.gpu)}};
}

}  // namespace stripesolve::daemon
