// MasterRole::run's walk of the task list (roles.h): the state it keeps from one step to the
// next and the rules that hand out a task. Lives on the master's thread only.
//
// 002 §8.1, no global barrier: the master hands out every task whose part is cached and free as
// soon as its stripe's earlier tasks and the eliminations it reads have been handed out, up to a
// window ahead of the first task not yet handed out (the front), and the next elimination
// wherever it is. So elim.I can start the next meta-stripe while the J stripes at the far end of
// the sweep still wait for their previous update. A task is handed out only after all it depends
// on, so whatever has been handed out can finish without the master. When nothing can go without
// waiting the master downloads the front's part (a miss) or waits for the next change of any cell.
// Two gates bound the working set (RAM cells, the GPU tier's U blocks) as the in-order walk did:
// elim.I runs at most one meta-stripe ahead of the sweeps (a stripe of meta-stripe m is
// eliminated once every update by meta-stripe m - 2 has finished, i.e. its last stripe has left
// kStuck; m - 1 - a where the elimination allows a > 1, Elimination::meta_stripes_ahead), and,
// unless the elimination says they may overlap, a sweep by a range of several stripes starts
// once the previous one has finished. The workers take the critical updates first
// (ElimJRole), so the next meta-stripe's updates then run beside the end of the previous sweep.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "base/internal_error.h"
#include "cache/cell_state.h"
#include "cache/stripe_cache.h"
#include "scheduler/factor_progress.h"
#include "scheduler/factor_run.h"
#include "scheduler/roles.h"
#include "scheduler/strategy.h"
#include "scheduler/trace.h"

namespace stripesolve::scheduler {

using cache::CellState;

class MasterRole::Walk {
 public:
  Walk(MasterRole& role, const std::vector<Task>& tasks, const ResumePlan& plan);
  // To the end of the list, or to the first failure (recorded in the cache).
  void run();

 private:
  void hand_out(size_t k);
  // Every update by meta-stripe m has finished (true for m < 0).
  bool swept_by(int64_t m);
  // What task t reads is ready: the eliminations it applies, and the gates above.
  bool reads_ready(const Task& t);
  // Hands out every task of the window that is ready and a hit; whether any went. An
  // elimination ahead of the front takes may_pin_early's test first, as in
  // hand_out_elimination: its stripe is a hit once its last update has ended, which may happen
  // between that update's hand-out (the front's miss) and this scan, the master descheduled
  // while the part was read and updated. Handed out untested, it left a cache of two stripes
  // with two stuck stripes and no room for the next miss.
  bool hand_out_hits();
  // Whether an elimination of `stripe` may go before its turn, pinning the stripe (kStuck) until
  // its updates, which come after the front: when nothing is ever evicted, or, on the tiers that
  // take early eliminations, when the cache would still find room for `needed` bytes (the
  // front's part) beside it. fits_beside is a snapshot, but a safe one here: on those tiers only
  // the master allocates, or turns a cell that would give its memory back into one that would
  // not.
  bool may_pin_early(int64_t stripe, uint64_t needed);
  // The list position of the first elimination not handed out yet (tasks.size(): none left).
  size_t next_elimination();
  // The stripes from the next elimination's to the end of its meta-stripe.
  cache::StripeRange spared_chain();
  // The next elimination, before its turn in the list: once its stripe has no other task left
  // and what it reads is ready, and may_pin_early(needed): in a small cache the front's miss may
  // need exactly that stripe's memory (a cache of two stripes evicts J between its last update
  // and its elimination; eliminating it at once left no part to evict).
  bool hand_out_elimination(uint64_t needed);
  // Task k's miss (the front's). Waiting for memory (for in-flight updates to finish, for
  // write-backs), the master hands out nothing else but the next elimination, whose stripe
  // would otherwise be the first victim once its last update leaves it idle, to be read again
  // for the elimination after the sweep (n = 16384 on 16 cores, a quarter cached: each
  // elimination started 180 ms after its last update on average). Other hits would take the
  // memory the miss waits for. False once the cache failed (recorded there).
  bool request_miss(size_t k);
  // Where the cache holds every part at once (all_fit_), the parts of the tasks after the front
  // that have no cell yet are read now, in the list's order, while the front waits: the disk
  // streams A at its rate instead of one part at a time behind each elimination of the first
  // meta-stripe (a device keeping the whole matrix with no load, n = 57344 on an H200: A read
  // at 1.59 GB/s as the tasks asked for it, 1.75 by the load; the read-ahead's own gain was
  // within the runs' spread on a slow-disk host, docs/performance.md). Nothing is evicted for
  // them.
  void read_ahead();

  MasterRole& role_;
  cache::StripeCache& cache_;
  const std::vector<Task>& tasks_;
  const ResumePlan& plan_;
  const size_t window_;
  const bool all_fit_;                   // nothing is ever evicted
  const std::vector<int64_t>& meta_of_;  // the role's: meta-stripe of each stripe
  std::vector<int64_t> meta_last_;       // per meta-stripe: its last stripe
  // A resumed run's skipped tasks count as handed out (and their eliminations as done).
  std::vector<bool> handed_out_;
  std::vector<bool> eliminated_;  // E handed out
  std::vector<bool> swept_;       // every update by the meta-stripe finished
  std::vector<bool> waits_;       // scratch per scan: an earlier task of the stripe goes first
  // The eliminations in list order, and each stripe's tasks not handed out yet: an elimination
  // is its stripe's last task, so it may go once it is the only one left (past the window).
  std::vector<size_t> elim_at_;
  std::vector<int64_t> left_;
  size_t next_elim_ = 0;  // elim_at_ before it all handed out
  size_t front_ = 0;      // tasks before it all handed out
  size_t ahead_ = 0;      // tasks before it considered by read_ahead()
};

MasterRole::Walk::Walk(MasterRole& role, const std::vector<Task>& tasks, const ResumePlan& plan)
    : role_(role),
      cache_(role.ctx_.cache),
      tasks_(tasks),
      plan_(plan),
      window_(static_cast<size_t>(role.layout_.geometry().stripes +
                                  2 * role.params_.elim_j_workers + 2)),
      all_fit_(whole_parts_fit(role.layout_, cache_.stats().budget)),
      meta_of_(role.meta_of_),
      handed_out_(plan.skip) {
  const int64_t stripes = role.layout_.geometry().stripes;
  meta_last_.assign(static_cast<size_t>(meta_of_.back() + 1), 0);
  for (int64_t i = 0; i < stripes; ++i)
    meta_last_[static_cast<size_t>(meta_of_[static_cast<size_t>(i)])] = i;
  swept_.assign(meta_last_.size(), false);
  eliminated_.assign(static_cast<size_t>(stripes), false);
  waits_.assign(static_cast<size_t>(stripes), false);
  left_.assign(static_cast<size_t>(stripes), 0);
  for (size_t k = 0; k < tasks.size(); ++k) {
    const size_t s = static_cast<size_t>(tasks[k].stripe);
    if (tasks[k].kind == Task::Kind::kEliminate) {
      elim_at_.push_back(k);
      if (plan.skip[k]) eliminated_[s] = true;
    }
    if (!handed_out_[k]) ++left_[s];
  }
}

void MasterRole::Walk::hand_out(size_t k) {
  const Task& t = tasks_[k];
  STRIPESOLVE_CHECK(!handed_out_[k], "master: " + to_string(t) + " handed out twice");
  role_.dispatch(t);
  handed_out_[k] = true;
  --left_[static_cast<size_t>(t.stripe)];
  if (t.kind == Task::Kind::kEliminate) eliminated_[static_cast<size_t>(t.stripe)] = true;
}

bool MasterRole::Walk::swept_by(int64_t m) {
  if (m < 0 || swept_[static_cast<size_t>(m)]) return true;
  const int64_t last = meta_last_[static_cast<size_t>(m)];
  if (!eliminated_[static_cast<size_t>(last)]) return false;
  const CellState st = cache_.state_of(last);
  swept_[static_cast<size_t>(m)] = st == CellState::kIdle || st == CellState::kAbsent ||
                                   st == CellState::kWaitUpload || st == CellState::kUploading;
  return swept_[static_cast<size_t>(m)];
}

bool MasterRole::Walk::reads_ready(const Task& t) {
  if (t.kind == Task::Kind::kEliminate)
    return swept_by(meta_of_[static_cast<size_t>(t.stripe)] - 1 - role_.meta_ahead_);
  for (int64_t i = t.i_begin; i < t.i_end; ++i) {
    if (!eliminated_[static_cast<size_t>(i)]) return false;
  }
  // Unless they may overlap, one sweep by a range of several stripes at a time.
  return role_.overlap_sweeps_ || t.i_end - t.i_begin == 1 ||
         swept_by(meta_of_[static_cast<size_t>(t.i_begin)] - 1);
}

bool MasterRole::Walk::hand_out_hits() {
  bool any = false;
  std::fill(waits_.begin(), waits_.end(), false);
  size_t front = tasks_.size();  // the first task not handed out yet, as this scan moves it
  for (size_t k = front_; k < tasks_.size() && k < front_ + window_; ++k) {
    if (handed_out_[k]) continue;
    const Task& t = tasks_[k];
    const size_t s = static_cast<size_t>(t.stripe);
    if (waits_[s]) {  // an earlier task of this stripe goes first
      front = std::min(front, k);
      continue;
    }
    waits_[s] = true;
    // An elimination before its turn. Not tested on the GPU tier: it cannot tell which memory
    // comes back (keeps_parts_on_device), and its hits here go as they did.
    const bool early = t.kind == Task::Kind::kEliminate && front < k && role_.early_eliminations_;
    const bool may_go =
        reads_ready(t) &&
        (!early || may_pin_early(t.stripe, role_.request_for(tasks_[front], plan_).buffer_bytes));
    if (may_go && cache_.try_hit(role_.request_for(t, plan_))) {
      hand_out(k);
      any = true;
    } else {
      front = std::min(front, k);
    }
  }
  return any;
}

bool MasterRole::Walk::may_pin_early(int64_t stripe, uint64_t needed) {
  return all_fit_ || (role_.early_eliminations_ && cache_.fits_beside(needed, stripe));
}

size_t MasterRole::Walk::next_elimination() {
  while (next_elim_ < elim_at_.size() && handed_out_[elim_at_[next_elim_]]) ++next_elim_;
  return next_elim_ < elim_at_.size() ? elim_at_[next_elim_] : tasks_.size();
}

cache::StripeRange MasterRole::Walk::spared_chain() {
  const size_t e = next_elimination();
  if (e == tasks_.size()) return {};
  const int64_t i = tasks_[e].stripe;
  return {i, meta_last_[static_cast<size_t>(meta_of_[static_cast<size_t>(i)])] + 1};
}

bool MasterRole::Walk::hand_out_elimination(uint64_t needed) {
  const size_t k = next_elimination();
  if (k == tasks_.size()) return false;
  const Task& e = tasks_[k];
  if (left_[static_cast<size_t>(e.stripe)] != 1 || !reads_ready(e)) return false;
  if (!may_pin_early(e.stripe, needed)) return false;
  if (!cache_.try_hit(role_.request_for(e, plan_))) return false;
  hand_out(k);
  return true;
}

bool MasterRole::Walk::request_miss(size_t k) {
  const cache::PartRequest req = role_.request_for(tasks_[k], plan_);
  if (!role_.early_eliminations_) {
    auto cell = cache_.request(req);
    if (!cell.is_ok()) cache_.fail(cell.status());
    return cell.is_ok();
  }
  for (;;) {
    if (role_.ctx_.cancel.cancelled()) cache_.fail(cancelled_status());
    const uint64_t seen = cache_.changes();
    // Not the miss itself: an elimination whose part turned idle meanwhile is this request's
    // hit, and handed out here too it would run twice.
    if (tasks_[k].kind != Task::Kind::kEliminate) hand_out_elimination(req.buffer_bytes);
    // The next elimination's stripe is evicted last (it may turn idle right after the check),
    // and so are the later stripes of its meta-stripe: their updates inside the meta-stripe
    // come next, and evicted after their update by the sweep they waited for the sweep to end
    // (n = 16384 on 16 cores, a quarter cached: the third stripe of a meta-stripe eliminated
    // 3 s after the first two, the next sweep waiting for it).
    auto cell = cache_.try_request(req, spared_chain());
    if (!cell.is_ok()) {
      cache_.fail(cell.status());
      return false;
    }
    if (*cell) return true;
    if (!cache_.wait_change(seen).is_ok()) return false;
  }
}

void MasterRole::Walk::read_ahead() {
  if (!all_fit_) return;
  for (ahead_ = std::max(ahead_, front_); ahead_ < tasks_.size(); ++ahead_) {
    const Task& t = tasks_[ahead_];
    if (handed_out_[ahead_] || cache_.state_of(t.stripe) != CellState::kAbsent) continue;
    if (!cache_.read_ahead(role_.request_for(t, plan_))) return;  // no free memory now
  }
}

void MasterRole::Walk::run() {
  while (front_ < tasks_.size()) {
    if (role_.ctx_.cancel.cancelled()) {
      cache_.fail(cancelled_status());
      return;
    }
    const uint64_t seen = cache_.changes();
    bool progressed = hand_out_hits();
    while (front_ < tasks_.size() && handed_out_[front_]) ++front_;
    // The next elimination past the window: on the CPU tier the whole matrix is one meta-stripe
    // when it fits, and the last stripes' updates, one I at a time, hold the front back by more
    // than the window (n = 16384 on 16 cores: E11 waited 223 ms after its last update for the
    // front to move, the chain's lag 47 ms on average).
    const size_t e = next_elimination();
    if (front_ < tasks_.size() && e < tasks_.size() && e >= front_ + window_ &&
        hand_out_elimination(role_.request_for(tasks_[front_], plan_).buffer_bytes)) {
      progressed = true;
    }
    if (progressed || front_ == tasks_.size()) continue;
    const Task& t = tasks_[front_];
    const CellState state = cache_.state_of(t.stripe);
    if (reads_ready(t) && (state == CellState::kAbsent || state == CellState::kIdle ||
                           state == CellState::kOnDevice)) {
      // A miss (or a part cached from a later column than needed): the cache downloads it,
      // waiting for memory. Or an elimination whose part only the device holds (its RAM went
      // back: stripe_cache.h, UpdatedJ): the cache gives it memory, without a download (none
      // where the final values stay on the device: such a part is a hit for the window's scan,
      // so that an elimination never waits for the front's misses to be read).
      if (!request_miss(front_)) return;
      hand_out(front_);
      continue;
    }
    // The front's part is busy with its previous task (or on its way in), or its elimination
    // waits for the sweeps: read ahead where all fits, and wait for any change.
    read_ahead();
    if (!cache_.wait_change(seen).is_ok()) return;
  }
}

void MasterRole::run(const std::vector<Task>& tasks, const ResumePlan& plan) {
  TraceRecorder::Span span(ctx_.trace, "master", "triangulation",
                           {{"meta-stripes ahead", std::to_string(meta_ahead_)}});
  Walk(*this, tasks, plan).run();
  elim_i_.close_and_join();
  elim_j_.close_and_join();
}

}  // namespace stripesolve::scheduler
