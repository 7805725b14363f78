// The quality check inside the one-pass SPIKE kernels (group_spike.cu; quality_check.h says what
// is checked): after the solve, each row's terms (|r|, |A| row sum, |f|: check_terms.cuh) lie in
// the warp's shared rows the solve no longer needs, and x in its staging rows. These functions
// reduce them per system and give each system its verdict, without atomics on the maxima: a
// system lies whole in one warp (n <= 288) or whole in one group of warps. Internal to
// tridiag/cuda/.
#pragma once

#include "tridiag/cuda/check_terms.cuh"
#include "tridiag/cuda/kernel_limits.h"

namespace stripesolve::tridiag::gpu::check {

// A warp's rows: the check's terms of row i and its x.
struct WarpTerms {
  const double* r;
  const double* a;
  const double* f;
  const double* x;
  __device__ RowBits at(int i) const {
    return {bits_of(r[i]), bits_of(a[i]), bits_of(fabs(x[i])), bits_of(f[i])};
  }
};

// The maxima of the warp's first `rows` rows, in every lane (a group's warps, each part of one
// system).
__device__ inline RowBits warp_rows_max(const WarpTerms& t, int rows, int lane) {
  RowBits m{0, 0, 0, 0};
  for (int i = lane; i < rows; i += 32) m = max_bits(m, t.at(i));
  return warp_max(m);
}

// The verdicts of the systems of a warp that holds them whole (`rows` rows, systems of n <= 288
// rows one after another, the first numbered first_system). Row order, 32 rows a step, lane k
// taking row k of the step: a step inside one system keeps each lane's own maxima (`run`); a step
// across systems reduces by segments (a system's rows are consecutive lanes; after log 32 rounds
// the lane that starts a segment holds its maxima) and gives each system that ends in the step
// its verdict. The system still open at a step's end carries its maxima (`carry`, the same in
// every lane) into the next.
__device__ inline void lone_warp_verdicts(const WarpTerms& t, int rows, int n,
                                          std::size_t first_system, const CheckTarget& target,
                                          int lane) {
  const RowBits zero{0, 0, 0, 0};
  RowBits run = zero, carry = zero;
  bool run_used = false;                   // warp-uniform
  int sys_row = lane % n, key = lane / n;  // this lane's row: its row in its system, its system
  for (int base = 0; base < rows; base += 32) {
    const bool valid = base + lane < rows;
    RowBits v = valid ? t.at(base + lane) : zero;
    const int first_row = __shfl_sync(kFullMask, sys_row, 0);
    if (first_row + 31 < n) {  // the whole step inside lane 0's system
      run = max_bits(run, v);
      run_used = true;
      if (first_row + 31 == n - 1) {  // ... which ends with it
        const RowBits m = max_bits(carry, warp_max(run));
        if (lane == 0) classify(first_system + key, error_of(m), target.tolerance, target);
        run = carry = zero;
        run_used = false;
      }
    } else {
      if (run_used) carry = max_bits(carry, warp_max(run));
      run = zero;
      run_used = false;
      if (lane == 0) v = max_bits(v, carry);  // lane 0's row is in the open system, if any
      carry = zero;
      for (int offset = 1; offset < 32; offset *= 2) {
        const RowBits other = shfl_down(v, offset);
        if (lane + offset < 32 && sys_row + offset < n) v = max_bits(v, other);
      }
      const bool starts = valid && (lane == 0 || sys_row == 0);
      if (starts && lane + (n - 1 - sys_row) <= 31) {
        classify(first_system + key, error_of(v), target.tolerance, target);
      }
      const int last_row = __shfl_sync(kFullMask, sys_row, 31);
      const bool last_valid = base + 31 < rows;
      if (last_valid && last_row < n - 1) {  // the last segment goes on into the next step
        const int start = last_row >= 31 ? 0 : 31 - last_row;
        carry = shfl(v, start);
      }
    }
    // The next step's rows: 32 further on.
    if (n >= 32) {
      sys_row += 32;
      if (sys_row >= n) {
        sys_row -= n;
        ++key;
      }
    } else {
      key += (sys_row + 32) / n;
      sys_row = (sys_row + 32) % n;
    }
  }
}

}  // namespace stripesolve::tridiag::gpu::check
