// The compute backend: the operations the stripe algorithm (002 §3-6) runs on stripe parts.
//
// The interface is named by what stripe/ needs, not by BLAS routines:
//   PanelFactor        factor one substripe panel with a pivot mode (002 Fig 9/11 <A>,<B> + <IK>
//   row) BlockUpdate        multipliers + trailing update of rows by an eliminated block of rows
//                      (<C>,<D> inside a stripe, <JI>,<JK> between stripes: 002 Figs 7, 9)
//   LowerSubstitution  forward substitution of one stripe (L, and kLocal row swaps)
//   UpperSubstitution  backward substitution of one stripe (U), last stripe first (002 §6)
// Every operation is a plain value with host pointers to stripe parts in RAM (the cache's cells).
// A backend with device memory (CUDA, later) moves the data itself inside run(): it uploads what
// it needs, may pipeline column segments over streams (copy in, GEMM, copy out overlapped), and
// when run() returns every output is back in host memory. So host <-> device transfers are part
// of each operation, and the CPU backend's are no-ops.
//
// Lifecycle (CUTLASS style): can_implement(op) -> workspace_size(op) -> run(op, workspace).
// The caller owns the workspace (so the daemon's memory budget governs every allocation); a
// backend never allocates memory proportional to the problem inside run().
//
// Errors: run() returns InvalidArgument for shapes that can_implement() rejects (a bug in the
// caller), and Numerical for a zero or non-finite pivot: "zero pivot at row 1234" /
// "non-finite pivot at row 1234", naming the global row (op.global_row + local row).
//
// Threading: a Backend may be called concurrently from several threads (one elim.I and k elim.J
// threads) as long as the calls touch disjoint output memory; inputs may be shared read-only
// (e.g. stripe I's U read by several J updates at once). Implementations say how they honour it.
//
// Storage convention: every matrix block is column-major; element (r, c) of a block with leading
// dimension ld is at ptr[r + c * ld].
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "base/status.h"

namespace stripesolve::backend {

// ARCHITECTURE.md §7. kRow is the default.
enum class PivotMode {
  kRow,    // pivot of row i = largest |A_ik|, k >= i, over the whole row (column interchanges;
           // GEPP applied to A^T). All of row i lives in stripe I, so the search is complete.
  kLocal,  // 002 §5 Fig 11: largest |A_qi| over the rows q of the current substripe (row swaps)
  kNone,   // no pivoting (diagonally dominant matrices, comparisons)
  // LAPACK's row partial pivoting (GEPP of A): a mode of the dense solve only, which eliminates
  // A^T with kRow (scheduler/transposed_solve.h). No backend or stripe routine takes it.
  kGepp,
};

std::string_view pivot_mode_name(PivotMode mode);  // "row", "local", "none", "gepp"
Result<PivotMode> parse_pivot_mode(std::string_view name);
// The mode the stripes are eliminated with: kRow for kGepp, the mode itself otherwise.
PivotMode elimination_pivot(PivotMode mode);

struct WorkspaceSize {
  uint64_t host_bytes = 0;    // RAM, 64-byte aligned
  uint64_t device_bytes = 0;  // accelerator memory (0 for the CPU backend)
};

// Memory the caller lends to one run(); not touched after run() returns.
struct Workspace {
  std::byte* host = nullptr;
  uint64_t host_bytes = 0;
  void* device = nullptr;
  uint64_t device_bytes = 0;
};

// Factors the panel of rows [panel_row, panel_row + panel_rows) of a stripe part in place.
// The part has `rows` rows (all rows of the stripe) and `cols` columns; the stripe's diagonal block
// starts at local column `block_col`, so row r's diagonal element is (r, block_col + r) and the
// panel's diagonal block is columns [dc, dc + panel_rows) with dc = block_col + panel_row.
// Preconditions: the panel rows have been updated by all earlier substripes (their columns >= dc).
// Result, in place over columns [dc, cols) of the panel rows: unit lower L strictly below the
// panel diagonal (multipliers, 002 R) and U on and above it.
//   kRow:   column interchanges: step k swaps columns dc+k and swaps[k] (>= dc+k) over ALL `rows`
//           rows of the part (U rows above the panel and unreduced rows below are kept consistent).
//   kLocal: row interchanges within the panel: step k swaps rows panel_row+k and swaps[k]
//           (in [panel_row+k, panel_row+panel_rows)) over columns [block_col, cols): the
//           multipliers of earlier substripes of this stripe move with their rows (002 Fig 11),
//           columns left of block_col (multipliers of earlier stripes) do not.
//   kNone:  swaps[k] = dc+k (identity).
// Flops: about panel_rows^2 * (cols - dc) - panel_rows^3 / 3.
struct PanelFactor {
  double* part = nullptr;
  int64_t ld = 0;
  int64_t rows = 0;
  int64_t cols = 0;
  int64_t block_col = 0;
  int64_t panel_row = 0;
  int64_t panel_rows = 0;
  PivotMode mode = PivotMode::kRow;
  int64_t* swaps = nullptr;  // out: panel_rows entries, local indices (see above)
  int64_t global_row = 0;    // global row index of the part's row 0 (error messages)
};

// Eliminates rows T by an eliminated block of k rows U (002 <C>,<D> and <JI>,<JK>):
//   T[:, 0:k]    <- T[:, 0:k] * triu(U[:, 0:k])^-1      multipliers (only U's upper triangle,
//                                                        diagonal included, is read)
//   T[:, k:cols] -= T[:, 0:k] * U[:, k:cols]             the GEMM that carries nearly all flops
// U is k x cols (ld_u), T is t_rows x cols (ld_t); they must not overlap.
// Flops: t_rows * k^2 (triangular solve) + 2 * t_rows * k * (cols - k) (GEMM).
struct BlockUpdate {
  const double* u = nullptr;
  int64_t ld_u = 0;
  int64_t k = 0;
  int64_t cols = 0;
  double* t = nullptr;
  int64_t ld_t = 0;
  int64_t t_rows = 0;
};

// Forward substitution of one stripe with rows [row_begin, row_begin + rows):
//   z_I <- unit_tril(L_II)^-1 * P_I * (b_I - L_left * z_{<I})
// `part` holds the stripe's rows from column 0 (ld): L_left = columns [0, row_begin), L_II =
// columns [row_begin, row_begin + rows). `rhs` is the whole n x nrhs block (ld_rhs): rows
// [0, row_begin) are read (final z of earlier stripes), rows of stripe I updated in place.
// `row_swaps` (nullable; kLocal only) has `rows` entries: step k swaps local rows k and
// row_swaps[k] of b_I, applied in order after the L_left product.
// Flops: 2 * rows * row_begin * nrhs + rows^2 * nrhs.
// `transposed`: the step of a solve with L^T instead (the condition estimate's A^-T, --pivot
// gepp's solves): z_I <- unit_tril(L_II)^-T z_I, then the row_swaps in reverse order, then
// rows [0, row_begin) of rhs -= L_left^T z_I.
struct LowerSubstitution {
  const double* part = nullptr;
  int64_t ld = 0;
  int64_t rows = 0;
  int64_t row_begin = 0;
  const int64_t* row_swaps = nullptr;
  double* rhs = nullptr;
  int64_t ld_rhs = 0;
  int64_t nrhs = 0;
  bool transposed = false;
};

// Backward substitution of one stripe: x_I <- triu(U_II)^-1 * (z_I - U_right * x_right).
// `part` holds the stripe's rows from its diagonal column on: U_II = columns [0, rows),
// U_right = columns [rows, cols) where cols = n - row_begin. `rhs` points at row row_begin of the
// n x nrhs block: its rows [0, rows) are updated, rows [rows, cols) read.
// Flops: 2 * rows * (cols - rows) * nrhs + rows^2 * nrhs.
// `transposed`: the step of a solve with U^T instead: z_I <- triu(U_II)^-T z_I, then rows
// [rows, cols) of rhs -= U_right^T z_I.
struct UpperSubstitution {
  const double* part = nullptr;
  int64_t ld = 0;
  int64_t rows = 0;
  int64_t cols = 0;
  double* rhs = nullptr;
  int64_t ld_rhs = 0;
  int64_t nrhs = 0;
  bool transposed = false;
};

// Shape checks shared by every backend (InvalidArgument naming the field).
Status validate(const PanelFactor& op);
Status validate(const BlockUpdate& op);
Status validate(const LowerSubstitution& op);
Status validate(const UpperSubstitution& op);

class Backend {
 public:
  virtual ~Backend() = default;

  virtual std::string_view name() const = 0;

  virtual Status can_implement(const PanelFactor& op) const = 0;
  virtual WorkspaceSize workspace_size(const PanelFactor& op) const = 0;
  virtual Status run(const PanelFactor& op, const Workspace& workspace) = 0;

  virtual Status can_implement(const BlockUpdate& op) const = 0;
  virtual WorkspaceSize workspace_size(const BlockUpdate& op) const = 0;
  virtual Status run(const BlockUpdate& op, const Workspace& workspace) = 0;

  virtual Status can_implement(const LowerSubstitution& op) const = 0;
  virtual WorkspaceSize workspace_size(const LowerSubstitution& op) const = 0;
  virtual Status run(const LowerSubstitution& op, const Workspace& workspace) = 0;

  virtual Status can_implement(const UpperSubstitution& op) const = 0;
  virtual WorkspaceSize workspace_size(const UpperSubstitution& op) const = 0;
  virtual Status run(const UpperSubstitution& op, const Workspace& workspace) = 0;
};

// Checks that `workspace` is at least `size` (InvalidArgument "workspace too small: ...").
Status check_workspace(const Workspace& workspace, const WorkspaceSize& size);

}  // namespace stripesolve::backend
