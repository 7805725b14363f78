// The read-only phases after the triangulation (002 §8.2): forward and backward substitution on
// the stored factors and the residual (A x) on the original matrix. The DSR role ("download
// stripes in a range", roles.h) requests the parts in the order the master will use them, as
// kStuck cells (never evicted); the master (calling thread) waits for each, uses it and then
// deletes it from the cache (002 §8.3 path 3) or, for the factors, keeps it as an idle clean cell
// so that the next pass (backward after forward, the next refinement step) may hit it. The cache
// budget bounds how far DSR runs ahead (backpressure). Cells are keyed by stripe only, so the cache
// must be flushed when the phases switch objects (factor <-> A).
//
// Thread-safety: each function runs one phase; the I/O role's sources must be set for it.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "scheduler/factor_run.h"
#include "scheduler/roles.h"

namespace stripesolve::scheduler {

enum class PassDirection { kFirstToLast, kLastToFirst };
// kLower: the L passes read columns [0, row_end(I)) of stripe I (L reaches no further); kUpper:
// the U passes read [row_begin(I), n).
enum class PassColumns { kLower, kUpper };

// The parts a pass over the factor's stripes reads, in pass order. When the whole factor fits in
// `cache_bytes`, whole parts (from column 0 through n): read once, they serve every later pass.
// Otherwise only the columns the pass needs, about half of each part: a pass that turns back over
// the same columns (backward U then U^T, L^T then the next solve's L) starts with the parts the
// previous one left cached, and half parts leave twice as many there. (Reading the last stripes of
// a pass whole for a next pass over the other half costs what reading the halves apart does.)
std::vector<PartOrder> pass_parts(const storage::StripedMatrix& layout, uint64_t cache_bytes,
                                  PassDirection direction, PassColumns columns);

// Streams the parts of `order` through the cache and calls `use` for each on the calling thread,
// in order; `keep`: release used parts as idle cells instead of deleting them. Stops at the first
// error (of `use`, I/O, or cancellation).
Status stream_parts(EngineContext& ctx, const storage::StripedMatrix& layout,
                    const std::vector<PartOrder>& order, const std::string& phase, bool keep,
                    const std::function<Status(int64_t stripe, const stripe::StripePart&)>& use);

// Forward then backward substitution of the n x nrhs block `rhs` (ld = n) in place, with the
// factors of `factor` (from the I/O role's current source) and `pivots` per stripe. `on_stripe`
// (optional) is called after each stripe's backward step (with kRow after its swaps). Progress
// reports the passes as phases "forward" and "backward", or both as `phase` when given.
Status substitute(EngineContext& ctx, const storage::StripedMatrix& factor,
                  const std::vector<stripe::StripePivots>& pivots, double* rhs, int64_t nrhs,
                  const std::function<Status(int64_t stripe)>& on_stripe,
                  const std::string& phase = "");

// A^T V = C in place for the n x nrhs block `v` (ld = n), with the same factors and pivots:
// pass 1 streams the parts from the diagonal (stripes first to last), pass 2 the parts from column
// 0 (last to first); stripe/stripe_ops.h says what each step does, one column at a time (2 n^2
// flops a column, matrix-vector work). The condition estimate's transposed solve, and the solve
// of --pivot gepp, whose factors are those of A^T (transposed_solve.h); progress reports both
// passes as `phase`.
Status substitute_transposed(EngineContext& ctx, const storage::StripedMatrix& factor,
                             const std::vector<stripe::StripePivots>& pivots, double* v,
                             int64_t nrhs = 1, const std::string& phase = "condition");
// Its second pass alone, on a `v` whose first pass is made (run_factorization's
// transposed_upper): the L^T parts from the last stripe, where the factorization left the cache.
Status substitute_transposed_lower(EngineContext& ctx, const storage::StripedMatrix& factor,
                                   const std::vector<stripe::StripePivots>& pivots, double* v,
                                   int64_t nrhs = 1, const std::string& phase = "condition");

struct ResidualResult {
  double a_norm_inf = 0;  // ||A||_inf
  double a_norm_1 = 0;    // ||A||_1 (the condition estimate's)
  double a_max_abs = 0;   // max |a_ij| (the pivot growth's denominator)
  double r_norm_inf = 0;  // ||b - A x||_inf over all columns
};

// One stripe of A from column 0: rows [row_begin, row_begin + rows), column-major, ld = rows.
struct StripeRows {
  const double* data = nullptr;
  int64_t rows = 0;
  int64_t row_begin = 0;
};

// The stripe's rows of r = b - A x (n x nrhs, ld = n), folded into `out` (||r||_inf, and where
// `col_abs` is given, ||A||_inf, max |a_ij| and each column's sum of |a_ij| added to col_abs[c]).
void stripe_residual(const StripeRows& a, int64_t n, const double* b, const double* x, int64_t nrhs,
                     double* r, double* col_abs, ResidualResult& out);

// r = b - A x (n x nrhs, ld = n) from the original matrix read again by stripes.
Result<ResidualResult> residual(EngineContext& ctx, const storage::StripedMatrix& a,
                                const double* b, const double* x, int64_t nrhs, double* r);

}  // namespace stripesolve::scheduler
