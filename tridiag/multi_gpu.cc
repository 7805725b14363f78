// solve_batch_gpus (tridiag/gpu.h): a batch cut into runs of whole systems, one per device;
// each part is solved and checked on its device (its fallbacks on the CPU, on its thread), and
// the parts' outcomes merge into one report. An interleaved batch's runs are columns of its rows:
// the GPU path cuts it itself (solve_gpu_checked's `spread`), so that the check's fallbacks and
// report see the batch whole.
#include <algorithm>
#include <string>
#include <thread>
#include <vector>

#include "tridiag/batch_check.h"
#include "tridiag/gpu.h"
#include "tridiag/gpu_part.h"

namespace stripesolve::tridiag {
namespace {

struct Part {
  BatchShape shape;
  std::size_t first_unknown = 0;
  std::size_t first_system = 0;
};

// Runs of whole systems with about unknowns / devices each.
std::vector<Part> cut(const BatchShape& shape, std::size_t devices) {
  std::vector<Part> parts;
  const std::size_t systems = shape.systems();
  if (shape.layout == BatchLayout::kStrided) {
    for (std::size_t p = 0; p < devices; ++p) {
      const std::size_t b = systems * p / devices, e = systems * (p + 1) / devices;
      if (e > b)
        parts.push_back({BatchShape{BatchLayout::kStrided, shape.n, e - b, {}}, b * shape.n, b});
    }
    return parts;
  }
  const std::size_t total = shape.unknowns();
  std::size_t begin = 0, done = 0, unknowns = 0;
  for (std::size_t j = 0; j < systems; ++j) {
    unknowns += shape.sizes[j];
    const bool last = j + 1 == systems;
    const std::size_t share = total * (parts.size() + 1) / devices;
    if (last || (done + unknowns >= share && parts.size() + 1 < devices)) {
      parts.push_back(
          {BatchShape{BatchLayout::kRagged, 0, 0, shape.sizes.subspan(begin, j + 1 - begin)}, done,
           begin});
      done += unknowns;
      unknowns = 0;
      begin = j + 1;
    }
  }
  return parts;
}

}  // namespace

Result<SolveReport> solve_batch_gpus(const BatchShape& shape, const BatchArrays& arrays,
                                     const GpuOptions& options, std::span<const int> devices) {
  if (devices.size() <= 1 || shape.systems() < devices.size()) {
    GpuOptions first = options;
    if (!devices.empty()) first.device = devices.front();
    return solve_batch_gpu(shape, arrays, first);
  }
  if (shape.layout == BatchLayout::kInterleaved) {
    return summarized([&](SolveReport& report, BatchOutcome& outcome) {
      return solve_gpu_checked(shape, arrays, options, report, outcome, devices);
    });
  }
  STRIPESOLVE_RETURN_IF_ERROR(validate_batch(shape, arrays));
  const std::vector<Part> parts = cut(shape, devices.size());
  std::vector<SolveReport> reports(parts.size());
  std::vector<BatchOutcome> outcomes(parts.size());
  std::vector<Status> status(parts.size(), Status::internal("not run"));
  std::vector<std::thread> threads;
  for (std::size_t p = 0; p < parts.size(); ++p) {
    threads.emplace_back([&, p] {
      const std::size_t o = parts[p].first_unknown;
      const BatchArrays a{arrays.dl + o, arrays.d + o, arrays.du + o, arrays.f + o, arrays.x + o};
      GpuOptions mine = options;
      mine.device = devices[p];
      status[p] = solve_gpu_checked(parts[p].shape, a, mine, reports[p], outcomes[p]);
    });
  }
  for (auto& t : threads) t.join();
  SolveReport out;
  BatchOutcome merged;
  for (std::size_t p = 0; p < reports.size(); ++p) {
    if (!status[p].is_ok()) return status[p];
    if (p == 0) out.algorithm = reports[p].algorithm;
    for (const auto& note : reports[p].notes) {
      if (std::find(out.notes.begin(), out.notes.end(), note) == out.notes.end())
        out.notes.push_back(note);
    }
    // The parts ran at once: the longest check is the one the caller waited for.
    out.check_seconds = std::max(out.check_seconds, reports[p].check_seconds);
    merge_outcome(outcomes[p], parts[p].first_system, merged);
  }
  summarize(out.algorithm, merged, out);
  out.notes.push_back("solved on " + std::to_string(parts.size()) +
                      " devices, a run of whole systems each");
  return out;
}

}  // namespace stripesolve::tridiag
