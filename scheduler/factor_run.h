// The triangulation phase of the out-of-core solve: the master, elim.I and k elim.J roles of
// 002 §8.2 (Fig 18) walking a strategy's task list (002 Fig 20) through the cache's cell states
// (002 Fig 19). There is no global barrier: an elim.J worker starts an update of J by [I0, I1) as
// soon as J's part is downloaded and every I in the range is eliminated (its cell "stuck"), and
// elim.I starts stripe I+1 as soon as its cell is idle after its update by I (002 §8.1).
//
// Roles and what they move (cache/cell_state.h):
//   master (calling thread) walks the tasks in order; per task it requests the part
//     (hit: kIdle/kStuck -> kWaitElimI/kWaitElimJ; miss: -> kWaitDownload) and queues the task.
//     It blocks while the part's cell is busy with its previous task and on memory
//     (backpressure); it never runs ahead of a stripe's own order.
//   I/O role (io_role.h) downloads/uploads.
//   elim.I: kWaitElimI -> kElimI -> kStuck (or kIdle for the last stripe).
//   elim.J x k: kWaitElimJ -> kElimJ -> kIdle, releasing each I (count -= 1; the last one
//     unsticks I). Workers take the update that completes the next stripe to eliminate first.
//   monitor: checks the cancel token and emits rate-limited progress.
// At the end every dirty part is written back and stays cached, clean (cache write_back), so the
// substitution finds them; the caller stores the pivots and commits the factor object.
//
// Errors: the first failure (numerical error naming the row, I/O error, cancellation) fails the
// cache, which wakes every role; all threads are joined before returning.
#pragma once

#include <vector>

#include "backend/backend.h"
#include "cache/stripe_cache.h"
#include "scheduler/progress.h"
#include "scheduler/strategy.h"
#include "scheduler/trace.h"
#include "storage/striped_matrix.h"
#include "stripe/stripe_ops.h"

namespace stripesolve::scheduler {

struct EngineContext {
  backend::Backend& backend;
  cache::StripeCache& cache;
  ProgressMeter& progress;
  CancelToken& cancel;
  TraceRecorder* trace;
  double progress_interval_seconds = 0.5;
};

struct FactorParams {
  stripe::PivotMode pivot = stripe::PivotMode::kRow;
  Strategy strategy = Strategy::kMetaZigzag;
  int64_t meta_stripes = 1;
  int64_t substripe_rows = 64;
  int64_t elim_j_workers = 1;
};

// Flops of the triangulation (the formulas of stripe/stripe_ops.h summed over all stripes).
double factorization_flops(const storage::StripeGeometry& g);

// `layout`: the object whose part_layout() describes the cells (A or the factor: same geometry
// and placement). The I/O role's sources must be set (A -> factor) and the cache empty.
Result<std::vector<stripe::StripePivots>> run_factorization(EngineContext& ctx,
                                                            const storage::StripedMatrix& layout,
                                                            const FactorParams& params);

// The stripe part a cell holds.
stripe::StripePart cell_part(const storage::StripedMatrix& layout, const cache::CellView& cell);

// A thread that, until stopped, fails the cache when the token is cancelled and emits progress.
class Monitor {
 public:
  explicit Monitor(EngineContext& ctx);
  ~Monitor();  // stops and joins
  Monitor(const Monitor&) = delete;
  Monitor& operator=(const Monitor&) = delete;

 private:
  EngineContext& ctx_;
  std::mutex mu_;
  std::condition_variable stop_cv_;
  bool stop_ = false;  // guarded by mu_
  std::thread thread_;
};

}  // namespace stripesolve::scheduler
