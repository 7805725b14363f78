// solve_batch_gpu (gpu.h) without the report's quality summary, for solve_batch_gpus to solve
// and check its parts on their devices and summarize the whole batch once (batch_check.h).
// Internal to tridiag/; defined in cuda/gpu_solver.cu (gpu_absent.cc without CUDA).
#pragma once

#include "base/status.h"
#include "tridiag/batch_check.h"
#include "tridiag/gpu.h"

namespace stripesolve::tridiag {

// Solves on options.device and checks every system (fallbacks to gepp on the CPU included):
// the algorithm, notes and check_seconds in `report`, the check's outcome in `outcome`. An
// interleaved batch with more than one device in `spread` (CUDA ordinals) is shared by those
// devices instead, each taking a run of its systems (their columns of every row) with options'
// budget.
Status solve_gpu_checked(const BatchShape& shape, const BatchArrays& arrays,
                         const GpuOptions& options, SolveReport& report, BatchOutcome& outcome,
                         std::span<const int> spread = {});

}  // namespace stripesolve::tridiag
