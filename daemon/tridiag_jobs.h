// The tridiag_solve job type (tridiag lane): a batch of tridiagonal systems through tridiag/
// (papers 000, 001, 003), on the CPU or the GPU.
//
// Fields: dl, d, du, rhs = {"fd": i} (an .npy file the client passed, read in place) or
// {"upload": id} (an .npy the owner uploaded); optional sizes (a list of integers, or an int64
// .npy as {"fd": i} or {"upload": id}: a ragged batch), out = {"fd": i} (optional: the client's
// temporary for the solution), layout (strided|interleaved), algorithm (auto or a
// tridiag::parse_algorithm name), unstable_ok, device (auto|cpu|gpu). Shapes, dtypes, sizes and the
// memory cap (tridiag.max_bytes) are checked here, at the edge (daemon/tridiag_input.h), from
// the headers before any data is read; non-finite values before the GPU solves, or by the CPU
// solver as it reads them (tridiag::SolveOptions::refuse_non_finite), either way failing the job
// with the batch's first ("d[17] is not finite (nan): system 2, row 16") before anything is
// delivered.
//
// The arrays live in the daemon's RAM for the job: a passed file is read straight into its
// array (daemon/npy_file.h: one copy from the page cache). The solve is one call into tridiag/,
// which spreads the batch over all cores (or the GPU), so progress moves by phase (load, solve,
// check, write) and a cancel is seen between phases; at the default cap a phase takes seconds at
// most. With `out` the solution, shaped like rhs, is written into the client's file (header and
// data, pwrite) and the job keeps nothing; without it the solution is published whole and
// streams to `result` in chunks.
// device auto: the CPU without a GPU; with one, the path predicted quicker for the batch's
// unknowns from both paths measured once (daemon/tridiag_auto_device.h), and the CPU when the GPU
// cannot take the batch (an algorithm it lacks, or over its memory); the choice is a note.
// Breakdown and singular matrices (kNumerical from tridiag/) fail the job with tridiag's message.
// Result: shape, systems, unknowns, layout, dtype, algorithm (that ran), requested_algorithm,
// device, seconds (the solve), max_relative_residual and worst_system, backward_error,
// worst_backward_system and tolerance (the CPU solver's own check, which covers every system;
// for the GPU computed here, O(n): the same figures either way), fell_back
// (how many systems were solved again with gepp) and fell_back_systems (the first 8), notes
// (tridiag's choices and fallbacks, also in the job's log), and "warning" when a system is above
// its backward-error tolerance or went through a near breakdown: the job then ends
// COMPLETED_WITH_WARNING (issue 17), never plain COMPLETED.
#pragma once

#include "daemon/job_manager.h"
#include "daemon/tridiag_auto_device.h"
#include "daemon/tridiag_config.h"
#include "daemon/uploads.h"

namespace stripesolve::daemon {

// `uploads`, `config` and `auto_device` (device auto's measurement, shared by the jobs) must
// outlive the registry's jobs.
void register_tridiag_jobs(JobRegistry& registry, UploadStore& uploads,
                           const TridiagJobConfig& config, AutoDevice& auto_device);

}  // namespace stripesolve::daemon
