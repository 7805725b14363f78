// The arrays of a tridiagonal job in the daemon (tridiag_jobs.cc): the batch's four arrays and
// the solution, each the client's file mapped in place where it can be, else an array of the
// daemon's own. Internal to daemon/.
#pragma once

#include <array>
#include <cstddef>
#include <memory>
#include <optional>
#include <span>

#include "base/status.h"
#include "daemon/client_mapping.h"
#include "daemon/npy_file.h"
#include "daemon/tridiag_input.h"
#include "daemon/tridiag_sources.h"

namespace stripesolve::daemon {

// One float64 array of the batch: the client's file mapped in place (daemon/client_mapping.h),
// or values of the daemon's own, not zero-filled (a read or the solver fills every one).
struct TridiagArray {
  std::unique_ptr<double[]> owned;
  ClientMapping mapping;
  double* values = nullptr;
  std::size_t size = 0;

  static TridiagArray own(std::size_t count) {
    TridiagArray a;
    a.owned = std::make_unique_for_overwrite<double[]>(count);
    a.values = a.owned.get();
    a.size = count;
    return a;
  }
  double* data() const { return values; }
  std::span<const double> span() const { return {values, size}; }
  bool truncated() const { return mapping.truncated(); }
};

// A passed little-endian float64 file in C order is mapped and used where it lies; anything else
// (float32, big-endian, Fortran order, an odd data offset, an upload, no mapping slot left) is
// converted into an array of the daemon's own.
Result<TridiagArray> load_array(TridiagSource& source, std::size_t count);

// The solution's array: with an output file, the file itself (sized, header written, mapped
// shared, so the solver writes the .npy's data directly); else, or where the file cannot be
// mapped (opened write-only), an array of the daemon's own.
struct TridiagSolution {
  std::optional<NpyOutput> out;
  TridiagArray x;
};

Result<TridiagSolution> solution_array(int out_fd, const TridiagPlan& plan);

// A client that truncated one of its files while the job ran gets an error, not what the
// daemon read or wrote past the new end.
Status check_not_truncated(const std::array<TridiagArray, 4>& a, const TridiagArray& x);

}  // namespace stripesolve::daemon
