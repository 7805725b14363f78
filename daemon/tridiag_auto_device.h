// Where `device auto` solves a tridiagonal batch on a host with a GPU (issue 19: the whole
// host). The daemon's batches live in host memory (the client's files, mapped), so the GPU path
// pays for every array's trip to the device and back (pageable copies) and for the daemon's
// scans beside it, while the CPU's vector-lane gepp reads the arrays once at memory speed: on
// an H200 host the GPU path took 0.255 s for 2^24 unknowns where the host's 16 cores took 0.022
// s (bench/daemon/README.md). Neither path wins on every host, so the first job that asks
// measures both as the daemon runs them, on synthetic batches of two sizes, and every job then
// goes where the line through those points predicts the shorter time (its note says both
// predictions).
//
// The measurement solves strided batches of 1024-row, diagonally dominant systems with the stable
// default; other sizes, layouts and algorithms run at other rates, so the choice is an estimate
// that matters where the two paths differ most (large batches, many cores).
//
// Thread-safety: AutoDevice may be shared by concurrent jobs (the first measures, the others wait
// on its mutex); the free functions are pure.
#pragma once

#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "daemon/tridiag_input.h"
#include "tridiag/tridiag.h"

namespace stripesolve::daemon {

// One path's time as a line in the unknowns: fixed + per_unknown * unknowns.
struct PathCost {
  double fixed_seconds = 0;
  double seconds_per_unknown = 0;

  double seconds(std::size_t unknowns) const {
    return fixed_seconds + seconds_per_unknown * static_cast<double>(unknowns);
  }
  // The line through (small, small_seconds) and (large, large_seconds), small < large; a
  // negative slope or intercept (noise) is taken as zero, keeping the larger point's time.
  static PathCost through(std::size_t small, double small_seconds, std::size_t large,
                          double large_seconds);
};

struct PathCosts {
  PathCost cpu;
  PathCost gpu;
};

// What device auto decided for a batch, and the note that says why.
struct AutoChoice {
  bool gpu = false;
  std::string note;
  bool measured_now = false;  // this call measured the paths (the first to ask)
};

// The path predicted to take less time for `unknowns` (the CPU on a tie).
AutoChoice choose_path(const PathCosts& costs, std::size_t unknowns);

// Solves a batch (its plan and arrays, x written) as the daemon's path would, counting every
// pass the job makes beside the solve.
using PathRun = std::function<Status(const TridiagPlan& plan, const tridiag::BatchArrays& arrays)>;

// The synthetic batches' sizes in unknowns (the small one also warms each path up first).
inline constexpr std::size_t kMeasureSmall = std::size_t{1} << 18;
inline constexpr std::size_t kMeasureLarge = std::size_t{1} << 22;

// Times `cpu` and `gpu` on the same synthetic batches (a warm-up, then the best of two at each
// size) and fits each path's line. A path's failure is returned with what it was doing.
Result<PathCosts> measure_paths(const PathRun& cpu, const PathRun& gpu);

// The daemon's device auto: measures the paths the first time it is asked (a failure is kept
// too: the GPU path that failed on a synthetic batch is not tried again, unless it failed for
// device memory that other jobs held: kResourceExhausted, measured again at the next job),
// then chooses.
class AutoDevice {
 public:
  // `log` gets one line with the measured rates, the first time.
  AutoChoice choose(std::size_t unknowns, const PathRun& cpu, const PathRun& gpu,
                    const std::function<void(const std::string&)>& log);
  // For `daemon status`: {"measured": false} before the first measurement; then the fitted
  // lines (seconds per unknown and fixed seconds of each path, and unknowns/s), or its error.
  nlohmann::json to_json() const;

 private:
  mutable std::mutex mutex_;
  std::optional<Result<PathCosts>> costs_;  // guarded by mutex_
};

}  // namespace stripesolve::daemon
