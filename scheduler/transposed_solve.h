// --pivot gepp (issue 17): LAPACK's row partial pivoting, by factoring the transpose.
//
// Row pivoting (kRow) searches each row of A for its pivot: column interchanges, GEPP of A^T,
// which the transposed Wilkinson matrix defeats (growth 2^(n-1)) where LAPACK's GEPP of A is
// stable. The stripes hold rows, so GEPP of A itself would need a search down each column across
// all the stripes. Instead the store keeps A^T as the companion object "<matrix>.t" (made out of
// core, MatrixStore::create_transpose) and the dense solve factors it with kRow: B = A^T,
// B Q = L U, so Q^T A = U^T L^T, which is GEPP of A (the pivots of B's rows are A's columns).
// A x = b is then B^T x = b: substitute_transposed() with B's factors (forward with U^T, backward
// with L^T, stripe by stripe). The residual and refinement read A; the condition estimate swaps
// its two solves (A^-1 = B^-T). The factor "<matrix>.lu.gepp" records A as what it factors, so
// it is reused, remade and removed like the other modes' factors; the companion too.
//
// Cost beyond kRow: the transpose (8 n^2 bytes read and 8 n^2 written, once per A, within the RAM
// budget), and a substitution in matrix-vector passes (2 n^2 flops a
// right-hand side and pass, one column at a time) instead of kRow's blocked one.
//
// Thread-safety: plain functions; open_transpose() expects the caller to hold the name lock of
// the gepp factor, which serializes the solves that may make the companion.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "base/status.h"
#include "scheduler/dense_solve.h"
#include "scheduler/progress.h"
#include "storage/matrix_store.h"

namespace stripesolve::scheduler {

// "<matrix>.t".
std::string transpose_name_for(std::string_view matrix_name);

// The companion of `a` (A^T), opened read-only: the stored one when it was made from this very
// A (storage::is_factor_of: id, order, checksum summary), else made anew within `memory_budget`
// bytes of RAM, a stale one removed first. kCancelled when `cancel` fires while it is made
// (nothing is left then).
Result<std::unique_ptr<storage::StripedMatrix>> open_transpose(storage::MatrixStore& store,
                                                               const storage::StripedMatrix& a,
                                                               uint64_t memory_budget,
                                                               const CancelToken& cancel);

// True when a solve should be made again with gepp (the safety net's switch): it used the
// default kRow with auto refinement and the quality checks, not in place, and it missed the
// tolerance with the pivoting to blame (condition.h pivoting_to_blame: growth, not an
// ill-conditioned or singular A).
bool should_switch_to_gepp(const DenseSolveOptions& options, const SolveReport& report);

// What the result says about the switch: "row pivoting grew by G (backward error E above the
// tolerance T); re-solved with gepp".
std::string gepp_switch_note(const SolveReport& row_report);

}  // namespace stripesolve::scheduler
