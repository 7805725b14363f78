// The triangulation phase of the out-of-core solve: the master, elim.I and k elim.J roles of
// 002 §8.2 (Fig 18) walking a strategy's task list (002 Fig 20) through the cache's cell states
// (002 Fig 19). There is no global barrier: an elim.J worker starts an update of J by [I0, I1) as
// soon as J's part is downloaded and every I in the range is eliminated (its cell "stuck"), and
// elim.I starts stripe I+1 as soon as its cell is idle after its update by I (002 §8.1).
//
// Roles and what they move (cache/cell_state.h; the classes are in roles.h):
//   master (calling thread) walks the tasks in order; per task it requests the part
//     (hit: kIdle/kStuck -> kWaitElimI/kWaitElimJ; miss: -> kWaitDownload) and queues the task.
//     It blocks while the part's cell is busy with its previous task and on memory
//     (backpressure); it never runs ahead of a stripe's own order.
//   I/O role (io_role.h) downloads/uploads.
//   elim.I: kWaitElimI -> kElimI -> kStuck (or kIdle for the last stripe).
//   elim.J x k: kWaitElimJ -> kElimJ -> kIdle, releasing each I (count -= 1; the last one
//     unsticks I). Workers take the updates on the critical path first: those of a J in the
//     meta-stripe eliminated next, lowest J first (002 §8.1); then the oldest. Look-ahead
//     workers (FactorParams::lookahead_workers) take only those; beside them, the other
//     workers take them only when no other update is queued for them.
//   monitor: checks the cancel token and emits rate-limited progress.
// At the end every dirty part is written back and stays cached, clean (cache write_back), so the
// substitution finds them; the caller stores the pivots and commits the factor object.
//
// Errors: the first failure (numerical error naming the row, I/O error, cancellation) fails the
// cache, which wakes every role; all threads are joined before returning.
#pragma once

#include <memory>
#include <utility>
#include <vector>

#include "backend/backend.h"
#include "backend/cpu/critical_helpers.h"
#include "base/mutex.h"
#include "cache/stripe_cache.h"
#include "scheduler/factor_progress.h"
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
  int64_t upward_lead = -1;  // make_tasks(): where upward sweeps take the next meta-stripe
  // make_tasks(): the next meta-stripe's first stripes updated inside the chain (the GPU tier).
  int64_t early_next = 0;
  int64_t substripe_rows = 64;
  int64_t elim_j_workers = 1;
  // Further elim.J workers that take only updates on the critical path: those of a J in the
  // meta-stripe eliminated next (the look-ahead of the GPU tier, whose lanes run at high
  // priority beside the sweep's).
  int64_t lookahead_workers = 0;
  // Write every dirty part back to the factor object at the end (kept cached, clean). Off when
  // the factors are not persisted (DenseSolveOptions::store_factors).
  bool write_back = true;
  // The GPU tier: a stripe's parts from its meta-stripe's first column on, for its elimination
  // and the updates inside its meta-stripe (the U block of a range carries the multipliers
  // inside the meta-stripe; a part loaded from its diagonal, as after an eviction or in a
  // resumed run, would lack them).
  bool parts_from_meta_start = false;
  // The CPU tier: helper threads that elim.I's eliminations and the critical updates split their
  // block updates over (backend/cpu/critical_helpers.h); 0: none.
  int64_t critical_threads = 0;
  // The CPU tier out of core (Plan::split_sweeps): every J update splits over the helpers too,
  // the sweep's pieces queued behind those of the critical path (the updates of the meta-stripe
  // eliminated next).
  bool split_sweeps = false;
  // The GPU tier: columns of right-hand sides its pool keeps room for beside the factors (the
  // substitution's and the residual's x and r on the device, GpuElimination::create).
  int64_t rhs_columns = 0;
  // The final factors are wanted in RAM and the store (stored, or substituted on the host).
  // False (a solve that keeps no factors): the GPU tier may keep them on its device only
  // (Elimination::final_on_device_only), never writing them.
  bool factors_on_host = true;
};

// Flops of the triangulation (the formulas of stripe/stripe_ops.h summed over all stripes).
double factorization_flops(const storage::StripeGeometry& g);

// What the elim.I and elim.J roles do with a task once its cells are theirs (kElimI / kElimJ,
// the I stripes kStuck): the arithmetic, on the CPU backend (CpuElimination) or on the GPU tier
// (scheduler/gpu_elimination.h). The threads, the cell states and the master are
// run_factorization's; an Elimination only computes.
class Elimination {
 public:
  virtual ~Elimination() = default;
  // elim.I (one thread): eliminates stripe `i` in its cell; fills *pivots.
  virtual Status eliminate(int64_t i, const cache::CellView& cell,
                           stripe::StripePivots* pivots) = 0;
  // elim.J worker `worker` (of params.elim_j_workers): updates J = t.stripe by the eliminated
  // stripes [t.i_begin, t.i_end) (`is`, in order; pivots[I] final). *where: whether J's values
  // stay newer on the device (its cell goes to kOnDevice instead of kIdle), and whether its RAM
  // goes back meanwhile (cache::UpdatedJ). j.buffer is null where it went back after an earlier
  // update: the values are on the device only, and stay there.
  virtual Status update(int worker, const Task& t, const cache::CellView& j,
                        const std::vector<cache::CellView>& is,
                        const std::vector<stripe::StripePivots>& pivots,
                        cache::UpdatedJ* where) = 0;
  // Before the roles start, with the run's plan (a resumed run skips the tasks whose effect is
  // durable): the GPU tier counts the reads of each stripe from the tasks left.
  virtual Status begin(const ResumePlan& plan) {
    (void)plan;
    return Status::ok();
  }
  // elim.I, for a stripe loaded final from the factor object instead of being eliminated (a
  // resumed run): the GPU tier puts it on the device for the updates that still read it.
  virtual Status load_final(int64_t i, const cache::CellView& cell,
                            const stripe::StripePivots& pivots) {
    (void)i;
    (void)cell;
    (void)pivots;
    return Status::ok();
  }
  // Whether the sweep by a range of several stripes may start before the previous range's sweep
  // has finished (its critical updates then run beside the previous sweep's last ones). The GPU
  // tier allows it only when its pool holds two ranges' U blocks beside the parts in flight.
  virtual bool sweeps_may_overlap() const { return true; }
  // How far elim.I may run ahead of the sweeps: a stripe of meta-stripe m is eliminated once
  // every update by meta-stripe m - 1 - meta_stripes_ahead() has finished. One bounds the working
  // set to two ranges' U blocks and two meta-stripes' eliminated stripes held (kStuck) for their
  // sweeps. The GPU tier keeping the whole matrix on one device, where RAM bounds nothing (it
  // holds A, or the eliminated stripes stay on the device only), allows as many more as its pool
  // holds U blocks beside the matrix: a factorization reading A as it goes then eliminates each
  // meta-stripe once its stripes have arrived, instead of waiting for the whole of A.
  virtual int64_t meta_stripes_ahead() const { return 1; }
  // Whether J parts may stay newer on the device (kOnDevice: their RAM cells neither evictable
  // nor free until their elimination). The master then hands out no elimination before its
  // turn out of core (it could not tell which memory comes back).
  virtual bool keeps_parts_on_device() const { return false; }
  // Whether an eliminated stripe's final values stay on the device only, not copied to its RAM
  // cell, which elim.I then gives back (StripeCache::finish_elim_i_on_device): the GPU tier
  // keeping the whole matrix on one device for a solve that wants no factors on the host
  // (FactorParams::factors_on_host).
  virtual bool final_on_device_only() const { return false; }
  // Whether elim.J worker `worker` may take update `t` (several GPUs: each worker serves one
  // device, and a J's updates run on its device).
  virtual bool accepts(int64_t worker, const Task& t) const {
    (void)worker;
    (void)t;
    return true;
  }
  // The largest |U| entry of the stripes eliminated so far (the pivot growth's numerator), read
  // once the roles are joined; -1 where it is not tracked.
  virtual double max_abs_u() const { return -1; }
  // The same of stripe `i` alone, on elim.I's thread once it has eliminated it (its progress
  // record carries it); -1 where not tracked.
  virtual double stripe_max_abs_u(int64_t i) const {
    (void)i;
    return -1;
  }
};

// The condition estimate's first transposed pass, made by elim.I as it eliminates each stripe
// (run_factorization): the vector it works on, and the seconds elim.I spent on it (written by
// elim.I, read after the run; also inside the factorization's time).
struct TransposedUpperPass {
  double* v = nullptr;  // n values
  double seconds = 0;
};

// The CPU backend's elimination (stripe/stripe_ops.h on the cells in RAM).
class CpuElimination final : public Elimination {
 public:
  // Allocates elim.I's workspace and one per elim.J worker, each for the largest stripes of
  // `layout` (stripe_ops' *_workspace_size). `meta_of`: each stripe's meta-stripe under
  // `params` (meta_stripe_of(), as run_factorization computes it for the roles).
  // `transposed_upper` (optional, n values): see run_factorization.
  static Result<std::unique_ptr<CpuElimination>> create(
      EngineContext& ctx, const storage::StripedMatrix& layout, const FactorParams& params,
      std::vector<int64_t> meta_of, TransposedUpperPass* transposed_upper = nullptr);
  Status eliminate(int64_t i, const cache::CellView& cell, stripe::StripePivots* pivots) override;
  Status update(int worker, const Task& t, const cache::CellView& j,
                const std::vector<cache::CellView>& is,
                const std::vector<stripe::StripePivots>& pivots, cache::UpdatedJ* where) override;
  double max_abs_u() const override { return max_abs_u_; }
  double stripe_max_abs_u(int64_t i) const override {
    return stripe_max_abs_u_[static_cast<size_t>(i)];
  }

 private:
  CpuElimination(EngineContext& ctx, const storage::StripedMatrix& layout,
                 const FactorParams& params, std::vector<int64_t> meta_of)
      : ctx_(ctx), layout_(layout), params_(params), meta_of_(std::move(meta_of)) {}
  EngineContext& ctx_;
  const storage::StripedMatrix& layout_;
  FactorParams params_;
  const std::vector<int64_t> meta_of_;                    // each stripe's meta-stripe (strategy.h)
  std::unique_ptr<backend::CriticalHelpers> helpers_;     // null without params.critical_threads
  stripe::HostWorkspace eliminate_workspace_;             // elim.I's
  std::vector<stripe::HostWorkspace> update_workspaces_;  // one per elim.J worker, each its own
  double max_abs_u_ = 0;                  // written by elim.I only, read after it is joined
  std::vector<double> stripe_max_abs_u_;  // written and read by elim.I only
  // run_factorization's transposed_upper: written by elim.I only (stripe by stripe, in order),
  // read after it is joined; null: none (or no longer, after an overflow).
  TransposedUpperPass* transposed_upper_ = nullptr;
  stripe::HostWorkspace transposed_workspace_;  // elim.I's, for it
};

// A factorization that records its progress and/or resumes from it (factor_progress.h).
struct FactorResume {
  // Durable progress: its tasks are skipped, its final stripes' pivots used (null: from A). The
  // I/O role must read the stripes it holds from the factor (IoRole::mark_written).
  const ResumePoint* point = nullptr;
  // Hears of every elimination, for the records the I/O role's write hook appends (may be null).
  FactorProgress* progress = nullptr;
  // Receives what the run skipped (may be null).
  ResumeStats* skipped = nullptr;
};

// `layout`: the object whose part_layout() describes the cells (A or the factor: same geometry
// and placement). The I/O role's sources must be set (A -> factor) and the cache empty.
// `elimination` null: the CPU backend's. `max_abs_u` (optional) receives the elimination's
// max_abs_u() (with a resume point's, the largest of it and the final stripes' records).
// `transposed_upper` (optional; only with the CPU backend's elimination and no resume point,
// else kInvalidArgument): the first pass of A^T y = c made in place on its n values as elim.I
// eliminates each stripe (stripe_ops.h transposed_upper_substitute_stripe, stripes in order, on
// the U rows just made, in RAM): what substitute_transposed's upper pass would give afterwards
// from the stored factors, without reading them (the condition estimate's, condition.h). A
// non-finite value on the way (kNumerical from the stripe op) leaves a NaN in element 0 and the
// rest undone; the factorization goes on.
Result<std::vector<stripe::StripePivots>> run_factorization(
    EngineContext& ctx, const storage::StripedMatrix& layout, const FactorParams& params,
    Elimination* elimination = nullptr, double* max_abs_u = nullptr,
    const FactorResume& resume = {}, TransposedUpperPass* transposed_upper = nullptr);

// The status every role fails the cache with when the job's CancelToken is set.
Status cancelled_status();

// Flops of one elimination and one update (stripe/stripe_ops.h's formulas).
double elimination_flops(const storage::StripeGeometry& g, int64_t i);
double update_flops(const storage::StripeGeometry& g, int64_t j, int64_t i);

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
  Mutex mu_;
  CondVar stop_cv_;
  bool stop_ GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace stripesolve::scheduler
