// The edge checks of tridiag_solve jobs (daemon/tridiag_jobs.h): job fields, the four uploaded
// arrays against each other, the layout and the ragged sizes, the memory cap, and the values.
// Everything a user can get wrong is found here, with a message naming the field, the array and
// (for values) the flat index, so tridiag/ only ever sees a consistent batch.
//
// Arrays (.npy, float64 or float32, all four the same shape and dtype):
//   (n,)          one system of size n;
//   (m, n)        m systems of size n, one after another (BatchLayout::kStrided, the default);
//   (n, m)        with layout "interleaved": element i of every system together
//                 (BatchLayout::kInterleaved, system j's element i at flat index i*m + j);
//   (N,) + sizes  a ragged batch: systems of sizes[j] one after another, sum(sizes) = N.
// The solution has the rhs's shape and is always float64.
// Pure functions; no threads.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "protocol/npy.h"
#include "tridiag/tridiag.h"

namespace stripesolve::daemon {

enum class TridiagDevice { kAuto, kCpu, kGpu };
std::string_view tridiag_device_name(TridiagDevice device);

// The scalar fields of a tridiag_solve job.
struct TridiagParams {
  tridiag::Algorithm algorithm = tridiag::Algorithm::kAuto;
  tridiag::BatchLayout layout = tridiag::BatchLayout::kStrided;  // kStrided or kInterleaved
  bool unstable_ok = false;  // SolveOptions::require_stable = false
  bool fallback = false;     // SolveOptions::fallback
  TridiagDevice device = TridiagDevice::kAuto;
};

// Reads algorithm, layout, unstable_ok, fallback and device (all optional).
Result<TridiagParams> parse_tridiag_params(const nlohmann::json& job);

// The sizes field of a ragged batch given inline: a JSON list of integers (an uploaded .npy is
// read by the caller). Range checks are check_tridiag_batch's.
Result<std::vector<int64_t>> parse_inline_sizes(const nlohmann::json& sizes);

// One input array's name ("dl", "d", "du" or "rhs") and .npy header.
struct NamedHeader {
  std::string_view name;
  protocol::NpyHeader header;
};

// A checked batch. shape() points into `sizes`, so the plan must outlive the BatchShape.
struct TridiagPlan {
  tridiag::BatchLayout layout = tridiag::BatchLayout::kStrided;
  std::size_t n = 0;                 // kStrided / kInterleaved: size of every system
  std::size_t count = 0;             // number of systems
  std::vector<std::size_t> sizes;    // kRagged
  std::vector<int64_t> array_shape;  // the rhs's (and the solution's) .npy shape
  protocol::NpyDtype dtype = protocol::NpyDtype::kFloat64;
  std::size_t unknowns = 0;

  tridiag::BatchShape shape() const;
  // "50 systems of 257 (strided)", "one system of 1000", "3 systems of 2..5 (ragged)".
  std::string describe() const;
  // (system, row) of a flat index into an input array.
  std::pair<std::size_t, std::size_t> locate(std::size_t flat) const;
};

// Checks dl, d, du, rhs (in that order) against each other and against layout and sizes, and
// the float64 bytes of the four arrays against `max_bytes` (tridiag.max_bytes).
Result<TridiagPlan> check_tridiag_batch(const std::vector<NamedHeader>& arrays,
                                        tridiag::BatchLayout layout,
                                        const std::optional<std::vector<int64_t>>& sizes,
                                        uint64_t max_bytes);

// The first non-finite value of an array: "d[17] is not finite (nan)", with ": system 2, row 16"
// for a batch of several systems. `threads` scan it in parallel (tridiag/parallel_for.h; 0: all
// cores); the value reported is the first whatever the threads.
Status check_finite(std::string_view name, std::span<const double> values, const TridiagPlan& plan,
                    unsigned threads = 1);

// The memory cap alone: `unknowns` as four float64 arrays against `max_bytes`
// (check_tridiag_batch applies it too; callers check it before reading a sizes file).
Status check_batch_bytes(uint64_t unknowns, uint64_t max_bytes);

// max over the systems of ||A_j x_j - f_j||_2 / ||f_j||_2 (000 Eq 13, in double as
// tridiag::solution_quality computes it; +inf for a non-finite x) and the system where it is
// largest (the first of equals); and the same for the normwise backward error
// (tridiag::backward_error), with the systems above their tolerance
// (tridiag::backward_error_tolerance). The daemon's own check of a solution whose solver did not
// report these figures (the GPU's); the CPU solver's report has the same ones, to the bit.
// O(unknowns), one pass a system, split over `threads` (0: all cores).
struct ResidualSummary {
  double max_relative = 0;
  std::size_t worst_system = 0;
  double max_backward_error = 0;
  std::size_t worst_backward_system = 0;
  double tolerance = 0;  // of the largest system
  std::size_t above_tolerance = 0;
};
ResidualSummary max_relative_residual(const TridiagPlan& plan, const double* dl, const double* d,
                                      const double* du, const double* f, const double* x,
                                      unsigned threads = 1);

}  // namespace stripesolve::daemon
