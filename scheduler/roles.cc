#include "scheduler/roles.h"

#include <algorithm>
#include <string>

#include "base/internal_error.h"
#include "cache/arena.h"

namespace stripesolve::scheduler {

using cache::CellState;
using cache::CellView;

ElimIRole::ElimIRole(EngineContext& ctx, const storage::StripeGeometry& g, Elimination& elimination,
                     std::vector<stripe::StripePivots>& pivots,
                     const std::vector<bool>& loaded_final, FactorProgress* progress)
    : ctx_(ctx),
      g_(g),
      elimination_(elimination),
      pivots_(pivots),
      loaded_final_(loaded_final),
      progress_(progress),
      thread_([this] { run(); }) {}

ElimIRole::~ElimIRole() {
  close_and_join();
}

bool whole_parts_fit(const storage::StripedMatrix& layout, uint64_t cache_bytes) {
  uint64_t whole = 0;
  for (int64_t i = 0; i < layout.geometry().stripes; ++i) {
    whole += cache::Arena::round_up(layout.part_layout(i, 0).buffer_bytes);
  }
  return whole <= cache_bytes;
}

void ElimIRole::close_and_join() {
  queue_.close();
  if (thread_.joinable()) thread_.join();
}

void ElimIRole::run() {
  cache::StripeCache& cache = ctx_.cache;
  while (auto i = queue_.pop()) {
    if (ctx_.cancel.cancelled()) cache.fail(cancelled_status());
    auto cell = cache.wait_for(*i, CellState::kWaitElimI);
    if (!cell.is_ok()) return;
    cache.transition(*i, CellState::kElimI);
    if (loaded_final_[static_cast<size_t>(*i)]) {
      // Final in the factor object; its pivots and progress were set before the run.
      const Status st = elimination_.load_final(*i, *cell, pivots_[static_cast<size_t>(*i)]);
      if (!st.is_ok()) {
        cache.fail(st);
        return;
      }
      cache.finish_elim_i(*i, /*modified=*/false);
      continue;
    }
    const Status st = elimination_.eliminate(*i, *cell, &pivots_[static_cast<size_t>(*i)]);
    if (!st.is_ok()) {
      cache.fail(st);
      return;
    }
    if (progress_ != nullptr) {
      progress_->note_eliminated(*i, pivots_[static_cast<size_t>(*i)],
                                 elimination_.stripe_max_abs_u(*i));
    }
    ctx_.progress.add_flops(elimination_flops(g_, *i));
    ctx_.progress.add_stripe();
    cache.finish_elim_i(*i);
  }
}

ElimJRole::ElimJRole(EngineContext& ctx, const storage::StripeGeometry& g,
                     const FactorParams& params, Elimination& elimination,
                     const std::vector<stripe::StripePivots>& pivots)
    : ctx_(ctx),
      g_(g),
      elimination_(elimination),
      pivots_(pivots),
      meta_of_(meta_stripe_of(params.strategy, g.stripes, params.meta_stripes)),
      lookahead_(std::max<int64_t>(0, params.lookahead_workers)) {
  const int64_t workers = std::max<int64_t>(1, params.elim_j_workers) + lookahead_;
  for (int64_t w = 0; w < workers; ++w) threads_.emplace_back([this, w] { run(w); });
}

ElimJRole::~ElimJRole() {
  close_and_join();
}

void ElimJRole::close_and_join() {
  queue_.close();
  for (auto& t : threads_) {
    if (t.joinable()) t.join();
  }
}

bool ElimJRole::critical(const Task& t) const {
  return meta_of_[static_cast<size_t>(t.stripe)] == meta_of_[static_cast<size_t>(t.i_end)];
}

void ElimJRole::run(int64_t worker) {
  // 002 §8.1: critical updates first, by J and then by the eliminations they follow: elim.I
  // factors J only after all of J's updates, so every update of the next stripe goes before any
  // of a later one (ranking by i_end first put the previous meta-stripe's updates of every later
  // stripe before the next stripe's update by its neighbour). The sweep's other updates after
  // them in their order. Any pop order is safe: the master queues an update of J only once J's
  // previous update has finished.
  //
  // With look-ahead lanes (the GPU tier), the sweep lanes take critical updates only when no
  // sweep update is queued for them: between sweeps and at the end of the factorization, the
  // updates of the next meta-stripe by the whole previous one would otherwise queue for the one
  // look-ahead lane of their device while the sweep lanes idle (about 0.25 s of a 3 s
  // factorization at n = 57344 on one H200).
  const int64_t stripes = g_.stripes;
  const int64_t last_of_sweep = stripes * stripes;
  auto left_to_lookahead = [this](const Task& q) {
    for (int64_t w = 0; w < lookahead_; ++w) {
      if (elimination_.accepts(w, q)) return true;
    }
    return false;
  };
  const bool lookahead = worker < lookahead_;
  auto rank = [&](const Task& q) {
    if (!critical(q)) return last_of_sweep;
    const int64_t by_j = q.stripe * stripes + q.i_end;
    return !lookahead && left_to_lookahead(q) ? last_of_sweep + 1 + by_j : by_j;
  };
  auto eligible = [&](const Task& q) {
    return elimination_.accepts(worker, q) && (!lookahead || critical(q));
  };
  cache::StripeCache& cache = ctx_.cache;
  while (auto t = queue_.pop(eligible, rank)) {
    if (ctx_.cancel.cancelled()) cache.fail(cancelled_status());
    auto cj = cache.wait_for(t->stripe, CellState::kWaitElimJ);
    if (!cj.is_ok()) return;
    std::vector<CellView> cis;
    for (int64_t i = t->i_begin; i < t->i_end; ++i) {
      auto ci = cache.wait_for(i, CellState::kStuck);  // eliminated, held for us
      if (!ci.is_ok()) return;
      cis.push_back(*ci);
    }
    cache.transition(t->stripe, CellState::kElimJ);
    bool on_device = false;
    const Status st =
        elimination_.update(static_cast<int>(worker), *t, *cj, cis, pivots_, &on_device);
    if (!st.is_ok()) {
      cache.fail(st);
      return;
    }
    for (const CellView& ci : cis) ctx_.progress.add_flops(update_flops(g_, t->stripe, ci.stripe));
    cache.finish_elim_j(t->stripe, t->i_begin, t->i_end, on_device);
  }
}

MasterRole::MasterRole(EngineContext& ctx, const storage::StripedMatrix& layout,
                       const FactorParams& params, ElimIRole& elim_i, ElimJRole& elim_j,
                       bool overlap_sweeps, bool early_eliminations)
    : ctx_(ctx),
      layout_(layout),
      params_(params),
      elim_i_(elim_i),
      elim_j_(elim_j),
      overlap_sweeps_(overlap_sweeps),
      early_eliminations_(early_eliminations) {
  const int64_t stripes = layout.geometry().stripes;
  const std::vector<int64_t> meta = meta_stripe_of(params.strategy, stripes, params.meta_stripes);
  meta_first_.resize(static_cast<size_t>(stripes));
  for (int64_t s = 0; s < stripes; ++s) {
    const size_t k = static_cast<size_t>(s);
    meta_first_[k] = s > 0 && meta[k - 1] == meta[k] ? meta_first_[k - 1] : s;
  }
}

cache::PartRequest MasterRole::request_for(const Task& t, const ResumePlan& plan) const {
  const storage::StripeGeometry& g = layout_.geometry();
  int64_t col = g.row_begin(t.i_begin);
  if (params_.parts_from_meta_start) {
    col = std::min(col, g.row_begin(meta_first_[static_cast<size_t>(t.stripe)]));
  }
  cache::PartRequest req;
  req.stripe = t.stripe;
  req.col_begin = col;
  req.buffer_bytes = layout_.part_layout(t.stripe, col).buffer_bytes;
  req.elim_begin = t.i_begin;
  req.elim_end = t.i_end;
  if (t.kind == Task::Kind::kEliminate) {
    req.target = CellState::kWaitElimI;
    req.count = plan.uses[static_cast<size_t>(t.stripe)];
  } else {
    req.target = CellState::kWaitElimJ;
  }
  return req;
}

void MasterRole::dispatch(const Task& t) {
  if (t.kind == Task::Kind::kEliminate) {
    elim_i_.push(t.stripe);
  } else {
    elim_j_.push(t);
  }
}

void MasterRole::run(const std::vector<Task>& tasks, const ResumePlan& plan) {
  // 002 §8.1, no global barrier: the master hands out every task whose part is cached and free
  // as soon as its stripe's earlier tasks and the eliminations it reads have been handed out, up
  // to a window ahead of the first task not yet handed out (the front), and the next elimination
  // wherever it is. So elim.I can start the
  // next meta-stripe while the J stripes at the far end of the sweep still wait for their
  // previous update. A task is handed out only after all it depends on, so whatever has been
  // handed out can finish without the master. When nothing can go without waiting the master
  // downloads the front's part (a miss) or waits for the next change of any cell.
  // Two gates bound the working set (RAM cells, the GPU tier's U blocks) as the in-order walk
  // did: elim.I runs at most one meta-stripe ahead of the sweeps (a stripe of meta-stripe m is
  // eliminated once every update by meta-stripe m - 2 has finished, i.e. its last stripe has
  // left kStuck), and, unless the elimination says they may overlap, a sweep by a range of
  // several stripes starts once the previous one has finished. The workers take the critical
  // updates first (ElimJRole), so the next meta-stripe's updates then run beside the end of
  // the previous sweep.
  cache::StripeCache& cache = ctx_.cache;
  const storage::StripeGeometry& g = layout_.geometry();
  const size_t window = static_cast<size_t>(g.stripes + 2 * params_.elim_j_workers + 2);
  TraceRecorder::Span span(ctx_.trace, "master", "triangulation");
  const std::vector<int64_t> meta_of =
      meta_stripe_of(params_.strategy, g.stripes, params_.meta_stripes);
  std::vector<int64_t> meta_last(static_cast<size_t>(meta_of.back() + 1), 0);
  for (int64_t i = 0; i < g.stripes; ++i)
    meta_last[static_cast<size_t>(meta_of[static_cast<size_t>(i)])] = i;
  // A resumed run's skipped tasks count as handed out (and their eliminations as done).
  std::vector<bool> handed_out = plan.skip;
  std::vector<bool> eliminated(static_cast<size_t>(g.stripes), false);  // E handed out
  for (size_t k = 0; k < tasks.size(); ++k) {
    if (plan.skip[k] && tasks[k].kind == Task::Kind::kEliminate) {
      eliminated[static_cast<size_t>(tasks[k].stripe)] = true;
    }
  }
  std::vector<bool> swept(meta_last.size(), false);  // every update by the meta-stripe finished
  std::vector<bool> waits(static_cast<size_t>(g.stripes), false);  // scratch per scan
  // The eliminations in list order, and each stripe's tasks not handed out yet: an elimination is
  // its stripe's last task, so it may go once it is the only one left (below, past the window).
  std::vector<size_t> elim_at;
  std::vector<int64_t> left(static_cast<size_t>(g.stripes), 0);
  for (size_t k = 0; k < tasks.size(); ++k) {
    if (tasks[k].kind == Task::Kind::kEliminate) elim_at.push_back(k);
    if (!handed_out[k]) ++left[static_cast<size_t>(tasks[k].stripe)];
  }
  size_t next_elim = 0;
  const bool all_fit = whole_parts_fit(layout_, cache.stats().budget);
  auto hand_out = [&](size_t k) {
    STRIPESOLVE_CHECK(!handed_out[k], "master: " + to_string(tasks[k]) + " handed out twice");
    dispatch(tasks[k]);
    handed_out[k] = true;
    --left[static_cast<size_t>(tasks[k].stripe)];
    if (tasks[k].kind == Task::Kind::kEliminate)
      eliminated[static_cast<size_t>(tasks[k].stripe)] = true;
  };
  auto swept_by = [&](int64_t m) -> bool {
    if (m < 0 || swept[static_cast<size_t>(m)]) return true;
    const int64_t last = meta_last[static_cast<size_t>(m)];
    if (!eliminated[static_cast<size_t>(last)]) return false;
    const cache::CellState st = cache.state_of(last);
    swept[static_cast<size_t>(m)] =
        st == cache::CellState::kIdle || st == cache::CellState::kAbsent ||
        st == cache::CellState::kWaitUpload || st == cache::CellState::kUploading;
    return swept[static_cast<size_t>(m)];
  };
  auto reads_ready = [&](const Task& t) -> bool {
    if (t.kind == Task::Kind::kEliminate)
      return swept_by(meta_of[static_cast<size_t>(t.stripe)] - 2);
    for (int64_t i = t.i_begin; i < t.i_end; ++i) {
      if (!eliminated[static_cast<size_t>(i)]) return false;
    }
    // Unless they may overlap, one sweep by a range of several stripes at a time.
    return overlap_sweeps_ || t.i_end - t.i_begin == 1 ||
           swept_by(meta_of[static_cast<size_t>(t.i_begin)] - 1);
  };
  // The next elimination, before its turn in the list: once its stripe has no other task left
  // and what it reads is ready. An elimination pins its stripe (kStuck) until its updates, so it
  // goes only when nothing is ever evicted, or when the cache would still find room for
  // `needed` bytes (the front's part) beside it: in a small cache the front's miss may need
  // exactly that stripe's memory (a cache of two stripes evicts J between its last update and
  // its elimination; eliminating it at once left no part to evict).
  // The list position of the first elimination not handed out yet (tasks.size(): none left).
  auto next_elimination = [&]() -> size_t {
    while (next_elim < elim_at.size() && handed_out[elim_at[next_elim]]) ++next_elim;
    return next_elim < elim_at.size() ? elim_at[next_elim] : tasks.size();
  };
  // The stripes from the next elimination's to the end of its meta-stripe.
  auto spared_chain = [&]() -> cache::StripeRange {
    const size_t e = next_elimination();
    if (e == tasks.size()) return {};
    const int64_t i = tasks[e].stripe;
    return {i, meta_last[static_cast<size_t>(meta_of[static_cast<size_t>(i)])] + 1};
  };
  auto hand_out_elimination = [&](uint64_t needed) -> bool {
    const size_t k = next_elimination();
    if (k == tasks.size()) return false;
    const Task& e = tasks[k];
    if (left[static_cast<size_t>(e.stripe)] != 1 || !reads_ready(e)) return false;
    if (!all_fit && !(early_eliminations_ && cache.fits_beside(needed, e.stripe))) return false;
    if (!cache.try_hit(request_for(e, plan))) return false;
    hand_out(k);
    return true;
  };
  // The front's miss. Waiting for memory (for in-flight updates to finish, for write-backs),
  // the master hands out nothing else but the next elimination, whose stripe would otherwise
  // be the first victim once its last update leaves it idle, to be read again for the
  // elimination after the sweep (n = 16384 on 16 cores, a quarter cached: each elimination
  // started 180 ms after its last update on average). Other hits would take the memory the
  // miss waits for. False once the cache failed (recorded there).
  auto request_miss = [&](size_t k) -> bool {
    const cache::PartRequest req = request_for(tasks[k], plan);
    if (!early_eliminations_) {
      auto cell = cache.request(req);
      if (!cell.is_ok()) cache.fail(cell.status());
      return cell.is_ok();
    }
    for (;;) {
      if (ctx_.cancel.cancelled()) cache.fail(cancelled_status());
      const uint64_t seen = cache.changes();
      // Not the miss itself: an elimination whose part turned idle meanwhile is this request's
      // hit, and handed out here too it would run twice.
      if (tasks[k].kind != Task::Kind::kEliminate) hand_out_elimination(req.buffer_bytes);
      // The next elimination's stripe is evicted last (it may turn idle right after the check),
      // and so are the later stripes of its meta-stripe: their updates inside the meta-stripe
      // come next, and evicted after their update by the sweep they waited for the sweep to end
      // (n = 16384 on 16 cores, a quarter cached: the third stripe of a meta-stripe eliminated
      // 3 s after the first two, the next sweep waiting for it).
      auto cell = cache.try_request(req, spared_chain());
      if (!cell.is_ok()) {
        cache.fail(cell.status());
        return false;
      }
      if (*cell) return true;
      if (!cache.wait_change(seen).is_ok()) return false;
    }
  };
  size_t front = 0;
  while (front < tasks.size()) {
    if (ctx_.cancel.cancelled()) {
      cache.fail(cancelled_status());
      break;
    }
    const uint64_t seen = cache.changes();
    bool progressed = false;
    std::fill(waits.begin(), waits.end(), false);
    for (size_t k = front; k < tasks.size() && k < front + window; ++k) {
      if (handed_out[k]) continue;
      const Task& t = tasks[k];
      const size_t s = static_cast<size_t>(t.stripe);
      if (waits[s]) continue;  // an earlier task of this stripe goes first
      waits[s] = true;
      if (reads_ready(t) && cache.try_hit(request_for(t, plan))) {
        hand_out(k);
        progressed = true;
      }
    }
    while (front < tasks.size() && handed_out[front]) ++front;
    // The next elimination past the window: on the CPU tier the whole matrix is one meta-stripe
    // when it fits, and the last stripes' updates, one I at a time, hold the front back by more
    // than the window (n = 16384 on 16 cores: E11 waited 223 ms after its last update for the
    // front to move, the chain's lag 47 ms on average).
    const size_t e = next_elimination();
    if (front < tasks.size() && e < tasks.size() && e >= front + window &&
        hand_out_elimination(request_for(tasks[front], plan).buffer_bytes)) {
      progressed = true;
    }
    if (progressed || front == tasks.size()) continue;
    const Task& t = tasks[front];
    const cache::CellState state = cache.state_of(t.stripe);
    if (reads_ready(t) &&
        (state == cache::CellState::kAbsent || state == cache::CellState::kIdle)) {
      // A miss (or a part cached from a later column than needed): the cache downloads it,
      // waiting for memory.
      if (!request_miss(front)) break;
      hand_out(front);
      continue;
    }
    // The front's part is busy with its previous task (or on its way in), or its elimination
    // waits for the sweeps: wait for any change.
    if (!cache.wait_change(seen).is_ok()) break;
  }
  elim_i_.close_and_join();
  elim_j_.close_and_join();
}

DsrRole::DsrRole(cache::StripeCache& cache, const storage::StripedMatrix& layout,
                 const std::vector<PartOrder>& order)
    : thread_([&cache, &layout, &order] {
        for (const PartOrder& p : order) {
          cache::PartRequest req;
          req.stripe = p.stripe;
          req.col_begin = p.col_begin;
          req.col_end = p.col_end < layout.geometry().n ? p.col_end : cache::kThroughN;
          req.buffer_bytes = layout.part_layout(p.stripe, p.col_begin, p.col_end).buffer_bytes;
          req.target = CellState::kStuck;
          auto cell = cache.request(req);
          if (!cell.is_ok()) {
            cache.fail(cell.status());
            return;
          }
        }
      }) {}

DsrRole::~DsrRole() {
  join();
}

void DsrRole::join() {
  if (thread_.joinable()) thread_.join();
}

}  // namespace stripesolve::scheduler
