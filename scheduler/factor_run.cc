#include "scheduler/factor_run.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <limits>
#include <memory>
#include <string>
#include <thread>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "base/logging.h"
#include "scheduler/roles.h"

namespace stripesolve::scheduler {

using cache::CellState;
using cache::CellView;

Status cancelled_status() {
  return Status::cancelled("dense solve cancelled");
}

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
  stripe::StripePart part{reinterpret_cast<double*>(cell.buffer + offset), g.row_begin(cell.stripe),
                          g.rows(cell.stripe), cell.i0_store, g.n};
  if (cell.i1_store < g.n) part.col_end = cell.i1_store;
  return part;
}

Monitor::Monitor(EngineContext& ctx)
    : ctx_(ctx), thread_([this] {
        MutexLock lock(mu_);
        const auto tick = std::chrono::milliseconds(20);
        while (!stop_) {
          stop_cv_.wait_for(lock, tick);
          if (ctx_.cancel.cancelled()) ctx_.cache.fail(cancelled_status());
          ctx_.progress.maybe_emit();
        }
      }) {}

Monitor::~Monitor() {
  {
    MutexLock lock(mu_);
    stop_ = true;
  }
  stop_cv_.notify_all();
  thread_.join();
}

Result<std::unique_ptr<CpuElimination>> CpuElimination::create(
    EngineContext& ctx, const storage::StripedMatrix& layout, const FactorParams& params,
    std::vector<int64_t> meta_of, TransposedUpperPass* transposed_upper) {
  const storage::StripeGeometry& g = layout.geometry();
  std::unique_ptr<CpuElimination> e(new CpuElimination(ctx, layout, params, std::move(meta_of)));
  // Sized for the widest parts (stripe 0 from column 0); outside the cache budget (elim.I's is
  // a substripe_rows / S fraction of one stripe for kRow; the CPU backend's updates need none).
  backend::WorkspaceSize eliminate, update;
  for (int64_t i = 0; i < g.stripes; ++i) {
    const stripe::StripePart probe{nullptr, g.row_begin(i), g.rows(i), g.row_begin(i), g.n};
    eliminate = stripe::larger(
        eliminate,
        stripe::eliminate_workspace_size(ctx.backend, probe, params.pivot, params.substripe_rows));
    for (int64_t j : {i + 1, g.stripes - 1}) {  // stripes differ in height only at the end
      if (j <= i) continue;
      const stripe::StripePart below{nullptr, g.row_begin(j), g.rows(j), 0, g.n};
      update = stripe::larger(update, stripe::update_workspace_size(ctx.backend, probe, below));
    }
  }
  e->stripe_max_abs_u_.assign(static_cast<size_t>(g.stripes), -1);
  if (params.critical_threads > 0) {
    e->helpers_ = std::make_unique<backend::CriticalHelpers>(static_cast<int>(
        std::min<int64_t>(params.critical_threads, std::numeric_limits<int>::max())));
  }
  STRIPESOLVE_ASSIGN_OR_RETURN(e->eliminate_workspace_,
                               stripe::HostWorkspace::allocate(eliminate, "elim.I"));
  if (transposed_upper != nullptr) {
    backend::WorkspaceSize substitution;
    for (int64_t i = 0; i < g.stripes; ++i) {
      const stripe::StripePart probe{nullptr, g.row_begin(i), g.rows(i), 0, g.n};
      substitution =
          stripe::larger(substitution, stripe::substitution_workspace_size(ctx.backend, probe, 1));
    }
    STRIPESOLVE_ASSIGN_OR_RETURN(
        e->transposed_workspace_,
        stripe::HostWorkspace::allocate(substitution, "elim.I transposed substitution"));
    e->transposed_upper_ = transposed_upper;
  }
  // As many as run_factorization's elim.J workers (scheduler/roles.h).
  const int64_t workers =
      std::max<int64_t>(1, params.elim_j_workers) + std::max<int64_t>(0, params.lookahead_workers);
  for (int64_t w = 0; w < workers; ++w) {
    STRIPESOLVE_ASSIGN_OR_RETURN(stripe::HostWorkspace ws,
                                 stripe::HostWorkspace::allocate(update, "elim.J"));
    e->update_workspaces_.push_back(std::move(ws));
  }
  return e;
}

Status CpuElimination::eliminate(int64_t i, const CellView& cell, stripe::StripePivots* pivots) {
  const backend::Workspace workspace = eliminate_workspace_.view();
  TraceRecorder::Span span(ctx_.trace, "elim.I", "eliminate", {{"stripe", std::to_string(i)}});
  const backend::CriticalScope critical(helpers_.get());  // every elimination is on the path
  const stripe::StripePart part = cell_part(layout_, cell);
  STRIPESOLVE_RETURN_IF_ERROR(stripe::eliminate_stripe(ctx_.backend, part, params_.pivot,
                                                       params_.substripe_rows, workspace, pivots));
  // Stripe I's U rows are final now and still in RAM: the growth costs one read of them.
  stripe_max_abs_u_[static_cast<size_t>(i)] = stripe::max_abs_upper(part);
  max_abs_u_ = std::max(max_abs_u_, stripe_max_abs_u_[static_cast<size_t>(i)]);
  if (transposed_upper_ != nullptr) {
    // So are the swaps the transposed solve applies with them: its first pass on them now
    // (stripes come here in order) saves reading U again after the factorization.
    TraceRecorder::Span t(ctx_.trace, "elim.I", "transposed upper",
                          {{"stripe", std::to_string(i)}});
    const auto t0 = std::chrono::steady_clock::now();
    const Status st = stripe::transposed_upper_substitute_stripe(
        ctx_.backend, part, *pivots, transposed_upper_->v, layout_.geometry().n, 1,
        transposed_workspace_.view());
    transposed_upper_->seconds +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (st.code() == StatusCode::kNumerical) {
      // An overflow is the estimate's business, not the factorization's: the vector says so
      // with a NaN, and the estimate makes its transposed solve afterwards as without it.
      transposed_upper_->v[0] = std::numeric_limits<double>::quiet_NaN();
      transposed_upper_ = nullptr;
    } else {
      STRIPESOLVE_RETURN_IF_ERROR(st);
    }
  }
  return Status::ok();
}

Status CpuElimination::update(int worker, const Task& t, const CellView& j,
                              const std::vector<CellView>& is,
                              const std::vector<stripe::StripePivots>& pivots,
                              cache::UpdatedJ* where) {
  *where = cache::UpdatedJ::kInRam;
  const std::string role = "elim.J" + std::to_string(worker);
  const stripe::StripePart pj = cell_part(layout_, j);
  // On the critical path: the update elim.I waits for next, J right after the range (on the CPU
  // tier the planner makes the whole matrix one meta-stripe when it fits, so the meta-stripe
  // rule of ElimJRole would take every update and split them all at once, 16 workers over 8
  // helpers: 10-25% slower), and with split sweeps every update of the meta-stripe eliminated
  // next. The other updates split only with split sweeps, their pieces behind the critical ones.
  const bool critical =
      t.stripe == t.i_end || (params_.split_sweeps && updates_next_meta_stripe(meta_of_, t));
  const backend::CriticalScope scope(critical || params_.split_sweeps ? helpers_.get() : nullptr,
                                     /*background=*/!critical);
  for (const CellView& ci : is) {
    TraceRecorder::Span span(ctx_.trace, role, "update",
                             {{"J", std::to_string(t.stripe)}, {"I", std::to_string(ci.stripe)}});
    STRIPESOLVE_RETURN_IF_ERROR(stripe::update_stripe(
        ctx_.backend, cell_part(layout_, ci), pivots[static_cast<size_t>(ci.stripe)], pj,
        update_workspaces_.at(static_cast<size_t>(worker)).view()));
  }
  return Status::ok();
}

Result<std::vector<stripe::StripePivots>> run_factorization(
    EngineContext& ctx, const storage::StripedMatrix& layout, const FactorParams& params,
    Elimination* elimination, double* max_abs_u, const FactorResume& resume,
    TransposedUpperPass* transposed_upper) {
  const storage::StripeGeometry& g = layout.geometry();
  if (transposed_upper != nullptr && (elimination != nullptr || resume.point != nullptr)) {
    return Status::invalid_argument(
        "the transposed solve's first pass during the factorization needs the CPU elimination "
        "of every stripe (no GPU tier, no resumed run)");
  }
  const int64_t stripes = g.stripes;
  const std::vector<Task> tasks = make_tasks(params.strategy, stripes, params.meta_stripes,
                                             params.upward_lead, params.early_next);
  // Each stripe's meta-stripe, computed once: the master, elim.J and the CPU elimination read
  // the critical path and the meta-stripes' bounds from it.
  const std::vector<int64_t> meta_of =
      meta_stripe_of(params.strategy, stripes, params.meta_stripes);
  std::vector<stripe::StripePivots> pivots(static_cast<size_t>(stripes));
  std::vector<int64_t> steps;
  double resumed_max_abs_u = 0;
  if (resume.point != nullptr) {
    for (int64_t s = 0; s < stripes; ++s) {
      const DurableStripe& d = resume.point->stripes[static_cast<size_t>(s)];
      steps.push_back(d.step);
      if (!d.final(s)) continue;
      pivots[static_cast<size_t>(s)] = d.pivots;
      resumed_max_abs_u =
          d.max_abs_u < 0 || resumed_max_abs_u < 0 ? -1 : std::max(resumed_max_abs_u, d.max_abs_u);
    }
  }
  const ResumePlan plan = plan_resume(tasks, stripes, steps);
  ResumeStats skipped;
  for (size_t k = 0; k < tasks.size(); ++k) {
    // Durable work counts as done in the progress (the bar starts where it was).
    const Task& t = tasks[k];
    const bool durable_elimination =
        plan.skip[k] || plan.loaded_final[static_cast<size_t>(t.stripe)];
    if (t.kind == Task::Kind::kEliminate && durable_elimination) {
      ctx.progress.add_flops(elimination_flops(g, t.stripe));
      ctx.progress.add_stripe();
      ++skipped.eliminations;
    } else if (t.kind == Task::Kind::kUpdate && plan.skip[k]) {
      for (int64_t i = t.i_begin; i < t.i_end; ++i) {
        ctx.progress.add_flops(update_flops(g, t.stripe, i));
      }
      skipped.updates += t.i_end - t.i_begin;
    }
  }
  if (resume.skipped != nullptr) *resume.skipped = skipped;
  if (resume.point != nullptr) {
    static const auto log = logger("scheduler");
    log->info(
        "resuming the factorization into '{}': {} of {} stripes final, {} of {} tasks skipped, "
        "{} stripes loaded final, stripes restarted from the matrix: [{}]",
        layout.info().name, resume.point->final_stripes(), stripes, plan.skipped, tasks.size(),
        std::count(plan.loaded_final.begin(), plan.loaded_final.end(), true),
        fmt::join(resume.point->restarted, ","));
  }
  cache::StripeCache& cache = ctx.cache;
  std::unique_ptr<CpuElimination> cpu;
  if (elimination == nullptr) {
    STRIPESOLVE_ASSIGN_OR_RETURN(
        cpu, CpuElimination::create(ctx, layout, params, meta_of, transposed_upper));
    elimination = cpu.get();
  }

  STRIPESOLVE_RETURN_IF_ERROR(elimination->begin(plan));
  Monitor monitor(ctx);
  {
    ElimIRole elim_i(ctx, g, *elimination, pivots, plan.loaded_final, resume.progress);
    ElimJRole elim_j(ctx, g, params, meta_of, *elimination, pivots);
    MasterRole(ctx, layout, params, meta_of, elim_i, elim_j, *elimination).run(tasks, plan);
  }
  STRIPESOLVE_RETURN_IF_ERROR(cache.failure());
  if (params.write_back) {
    // Dirty parts go to the factor object but stay cached (clean) for the substitution.
    TraceRecorder::Span span(ctx.trace, "master", "write_back");
    STRIPESOLVE_RETURN_IF_ERROR(cache.write_back());
  }
  if (ctx.cancel.cancelled()) return cancelled_status();
  if (max_abs_u != nullptr) {
    // A max is exact in any order: the same growth as an uninterrupted run.
    const double m = elimination->max_abs_u();
    *max_abs_u = m < 0 || resumed_max_abs_u < 0 ? -1 : std::max(m, resumed_max_abs_u);
  }
  return pivots;
}

}  // namespace stripesolve::scheduler
