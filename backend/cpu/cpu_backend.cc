#include "backend/cpu/cpu_backend.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <utility>

#include <cblas.h>
#include <fmt/format.h>
#include <lapacke.h>

#include "backend/cpu/critical_helpers.h"

namespace stripesolve::backend {
namespace {

constexpr int64_t kIntMax = std::numeric_limits<blasint>::max();

// OpenBLAS/LAPACKE take 32-bit integers in Debian's build: refuse what would not fit.
Status check_int(std::string_view op, std::initializer_list<int64_t> values) {
  for (int64_t v : values) {
    if (v > kIntMax) {
      return Status::invalid_argument(
          fmt::format("{}: dimension {} exceeds the CPU backend's BLAS integer range", op, v));
    }
  }
  return Status::ok();
}

blasint bi(int64_t v) {
  return static_cast<blasint>(v);
}

// A block update splits (on the critical path) from about 1 ms of one core's work, into pieces
// of at least 32 rows (dtrsm) and 256 columns (dgemm).
constexpr double kMinSplitFlops = 4e7;
constexpr int64_t kMinPieceRows = 32;
constexpr int64_t kMinPieceColumns = 256;

// body(begin, end) over `pieces` near-equal ranges of [0, count), on `helpers` when there are
// several pieces.
void each_piece(CriticalHelpers* helpers, int pieces, int64_t count,
                const std::function<void(int64_t, int64_t)>& body) {
  if (pieces <= 1 || helpers == nullptr) {
    body(0, count);
    return;
  }
  helpers->run(pieces, [&](int p) { body(count * p / pieces, count * (p + 1) / pieces); });
}

Status check_pivot(double pivot, int64_t global_row) {
  if (!std::isfinite(pivot)) {
    return Status::numerical(fmt::format("non-finite pivot at row {}", global_row));
  }
  if (pivot == 0.0) return Status::numerical(fmt::format("zero pivot at row {}", global_row));
  return Status::ok();
}

void swap_rows_of_columns(double* part, int64_t ld, int64_t row_begin, int64_t row_end,
                          int64_t col_a, int64_t col_b) {
  if (row_begin >= row_end || col_a == col_b) return;
  std::swap_ranges(part + row_begin + col_a * ld, part + row_end + col_a * ld,
                   part + row_begin + col_b * ld);
}

// A panel to factor: p rows of the part from its diagonal column dc on (m columns, ld), the
// first at `a`.
struct Panel {
  int64_t p, dc, m, ld;
  double* a;
};

Panel panel_of(const PanelFactor& op) {
  const int64_t dc = op.block_col + op.panel_row;
  return {op.panel_rows, dc, op.cols - dc, op.ld, op.part + op.panel_row + dc * op.ld};
}

// kRow: GEPP on the transposed panel (column interchanges on the panel), 002 §5 generalised to
// the whole row as ARCHITECTURE.md §7 asks.
Status factor_row_pivot(const PanelFactor& op, const Workspace& ws) {
  const auto [p, dc, m, ld, panel] = panel_of(op);
  auto* ipiv = reinterpret_cast<lapack_int*>(ws.host);
  auto* w = reinterpret_cast<double*>(ws.host + 8 * p);
  constexpr int64_t kTile = 256;
  for (int64_t c0 = 0; c0 < m; c0 += kTile) {
    const int64_t c1 = std::min(m, c0 + kTile);
    for (int64_t c = c0; c < c1; ++c) {
      for (int64_t r = 0; r < p; ++r) w[c + r * m] = panel[r + c * ld];
    }
  }
  LAPACKE_dgetrf_work(LAPACK_COL_MAJOR, bi(m), bi(p), w, bi(m), ipiv);
  for (int64_t k = 0; k < p; ++k) {
    STRIPESOLVE_RETURN_IF_ERROR(check_pivot(w[k + k * m], op.global_row + op.panel_row + k));
  }
  // panel * Q = U'^T L'^T = (U'^T D^-1) (D L'^T), D = diag(U'): unit lower L, upper U.
  for (int64_t c0 = 0; c0 < m; c0 += kTile) {
    const int64_t c1 = std::min(m, c0 + kTile);
    for (int64_t r = 0; r < p; ++r) {
      const double d = w[r + r * m];
      const double* wr = w + r * m;
      for (int64_t c = c0; c < c1; ++c) {
        double v;
        if (c < r) {
          v = w[c + r * m] / w[c + c * m];
        } else if (c == r) {
          v = d;
        } else {
          v = d * wr[c];
        }
        panel[r + c * ld] = v;
      }
    }
  }
  for (int64_t k = 0; k < p; ++k) {
    const int64_t other = dc + (ipiv[k] - 1);
    op.swaps[k] = other;
    swap_rows_of_columns(op.part, ld, 0, op.panel_row, dc + k, other);
    swap_rows_of_columns(op.part, ld, op.panel_row + p, op.rows, dc + k, other);
  }
  return Status::ok();
}

// kLocal: 002 §5 Fig 11, pivot search among the substripe's rows.
Status factor_local_pivot(const PanelFactor& op, const Workspace& ws) {
  const auto [p, dc, m, ld, panel] = panel_of(op);
  auto* ipiv = reinterpret_cast<lapack_int*>(ws.host);
  // The pivot search only looks at the panel's diagonal block, so factor that square and carry
  // the swaps and L^-1 over the panel's right part as a level-3 dtrsm.
  LAPACKE_dgetrf_work(LAPACK_COL_MAJOR, bi(p), bi(p), panel, bi(ld), ipiv);
  for (int64_t k = 0; k < p; ++k) {
    STRIPESOLVE_RETURN_IF_ERROR(check_pivot(panel[k + k * ld], op.global_row + op.panel_row + k));
  }
  if (m > p) {
    LAPACKE_dlaswp_work(LAPACK_COL_MAJOR, bi(m - p), panel + p * ld, bi(ld), 1, bi(p), ipiv, 1);
    cblas_dtrsm(CblasColMajor, CblasLeft, CblasLower, CblasNoTrans, CblasUnit, bi(p), bi(m - p),
                1.0, panel, bi(ld), panel + p * ld, bi(ld));
  }
  if (dc > op.block_col) {
    LAPACKE_dlaswp_work(LAPACK_COL_MAJOR, bi(dc - op.block_col),
                        op.part + op.panel_row + op.block_col * ld, bi(ld), 1, bi(p), ipiv, 1);
  }
  for (int64_t k = 0; k < p; ++k) op.swaps[k] = op.panel_row + (ipiv[k] - 1);
  return Status::ok();
}

Status factor_no_pivot(const PanelFactor& op) {
  const auto [p, dc, m, ld, a] = panel_of(op);
  for (int64_t k = 0; k < p; ++k) {
    const double d = a[k + k * ld];
    STRIPESOLVE_RETURN_IF_ERROR(check_pivot(d, op.global_row + op.panel_row + k));
    const int64_t below = p - k - 1;
    if (below > 0) {
      cblas_dscal(bi(below), 1.0 / d, a + (k + 1) + k * ld, 1);
      cblas_dger(CblasColMajor, bi(below), bi(below), -1.0, a + (k + 1) + k * ld, 1,
                 a + k + (k + 1) * ld, bi(ld), a + (k + 1) + (k + 1) * ld, bi(ld));
    }
    op.swaps[k] = dc + k;
  }
  if (m > p) {
    cblas_dtrsm(CblasColMajor, CblasLeft, CblasLower, CblasNoTrans, CblasUnit, bi(p), bi(m - p),
                1.0, a, bi(ld), a + p * ld, bi(ld));
  }
  return Status::ok();
}

}  // namespace

Status CpuBackend::can_implement(const PanelFactor& op) const {
  STRIPESOLVE_RETURN_IF_ERROR(validate(op));
  return check_int("panel factor", {op.ld, op.cols, op.rows * op.cols});
}

WorkspaceSize CpuBackend::workspace_size(const PanelFactor& op) const {
  const auto p = static_cast<uint64_t>(op.panel_rows);
  switch (op.mode) {
    case PivotMode::kRow: {
      const auto m = static_cast<uint64_t>(op.cols - op.block_col - op.panel_row);
      return {8 * p * (m + 1), 0};
    }
    case PivotMode::kLocal:
      return {8 * p, 0};
    case PivotMode::kNone:
    case PivotMode::kGepp:  // refused by run()
      return {0, 0};
  }
  return {};
}

Status CpuBackend::run(const PanelFactor& op, const Workspace& workspace) {
  STRIPESOLVE_RETURN_IF_ERROR(can_implement(op));
  STRIPESOLVE_RETURN_IF_ERROR(check_workspace(workspace, workspace_size(op)));
  switch (op.mode) {
    case PivotMode::kRow:
      return factor_row_pivot(op, workspace);
    case PivotMode::kLocal:
      return factor_local_pivot(op, workspace);
    case PivotMode::kNone:
      return factor_no_pivot(op);
    case PivotMode::kGepp:
      break;  // the dense solve's mode: it eliminates A^T with kRow
  }
  return Status::invalid_argument("panel factor: unknown pivot mode");
}

Status CpuBackend::can_implement(const BlockUpdate& op) const {
  STRIPESOLVE_RETURN_IF_ERROR(validate(op));
  return check_int("block update", {op.ld_u, op.ld_t, op.cols});
}

WorkspaceSize CpuBackend::workspace_size(const BlockUpdate&) const {
  return {};
}

Status CpuBackend::run(const BlockUpdate& op, const Workspace&) {
  STRIPESOLVE_RETURN_IF_ERROR(can_implement(op));
  if (op.k == 0 || op.t_rows == 0) return Status::ok();
  // On the critical path (critical_helpers.h) the dtrsm goes in pieces of rows and the dgemm in
  // pieces of columns; each piece computes its entries as the whole call would.
  CriticalHelpers* helpers = critical_helpers();
  const bool split =
      helpers != nullptr && 2.0 * static_cast<double>(op.t_rows) * op.k * op.cols >= kMinSplitFlops;
  const int row_pieces =
      split ? static_cast<int>(std::min<int64_t>(helpers->ways(), op.t_rows / kMinPieceRows)) : 1;
  each_piece(helpers, row_pieces, op.t_rows, [&](int64_t r0, int64_t r1) {
    cblas_dtrsm(CblasColMajor, CblasRight, CblasUpper, CblasNoTrans, CblasNonUnit, bi(r1 - r0),
                bi(op.k), 1.0, op.u, bi(op.ld_u), op.t + r0, bi(op.ld_t));
  });
  const int64_t right = op.cols - op.k;
  if (right <= 0) return Status::ok();
  const int col_pieces =
      split ? static_cast<int>(std::min<int64_t>(helpers->ways(), right / kMinPieceColumns)) : 1;
  each_piece(helpers, col_pieces, right, [&](int64_t c0, int64_t c1) {
    cblas_dgemm(CblasColMajor, CblasNoTrans, CblasNoTrans, bi(op.t_rows), bi(c1 - c0), bi(op.k),
                -1.0, op.t, bi(op.ld_t), op.u + (op.k + c0) * op.ld_u, bi(op.ld_u), 1.0,
                op.t + (op.k + c0) * op.ld_t, bi(op.ld_t));
  });
  return Status::ok();
}

Status CpuBackend::can_implement(const LowerSubstitution& op) const {
  STRIPESOLVE_RETURN_IF_ERROR(validate(op));
  return check_int("lower substitution", {op.ld, op.ld_rhs, op.row_begin + op.rows, op.nrhs});
}

WorkspaceSize CpuBackend::workspace_size(const LowerSubstitution&) const {
  return {};
}

Status CpuBackend::run(const LowerSubstitution& op, const Workspace&) {
  STRIPESOLVE_RETURN_IF_ERROR(can_implement(op));
  if (op.nrhs == 0) return Status::ok();
  double* z = op.rhs + op.row_begin;
  if (op.transposed) {
    cblas_dtrsm(CblasColMajor, CblasLeft, CblasLower, CblasTrans, CblasUnit, bi(op.rows),
                bi(op.nrhs), 1.0, op.part + op.row_begin * op.ld, bi(op.ld), z, bi(op.ld_rhs));
    if (op.row_swaps != nullptr) {
      for (int64_t k = op.rows - 1; k >= 0; --k) {
        const int64_t other = op.row_swaps[k];
        if (other == k) continue;
        for (int64_t j = 0; j < op.nrhs; ++j)
          std::swap(z[k + j * op.ld_rhs], z[other + j * op.ld_rhs]);
      }
    }
    if (op.row_begin > 0) {
      cblas_dgemm(CblasColMajor, CblasTrans, CblasNoTrans, bi(op.row_begin), bi(op.nrhs),
                  bi(op.rows), -1.0, op.part, bi(op.ld), z, bi(op.ld_rhs), 1.0, op.rhs,
                  bi(op.ld_rhs));
    }
    return Status::ok();
  }
  if (op.row_begin > 0) {
    cblas_dgemm(CblasColMajor, CblasNoTrans, CblasNoTrans, bi(op.rows), bi(op.nrhs),
                bi(op.row_begin), -1.0, op.part, bi(op.ld), op.rhs, bi(op.ld_rhs), 1.0, z,
                bi(op.ld_rhs));
  }
  if (op.row_swaps != nullptr) {
    for (int64_t k = 0; k < op.rows; ++k) {
      const int64_t other = op.row_swaps[k];
      if (other == k) continue;
      for (int64_t j = 0; j < op.nrhs; ++j)
        std::swap(z[k + j * op.ld_rhs], z[other + j * op.ld_rhs]);
    }
  }
  cblas_dtrsm(CblasColMajor, CblasLeft, CblasLower, CblasNoTrans, CblasUnit, bi(op.rows),
              bi(op.nrhs), 1.0, op.part + op.row_begin * op.ld, bi(op.ld), z, bi(op.ld_rhs));
  return Status::ok();
}

Status CpuBackend::can_implement(const UpperSubstitution& op) const {
  STRIPESOLVE_RETURN_IF_ERROR(validate(op));
  return check_int("upper substitution", {op.ld, op.ld_rhs, op.cols, op.nrhs});
}

WorkspaceSize CpuBackend::workspace_size(const UpperSubstitution&) const {
  return {};
}

Status CpuBackend::run(const UpperSubstitution& op, const Workspace&) {
  STRIPESOLVE_RETURN_IF_ERROR(can_implement(op));
  if (op.nrhs == 0) return Status::ok();
  if (op.transposed) {
    cblas_dtrsm(CblasColMajor, CblasLeft, CblasUpper, CblasTrans, CblasNonUnit, bi(op.rows),
                bi(op.nrhs), 1.0, op.part, bi(op.ld), op.rhs, bi(op.ld_rhs));
    if (op.cols > op.rows) {
      cblas_dgemm(CblasColMajor, CblasTrans, CblasNoTrans, bi(op.cols - op.rows), bi(op.nrhs),
                  bi(op.rows), -1.0, op.part + op.rows * op.ld, bi(op.ld), op.rhs, bi(op.ld_rhs),
                  1.0, op.rhs + op.rows, bi(op.ld_rhs));
    }
    return Status::ok();
  }
  if (op.cols > op.rows) {
    cblas_dgemm(CblasColMajor, CblasNoTrans, CblasNoTrans, bi(op.rows), bi(op.nrhs),
                bi(op.cols - op.rows), -1.0, op.part + op.rows * op.ld, bi(op.ld), op.rhs + op.rows,
                bi(op.ld_rhs), 1.0, op.rhs, bi(op.ld_rhs));
  }
  cblas_dtrsm(CblasColMajor, CblasLeft, CblasUpper, CblasNoTrans, CblasNonUnit, bi(op.rows),
              bi(op.nrhs), 1.0, op.part, bi(op.ld), op.rhs, bi(op.ld_rhs));
  return Status::ok();
}

BlasThreadsScope::BlasThreadsScope(int threads) : before_(openblas_get_num_threads()) {
  openblas_set_num_threads(std::max(1, threads));
}

BlasThreadsScope::~BlasThreadsScope() {
  openblas_set_num_threads(before_);
}

int blas_threads() {
  return openblas_get_num_threads();
}

std::unique_ptr<Backend> make_cpu_backend() {
  return std::make_unique<CpuBackend>();
}

}  // namespace stripesolve::backend
