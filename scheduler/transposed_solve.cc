#include "scheduler/transposed_solve.h"

#include "base/logging.h"

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

}  // namespace stripesolve::scheduler
