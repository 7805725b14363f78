// The GPU tier's panel (elim.I's GEPP of a transposed stripe) in ONE launch on a few SMs
// (engine.gpu_panel_blocks; backend/cuda/lane_factor.cc): LU with partial pivoting of a tall
// panel, m x h with m >> h. cuSOLVER's getrf, the
// cooperative leaves (cooperative_panel.h) and the tournament (tournament_panel.h) each launch
// many kernels a panel, and beside the sweeps' GEMMs every launch waits for SMs the GEMM blocks
// hold for their whole k loop. This kernel waits once: its blocks stay resident for the whole
// panel, and their SMs go back to the sweeps when it ends.
//
// The panel is stored by rows, as the GPU tier keeps a stripe (element (r, c) at a[r * ld + c]:
// the transposed stripe's rows are the stripe's columns), so no transposes are needed around it.
// Block b owns a contiguous range of rows for the whole factorization; rows never move until the
// end (pivoting by marking: a chosen row is flagged and keeps its place), then the rows getrf's
// swaps would have moved are moved once. The columns go in blocks of 64, left-looking:
//   (A) the block's columns updated by every earlier pivot: one GEMM over the block's own rows
//       (FP64 tensor cores through mma.sync), K = the columns done so far;
//   (B) the 64 columns factored 8 at a time, the 8 held in registers (each thread its rows). A
//       column: every block publishes its largest candidate and its 8 values in a slot tagged
//       with the step, waits for every block's slot of that step (no counter, no barrier) and
//       applies the winner. After each 8, their update of the block's later columns
//       (right-looking; a warp goes along one row at a time, so that an access is one row's
//       segment, the rows' multipliers passed through shared memory);
//   (D) the chosen rows' later columns (U) by a GEMM split over the blocks by columns and a
//       64 x 64 unit triangular solve, then a grid barrier.
// Pivots are GEPP's (largest magnitude; ties to the lowest original row, where getrf takes the
// lowest current position), so they equal getrf's on data without ties. Output as getrf on the
// transposed storage: L unit lower and U in place, ipiv 1-based, *info the first zero pivot.
#pragma once

#include <cstdint>

#include <cuda_runtime.h>

namespace stripesolve::backend::cuda {

class PersistentPanel {
 public:
  static constexpr int kThreads = 256;
  static constexpr int kRowsPerThread = 8;  // the 8 columns of each row in registers
  static constexpr int kMaxRowsPerBlock = kThreads * kRowsPerThread;
  static constexpr int kMaxColumns = 1024;
  static constexpr int kMaxBlocks = 64;

  // The blocks factor() launches for m rows when `wanted` are asked for: at least enough that
  // each holds at most kMaxRowsPerBlock rows, at most one per row.
  static int blocks_for(int64_t m, int wanted);

  // The most blocks of the kernel `device` holds at once (one a multiprocessor where its shared
  // memory allows), at most kMaxBlocks; 0 when the device cannot launch it cooperatively (or on
  // an error of the queries). factor() with more blocks fails to launch.
  static int resident_blocks(int device);

  // Bytes of device scratch factor() needs for panels of up to h columns and `blocks` blocks.
  static uint64_t scratch_bytes(int64_t h, int blocks);

  // Factors the m x h panel a (by rows, ld >= h, m >= h, h a multiple of 8, h <= kMaxColumns,
  // m < 2^31) in place on `stream` with blocks_for(m, blocks) resident blocks, as getrf factors
  // the transpose of this storage. `scratch`: scratch_bytes(h, blocks) of device memory.
  // Returns the launch's error (cudaErrorInvalidValue for a shape it does not take,
  // cudaErrorCooperativeLaunchTooLarge when the blocks cannot be resident together).
  // Where factor() leaves block 0's time in each phase (device memory, kPhases nanosecond
  // counts): (A) GEMMs, column steps' own work, their barrier waits, their winner and rank-1
  // update, the 8 columns' write-back and later-column update, (D), the final row moves.
  static constexpr int kPhases = 7;
  static const long long* phase_nanoseconds(const void* scratch);

  static cudaError_t factor(double* a, int64_t ld, int64_t m, int64_t h, int32_t* ipiv,
                            int32_t* info, int blocks, void* scratch, cudaStream_t stream);
};

}  // namespace stripesolve::backend::cuda
