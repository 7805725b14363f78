// The dense_solve job type (dense lane): A X = B on a stored matrix through
// scheduler::solve_dense (paper 002 end to end).
//
// Parameters (checked here, at the edge): matrix; rhs = {"upload": id} (an .npy the owner
// uploaded: (n) or (n, k) float64) or {"generate": "ones"|"uniform", "nrhs": k, "seed": s};
// pivot (row|local|none), strategy (basic|zigzag|meta_zigzag), refinement (steps), in_place,
// reuse. Progress goes to the job (and so to watchers, metrics and the progress log); solution
// rows are published to the job as the engine finalizes them, so `result` streams them while the
// solve runs; cancel reaches the engine's CancelToken at once. The engine's Chrome trace becomes
// the job's trace. Result: residual, GFLOP/s, seconds, I/O and cache figures, factor name.
#pragma once

#include <nlohmann/json.hpp>

#include "daemon/job_manager.h"
#include "daemon/uploads.h"
#include "scheduler/planner.h"
#include "storage/matrix_store.h"

namespace stripesolve::daemon {

// The generated right-hand sides: "ones", or "uniform" on [-0.5, 0.5) from (seed, row, col).
Result<std::vector<double>> generate_rhs(const std::string& kind, int64_t n, int64_t nrhs, uint64_t seed);

// `store`, `uploads` and `engine` must outlive the registry's jobs.
void register_dense_jobs(JobRegistry& registry, storage::MatrixStore& store, UploadStore& uploads,
                         const scheduler::EngineConfig& engine);

}  // namespace stripesolve::daemon
