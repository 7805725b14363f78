// The GPU tier's compute (8b of ../shared/design/ARCHITECTURE.md): stripe parts in device memory
// and the operations the elim.I / elim.J / substitution roles run on them. No CUDA type here; the
// implementation is backend/cuda/ (cuBLAS, cuSOLVER and a few kernels). In a build without CUDA,
// DeviceEngine::open() returns kUnavailable.
//
// What lives where: the scheduler's GPU roles (scheduler/gpu_factor_run.h) decide which stripe
// parts are resident (cache/device_tier.h keeps that table and carves the device pool); a lane
// only computes on the blocks it is given. Parts on the device have the layout of their RAM cell
// (rows x cols, column-major, ld = rows), so a column range is one contiguous copy.
//
// Lanes: each worker thread owns one DeviceLane (its streams, cuBLAS and cuSOLVER handles, events
// and workspace). Every lane operation has finished when it returns (the lane synchronises its
// streams), so the caller's cell transitions order all accesses as on the CPU. Operations of
// different lanes run concurrently on the device: that is how elim.I (a high-priority lane) hides
// under the J updates, and how one J's copies overlap another J's GEMMs.
//
// Pivots on the device (kRow): an eliminated stripe's swaps are kept twice: raw (step k swaps
// columns i0+k and i0+raw[k], for the substitution) and as a column permutation (pairs dst <- src,
// relative to i0), which the update applies to a J part in one gather instead of S sequential
// swaps.
//
// Errors: kNumerical "zero pivot at row R" / "non-finite value in row R after elimination"
// (global R, as the CPU backend), kResourceExhausted for device memory, kInternal for CUDA errors
// (naming the call).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "base/status.h"

namespace stripesolve::backend {

// A column-major block in device memory: element (r, c) at data[r + c * ld].
struct DeviceBlock {
  double* data = nullptr;
  int64_t rows = 0;
  int64_t cols = 0;
  int64_t ld = 0;

  // Columns [c0, cols) as a block of their own.
  DeviceBlock from_column(int64_t c0) const { return {data + c0 * ld, rows, cols - c0, ld}; }
};

// Bytes of the columns [c0, c1) of a column-major part with leading dimension `ld`.
inline size_t column_bytes(int64_t ld, int64_t c0, int64_t c1) {
  return sizeof(double) * static_cast<size_t>(ld) * static_cast<size_t>(c1 - c0);
}

// A permutation of columns: for p < count, column first + pairs[2p] receives (old) column
// first + pairs[2p + 1]. `pairs` is in device memory.
struct ColumnPermutation {
  const int32_t* pairs = nullptr;
  int64_t count = 0;
  int64_t first = 0;
};

// The net column permutation of the sequential swaps "step k exchanges columns k and swaps[k]"
// (swaps[k] >= k, k = 0 .. size-1), as (dst, src) pairs; empty for the identity.
std::vector<int32_t> permutation_pairs(const std::vector<int32_t>& swaps);

// J <- update by U (002 <JI>, <JK>, with K eliminated rows, possibly a whole meta-stripe):
//   J[:, j_col : j_col+K]   <- J[:, j_col : j_col+K] * triu(U[:, 0:K])^-1     (dtrsm)
//   J[:, j_col+K : ]        -= J[:, j_col : j_col+K] * U[:, K:]              (dgemm by segments)
// after the column permutations (kRow, in order; their `first` is relative to column j_col).
// U is K x (J.cols - j_col). With host_in, J's columns [j_col, cols) are first copied in from
// that pinned host part (same layout as J), by segments overlapped with the update where no
// permutation needs the whole part; with host_out they are copied back segment by segment as
// their GEMM finishes. Without either, the GEMM is one call over all columns.
//
// u_inverse (optional): the inverses of U's nb x nb diagonal blocks (invert_diagonal_blocks, nb =
// u_inverse.cols). The multipliers then come from GEMMs only - block column p of J is reduced by
// the earlier ones and multiplied by block p's inverse, the blocked triangular solve with
// inverted diagonal blocks of MAGMA's trsm - instead of one dtrsm by the K x K triangle, which
// runs at a fraction of the GEMM rate.
struct DeviceUpdate {
  DeviceBlock j;
  int64_t j_col = 0;
  DeviceBlock u;
  DeviceBlock u_inverse;
  std::vector<ColumnPermutation> permutations;
  int64_t segment_columns = 8192;
  const double* host_in = nullptr;
  double* host_out = nullptr;
};

class DeviceLane {
 public:
  virtual ~DeviceLane() = default;

  // Columns [c0, c1) of a part between pinned host memory and the device (same layout).
  virtual Status upload(const double* host, const DeviceBlock& dst, int64_t c0, int64_t c1) = 0;
  virtual Status download(const DeviceBlock& src, double* host, int64_t c0, int64_t c1) = 0;
  // `bytes` from `src` in the memory of device `src_device` to `dst` on this lane's device
  // (cudaMemcpyPeer: over NVLink where the devices have it, else staged by the driver).
  virtual Status copy_from_peer(double* dst, const double* src, int src_device, uint64_t bytes) = 0;
  // values (host, any memory) to `device` (int32 entries): a column permutation made elsewhere.
  virtual Status upload_ints(const std::vector<int32_t>& values, int32_t* device) = 0;
  // download() without waiting: the copy is queued behind the lane's work so far, on its
  // copy-out stream. Until wait(ticket) has returned (from any thread), neither the host memory
  // may be read nor the device block written or reused. Ticket 0 means nothing to wait for.
  virtual Result<uint64_t> download_later(const DeviceBlock& src, double* host, int64_t c0,
                                          int64_t c1) = 0;
  virtual Status wait(uint64_t ticket) = 0;
  // Waits for everything the lane has queued (before its memory or the host's goes away).
  virtual Status synchronize() = 0;

  // stripe::eliminate_stripe on the device: the part's diagonal block starts at local column
  // block_col. Fills host_swaps (rows entries, as eliminate_stripe's local indices: kRow local
  // columns, kLocal local rows, kNone untouched) and, for kRow/kLocal, device_raw (rows int32,
  // relative to block_col / row 0) and, for kRow, device_perm (permutation pairs of the swaps,
  // 4 * rows int32 at most) with *perm_count set.
  virtual Status eliminate(const DeviceBlock& part, int64_t block_col, PivotMode mode,
                           int64_t substripe_rows, int64_t global_row, int64_t* host_swaps,
                           int32_t* device_raw, int32_t* device_perm, int64_t* perm_count) = 0;

  // The largest |entry| of the part's upper trapezoid (row r from local column block_col + r
  // on; NaNs skipped): an eliminated stripe's U, for the pivot growth (stripe::max_abs_upper on
  // the device). Waits for the lane's work.
  virtual Result<double> max_abs_upper(const DeviceBlock& part, int64_t block_col) = 0;

  virtual Status update(const DeviceUpdate& op) = 0;

  // dst[dst_row + r, c] = src[r, c] for the src block (meta-stripe U blocks).
  virtual Status copy_rows(const DeviceBlock& dst, int64_t dst_row, const DeviceBlock& src) = 0;
  // inverse (K x nb, ld K) <- the inverses of the nb x nb diagonal blocks of the upper triangle
  // of u's first K columns (K = u.rows; the last block may be smaller), block p in rows
  // [p nb, p nb + b), columns [0, b). The blocks are inverted by triangular solves against the
  // identity (a b^3 / 3-flop step per block, once per U).
  virtual Status invert_diagonal_blocks(const DeviceBlock& u, const DeviceBlock& inverse) = 0;
  // Applies a permutation to rows [0, rows) of `target`.
  virtual Status permute_columns(const DeviceBlock& target, const ColumnPermutation& perm) = 0;

  // A pass of the substitution over resident factor stripes, in the order given (forward:
  // first stripe first; backward: last first), on the n x nrhs block `rhs` in device memory
  // (backend.h's Lower/Upper Substitution per stripe). Each stripe's part is its rows
  // [row_begin, row_begin + rows) from column 0 (h x n). forward: a stripe's raw are kLocal's row
  // swaps (nullable); backward: kRow's raw column swaps, applied to the solution afterwards
  // (stripe::apply_solution_swaps). The stripes are queued back to back; the lane waits once, at
  // the end of the pass.
  struct FactorStripe {
    DeviceBlock part;
    int64_t row_begin = 0;
    const int32_t* raw = nullptr;
  };
  virtual Status forward(const std::vector<FactorStripe>& stripes, const DeviceBlock& rhs) = 0;
  virtual Status backward(const std::vector<FactorStripe>& stripes, const DeviceBlock& rhs) = 0;
  // The two passes of a solve with A^T on the same factors (stripe_ops.h's transposed
  // substitutions, the condition estimate's second operator), queued back to back like the
  // passes above. transposed_upper, first stripe first: kRow's raw swaps in order, then
  // triu(U_II)^-T on the stripe's rows and U_{I,>I}^T times them off the rows below.
  // transposed_lower, last stripe first: tril(L_II)^-T (unit) on the stripe's rows, kLocal's raw
  // row swaps undone (last first), then L_{I,<I}^T times them off the rows above.
  virtual Status transposed_upper(const std::vector<FactorStripe>& stripes,
                                  const DeviceBlock& rhs) = 0;
  virtual Status transposed_lower(const std::vector<FactorStripe>& stripes,
                                  const DeviceBlock& rhs) = 0;

  // The residual on a copy of the original matrix kept on the device: for its row stripes
  // (each `part` h x n, from column 0, at row_begin; raw unused), r[row_begin + q, k] -= sum_c
  // part[q, c] x[c, k] (r and x n x nrhs; r holds b on entry), and what the backward error and
  // the condition estimate take of A, into `sums` (2n + 1 doubles of device memory, zeroed
  // here): [0, n) each row's sum of |a|, [n, 2n) each column's, [2n] the largest |a|. Waits for
  // its work. transposed: the stripes are rows of A^T (--pivot gepp's object), and r -= A x is
  // r[c, k] -= sum_q part[q, c] x[row_begin + q, k]; `sums` are still the stripes' own (the
  // caller swaps rows and columns).
  virtual Status residual(const std::vector<FactorStripe>& stripes, const DeviceBlock& x,
                          const DeviceBlock& r, double* sums, bool transposed) = 0;
};

struct DeviceEngineOptions {
  // SMs the low-priority lanes (the J sweeps' GEMMs) leave to the high-priority ones (elim.I,
  // the look-ahead updates): the low-priority lanes' kernels run in a green context of the
  // device's other SMs, the high-priority lanes' anywhere. 0: every lane on every SM. The panel
  // (cuSOLVER getrf of a 2048-wide stripe) is a chain of small kernels that, beside the GEMMs
  // on all SMs, waits for each GEMM block to finish: 20.5 ms alone, 108-117 ms beside two GEMM
  // streams on the H200 (bench_panel_sms).
  int panel_sms = 0;
  // The depth (k) of each J-update GEMM: an update by a meta-stripe (k = S^m S) runs as GEMMs of
  // at most this depth, accumulating into J; 0: one GEMM. A GEMM block holds its SM for the
  // whole k loop, so the panel's kernels, each waiting for blocks to finish, get SMs as many
  // times more often as the pieces are shorter. bench_panel_sms on the H200 (57344 x 2048 panel
  // beside two streams of 2048 x 49152 x 8192 GEMMs): k whole, panel 117 ms, GEMMs 53.0
  // TFLOP/s; pieces of 2048, 52 ms and 56.3; of 1024, 38 ms and 54.6. The whole RAM-tier solve
  // did not change (n = 57344: 38.5 / 37.9 / 39.1 TFLOP/s at 2048 / 1024 / 0 on one H200, 59.1
  // / 59.0 at 2048 / 0 on two): the eliminations got shorter and the sweeps longer. So 0.
  int64_t update_k = 0;
  // Blocks of the one-launch panel (backend/cuda/persistent_panel.h) for `row` eliminations: the
  // transposed stripe factored by one cooperative kernel that holds this many SMs (at least one
  // per 2048 of its rows) for its whole length, instead of cuSOLVER getrf's chain of kernels
  // over the device. 0: getrf. Stripes it does not take (rows not a multiple of 8, more than
  // 131072 columns, no room for its scratch) keep getrf.
  int panel_blocks = 0;
};

class DeviceEngine {
 public:
  // Opens device `device` (kUnavailable without CUDA or without that device; kInvalidArgument
  // when options.panel_sms leaves the low-priority lanes no SMs).
  static Result<std::unique_ptr<DeviceEngine>> open(int device,
                                                    const DeviceEngineOptions& options = {});
  // Whether the CUDA libraries an engine computes with (cuBLAS, cuSOLVER: opened at run time by
  // the first call, backend/cuda/libraries.h) are at hand: kUnavailable naming the one missing,
  // or without CUDA.
  static Status libraries_ready();
  virtual ~DeviceEngine() = default;

  virtual std::string description() const = 0;
  virtual int device() const = 0;
  virtual uint64_t free_memory() const = 0;

  // cudaMalloc / cudaFree of the pool the device tier carves.
  virtual Result<void*> allocate(uint64_t bytes, const std::string& what) = 0;
  virtual void release(void* data) = 0;
  // Lets this device read and write the memory of device `peer` directly (NVLink / PCIe peer
  // access), where the hardware allows; where not, copy_from_peer still works, staged.
  virtual Status enable_peer_access(int peer) = 0;
  // Pins (cudaHostRegister) / unpins an existing host block: the RAM cache's arena.
  virtual Status register_host(void* data, uint64_t bytes) = 0;
  virtual void unregister_host(void* data) = 0;

  // Device bytes of a lane that eliminates stripes of up to `rows` x `cols` with `mode`
  // (transposed stripe + solver workspace), or of an update lane (rows = 0) whose J parts have
  // up to `j_rows` rows and whose ranges up to `k_rows` rows (the permutation gather's buffer).
  virtual Result<uint64_t> lane_workspace_bytes(int64_t rows, int64_t cols, PivotMode mode,
                                                int64_t j_rows, int64_t k_rows) const = 0;
  // A lane with its workspace at `workspace` (lane_workspace_bytes of the same arguments).
  // high_priority: elim.I and the look-ahead updates (all SMs, highest stream priority); else a
  // sweep lane (lowest priority, fenced off the panel's SMs when options.panel_sms > 0).
  virtual Result<std::unique_ptr<DeviceLane>> make_lane(bool high_priority, int64_t rows,
                                                        int64_t cols, PivotMode mode,
                                                        int64_t j_rows, int64_t k_rows,
                                                        void* workspace) = 0;
};

}  // namespace stripesolve::backend
