// The compute roles of the triangulation and the DSR role of the read-only phases (002 §8.2,
// Fig 18), as classes beside IoRole (io_role.h). Each owns its thread(s) and its queue; the
// cells they work on move through the Fig 19 states of the cache (cache/cell_state.h), which is
// the one place that orders them.
//
//   ElimIRole   one thread: eliminates the stripes pushed to it, in order, once each cell is
//               kWaitElimI (kElimI while it runs, then kStuck, or kIdle for the last stripe).
//               A stripe loaded final from a resumed factor (factor_progress.h) goes through
//               the same states unchanged (its pivots are the records').
//   ElimJRole   k workers plus the look-ahead workers (FactorParams): updates J by [I0, I1)
//               once J is kWaitElimJ and every I of the range kStuck. Critical-path updates
//               (a J of the meta-stripe eliminated next) go first, in the order elim.I needs
//               them. Look-ahead workers take only those, and the other workers leave them to
//               the look-ahead workers that accept them: they run one after another on the
//               high-priority lane instead of three at a time (the update elim.I waited for
//               took 199 ms on a sweep lane beside two others at n = 57344 on the H200, and
//               the RAM tier went from 37.7 to 39.2 TFLOP/s when the sweep lanes left them).
//   MasterRole  the calling thread: walks the strategy's task list, requests each task's part
//               from the cache (002 §8.2 "master") and hands the task to elim.I or elim.J:
//               misses in the list's order, hits as soon as everything the task depends on
//               has been handed out. It never runs ahead of a stripe's own order. Its walk of
//               the list is a class of its own (MasterRole::Walk, master_walk.cc).
//   DsrRole     one thread: requests the parts of a read-only phase in the order they will be
//               used, as kStuck cells; the cache budget bounds how far it runs ahead.
//
// Ownership: pivots[I] is written by elim.I before its cell leaves kElimI and read by elim.J only
// after it has seen the cell kStuck (the cache's mutex orders the two). The queues are
// WorkQueues (thread-safe). The first failure of any role fails the cache, which wakes every
// other role; each role's destructor closes its queue and joins its threads.
#pragma once

#include <cstdint>
#include <thread>
#include <vector>

#include "scheduler/factor_progress.h"
#include "scheduler/factor_run.h"
#include "scheduler/work_queue.h"

namespace stripesolve::scheduler {

class ElimIRole {
 public:
  // loaded_final[I]: stripe I is loaded final, not eliminated (ResumePlan). progress (may be
  // null) hears of every elimination.
  ElimIRole(EngineContext& ctx, const storage::StripeGeometry& g, Elimination& elimination,
            std::vector<stripe::StripePivots>& pivots, const std::vector<bool>& loaded_final,
            FactorProgress* progress);
  ~ElimIRole();  // close_and_join()
  ElimIRole(const ElimIRole&) = delete;
  ElimIRole& operator=(const ElimIRole&) = delete;

  void push(int64_t stripe) { queue_.push(stripe); }
  // No more stripes: the thread ends once the queued ones are done (or the cache failed).
  void close_and_join();

 private:
  void run();

  EngineContext& ctx_;
  const storage::StripeGeometry& g_;
  Elimination& elimination_;
  std::vector<stripe::StripePivots>& pivots_;
  const std::vector<bool>& loaded_final_;
  FactorProgress* progress_;
  WorkQueue<int64_t> queue_;
  std::thread thread_;
};

class ElimJRole {
 public:
  // meta_of: each stripe's meta-stripe (run_factorization's; outlives the role).
  ElimJRole(EngineContext& ctx, const storage::StripeGeometry& g, const FactorParams& params,
            const std::vector<int64_t>& meta_of, Elimination& elimination,
            const std::vector<stripe::StripePivots>& pivots);
  ~ElimJRole();  // close_and_join()
  ElimJRole(const ElimJRole&) = delete;
  ElimJRole& operator=(const ElimJRole&) = delete;

  void push(const Task& t) { queue_.push(t); }
  void close_and_join();

 private:
  void run(int64_t worker);
  // An update of a J in the meta-stripe eliminated next: elim.I waits for it.
  bool critical(const Task& t) const;

  EngineContext& ctx_;
  const storage::StripeGeometry& g_;
  Elimination& elimination_;
  const std::vector<stripe::StripePivots>& pivots_;
  const std::vector<int64_t>& meta_of_;  // meta-stripe of each stripe
  const int64_t lookahead_;  // workers [0, lookahead_) take critical updates only; the others
                             // take them when no sweep update is queued for them
  WorkQueue<Task> queue_;
  std::vector<std::thread> threads_;
};

class MasterRole {
 public:
  // From `elimination` (its answers fixed for the run): whether sweeps may overlap
  // (sweeps_may_overlap); whether an elimination may go before its turn out of core, also while
  // the front waits for memory, when the cache keeps room for the front's part beside it
  // (!keeps_parts_on_device: the CPU tier; on the GPU tier, which cannot tell which memory its
  // device instances give back, the window's scan still hands out an elimination whose part is a
  // hit before its turn, without that room test, master_walk.cc hand_out_hits); how far elim.I
  // may run ahead of the sweeps (meta_stripes_ahead); and whether an elimination's final values
  // stay on the device (final_on_device_only: its part, kept there only, needs no RAM, and is a
  // hit for the scan). meta_of: each stripe's meta-stripe (run_factorization's; outlives the
  // role).
  MasterRole(EngineContext& ctx, const storage::StripedMatrix& layout, const FactorParams& params,
             const std::vector<int64_t>& meta_of, ElimIRole& elim_i, ElimJRole& elim_j,
             const Elimination& elimination);
  // Walks `tasks` (002 Fig 20) to the end or to the first failure (which it records in the
  // cache), then closes both compute roles' queues and waits for them. `plan`: the tasks a
  // resumed run skips and each eliminated stripe's count (plan_resume()).
  void run(const std::vector<Task>& tasks, const ResumePlan& plan);

 private:
  class Walk;  // run()'s walk of the list (master_walk.cc)

  cache::PartRequest request_for(const Task& t, const ResumePlan& plan) const;
  void dispatch(const Task& t);

  EngineContext& ctx_;
  const storage::StripedMatrix& layout_;
  const FactorParams& params_;
  const std::vector<int64_t>& meta_of_;  // meta-stripe of each stripe
  ElimIRole& elim_i_;
  ElimJRole& elim_j_;
  const bool overlap_sweeps_;
  const bool early_eliminations_;
  const int64_t meta_ahead_;
  const bool final_on_device_;
  std::vector<int64_t> meta_first_;  // per stripe: the first stripe of its meta-stripe
};

// Whether every stripe's whole part (from column 0 through n) fits `cache_bytes` at once: then
// nothing is ever evicted.
bool whole_parts_fit(const storage::StripedMatrix& layout, uint64_t cache_bytes);

// One part a read-only pass uses: columns [col_begin, col_end) of a stripe (kThroughN: through n).
struct PartOrder {
  int64_t stripe = 0;
  int64_t col_begin = 0;
  int64_t col_end = storage::kThroughN;
};

class DsrRole {
 public:
  // Starts requesting the parts of `order` (of `layout`) as kStuck cells.
  DsrRole(cache::StripeCache& cache, const storage::StripedMatrix& layout,
          const std::vector<PartOrder>& order);
  ~DsrRole();  // join()
  DsrRole(const DsrRole&) = delete;
  DsrRole& operator=(const DsrRole&) = delete;
  // Waits for the thread: it ends once every part was requested or the cache failed (the caller
  // fails the cache first to stop it early).
  void join();

 private:
  std::thread thread_;
};

}  // namespace stripesolve::scheduler
