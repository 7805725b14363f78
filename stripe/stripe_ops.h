// Stripe operations of the out-of-core Gauss elimination (002 §3-6) on stripe parts in RAM.
//
// The matrix (order n) is cut into row stripes (stripe/geometry.h, 002 Eq 3). Triangulation is
//   for I = 0..N-1: eliminate_stripe(I); for J > I: update_stripe(I, J)
// and any order is correct that respects the dependencies: J is updated by I0 < I1 < ... in
// increasing I, and stripe I is eliminated after its updates by every K < I (the scheduler's
// zigzag / meta-stripe orders, 002 §8.4, satisfy this). Factors are stored in place: L multipliers
// where the zeros were made, U on and above the diagonal (002 §11).
//
// Pivot modes (backend::PivotMode, ARCHITECTURE.md §7):
//   kRow:   GE with column interchanges (GEPP on A^T): A Q = L U, Q = Q_0 Q_1 ... Q_{N-1}, Q_I the
//           swaps chosen while eliminating stripe I. Q_I is applied to a stripe J > I by
//           update_stripe(I, J) just before J's update; stripes K < I are never touched again, so
//           stripe K's U rows are in the coordinates after Q_0..Q_K only. Back substitution
//           compensates: after solving stripe K, apply_solution_swaps(pivots_K) applies Q_K to the
//           vector (w^(K-1) = Q_K w^(K)); after stripe 0 the vector is x.
//   kLocal: 002 §5: row swaps inside each substripe (P_I per stripe). L entries left of the
//           stripe's diagonal block stay in their pre-swap order; forward substitution applies
//           P_I to the partially updated right-hand side right before solving with L_II.
//   kNone:  no swaps.
// A zero or non-finite pivot gives Status::numerical "zero pivot at row R" / "non-finite pivot
// at row R" (R global); non-finite values in a factored stripe or in a solution give
// "non-finite value in row R after elimination" / "non-finite solution at row R": never NaNs.
//
// A stripe part: rows [row_begin, row_begin + rows) of the matrix, columns [col_begin, n),
// column-major with leading dimension `rows` (exactly the storage layout, storage/geometry.h).
//
// Flops (h = stripe height, m = n - row_begin): eliminate_stripe ~ h^2 m - h^3/3, all but the
// substripe panels (~ s' h m) in dtrsm/dgemm; update_stripe(I, J) = h_J h_I^2 (multipliers) +
// 2 h_J h_I (n - row_end(I)) (GEMM); forward/backward substitution ~ 2 h n nrhs per stripe.
//
// Threading: functions are reentrant; calls on different stripes may run concurrently (several
// update_stripe calls may share the same read-only stripe I and pivots). The backend must allow
// it (backend/backend.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "backend/backend.h"
#include "base/status.h"

namespace stripesolve::stripe {

using backend::PivotMode;

struct StripePart {
  double* data = nullptr;
  int64_t row_begin = 0;
  int64_t rows = 0;
  int64_t col_begin = 0;
  int64_t n = 0;
  // Where the held columns end; 0: at n. Only the forward passes (forward_substitute_stripe,
  // transposed_lower_substitute_stripe) take parts that end earlier: their L reaches column
  // row_begin + rows, no further. Every other op needs the part through n.
  int64_t col_end = 0;

  int64_t held_end() const { return col_end > 0 ? col_end : n; }
  // Element (row, col) in global indices; row in the stripe, col in [col_begin, held_end()).
  double* at(int64_t row, int64_t col) const {
    return data + (row - row_begin) + (col - col_begin) * rows;
  }
};

// Pivots of one eliminated stripe, in global indices; step k belongs to row row_begin + k:
//   kRow:   column row_begin + k was swapped with column swaps[k] (>= row_begin + k), k in order;
//   kLocal: row row_begin + k was swapped with row swaps[k] (same substripe, >= row_begin + k);
//   kNone:  swaps is empty.
struct StripePivots {
  PivotMode mode = PivotMode::kNone;
  int64_t row_begin = 0;
  std::vector<int64_t> swaps;

  friend bool operator==(const StripePivots&, const StripePivots&) = default;
};

// Every op below runs backend ops (backend.h) and lends them the caller's workspace: the caller
// asks the op's *_workspace_size for the largest parts it will pass, allocates once (e.g. a
// HostWorkspace per worker) and passes it to every call; an op given too little returns
// InvalidArgument "workspace too small" before touching the part.
//
// eliminate_stripe's: the backend's largest panel or block-update workspace (for kRow on the CPU
// about 8 * substripe_rows * (n - row_begin) bytes, a substripe_rows/h fraction of the stripe).
backend::WorkspaceSize eliminate_workspace_size(const backend::Backend& backend,
                                                const StripePart& stripe, PivotMode mode,
                                                int64_t substripe_rows);
// update_stripe's, for J updated by I.
backend::WorkspaceSize update_workspace_size(const backend::Backend& backend,
                                             const StripePart& stripe_i,
                                             const StripePart& stripe_j);
// The larger of forward_substitute_stripe's and backward_substitute_stripe's, for `nrhs`
// right-hand sides.
backend::WorkspaceSize substitution_workspace_size(const backend::Backend& backend,
                                                   const StripePart& stripe, int64_t nrhs);
// Field by field.
backend::WorkspaceSize larger(const backend::WorkspaceSize& a, const backend::WorkspaceSize& b);

// Host memory lent as a workspace: 64-byte aligned, owned, freed with the object. A size with
// device bytes is kUnimplemented (no backend that needs device memory runs these ops).
class HostWorkspace {
 public:
  static Result<HostWorkspace> allocate(const backend::WorkspaceSize& size, std::string_view what);
  backend::Workspace view() const { return {data_.get(), bytes_, nullptr, 0}; }

 private:
  struct Free {
    void operator()(std::byte* p) const { std::free(p); }
  };
  std::unique_ptr<std::byte, Free> data_;
  uint64_t bytes_ = 0;
};

// <II>,<IK> (002 Figs 5, 9, 11): eliminates stripe I by itself, substripe by substripe
// (substripes of at most substripe_rows rows, 002 Eq 7): the substripe panel is factored with the
// pivot mode (<A>,<B> and its <IK> row), then the rows below it in the stripe get their
// multipliers and the trailing GEMM (<C>,<D>). Requires col_begin <= row_begin and that stripe I
// was updated by every earlier stripe. Writes L and U in place and fills *pivots.
Status eliminate_stripe(backend::Backend& backend, const StripePart& stripe, PivotMode mode,
                        int64_t substripe_rows, const backend::Workspace& workspace,
                        StripePivots* pivots);

// <JI>,<JK> (002 Fig 7): updates stripe J (below I) by eliminated stripe I: applies Q_I to J's
// columns first (kRow), stores J's multipliers in columns [i0, i1) of J and updates J's columns
// [i1, n). Requires I.col_begin <= I.row_begin, J.col_begin <= I.row_begin and
// J.row_begin >= I.row_begin + I.rows (J below I), and that I is eliminated.
Status update_stripe(backend::Backend& backend, const StripePart& stripe_i,
                     const StripePivots& pivots_i, const StripePart& stripe_j,
                     const backend::Workspace& workspace);

// Forward substitution of stripe I (call for I = 0..N-1 in order): rows of stripe I of the n x
// nrhs block `rhs` (ld_rhs) become z_I = L_II^-1 P_I (b_I - L_left z_{<I}). With kRow/kNone, P_I
// is the identity. The part may start at a column c > 0 (at most I's first row) when the rows of
// `rhs` above c are all zero (z is zero there too: a right-hand side such as a unit vector);
// InvalidArgument otherwise.
Status forward_substitute_stripe(backend::Backend& backend, const StripePart& stripe,
                                 const StripePivots& pivots, double* rhs, int64_t ld_rhs,
                                 int64_t nrhs, const backend::Workspace& workspace);

// Backward substitution of stripe I (call for I = N-1..0 in order): rows of stripe I of `rhs`
// become U_II^-1 (z_I - U_right w_right), reading rows [row_end, n). Requires col_begin <=
// row_begin. With kRow call apply_solution_swaps(pivots_I) right after it.
Status backward_substitute_stripe(backend::Backend& backend, const StripePart& stripe, double* rhs,
                                  int64_t ld_rhs, int64_t nrhs,
                                  const backend::Workspace& workspace);

// kRow: applies Q_I to the solution vector(s) (its swaps in reverse order); touches rows
// [row_begin(I), n). No-op for kLocal/kNone.
void apply_solution_swaps(const StripePivots& pivots, double* rhs, int64_t ld_rhs, int64_t nrhs);

// The largest |u_rc| of stripe I's rows of U (columns >= row, from the diagonal on) once the
// stripe is eliminated: the numerator of the pivot growth max|U| / max|A|. Reads h (n - row_begin)
// values the elimination has just written (no I/O). Requires col_begin <= row_begin.
double max_abs_upper(const StripePart& stripe);

// The transposed solve A^T y = c with the stored factors (the condition estimator's second
// operator), in two passes over the stripes (derivation beside the code):
//   pass 1, I = 0..N-1, on the part from column row_begin (the backward pass's part): applies
//     Q_I^T (kRow), solves U_II^T v_I = v_I and subtracts U_{I,>I}^T v_I from the rows below;
//   pass 2, I = N-1..0, on the part from column 0 (the forward pass's part): solves
//     L_II^T t = v_I, v_I = P_I^T t (kLocal) and subtracts L_{I,<I}^T v_I from the rows above.
// `nrhs` right-hand sides of n values (ld_v); 2 h n nrhs flops per stripe and pass, in the
// backend's transposed substitutions (BLAS dtrsm and dgemm on the CPU: the host loops they
// replace, a dot product per column, ran at about 1 GFLOP/s whatever the cores).
Status transposed_upper_substitute_stripe(backend::Backend& backend, const StripePart& stripe,
                                          const StripePivots& pivots, double* v, int64_t ld_v,
                                          int64_t nrhs, const backend::Workspace& workspace);
Status transposed_lower_substitute_stripe(backend::Backend& backend, const StripePart& stripe,
                                          const StripePivots& pivots, double* v, int64_t ld_v,
                                          int64_t nrhs, const backend::Workspace& workspace);

// Pivots as bytes (stored as a blob beside the factors) and back. Little-endian:
// u32 magic "SPV1", u32 mode, i64 row_begin, i64 count, count x i64 swaps.
std::vector<std::byte> serialize_pivots(const StripePivots& pivots);
// Corruption error naming what is wrong when the bytes are not a valid record.
Result<StripePivots> parse_pivots(std::span<const std::byte> bytes);

}  // namespace stripesolve::stripe
