// The dense_solve job type (dense lane): A X = B on a stored matrix through
// scheduler::solve_dense (paper 002 end to end).
//
// Parameters (checked here, at the edge): matrix; rhs = {"fd": i} (an .npy file the client
// passed: (n) or (n, k), float64 or float32, either byte order), {"upload": id} (an .npy the
// owner uploaded, float64)
// or {"generate": "ones"|"uniform", "nrhs": k, "seed": s}, each bounded by check_rhs_size()
// before it is allocated; out = {"fd": i} (optional: the client's temporary, which receives the
// solution as an .npy of shape (n) or (n, k) row by row as it is finalized; without it the
// solution is kept for `result` to stream);
// pivot (row|local|none), strategy (basic|zigzag|meta_zigzag), refinement (steps), in_place,
// reuse. Progress goes to the job (and so to watchers, metrics and the progress log); solution
// rows are published to the job as the engine finalizes them, so `result` streams them while the
// solve runs; cancel reaches the engine's CancelToken at once. The engine's Chrome trace becomes
// the job's trace. Result: residual, GFLOP/s, seconds, I/O and cache figures, factor name.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "daemon/job_manager.h"
#include "daemon/uploads.h"
#include "scheduler/planner.h"
#include "scheduler/progress.h"
#include "storage/matrix_store.h"

namespace stripesolve::daemon {

struct DenseJobLimits {
  uint64_t max_rhs_bytes = 1ull << 30;  // daemon.limits.max_rhs_bytes
  // Memory the daemon may still take (MemAvailable); 0 = unknown, not checked.
  std::function<uint64_t()> available_memory;
};

// A solve holds about this many n x nrhs float64 arrays at once: B, X, the residual and the
// solution the job streams (scheduler/dense_solve.h, "Memory").
inline constexpr uint64_t kRhsCopiesInFlight = 4;

// Checked before anything of that size is allocated, for generated and uploaded right-hand sides
// alike: n x nrhs float64 must stay within limits.max_rhs_bytes, and kRhsCopiesInFlight copies
// within the available memory. kResourceExhausted naming the limit otherwise.
Status check_rhs_size(int64_t n, int64_t nrhs, const DenseJobLimits& limits);

// A dense solve's progress as the job shows it: phase, fraction, I/O, stripes, and gflops and
// eta_seconds once the phase has done work to measure them by.
nlohmann::json dense_progress_json(const scheduler::Progress& p);

// `store`, `uploads` and `engine` must outlive the registry's jobs.
// The factor a queued job of `type` with `params` makes and may resume after a restart (a dense
// solve, not in place); nullopt for any other job.
std::optional<std::string> factor_to_resume(const std::string& type, const nlohmann::json& params);

void register_dense_jobs(JobRegistry& registry, storage::MatrixStore& store, UploadStore& uploads,
                         const scheduler::EngineConfig& engine, const DenseJobLimits& limits);

}  // namespace stripesolve::daemon
