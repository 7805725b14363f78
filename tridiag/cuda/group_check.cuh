// The quality check inside the one-pass SPIKE kernels (group_spike.cu; quality_check.h says what
// is checked): after the solve of a strided batch, each row's terms (|r|, |A| row sum, |x|,
// |f|), from registers, are reduced per system, each system getting its verdict without atomics on
// the maxima: a system lies whole in one warp (n <= 288) or whole in one group of warps. The maxima
// are doubles (fmax: one instruction, where the bit patterns of check_terms.cuh take several).
// Internal to tridiag/cuda/.
#pragma once

#include "tridiag/cuda/check_terms.cuh"
#include "tridiag/cuda/kernel_limits.h"

namespace stripesolve::tridiag::gpu::check {

// A row's (or a system's) maxima as doubles: |r|, |A| row sum, |x|, |f|, with r = +inf where the
// residual or x is not finite (backward_error.cc's non_finite: fmax drops a NaN).
struct RowMax {
  double r, a, x, f;
};

__device__ __forceinline__ RowMax max_of(const RowMax& p, const RowMax& q) {
  return {fmax(p.r, q.r), fmax(p.a, q.a), fmax(p.x, q.x), fmax(p.f, q.f)};
}

__device__ __forceinline__ RowMax shfl_down(const RowMax& v, int offset) {
  return {__shfl_down_sync(kFullMask, v.r, offset), __shfl_down_sync(kFullMask, v.a, offset),
          __shfl_down_sync(kFullMask, v.x, offset), __shfl_down_sync(kFullMask, v.f, offset)};
}

__device__ __forceinline__ RowMax shfl(const RowMax& v, int lane) {
  return {__shfl_sync(kFullMask, v.r, lane), __shfl_sync(kFullMask, v.a, lane),
          __shfl_sync(kFullMask, v.x, lane), __shfl_sync(kFullMask, v.f, lane)};
}

__device__ __forceinline__ RowMax warp_max(RowMax v) {
  for (int offset = 16; offset > 0; offset /= 2) {
    v = max_of(v,
               {__shfl_xor_sync(kFullMask, v.r, offset), __shfl_xor_sync(kFullMask, v.a, offset),
                __shfl_xor_sync(kFullMask, v.x, offset), __shfl_xor_sync(kFullMask, v.f, offset)});
  }
  return v;
}

// One row of backward_error() (backward_error.cc: Maxima::add), in its order of operations.
__device__ __forceinline__ RowMax row_max(double left, double diag, double right, double x_left,
                                          double x_mid, double x_right, double rhs) {
  const double ax = __dadd_rn(__dadd_rn(__dmul_rn(left, x_left), __dmul_rn(diag, x_mid)),
                              __dmul_rn(right, x_right));
  const double r = fabs(__dsub_rn(rhs, ax));
  return {r <= 1.7976931348623157e308 ? r : double_of(kInfBits),
          __dadd_rn(__dadd_rn(fabs(left), fabs(diag)), fabs(right)), fabs(x_mid), fabs(rhs)};
}

// backward_error()'s result from a system's maxima (error_of in check_terms.cuh, on doubles).
__device__ __forceinline__ double error_of(const RowMax& m) {
  return check::error_of(RowBits{bits_of(m.r), bits_of(m.a), bits_of(m.x), bits_of(m.f)});
}

// The maxima of a warp's rows (steps k = 0.. of 32 rows, `rows` of them real), in every lane:
// term(k) gives the lane's row of step k (a group's warps, each part of one system).
template <int kSteps, typename Term>
__device__ __forceinline__ RowMax warp_rows_max(Term&& term, int rows, int lane) {
  RowMax m{0, 0, 0, 0};
#pragma unroll
  for (int k = 0; k < kSteps; ++k) {
    if (32 * k + lane < rows) m = max_of(m, term(k));
  }
  return warp_max(m);
}

// The verdicts of the systems of a warp that holds them whole (`rows` rows, systems of n <= 288
// rows one after another, the first numbered first_system); term(k) gives the lane's row of step
// k. Row order, 32 rows a step, lane k taking row k of the step: a step inside one system keeps
// each lane's own maxima (`run`); a step across systems reduces by segments (a system's rows are
// consecutive lanes; after log 32 rounds the lane that starts a segment holds its maxima) and
// gives each system that ends in the step its verdict. The system still open at a step's end
// carries its maxima (`carry`, the same in every lane) into the next.
template <int kSteps, typename Term>
__device__ __forceinline__ void lone_warp_verdicts(Term&& term, int rows, int n,
                                                   std::size_t first_system,
                                                   const CheckTarget& target, int lane) {
  const RowMax zero{0, 0, 0, 0};
  RowMax run = zero, carry = zero;
  bool run_used = false;                   // warp-uniform
  int sys_row = lane % n, key = lane / n;  // this lane's row: its row in its system, its system
#pragma unroll
  for (int k = 0; k < kSteps; ++k) {
    const int base = 32 * k;
    if (base >= rows) break;
    const bool valid = base + lane < rows;
    RowMax v = valid ? term(k) : zero;
    const int first_row = __shfl_sync(kFullMask, sys_row, 0);
    if (first_row + 31 < n) {  // the whole step inside lane 0's system
      run = max_of(run, v);
      run_used = true;
      if (first_row + 31 == n - 1) {  // ... which ends with it
        const RowMax m = max_of(carry, warp_max(run));
        if (lane == 0) classify(first_system + key, error_of(m), target.tolerance, target);
        run = carry = zero;
        run_used = false;
      }
    } else {
      if (run_used) carry = max_of(carry, warp_max(run));
      run = zero;
      run_used = false;
      if (lane == 0) v = max_of(v, carry);  // lane 0's row is in the open system, if any
      carry = zero;
      for (int offset = 1; offset < 32; offset *= 2) {
        const RowMax other = shfl_down(v, offset);
        if (lane + offset < 32 && sys_row + offset < n) v = max_of(v, other);
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
