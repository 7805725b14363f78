#include "stripe/stripe_ops.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <utility>

#include <fmt/format.h>

#include "stripe/geometry.h"

namespace stripesolve::stripe {
namespace {

// `needed_end`: the op reads columns up to there (0: through n).
Status check_part(const StripePart& part, std::string_view what, int64_t needed_end = 0) {
  if (part.data == nullptr || part.rows < 1 || part.row_begin < 0 || part.n < 1 ||
      part.row_begin + part.rows > part.n || part.col_begin < 0 || part.col_begin >= part.n) {
    return Status::invalid_argument(
        fmt::format("{}: bad stripe part rows [{}, {}) columns [{}, {}) of n={}", what,
                    part.row_begin, part.row_begin + part.rows, part.col_begin, part.n, part.n));
  }
  const int64_t need = needed_end > 0 ? needed_end : part.n;
  if (part.held_end() < need || part.held_end() > part.n) {
    return Status::invalid_argument(
        fmt::format("{}: stripe part rows [{}, {}) holds columns [{}, {}), needs them up to {} of "
                    "n={}",
                    what, part.row_begin, part.row_begin + part.rows, part.col_begin,
                    part.held_end(), need, part.n));
  }
  return Status::ok();
}

backend::PanelFactor panel_op(const StripePart& stripe, PivotMode mode, int64_t panel_row,
                              int64_t panel_rows, int64_t* swaps) {
  backend::PanelFactor op;
  op.part = stripe.data;
  op.ld = stripe.rows;
  op.rows = stripe.rows;
  op.cols = stripe.n - stripe.col_begin;
  op.block_col = stripe.row_begin - stripe.col_begin;
  op.panel_row = panel_row;
  op.panel_rows = panel_rows;
  op.mode = mode;
  op.swaps = swaps;
  op.global_row = stripe.row_begin;
  return op;
}

// <C>,<D> of substripe [pr, pr + ps) inside eliminate_stripe: the rows below it.
backend::BlockUpdate substripe_update_op(const StripePart& stripe, int64_t pr, int64_t ps) {
  const int64_t h = stripe.rows, block_col = stripe.row_begin - stripe.col_begin;
  backend::BlockUpdate up;
  up.u = stripe.data == nullptr ? nullptr : stripe.data + pr + (block_col + pr) * h;
  up.ld_u = h;
  up.k = ps;
  up.cols = (stripe.n - stripe.col_begin) - (block_col + pr);
  up.t = stripe.data == nullptr ? nullptr : stripe.data + (pr + ps) + (block_col + pr) * h;
  up.ld_t = h;
  up.t_rows = h - pr - ps;
  return up;
}

// <JI>,<JK>: J's columns from i0 updated by eliminated stripe I.
backend::BlockUpdate update_op(const StripePart& stripe_i, const StripePart& stripe_j) {
  const int64_t i0 = stripe_i.row_begin;
  backend::BlockUpdate up;
  up.u = stripe_i.data == nullptr ? nullptr : stripe_i.at(i0, i0);
  up.ld_u = stripe_i.rows;
  up.k = stripe_i.rows;
  up.cols = stripe_i.n - i0;
  up.t = stripe_j.data == nullptr ? nullptr : stripe_j.at(stripe_j.row_begin, i0);
  up.ld_t = stripe_j.rows;
  up.t_rows = stripe_j.rows;
  return up;
}

backend::LowerSubstitution lower_op(const StripePart& stripe, const int64_t* row_swaps, double* rhs,
                                    int64_t ld_rhs, int64_t nrhs) {
  backend::LowerSubstitution op;
  op.part = stripe.data;
  op.ld = stripe.rows;
  op.rows = stripe.rows;
  op.row_begin = stripe.row_begin;
  op.row_swaps = row_swaps;
  op.rhs = rhs;
  op.ld_rhs = ld_rhs;
  op.nrhs = nrhs;
  return op;
}

backend::UpperSubstitution upper_op(const StripePart& stripe, double* rhs, int64_t ld_rhs,
                                    int64_t nrhs) {
  backend::UpperSubstitution op;
  op.part = stripe.data == nullptr ? nullptr : stripe.at(stripe.row_begin, stripe.row_begin);
  op.ld = stripe.rows;
  op.rows = stripe.rows;
  op.cols = stripe.n - stripe.row_begin;
  op.rhs = rhs == nullptr ? nullptr : rhs + stripe.row_begin;
  op.ld_rhs = ld_rhs;
  op.nrhs = nrhs;
  return op;
}

// Runs `op` with `workspace` once the workspace is known to be large enough.
template <typename Op>
Status run_with(backend::Backend& backend, const Op& op, const backend::Workspace& workspace) {
  STRIPESOLVE_RETURN_IF_ERROR(backend::check_workspace(workspace, backend.workspace_size(op)));
  return backend.run(op, workspace);
}

// The first row of stripe rows [row_begin, row_begin+rows), columns [c0, c1) of the part holding a
// non-finite value, or -1. Column-major scan; keeps the smallest row.
int64_t first_non_finite_row(const StripePart& stripe, int64_t c0, int64_t c1) {
  int64_t worst = stripe.rows;
  for (int64_t c = c0; c < c1; ++c) {
    const double* col = stripe.data + (c - stripe.col_begin) * stripe.rows;
    for (int64_t r = 0; r < worst; ++r) {
      if (!std::isfinite(col[r])) {
        worst = r;
        break;
      }
    }
  }
  return worst == stripe.rows ? -1 : stripe.row_begin + worst;
}

// The stripe's rows of a solution just computed (`rows` at the stripe's first row, ld, nrhs
// columns): a numerical error naming the first non-finite row ("non-finite <what> at row R").
Status check_solved_rows(const StripePart& stripe, const double* rows, int64_t ld, int64_t nrhs,
                         std::string_view what) {
  for (int64_t j = 0; j < nrhs; ++j) {
    for (int64_t r = 0; r < stripe.rows; ++r) {
      if (!std::isfinite(rows[r + j * ld])) {
        return Status::numerical(
            fmt::format("non-finite {} at row {}", what, stripe.row_begin + r));
      }
    }
  }
  return Status::ok();
}

}  // namespace

backend::WorkspaceSize eliminate_workspace_size(const backend::Backend& backend,
                                                const StripePart& stripe, PivotMode mode,
                                                int64_t substripe_rows) {
  backend::WorkspaceSize most;
  if (stripe.rows < 1 || substripe_rows < 1) return most;
  const auto subs = EvenPartition::with_max_part(stripe.rows, substripe_rows);
  int64_t dummy = 0;
  // The first substripe is the widest and (for a uniform partition) as tall as any other; check
  // every one anyway so the bound holds for any backend.
  for (int64_t q = 0; q < subs.count; ++q) {
    most = larger(
        most, backend.workspace_size(panel_op(stripe, mode, subs.begin(q), subs.size(q), &dummy)));
    if (subs.begin(q) + subs.size(q) < stripe.rows) {
      most = larger(
          most, backend.workspace_size(substripe_update_op(stripe, subs.begin(q), subs.size(q))));
    }
  }
  return most;
}

backend::WorkspaceSize update_workspace_size(const backend::Backend& backend,
                                             const StripePart& stripe_i,
                                             const StripePart& stripe_j) {
  return backend.workspace_size(update_op(stripe_i, stripe_j));
}

backend::WorkspaceSize substitution_workspace_size(const backend::Backend& backend,
                                                   const StripePart& stripe, int64_t nrhs) {
  return larger(backend.workspace_size(lower_op(stripe, nullptr, nullptr, stripe.n, nrhs)),
                backend.workspace_size(upper_op(stripe, nullptr, stripe.n, nrhs)));
}

backend::WorkspaceSize larger(const backend::WorkspaceSize& a, const backend::WorkspaceSize& b) {
  return {std::max(a.host_bytes, b.host_bytes), std::max(a.device_bytes, b.device_bytes)};
}

Result<HostWorkspace> HostWorkspace::allocate(const backend::WorkspaceSize& size,
                                              std::string_view what) {
  if (size.device_bytes > 0) {
    return Status::unimplemented(fmt::format(
        "{}: the backend asks for {} bytes of device workspace", what, size.device_bytes));
  }
  HostWorkspace w;
  w.bytes_ = (size.host_bytes + 63) / 64 * 64;
  if (w.bytes_ > 0) {
    w.data_.reset(static_cast<std::byte*>(std::aligned_alloc(64, w.bytes_)));
    if (!w.data_)
      return Status::resource_exhausted(
          fmt::format("{}: no {} bytes of workspace", what, w.bytes_));
  }
  return w;
}

Status eliminate_stripe(backend::Backend& backend, const StripePart& stripe, PivotMode mode,
                        int64_t substripe_rows, const backend::Workspace& workspace,
                        StripePivots* pivots) {
  STRIPESOLVE_RETURN_IF_ERROR(check_part(stripe, "eliminate stripe"));
  if (stripe.col_begin > stripe.row_begin) {
    return Status::invalid_argument(fmt::format(
        "eliminate stripe: part of rows from {} starts at column {}, after its diagonal",
        stripe.row_begin, stripe.col_begin));
  }
  if (substripe_rows < 1) {
    return Status::invalid_argument(
        fmt::format("eliminate stripe: substripe rows {} < 1", substripe_rows));
  }
  const int64_t h = stripe.rows;
  std::vector<int64_t> local(static_cast<size_t>(h));
  const auto subs = EvenPartition::with_max_part(h, substripe_rows);
  for (int64_t q = 0; q < subs.count; ++q) {
    const int64_t pr = subs.begin(q);
    const int64_t ps = subs.size(q);
    // <A>,<B> and the substripe's <IK> row (002 Fig 9 / Fig 11).
    STRIPESOLVE_RETURN_IF_ERROR(
        run_with(backend, panel_op(stripe, mode, pr, ps, local.data() + pr), workspace));
    // <C> multipliers and the <D> trailing GEMM over all columns right of the panel's block.
    if (pr + ps < h) {
      STRIPESOLVE_RETURN_IF_ERROR(
          run_with(backend, substripe_update_op(stripe, pr, ps), workspace));
    }
  }
  const int64_t bad_row = first_non_finite_row(stripe, stripe.row_begin, stripe.n);
  if (bad_row >= 0) {
    return Status::numerical(fmt::format("non-finite value in row {} after elimination", bad_row));
  }
  pivots->mode = mode;
  pivots->row_begin = stripe.row_begin;
  pivots->swaps.clear();
  if (mode == PivotMode::kRow) {
    pivots->swaps.resize(static_cast<size_t>(h));
    for (int64_t k = 0; k < h; ++k) pivots->swaps[k] = stripe.col_begin + local[k];
  } else if (mode == PivotMode::kLocal) {
    pivots->swaps.resize(static_cast<size_t>(h));
    for (int64_t k = 0; k < h; ++k) pivots->swaps[k] = stripe.row_begin + local[k];
  }
  return Status::ok();
}

Status update_stripe(backend::Backend& backend, const StripePart& stripe_i,
                     const StripePivots& pivots_i, const StripePart& stripe_j,
                     const backend::Workspace& workspace) {
  STRIPESOLVE_RETURN_IF_ERROR(check_part(stripe_i, "update stripe (I)"));
  STRIPESOLVE_RETURN_IF_ERROR(check_part(stripe_j, "update stripe (J)"));
  const int64_t i0 = stripe_i.row_begin;
  const int64_t i1 = i0 + stripe_i.rows;
  if (stripe_i.n != stripe_j.n || stripe_j.row_begin < i1 || stripe_i.col_begin > i0 ||
      stripe_j.col_begin > i0) {
    return Status::invalid_argument(fmt::format(
        "update stripe: stripe of rows from {} (columns from {}) cannot be updated by stripe of "
        "rows [{}, {}) (columns from {})",
        stripe_j.row_begin, stripe_j.col_begin, i0, i1, stripe_i.col_begin));
  }
  const bool has_swaps = pivots_i.mode != PivotMode::kNone;
  if (pivots_i.row_begin != i0 ||
      (has_swaps && static_cast<int64_t>(pivots_i.swaps.size()) != stripe_i.rows)) {
    return Status::invalid_argument(fmt::format(
        "update stripe: pivots of rows from {} ({} swaps) do not belong to stripe of rows [{}, {})",
        pivots_i.row_begin, pivots_i.swaps.size(), i0, i1));
  }
  const auto up = update_op(stripe_i, stripe_j);
  STRIPESOLVE_RETURN_IF_ERROR(backend::check_workspace(workspace, backend.workspace_size(up)));
  const int64_t hj = stripe_j.rows;
  if (pivots_i.mode == PivotMode::kRow) {
    for (int64_t k = 0; k < stripe_i.rows; ++k) {
      const int64_t other = pivots_i.swaps[k];
      if (other == i0 + k) continue;
      double* a = stripe_j.at(stripe_j.row_begin, i0 + k);
      double* b = stripe_j.at(stripe_j.row_begin, other);
      std::swap_ranges(a, a + hj, b);
    }
  }
  return backend.run(up, workspace);
}

Status forward_substitute_stripe(backend::Backend& backend, const StripePart& stripe,
                                 const StripePivots& pivots, double* rhs, int64_t ld_rhs,
                                 int64_t nrhs, const backend::Workspace& workspace) {
  STRIPESOLVE_RETURN_IF_ERROR(
      check_part(stripe, "forward substitution", stripe.row_begin + stripe.rows));
  const int64_t c0 = stripe.col_begin;
  if (c0 > stripe.row_begin) {
    return Status::invalid_argument(fmt::format(
        "forward substitution: part of rows from {} starts at column {}, after its diagonal",
        stripe.row_begin, c0));
  }
  for (int64_t k = 0; k < nrhs && c0 > 0; ++k) {
    const double* column = rhs + k * ld_rhs;
    if (std::any_of(column, column + c0, [](double v) { return v != 0.0; })) {
      return Status::invalid_argument(fmt::format(
          "forward substitution: part of rows from {} starts at column {}, and the right-hand "
          "side is not zero above it",
          stripe.row_begin, c0));
    }
  }
  std::vector<int64_t> local;
  if (pivots.mode == PivotMode::kLocal) {
    if (pivots.row_begin != stripe.row_begin ||
        static_cast<int64_t>(pivots.swaps.size()) != stripe.rows) {
      return Status::invalid_argument(fmt::format(
          "forward substitution: pivots of rows from {} do not belong to stripe of rows from {}",
          pivots.row_begin, stripe.row_begin));
    }
    local.resize(pivots.swaps.size());
    for (size_t k = 0; k < local.size(); ++k) local[k] = pivots.swaps[k] - stripe.row_begin;
  }
  // A part from column c0 is the op's part in a frame shifted by c0: its left block multiplies
  // z rows [c0, row_begin) (the rows above c0 are zero), its diagonal block sits at column
  // row_begin - c0 of the part.
  StripePart shifted = stripe;
  shifted.row_begin -= c0;
  shifted.col_begin = 0;
  return run_with(backend,
                  lower_op(shifted, local.empty() ? nullptr : local.data(), rhs + c0, ld_rhs, nrhs),
                  workspace);
}

Status backward_substitute_stripe(backend::Backend& backend, const StripePart& stripe, double* rhs,
                                  int64_t ld_rhs, int64_t nrhs,
                                  const backend::Workspace& workspace) {
  STRIPESOLVE_RETURN_IF_ERROR(check_part(stripe, "backward substitution"));
  if (stripe.col_begin > stripe.row_begin) {
    return Status::invalid_argument(fmt::format(
        "backward substitution: part of rows from {} starts at column {}, after its diagonal",
        stripe.row_begin, stripe.col_begin));
  }
  const auto op = upper_op(stripe, rhs, ld_rhs, nrhs);
  STRIPESOLVE_RETURN_IF_ERROR(run_with(backend, op, workspace));
  return check_solved_rows(stripe, op.rhs, ld_rhs, nrhs, "solution");
}

void apply_solution_swaps(const StripePivots& pivots, double* rhs, int64_t ld_rhs, int64_t nrhs) {
  if (pivots.mode != PivotMode::kRow) return;
  // Q_I = T_{i0} T_{i0+1} ... T_{i1-1}: the last transposition acts on the vector first.
  for (int64_t k = static_cast<int64_t>(pivots.swaps.size()) - 1; k >= 0; --k) {
    const int64_t a = pivots.row_begin + k;
    const int64_t b = pivots.swaps[k];
    if (a == b) continue;
    for (int64_t j = 0; j < nrhs; ++j) std::swap(rhs[a + j * ld_rhs], rhs[b + j * ld_rhs]);
  }
}

double max_abs_upper(const StripePart& stripe) {
  double most = 0;
  for (int64_t c = stripe.row_begin; c < stripe.n; ++c) {
    const double* col = stripe.at(stripe.row_begin, c);
    const int64_t rows = std::min(stripe.rows, c - stripe.row_begin + 1);
    for (int64_t r = 0; r < rows; ++r) most = std::max(most, std::fabs(col[r]));
  }
  return most;
}

// A^-1 = B F: F the forward pass (F = T_{N-1} .. T_0, T_I: v_I <- L_II^-1 P_I (v_I - L_{I,<I}
// v_{<I})) and B the backward one (B = Q_0 S_0 .. Q_{N-1} S_{N-1}, S_I: v_I <- U_II^-1 (v_I -
// U_{I,>I} v_{>I})). So A^-T = F^T B^T: B^T = S_{N-1}^T Q_{N-1}^T .. S_0^T Q_0^T is pass 1
// (Q_0^T acts first) and F^T = T_0^T .. T_{N-1}^T pass 2, T_{N-1}^T first.
Status transposed_upper_substitute_stripe(backend::Backend& backend, const StripePart& stripe,
                                          const StripePivots& pivots, double* v, int64_t ld_v,
                                          int64_t nrhs, const backend::Workspace& workspace) {
  STRIPESOLVE_RETURN_IF_ERROR(check_part(stripe, "transposed upper substitution"));
  if (stripe.col_begin > stripe.row_begin) {
    return Status::invalid_argument(fmt::format(
        "transposed upper substitution: part of rows from {} starts at column {}, after its "
        "diagonal",
        stripe.row_begin, stripe.col_begin));
  }
  if (pivots.mode == PivotMode::kRow) {
    // Q_I^T = T_{h-1} .. T_0: the first transposition acts first.
    for (size_t k = 0; k < pivots.swaps.size(); ++k) {
      const int64_t a = pivots.row_begin + static_cast<int64_t>(k);
      const int64_t b = pivots.swaps[k];
      if (a == b) continue;
      for (int64_t j = 0; j < nrhs; ++j) std::swap(v[a + j * ld_v], v[b + j * ld_v]);
    }
  }
  backend::UpperSubstitution op = upper_op(stripe, v, ld_v, nrhs);
  op.transposed = true;
  STRIPESOLVE_RETURN_IF_ERROR(run_with(backend, op, workspace));
  return check_solved_rows(stripe, op.rhs, ld_v, nrhs, "transposed solution");
}

Status transposed_lower_substitute_stripe(backend::Backend& backend, const StripePart& stripe,
                                          const StripePivots& pivots, double* v, int64_t ld_v,
                                          int64_t nrhs, const backend::Workspace& workspace) {
  STRIPESOLVE_RETURN_IF_ERROR(
      check_part(stripe, "transposed lower substitution", stripe.row_begin + stripe.rows));
  if (stripe.col_begin != 0) {
    return Status::invalid_argument(fmt::format(
        "transposed lower substitution: part of rows from {} starts at column {}, needs column 0",
        stripe.row_begin, stripe.col_begin));
  }
  // P_I = S_{h-1} .. S_0 (the forward pass swaps in order): the op undoes them in reverse order.
  std::vector<int64_t> local;
  if (pivots.mode == PivotMode::kLocal) {
    local.resize(pivots.swaps.size());
    for (size_t k = 0; k < local.size(); ++k) local[k] = pivots.swaps[k] - pivots.row_begin;
  }
  backend::LowerSubstitution op =
      lower_op(stripe, local.empty() ? nullptr : local.data(), v, ld_v, nrhs);
  op.transposed = true;
  return run_with(backend, op, workspace);
}

}  // namespace stripesolve::stripe
