#include "backend/backend.h"

#include <fmt/format.h>

namespace stripesolve::backend {

std::string_view pivot_mode_name(PivotMode mode) {
  switch (mode) {
    case PivotMode::kRow:
      return "row";
    case PivotMode::kLocal:
      return "local";
    case PivotMode::kNone:
      return "none";
    case PivotMode::kGepp:
      return "gepp";
  }
  return "unknown";
}

Result<PivotMode> parse_pivot_mode(std::string_view name) {
  if (name == "row") return PivotMode::kRow;
  if (name == "local") return PivotMode::kLocal;
  if (name == "none") return PivotMode::kNone;
  if (name == "gepp") return PivotMode::kGepp;
  return Status::invalid_argument(
      fmt::format("unknown pivot mode '{}' (expected row, local, none or gepp)", name));
}

PivotMode elimination_pivot(PivotMode mode) {
  return mode == PivotMode::kGepp ? PivotMode::kRow : mode;
}

namespace {

Status bad(std::string_view op, std::string_view what) {
  return Status::invalid_argument(fmt::format("{}: {}", op, what));
}

}  // namespace

Status validate(const PanelFactor& op) {
  constexpr std::string_view kOp = "panel factor";
  if (op.part == nullptr || op.swaps == nullptr) return bad(kOp, "null pointer");
  if (op.rows < 1 || op.cols < 1)
    return bad(kOp, fmt::format("empty part {}x{}", op.rows, op.cols));
  if (op.ld < op.rows) return bad(kOp, fmt::format("ld {} < rows {}", op.ld, op.rows));
  if (op.panel_row < 0 || op.panel_rows < 1 || op.panel_row + op.panel_rows > op.rows) {
    return bad(kOp, fmt::format("panel rows [{}, {}) outside part rows [0, {})", op.panel_row,
                                op.panel_row + op.panel_rows, op.rows));
  }
  if (op.block_col < 0 || op.block_col + op.rows > op.cols) {
    return bad(kOp, fmt::format("diagonal block at column {} of {} rows does not fit {} columns",
                                op.block_col, op.rows, op.cols));
  }
  return Status::ok();
}

Status validate(const BlockUpdate& op) {
  constexpr std::string_view kOp = "block update";
  if (op.k < 0 || op.t_rows < 0 || op.cols < op.k) {
    return bad(kOp, fmt::format("bad shape k={} cols={} t_rows={}", op.k, op.cols, op.t_rows));
  }
  if (op.k == 0 || op.t_rows == 0) return Status::ok();
  if (op.u == nullptr || op.t == nullptr) return bad(kOp, "null pointer");
  if (op.ld_u < op.k || op.ld_t < op.t_rows) {
    return bad(kOp, fmt::format("ld_u {} < k {} or ld_t {} < t_rows {}", op.ld_u, op.k, op.ld_t,
                                op.t_rows));
  }
  return Status::ok();
}

Status validate(const LowerSubstitution& op) {
  constexpr std::string_view kOp = "lower substitution";
  if (op.rows < 1 || op.row_begin < 0 || op.nrhs < 0) {
    return bad(
        kOp, fmt::format("bad shape rows={} row_begin={} nrhs={}", op.rows, op.row_begin, op.nrhs));
  }
  if (op.nrhs == 0) return Status::ok();
  if (op.part == nullptr || op.rhs == nullptr) return bad(kOp, "null pointer");
  if (op.ld < op.rows || op.ld_rhs < op.row_begin + op.rows) {
    return bad(kOp, fmt::format("ld {} < rows {} or ld_rhs {} < {}", op.ld, op.rows, op.ld_rhs,
                                op.row_begin + op.rows));
  }
  if (op.row_swaps != nullptr) {
    for (int64_t k = 0; k < op.rows; ++k) {
      if (op.row_swaps[k] < k || op.row_swaps[k] >= op.rows) {
        return bad(
            kOp, fmt::format("row swap {} -> {} outside [{}, {})", k, op.row_swaps[k], k, op.rows));
      }
    }
  }
  return Status::ok();
}

Status validate(const UpperSubstitution& op) {
  constexpr std::string_view kOp = "upper substitution";
  if (op.rows < 1 || op.cols < op.rows || op.nrhs < 0) {
    return bad(kOp, fmt::format("bad shape rows={} cols={} nrhs={}", op.rows, op.cols, op.nrhs));
  }
  if (op.nrhs == 0) return Status::ok();
  if (op.part == nullptr || op.rhs == nullptr) return bad(kOp, "null pointer");
  if (op.ld < op.rows || op.ld_rhs < op.cols) {
    return bad(kOp, fmt::format("ld {} < rows {} or ld_rhs {} < cols {}", op.ld, op.rows, op.ld_rhs,
                                op.cols));
  }
  return Status::ok();
}

Status check_workspace(const Workspace& workspace, const WorkspaceSize& size) {
  if (workspace.host_bytes < size.host_bytes ||
      (size.host_bytes > 0 && workspace.host == nullptr) ||
      workspace.device_bytes < size.device_bytes ||
      (size.device_bytes > 0 && workspace.device == nullptr)) {
    return Status::invalid_argument(fmt::format(
        "workspace too small: need {} host + {} device bytes, got {} + {}", size.host_bytes,
        size.device_bytes, workspace.host_bytes, workspace.device_bytes));
  }
  return Status::ok();
}

}  // namespace stripesolve::backend
