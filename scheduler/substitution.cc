#include "scheduler/substitution.h"

#include <algorithm>
#include <cmath>

namespace stripesolve::scheduler {

using cache::CellState;

namespace {

// The workspace of a pass's substitutions with nrhs columns, for its largest stripe.
Result<stripe::HostWorkspace> substitution_workspace(EngineContext& ctx,
                                                     const storage::StripeGeometry& g, int64_t nrhs,
                                                     const std::string& what) {
  backend::WorkspaceSize need;
  for (int64_t i = 0; i < g.stripes; ++i) {
    const stripe::StripePart probe{nullptr, g.row_begin(i), g.rows(i), 0, g.n};
    need = stripe::larger(need, stripe::substitution_workspace_size(ctx.backend, probe, nrhs));
  }
  return stripe::HostWorkspace::allocate(need, what);
}

// The first stripe holding a nonzero row of the n x nrhs block `rhs` (g.stripes when none): the
// forward pass's z is zero above it (a unit vector's solve, the condition estimate's).
int64_t first_nonzero_stripe(const storage::StripeGeometry& g, const double* rhs, int64_t nrhs) {
  int64_t first = g.n;
  for (int64_t k = 0; k < nrhs; ++k) {
    const double* column = rhs + k * g.n;
    const double* nonzero = std::find_if(column, column + first, [](double v) { return v != 0.0; });
    first = nonzero - column;
  }
  int64_t i = 0;
  while (i < g.stripes && g.row_end(i) <= first) ++i;
  return i;
}

// One pass of a transposed solve: n^2 flops a column.
double transposed_pass_flops(const storage::StripeGeometry& g, int64_t nrhs) {
  return static_cast<double>(g.n) * static_cast<double>(g.n) * static_cast<double>(nrhs);
}

}  // namespace

std::vector<PartOrder> pass_parts(const storage::StripedMatrix& layout, uint64_t cache_bytes,
                                  PassDirection direction, PassColumns columns) {
  const storage::StripeGeometry& g = layout.geometry();
  const bool fits = whole_parts_fit(layout, cache_bytes);
  std::vector<PartOrder> order;
  for (int64_t k = 0; k < g.stripes; ++k) {
    const int64_t i = direction == PassDirection::kFirstToLast ? k : g.stripes - 1 - k;
    if (fits) {
      order.push_back({i, 0});
    } else if (columns == PassColumns::kLower) {
      order.push_back({i, 0, g.row_end(i)});
    } else {
      order.push_back({i, g.row_begin(i)});
    }
  }
  return order;
}

Status stream_parts(EngineContext& ctx, const storage::StripedMatrix& layout,
                    const std::vector<PartOrder>& order, const std::string& phase, bool keep,
                    const std::function<Status(int64_t, const stripe::StripePart&)>& use) {
  cache::StripeCache& cache = ctx.cache;
  Monitor monitor(ctx);
  DsrRole dsr(cache, layout, order);
  Status result;
  for (const PartOrder& p : order) {
    if (ctx.cancel.cancelled()) {
      cache.fail(cancelled_status());
    }
    auto cell = cache.wait_for(p.stripe, CellState::kStuck);
    if (!cell.is_ok()) {
      result = cell.status();
      break;
    }
    {
      TraceRecorder::Span span(ctx.trace, "master", phase, {{"stripe", std::to_string(p.stripe)}});
      result = use(p.stripe, cell_part(layout, *cell));
    }
    if (!result.is_ok()) {
      cache.fail(result);
      break;
    }
    if (keep) {
      cache.release_read(p.stripe);
    } else {
      cache.remove(p.stripe);
    }
    ctx.progress.add_stripe();
  }
  if (!result.is_ok()) cache.fail(result);  // stops DSR if it still waits for room
  dsr.join();
  return result.is_ok() ? cache.failure() : result;
}

Status substitute(EngineContext& ctx, const storage::StripedMatrix& factor,
                  const std::vector<stripe::StripePivots>& pivots, double* rhs, int64_t nrhs,
                  const std::function<Status(int64_t)>& on_stripe, const std::string& phase) {
  const storage::StripeGeometry& g = factor.geometry();
  const double stripe_flops = 2.0 * static_cast<double>(g.n) * static_cast<double>(nrhs);
  const uint64_t cache_bytes = ctx.cache.stats().budget;
  std::vector<PartOrder> forward =
      pass_parts(factor, cache_bytes, PassDirection::kFirstToLast, PassColumns::kLower);
  // Stripes above the first nonzero row of rhs have z = 0: the pass starts at that row's stripe
  // and, where it reads only the columns it needs, from that stripe's first column (a unit
  // vector's forward pass reads about a third of L on average instead of all of it).
  const int64_t first = first_nonzero_stripe(g, rhs, nrhs);
  forward.erase(forward.begin(), forward.begin() + first);
  for (PartOrder& p : forward) {
    if (p.col_end != storage::kThroughN) p.col_begin = g.row_begin(first);
  }
  const std::vector<PartOrder> backward =
      pass_parts(factor, cache_bytes, PassDirection::kLastToFirst, PassColumns::kUpper);
  STRIPESOLVE_ASSIGN_OR_RETURN(stripe::HostWorkspace workspace,
                               substitution_workspace(ctx, g, nrhs, "substitution"));

  ctx.progress.begin_phase(phase.empty() ? "forward" : phase,
                           stripe_flops * static_cast<double>(g.n) / 2.0, g.stripes);
  for (int64_t i = 0; i < first; ++i) ctx.progress.add_stripe();
  const Status forward_status = stream_parts(
      ctx, factor, forward, "forward", true, [&](int64_t i, const stripe::StripePart& part) {
        STRIPESOLVE_RETURN_IF_ERROR(stripe::forward_substitute_stripe(
            ctx.backend, part, pivots[static_cast<size_t>(i)], rhs, g.n, nrhs, workspace.view()));
        ctx.progress.add_flops(stripe_flops * static_cast<double>(g.row_end(i)) /
                               static_cast<double>(g.n) * static_cast<double>(g.rows(i)));
        return Status::ok();
      });
  STRIPESOLVE_RETURN_IF_ERROR(forward_status);
  ctx.progress.begin_phase(phase.empty() ? "backward" : phase,
                           stripe_flops * static_cast<double>(g.n) / 2.0, g.stripes);
  return stream_parts(
      ctx, factor, backward, "backward", true, [&](int64_t i, const stripe::StripePart& part) {
        STRIPESOLVE_RETURN_IF_ERROR(stripe::backward_substitute_stripe(ctx.backend, part, rhs, g.n,
                                                                       nrhs, workspace.view()));
        stripe::apply_solution_swaps(pivots[static_cast<size_t>(i)], rhs, g.n, nrhs);
        ctx.progress.add_flops(stripe_flops * static_cast<double>(g.n - g.row_begin(i)) /
                               static_cast<double>(g.n) * static_cast<double>(g.rows(i)));
        return on_stripe ? on_stripe(i) : Status::ok();
      });
}

Status substitute_transposed(EngineContext& ctx, const storage::StripedMatrix& factor,
                             const std::vector<stripe::StripePivots>& pivots, double* v,
                             int64_t nrhs, const std::string& phase) {
  const storage::StripeGeometry& g = factor.geometry();
  const uint64_t cache_bytes = ctx.cache.stats().budget;
  const std::vector<PartOrder> upper =
      pass_parts(factor, cache_bytes, PassDirection::kFirstToLast, PassColumns::kUpper);
  ctx.progress.begin_phase(phase, transposed_pass_flops(g, nrhs), g.stripes);
  STRIPESOLVE_ASSIGN_OR_RETURN(stripe::HostWorkspace workspace,
                               substitution_workspace(ctx, g, nrhs, "transposed substitution"));
  STRIPESOLVE_RETURN_IF_ERROR(stream_parts(
      ctx, factor, upper, "transposed upper", true, [&](int64_t i, const stripe::StripePart& part) {
        return stripe::transposed_upper_substitute_stripe(
            ctx.backend, part, pivots[static_cast<size_t>(i)], v, g.n, nrhs, workspace.view());
      }));
  return substitute_transposed_lower(ctx, factor, pivots, v, nrhs, phase);
}

Status substitute_transposed_lower(EngineContext& ctx, const storage::StripedMatrix& factor,
                                   const std::vector<stripe::StripePivots>& pivots, double* v,
                                   int64_t nrhs, const std::string& phase) {
  const storage::StripeGeometry& g = factor.geometry();
  const std::vector<PartOrder> lower = pass_parts(factor, ctx.cache.stats().budget,
                                                  PassDirection::kLastToFirst, PassColumns::kLower);
  ctx.progress.begin_phase(phase, transposed_pass_flops(g, nrhs), g.stripes);
  STRIPESOLVE_ASSIGN_OR_RETURN(stripe::HostWorkspace workspace,
                               substitution_workspace(ctx, g, nrhs, "transposed substitution"));
  return stream_parts(
      ctx, factor, lower, "transposed lower", true, [&](int64_t i, const stripe::StripePart& part) {
        return stripe::transposed_lower_substitute_stripe(
            ctx.backend, part, pivots[static_cast<size_t>(i)], v, g.n, nrhs, workspace.view());
      });
}

void stripe_residual(const StripeRows& a, int64_t n, const double* b, const double* x, int64_t nrhs,
                     double* r, double* col_abs, ResidualResult& out) {
  const int64_t h = a.rows;
  const int64_t r0 = a.row_begin;
  std::vector<double> row_abs(static_cast<size_t>(h), 0.0);
  for (int64_t k = 0; k < nrhs; ++k) {
    double* rk = r + r0 + k * n;
    const double* bk = b + r0 + k * n;
    for (int64_t q = 0; q < h; ++q) rk[q] = bk[q];
  }
  for (int64_t c = 0; c < n; ++c) {
    const double* col = a.data + c * h;
    if (col_abs != nullptr) {
      double col_sum = 0;
      double col_max = 0;
      for (int64_t q = 0; q < h; ++q) {
        const double v = std::fabs(col[q]);
        row_abs[q] += v;
        col_sum += v;
        col_max = std::max(col_max, v);
      }
      col_abs[c] += col_sum;
      out.a_max_abs = std::max(out.a_max_abs, col_max);
    }
    for (int64_t k = 0; k < nrhs; ++k) {
      const double xv = x[c + k * n];
      double* rk = r + r0 + k * n;
      for (int64_t q = 0; q < h; ++q) rk[q] -= col[q] * xv;
    }
  }
  if (col_abs != nullptr) {
    for (int64_t q = 0; q < h; ++q) out.a_norm_inf = std::max(out.a_norm_inf, row_abs[q]);
  }
  for (int64_t k = 0; k < nrhs; ++k) {
    for (int64_t q = 0; q < h; ++q) {
      out.r_norm_inf = std::max(out.r_norm_inf, std::fabs(r[r0 + q + k * n]));
    }
  }
}

Result<ResidualResult> residual(EngineContext& ctx, const storage::StripedMatrix& a,
                                const double* b, const double* x, int64_t nrhs, double* r) {
  const storage::StripeGeometry& g = a.geometry();
  const int64_t n = g.n;
  std::vector<PartOrder> order;
  for (int64_t i = 0; i < g.stripes; ++i) order.push_back({i, 0});
  ResidualResult out;
  ctx.progress.begin_phase(
      "residual", 2.0 * static_cast<double>(n) * static_cast<double>(n) * static_cast<double>(nrhs),
      g.stripes);
  std::vector<double> col_abs(static_cast<size_t>(n), 0.0);
  const Status st =
      stream_parts(ctx, a, order, "residual", false, [&](int64_t, const stripe::StripePart& part) {
        stripe_residual({part.data, part.rows, part.row_begin}, n, b, x, nrhs, r, col_abs.data(),
                        out);
        ctx.progress.add_flops(2.0 * static_cast<double>(part.rows) * static_cast<double>(n) *
                               static_cast<double>(nrhs));
        return Status::ok();
      });
  STRIPESOLVE_RETURN_IF_ERROR(st);
  for (double sum : col_abs) out.a_norm_1 = std::max(out.a_norm_1, sum);
  return out;
}

}  // namespace stripesolve::scheduler
