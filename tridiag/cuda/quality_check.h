// The quality check of a solution on the device (tridiag.h: quality check; issue 17): each
// system's normwise backward error ||f - A x||_inf / (||A||_inf ||x||_inf + ||f||_inf), the
// formula and rounding of backward_error() (+inf for a non-finite x or residual), against
// backward_error_tolerance_of(n) (tolerance.h, shared with the CPU). The batch reduces on the
// device to the worst backward error among the systems within their tolerance (the first system
// of equals) and a list of the others; only those few bytes come back to the host, never the
// batch. Internal to tridiag/ (gpu_solver.cu), no CUDA type here.
//
// Layouts: strided and ragged (systems one after another: a warp a run of 512 rows, maxima per
// system through atomics, so that one large system spreads over the whole device) and
// interleaved (a thread a system, reading consecutive addresses across the warp; when the
// systems are too few to fill the device, a thread a run of at least 32 rows of a system, the
// runs' maxima joined per system through atomics).
// Cost: one read of dl, d, du, f and x (x three times, from cache), ~10 flops a row, a few
// atomics a system and three small launches; one 32-byte copy back when every system is within
// its tolerance, a second of 16 bytes a system otherwise.
//
// Checked as solved: the one-pass SPIKE kernels (group_spike.cu: strided batches of n <=
// kMaxGroupSystem) check their rows as they write x, from dl, d, du and f read again and x in
// shared memory, and give each system its verdict; no separate pass over x. (It still costs
// 30-130% of the solve on an H200, against 50-260% for the separate pass: docs/performance.md.
// Interleaved batches are checked apart, the separate pass in runs costing less there, but for
// gepp's, which its substitution checks (its second elimination in large batches), a third
// cheaper; for n <= 32 only in large batches, at 32 < n <= 64 never.) A caller
// passes prepare_check's CheckTarget to solve_device, which sets rows_checked where its kernel did
// that, and then calls check_on_device with that target: only the worst system's search and the
// copies remain. Threading: asynchronous on `stream` but for the final copies, which synchronise
// it.
#pragma once

#include <cstddef>
#include <vector>

#include "base/status.h"
#include "tridiag/batch_check.h"
#include "tridiag/cuda/device_solve.h"
#include "tridiag/tridiag.h"

namespace stripesolve::tridiag::gpu {

// What the device check found.
struct DeviceCheck {
  double worst_clean_error = 0.0;      // the worst backward error within its tolerance
  std::size_t worst_clean_system = 0;  // its system (0 when that error is 0)
  std::vector<Suspect> suspects;       // above the tolerance or non-finite, ascending
  double seconds = 0.0;                // the check on the device, by CUDA events
};

// Bytes of device workspace check_on_device needs for `systems` systems.
std::size_t check_workspace_bytes(BatchLayout layout, std::size_t systems);

// Clears the check's state in `workspace` (asynchronous on `stream`) and returns the target for a
// solve of `systems` systems of n rows (n = 0 for a ragged batch: never checked as solved).
Result<CheckTarget> prepare_check(BatchLayout layout, std::size_t systems, std::size_t n,
                                  void* workspace, std::size_t workspace_size, void* stream);

// Checks the solution in batch.x. With `solved` (prepare_check's target after solve_device) whose
// rows_checked is set, the rows are not read again. `systems`: the number of systems; `offsets`
// (ragged only): the device copy of the count + 1 prefix sums of the sizes. The batch's dl and du
// outside a system (dl of its first row, du of its last) are ignored.
Status check_on_device(BatchLayout layout, const DeviceBatch& batch, std::size_t systems,
                       const std::size_t* offsets, void* workspace, std::size_t workspace_size,
                       void* stream, DeviceCheck& out, const CheckTarget* solved = nullptr);

}  // namespace stripesolve::tridiag::gpu
