// One-pass SPIKE for strided and interleaved batches of small and medium systems (n <=
// kMaxGroupSystem), and its two passes for larger systems; internal to tridiag/cuda/. See
// group_spike.cu.
#pragma once

#include <cstddef>

#include "tridiag/cuda/device_solve.h"
#include "tridiag/cuda/kernel_limits.h"

namespace stripesolve::tridiag::gpu {

// The rows of one solve by the kernel. Couplings (dl, du) are cut at every multiple of n, so
// that a strided batch of systems of n rows, or one system (n = rows), is one solve. Breakdown
// flags: pivot_flag gets the first row with a zero, tiny or non-finite pivot, x_flag (where not
// null) the first row with a non-finite solution, each as the row of the original system that
// row r stands for, (r + 1) * stride - 1 (a reduced system's row stands for a separator).
struct OnePass {
  bool pivoting;
  const double *dl, *d, *du, *f;
  double* x;
  std::size_t rows, n;
  double tol;
  unsigned long long* pivot_flag;
  unsigned long long* x_flag;
  std::size_t stride;
  // 0: the arrays hold the rows in order. Else an interleaved batch of `count` systems of n
  // rows: row i of system j at i * count + j (the kernels read and write it in place).
  std::size_t count = 0;
  // Where errors is set (whole solves by launch_group_spike only): every system's verdict of the
  // quality check (check_terms.cuh), from its rows as x goes out.
  CheckTarget check{};
};

// Solves s.rows / s.n systems of s.n <= kMaxGroupSystem rows, each read once and written once,
// in groups of `warps` warps (choose_kernel's width: 1 where a warp holds whole systems).
void launch_group_spike(const OnePass& s, int warps, void* stream);
// Raises the kernels' dynamic shared memory limit to what their launches ask for; the first
// error, if any. Once per process, before the first launch (device_solve.cu).
cudaError_t set_group_spike_limits();

// A system of any size in two passes over it, every warp of 288 rows a partition of SPIKE
// whose separator is its last row. Pass 1 leaves each warp's part of its separator's row of
// the reduced system in WarpEnds (13 arrays of separators(rows)); launch_form_separators puts
// the rows together; the caller solves that system (x_sep); pass 2 solves each warp again
// with its two separators known and writes x.
struct WarpEnds {
  double *rl, *rd, *cs, *rg;  // the separator row with the warp's own interior substituted
  double* z_last[3];          // the warp level's last row, for f and its two couplings
  double* e_first[3];         // lane 0's first interior row, for f and its two spikes
  double* z_first[3];         // the warp level's first row
};
inline std::size_t separators(std::size_t rows) {
  return (rows + kWarpRows - 1) / kWarpRows;
}
void launch_warp_ends(const OnePass& s, const WarpEnds& ends, void* stream);
void launch_form_separators(const WarpEnds& ends, std::size_t count, double* rl, double* rd,
                            double* ru, double* rf, void* stream);
void launch_warp_finish(const OnePass& s, const double* x_sep, void* stream);

}  // namespace stripesolve::tridiag::gpu
