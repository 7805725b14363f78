// LAPACK dgtsv's elimination (solve_gepp, system_solvers.h) and the quality check
// (backward_error, tridiag.h) on several systems of one size at once, system k in vector lane k.
// One system's elimination is a chain of dependent divisions (each row's multiplier needs the
// previous row's pivot), so solve_gepp runs at the latency of that chain, a fifth of the memory
// bandwidth on batches; kGeppLanes independent chains side by side keep the divider busy
// instead. Each lane does solve_gepp's operations in its order and picks its own pivot by a
// mask, and the check sums as backward_error does, so every x and backward error equals the
// one-system path's to the bit.
// Thread-safety: a pure function; a GeppLanesWork must not be shared between threads.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "tridiag/tridiag.h"

namespace stripesolve::tridiag {

// Systems solved together: 8 doubles, four SSE2 registers (the x86-64 baseline).
inline constexpr std::size_t kGeppLanes = 8;

// Systems of at most this many rows go through the lanes (their work arrays, 8 n kGeppLanes
// doubles, stay within 16 MiB a thread); longer ones one at a time, through solve_gepp.
inline constexpr std::size_t kGeppLanesMaxRows = std::size_t{1} << 15;

// A run of `lanes` (1 to kGeppLanes) systems of n rows in a batch's arrays: row i of system k
// at [i * row_stride + k * lane_stride] from each pointer (dl[i] is row i's sub-diagonal,
// dl[0] and du[n - 1] ignored, as everywhere in tridiag/). A strided batch has row_stride 1 and
// lane_stride n, an interleaved one row_stride = its system count and lane_stride 1. x may
// alias f.
struct LaneRun : BatchArrays {
  std::size_t n = 0, lanes = 0, row_stride = 1, lane_stride = 0;
};

struct GeppLanesWork {
  // n x kGeppLanes each, row-major (row i, then lane): the factors and x (dl, d, du, b), and
  // the rows as given (a, d0, c, f), which the elimination and the check read in order.
  std::vector<double> dl, d, du, b, a, d0, c, f;
};

// Solves the run's systems into x and puts each one's backward error in errors[k]. Returns the
// lanes whose system gepp cannot solve (bit k for system k): a zero pivot (singular) or a
// non-finite x. Their x is left as it was (f intact when x aliases it): solve_gepp on them
// says why.
std::uint32_t solve_gepp_lanes(const LaneRun& run, GeppLanesWork& work, double* errors);

}  // namespace stripesolve::tridiag
