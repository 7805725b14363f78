// The CPU's two eliminations, gepp (LAPACK dgtsv's, the stable default) and thomas (the
// unpivoted default), with the quality check (backward_error, tridiag.h) on several systems of
// one size at once, system k in vector lane k. One system's elimination is a chain of dependent
// divisions (each row's pivot needs the previous row's), so solve_gepp and solve_thomas run at
// the latency of that chain, a fifth of the memory bandwidth on batches; kLanes independent
// chains side by side keep the divider busy instead. Each lane does the one-system solver's
// operations in its order (gepp picks each lane's interchange by a mask), and the check sums as
// solution_quality does, so every x, backward error and relative residual equals the one-system
// path's to the bit.
// Thread-safety: pure functions; a LaneWork must not be shared between threads.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "tridiag/tridiag.h"

namespace stripesolve::tridiag {

// Systems solved together: 8 doubles, four SSE2 registers (the x86-64 baseline).
inline constexpr std::size_t kLanes = 8;

// Systems of at most this many rows go through the lanes (their work arrays, 8 n kLanes
// doubles, stay within 16 MiB a thread); longer ones one at a time.
inline constexpr std::size_t kLanesMaxRows = std::size_t{1} << 15;

// A run of `lanes` (1 to kLanes) systems of n rows in a batch's arrays: row i of system k
// at [i * row_stride + k * lane_stride] from each pointer (dl[i] is row i's sub-diagonal,
// dl[0] and du[n - 1] ignored, as everywhere in tridiag/). A strided batch has row_stride 1 and
// lane_stride n, an interleaved one row_stride = its system count and lane_stride 1. x may
// alias f.
struct LaneRun : BatchArrays {
  std::size_t n = 0, lanes = 0, row_stride = 1, lane_stride = 0;
};

// What the check found for each system of a run, lane k for system k.
struct LaneChecks {
  std::array<double, kLanes> backward_error{};
  std::array<double, kLanes> relative_residual{};  // solution_quality's
  // The lanes with a non-finite input value (dl[0] and du[n - 1] too), whether or not their
  // solve failed: a non-finite residual in the check flags a lane, check_finite_inputs
  // confirms it.
  std::uint32_t non_finite_input = 0;
};

struct LaneWork {
  // n x kLanes each, row-major (row i, then lane): the factors and x (dl, d, du, b), and the
  // rows as given (a, d0, c, f), which the elimination and the check read in order.
  std::vector<double> dl, d, du, b, a, d0, c, f;
};

// Each solves the run's systems into x and puts each one's check (solution_quality) in
// `checks`, and returns the lanes whose system the one-system solver fails (bit k for system
// k), and those whose relative residual needs solution_quality's scaled second pass. Their x is
// left as it was (f intact when x aliases it): the one-system path on them says why, or checks
// them.
//
// solve_gepp_lanes: solve_gepp's failures, a zero pivot (singular) or a non-finite x.
std::uint32_t solve_gepp_lanes(const LaneRun& run, LaneWork& work, LaneChecks& checks);
// solve_thomas_lanes: solve_thomas's with pivot tolerance `tol`, a pivot not above tol times
// its row's largest entry or not finite, or a non-finite x; and those whose backward error is
// above max_error, for the caller to solve again (its x too is left as it was).
std::uint32_t solve_thomas_lanes(const LaneRun& run, double tol, double max_error, LaneWork& work,
                                 LaneChecks& checks);

}  // namespace stripesolve::tridiag
