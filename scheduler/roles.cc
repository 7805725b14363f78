#include "scheduler/roles.h"

#include <algorithm>
#include <string>

namespace stripesolve::scheduler {

using cache::CellState;
using cache::CellView;

ElimIRole::ElimIRole(EngineContext& ctx, const storage::StripeGeometry& g, Elimination& elimination,
                     std::vector<stripe::StripePivots>& pivots)
    : ctx_(ctx), g_(g), elimination_(elimination), pivots_(pivots), thread_([this] { run(); }) {}

ElimIRole::~ElimIRole() { close_and_join(); }

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
    const Status st = elimination_.eliminate(*i, *cell, &pivots_[static_cast<size_t>(*i)]);
    if (!st.is_ok()) {
      cache.fail(st);
      return;
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

ElimJRole::~ElimJRole() { close_and_join(); }

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
  // 002 §8.1: critical updates first, in the order of the eliminations they wait for and then of
  // J (the order elim.I needs them); the sweep's other updates after them in their order. Any pop
  // order is safe: the master queues an update of J only once J's previous update has finished.
  const int64_t stripes = g_.stripes;
  auto rank = [this, stripes](const Task& q) {
    return critical(q) ? q.i_end * stripes + q.stripe : stripes * stripes;
  };
  auto eligible = [this, worker](const Task& q) { return worker >= lookahead_ || critical(q); };
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
                       const FactorParams& params, ElimIRole& elim_i, ElimJRole& elim_j)
    : ctx_(ctx), layout_(layout), params_(params), elim_i_(elim_i), elim_j_(elim_j) {}

cache::PartRequest MasterRole::request_for(const Task& t) const {
  const storage::StripeGeometry& g = layout_.geometry();
  const int64_t col = g.row_begin(t.i_begin);
  cache::PartRequest req;
  req.stripe = t.stripe;
  req.col_begin = col;
  req.buffer_bytes = layout_.part_layout(t.stripe, col).buffer_bytes;
  req.elim_begin = t.i_begin;
  req.elim_end = t.i_end;
  if (t.kind == Task::Kind::kEliminate) {
    req.target = CellState::kWaitElimI;
    req.count = g.stripes - 1 - t.stripe;
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

void MasterRole::run(const std::vector<Task>& tasks) {
  // Updates by one range [I0, I1) are independent of each other, so inside such a group the
  // master first issues, within a small window, the ones whose part is cached and idle (hits)
  // instead of blocking on a J still busy with its previous update (at a zigzag turn the first J
  // of the new sweep is the last of the previous one).
  cache::StripeCache& cache = ctx_.cache;
  const size_t window = static_cast<size_t>(2 * params_.elim_j_workers + 2);
  TraceRecorder::Span span(ctx_.trace, "master", "triangulation");
  size_t k = 0;
  bool stop = false;
  while (k < tasks.size() && !stop) {
    size_t e = k + 1;
    while (tasks[k].kind == Task::Kind::kUpdate && e < tasks.size() &&
           tasks[e].kind == Task::Kind::kUpdate && tasks[e].i_begin == tasks[k].i_begin &&
           tasks[e].i_end == tasks[k].i_end) {
      ++e;
    }
    std::vector<Task> pending(tasks.begin() + static_cast<std::ptrdiff_t>(k),
                              tasks.begin() + static_cast<std::ptrdiff_t>(e));
    k = e;
    while (!pending.empty()) {
      if (ctx_.cancel.cancelled()) {
        cache.fail(cancelled_status());
        stop = true;
        break;
      }
      for (size_t w = 1; w < pending.size() && w < window;) {
        if (cache.try_hit(request_for(pending[w]))) {
          dispatch(pending[w]);
          pending.erase(pending.begin() + static_cast<std::ptrdiff_t>(w));
        } else {
          ++w;
        }
      }
      auto cell = cache.request(request_for(pending.front()));
      if (!cell.is_ok()) {
        cache.fail(cell.status());
        stop = true;
        break;
      }
      dispatch(pending.front());
      pending.erase(pending.begin());
    }
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
          req.buffer_bytes = layout.part_layout(p.stripe, p.col_begin).buffer_bytes;
          req.target = CellState::kStuck;
          auto cell = cache.request(req);
          if (!cell.is_ok()) {
            cache.fail(cell.status());
            return;
          }
        }
      }) {}

DsrRole::~DsrRole() { join(); }

void DsrRole::join() {
  if (thread_.joinable()) thread_.join();
}

}  // namespace stripesolve::scheduler
