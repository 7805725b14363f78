#include "scheduler/transposed_solve.h"

#include <fmt/format.h>

#include "base/logging.h"
#include "scheduler/condition.h"

namespace stripesolve::scheduler {

// The longest derived name stays within what the store keeps free in matrix names.
static_assert(std::string_view(".t").size() <= storage::kDerivedNameReserve);

std::string transpose_name_for(std::string_view matrix_name) {
  return std::string(matrix_name) + ".t";
}

Result<std::unique_ptr<storage::StripedMatrix>> open_transpose(storage::MatrixStore& store,
                                                               const storage::StripedMatrix& a,
                                                               uint64_t memory_budget,
                                                               const CancelToken& cancel) {
  static const auto log = logger("scheduler");
  const std::string name = transpose_name_for(a.info().name);
  auto existing = store.open_matrix(name);
  if (existing.is_ok()) {
    const storage::MatrixInfo& info = (*existing)->info();
    if (info.kind == "transpose" && storage::is_factor_of(info, a.info())) return existing;
    // Made from an A removed and created again, or not a transpose at all: not ours to reuse.
    if (info.kind != "transpose") {
      return Status::already_exists("object '" + name + "' is a " + info.kind +
                                    ", not the transpose of '" + a.info().name +
                                    "'; --pivot gepp keeps A^T under that name");
    }
    existing->reset();
    STRIPESOLVE_RETURN_IF_ERROR(store.remove(name));
  } else if (existing.status().code() != StatusCode::kNotFound) {
    return existing.status();
  }
  log->info("transposing '{}' into '{}' (gepp factors the transpose)", a.info().name, name);
  STRIPESOLVE_RETURN_IF_ERROR(
      store.create_transpose(name, a, memory_budget, [&cancel] { return cancel.cancelled(); })
          .status());
  return store.open_matrix(name);
}

bool should_switch_to_gepp(const DenseSolveOptions& options, const SolveReport& report) {
  if (options.pivot != stripe::PivotMode::kRow || options.in_place || !options.check_quality ||
      options.refinement_steps != DenseSolveOptions::kRefineAuto || report.warning.empty()) {
    return false;
  }
  const int steps =
      report.residual_history.empty() ? 0 : static_cast<int>(report.residual_history.size()) - 1;
  return pivoting_to_blame({.n = report.plan.n,
                            .backward_error = report.residual,
                            .rcond = report.rcond,
                            .growth = report.growth,
                            .refinement_steps = steps,
                            .pivot = options.pivot});
}

std::string gepp_switch_note(const SolveReport& row_report) {
  const std::string growth = row_report.growth < 0 ? std::string("by an unknown factor")
                                                   : fmt::format("by {:.2e}", row_report.growth);
  return fmt::format(
      "row pivoting grew {} (backward error {:.2e} above the tolerance {:.2e}); re-solved with "
      "gepp",
      growth, row_report.residual, row_report.tolerance);
}

}  // namespace stripesolve::scheduler
