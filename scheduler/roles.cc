#include "scheduler/roles.h"

#include <algorithm>
#include <string>

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
    if (elimination_.final_on_device_only()) {
      cache.finish_elim_i_on_device(*i);
    } else {
      cache.finish_elim_i(*i);
    }
  }
}

ElimJRole::ElimJRole(EngineContext& ctx, const storage::StripeGeometry& g,
                     const FactorParams& params, const std::vector<int64_t>& meta_of,
                     Elimination& elimination, const std::vector<stripe::StripePivots>& pivots)
    : ctx_(ctx),
      g_(g),
      elimination_(elimination),
      pivots_(pivots),
      meta_of_(meta_of),
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
  return updates_next_meta_stripe(meta_of_, t);
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
    cache::UpdatedJ where = cache::UpdatedJ::kInRam;
    const Status st = elimination_.update(static_cast<int>(worker), *t, *cj, cis, pivots_, &where);
    if (!st.is_ok()) {
      cache.fail(st);
      return;
    }
    for (const CellView& ci : cis) ctx_.progress.add_flops(update_flops(g_, t->stripe, ci.stripe));
    cache.finish_elim_j(t->stripe, t->i_begin, t->i_end, where);
  }
}

MasterRole::MasterRole(EngineContext& ctx, const storage::StripedMatrix& layout,
                       const FactorParams& params, const std::vector<int64_t>& meta_of,
                       ElimIRole& elim_i, ElimJRole& elim_j, const Elimination& elimination)
    : ctx_(ctx),
      layout_(layout),
      params_(params),
      meta_of_(meta_of),
      elim_i_(elim_i),
      elim_j_(elim_j),
      overlap_sweeps_(elimination.sweeps_may_overlap()),
      early_eliminations_(!elimination.keeps_parts_on_device()),
      meta_ahead_(std::max<int64_t>(1, elimination.meta_stripes_ahead())),
      final_on_device_(elimination.final_on_device_only()) {
  const int64_t stripes = layout.geometry().stripes;
  meta_first_.resize(static_cast<size_t>(stripes));
  for (int64_t s = 0; s < stripes; ++s) {
    const size_t k = static_cast<size_t>(s);
    meta_first_[k] = s > 0 && meta_of_[k - 1] == meta_of_[k] ? meta_first_[k - 1] : s;
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
    req.final_on_device = final_on_device_;
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
