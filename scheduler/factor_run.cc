#include "scheduler/factor_run.h"

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>

#include "base/logging.h"
#include "scheduler/work_queue.h"

namespace stripesolve::scheduler {

using cache::CellState;
using cache::CellView;

namespace {

Status cancelled_status() { return Status::cancelled("dense solve cancelled"); }


}  // namespace

double elimination_flops(const storage::StripeGeometry& g, int64_t i) {
  const double h = static_cast<double>(g.rows(i));
  const double m = static_cast<double>(g.n - g.row_begin(i));
  return h * h * m - h * h * h / 3.0;
}

double update_flops(const storage::StripeGeometry& g, int64_t j, int64_t i) {
  const double hj = static_cast<double>(g.rows(j));
  const double hi = static_cast<double>(g.rows(i));
  return hj * hi * hi + 2.0 * hj * hi * static_cast<double>(g.n - g.row_end(i));
}

double factorization_flops(const storage::StripeGeometry& g) {
  double total = 0;
  for (int64_t i = 0; i < g.stripes; ++i) {
    total += elimination_flops(g, i);
    for (int64_t j = i + 1; j < g.stripes; ++j) total += update_flops(g, j, i);
  }
  return total;
}

stripe::StripePart cell_part(const storage::StripedMatrix& layout, const CellView& cell) {
  const storage::StripeGeometry& g = layout.geometry();
  const uint64_t offset = layout.part_layout(cell.stripe, cell.i0_store).data_offset;
  return stripe::StripePart{reinterpret_cast<double*>(cell.buffer + offset),
                            g.row_begin(cell.stripe), g.rows(cell.stripe), cell.i0_store, g.n};
}

Monitor::Monitor(EngineContext& ctx)
    : ctx_(ctx), thread_([this] {
        std::unique_lock<std::mutex> lock(mu_);
        const auto tick = std::chrono::milliseconds(20);
        while (!stop_) {
          stop_cv_.wait_for(lock, tick);
          if (ctx_.cancel.cancelled()) ctx_.cache.fail(cancelled_status());
          ctx_.progress.maybe_emit();
        }
      }) {}

Monitor::~Monitor() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  stop_cv_.notify_all();
  thread_.join();
}

Result<std::unique_ptr<CpuElimination>> CpuElimination::create(
    EngineContext& ctx, const storage::StripedMatrix& layout, const FactorParams& params) {
  const storage::StripeGeometry& g = layout.geometry();
  std::unique_ptr<CpuElimination> e(new CpuElimination(ctx, layout, params));
  // elim.I's workspace, sized for the widest stripe (stripe 0 from column 0); outside the cache
  // budget (a substripe_rows / S fraction of one stripe for kRow).
  backend::WorkspaceSize need;
  for (int64_t i = 0; i < g.stripes; ++i) {
    stripe::StripePart probe{nullptr, g.row_begin(i), g.rows(i), g.row_begin(i), g.n};
    const auto s = stripe::eliminate_workspace_size(ctx.backend, probe, params.pivot,
                                                    params.substripe_rows);
    need.host_bytes = std::max(need.host_bytes, s.host_bytes);
  }
  e->workspace_bytes_ = (need.host_bytes + 63) / 64 * 64;
  if (e->workspace_bytes_ > 0) {
    e->workspace_ = static_cast<std::byte*>(std::aligned_alloc(64, e->workspace_bytes_));
    if (e->workspace_ == nullptr) {
      return Status::resource_exhausted("elim.I workspace of " +
                                        std::to_string(e->workspace_bytes_) + " bytes");
    }
  }
  return e;
}

CpuElimination::~CpuElimination() { std::free(workspace_); }

Status CpuElimination::eliminate(int64_t i, const CellView& cell, stripe::StripePivots* pivots) {
  const backend::Workspace workspace{workspace_, workspace_bytes_, nullptr, 0};
  TraceRecorder::Span span(ctx_.trace, "elim.I", "eliminate", {{"stripe", std::to_string(i)}});
  return stripe::eliminate_stripe(ctx_.backend, cell_part(layout_, cell), params_.pivot,
                                  params_.substripe_rows, workspace, pivots);
}

Status CpuElimination::update(int worker, const Task& t, const CellView& j,
                              const std::vector<CellView>& is,
                              const std::vector<stripe::StripePivots>& pivots,
                              bool* keep_on_device) {
  *keep_on_device = false;
  const std::string role = "elim.J" + std::to_string(worker);
  const stripe::StripePart pj = cell_part(layout_, j);
  for (const CellView& ci : is) {
    TraceRecorder::Span span(ctx_.trace, role, "update",
                             {{"J", std::to_string(t.stripe)}, {"I", std::to_string(ci.stripe)}});
    STRIPESOLVE_RETURN_IF_ERROR(stripe::update_stripe(
        ctx_.backend, cell_part(layout_, ci), pivots[static_cast<size_t>(ci.stripe)], pj));
  }
  return Status::ok();
}

Result<std::vector<stripe::StripePivots>> run_factorization(EngineContext& ctx,
                                                            const storage::StripedMatrix& layout,
                                                            const FactorParams& params,
                                                            Elimination* elimination) {
  const storage::StripeGeometry& g = layout.geometry();
  const int64_t stripes = g.stripes;
  const std::vector<Task> tasks = make_tasks(params.strategy, stripes, params.meta_stripes);
  std::vector<stripe::StripePivots> pivots(static_cast<size_t>(stripes));
  cache::StripeCache& cache = ctx.cache;
  std::unique_ptr<CpuElimination> cpu;
  if (elimination == nullptr) {
    STRIPESOLVE_ASSIGN_OR_RETURN(cpu, CpuElimination::create(ctx, layout, params));
    elimination = cpu.get();
  }

  WorkQueue<int64_t> i_queue;
  WorkQueue<Task> j_queue;
  Monitor monitor(ctx);

  std::thread elim_i([&] {
    while (auto i = i_queue.pop()) {
      if (ctx.cancel.cancelled()) cache.fail(cancelled_status());
      auto cell = cache.wait_for(*i, CellState::kWaitElimI);
      if (!cell.is_ok()) return;
      cache.transition(*i, CellState::kElimI);
      const Status st = elimination->eliminate(*i, *cell, &pivots[static_cast<size_t>(*i)]);
      if (!st.is_ok()) {
        cache.fail(st);
        return;
      }
      ctx.progress.add_flops(elimination_flops(g, *i));
      ctx.progress.add_stripe();
      cache.finish_elim_i(*i);
    }
  });

  std::vector<std::thread> elim_j;
  // 002 §8.1: an update of a J in the meta-stripe eliminated next is on the critical path (elim.I
  // waits for it); those go first, in the order of the eliminations they wait for and then of J
  // (the order elim.I needs them), the sweep's other updates after them in their order. Any pop
  // order is safe: the master queues an update of J only once J's previous update has finished.
  const std::vector<int64_t> meta_of = meta_stripe_of(params.strategy, stripes, params.meta_stripes);
  auto critical = [&meta_of](const Task& q) {
    return meta_of[static_cast<size_t>(q.stripe)] == meta_of[static_cast<size_t>(q.i_end)];
  };
  auto rank = [&critical, stripes](const Task& q) {
    return critical(q) ? q.i_end * stripes + q.stripe : stripes * stripes;
  };
  const int64_t lookahead = std::max<int64_t>(0, params.lookahead_workers);
  for (int64_t w = 0; w < std::max<int64_t>(1, params.elim_j_workers) + lookahead; ++w) {
    elim_j.emplace_back([&, w] {
      auto eligible = [&critical, w, lookahead](const Task& q) {
        return w >= lookahead || critical(q);
      };
      while (auto t = j_queue.pop(eligible, rank)) {
        if (ctx.cancel.cancelled()) cache.fail(cancelled_status());
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
        const Status st = elimination->update(static_cast<int>(w), *t, *cj, cis, pivots, &on_device);
        if (!st.is_ok()) {
          cache.fail(st);
          return;
        }
        for (const CellView& ci : cis) {
          ctx.progress.add_flops(update_flops(g, t->stripe, ci.stripe));
        }
        cache.finish_elim_j(t->stripe, t->i_begin, t->i_end, on_device);
      }
    });
  }

  // Master (002 Fig 20 walked in order). Updates by one range [I0, I1) are independent of each
  // other, so inside such a group the master first issues, within a small window, the ones whose
  // part is cached and idle (hits) instead of blocking on a J still busy with its previous update
  // (at a zigzag turn the first J of the new sweep is the last of the previous one).
  auto make_request = [&](const Task& t) {
    const int64_t col = g.row_begin(t.i_begin);
    cache::PartRequest req;
    req.stripe = t.stripe;
    req.col_begin = col;
    req.buffer_bytes = layout.part_layout(t.stripe, col).buffer_bytes;
    req.elim_begin = t.i_begin;
    req.elim_end = t.i_end;
    if (t.kind == Task::Kind::kEliminate) {
      req.target = CellState::kWaitElimI;
      req.count = stripes - 1 - t.stripe;
    } else {
      req.target = CellState::kWaitElimJ;
    }
    return req;
  };
  auto dispatch = [&](const Task& t) {
    if (t.kind == Task::Kind::kEliminate) {
      i_queue.push(t.stripe);
    } else {
      j_queue.push(t);
    }
  };
  const size_t window = static_cast<size_t>(2 * params.elim_j_workers + 2);
  {
    TraceRecorder::Span span(ctx.trace, "master", "triangulation");
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
        if (ctx.cancel.cancelled()) {
          cache.fail(cancelled_status());
          stop = true;
          break;
        }
        for (size_t w = 1; w < pending.size() && w < window;) {
          if (cache.try_hit(make_request(pending[w]))) {
            dispatch(pending[w]);
            pending.erase(pending.begin() + static_cast<std::ptrdiff_t>(w));
          } else {
            ++w;
          }
        }
        auto cell = cache.request(make_request(pending.front()));
        if (!cell.is_ok()) {
          cache.fail(cell.status());
          stop = true;
          break;
        }
        dispatch(pending.front());
        pending.erase(pending.begin());
      }
    }
    i_queue.close();
    j_queue.close();
    elim_i.join();
    for (auto& th : elim_j) th.join();
  }
  STRIPESOLVE_RETURN_IF_ERROR(cache.failure());
  if (params.write_back) {
    // Dirty parts go to the factor object but stay cached (clean) for the substitution.
    TraceRecorder::Span span(ctx.trace, "master", "write_back");
    STRIPESOLVE_RETURN_IF_ERROR(cache.write_back());
  }
  if (ctx.cancel.cancelled()) return cancelled_status();
  return pivots;
}

}  // namespace stripesolve::scheduler
