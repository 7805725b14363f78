// The quality check inside the one-pass SPIKE kernels (group_spike.cu; quality_check.h says what
// is checked): after the solve of a strided batch, each lane takes the terms (|r|, |A| row sum,
// |x|, |f|) of its own nine consecutive rows, and the lanes' maxima meet per system without
// atomics: a system lies whole in one warp (n <= 288) or whole in one group of warps. The maxima
// are doubles (a compare and a select, where the bit patterns of check_terms.cuh take several).
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

// The larger of an accumulator `acc` (never a NaN: it starts at 0 and takes only larger values)
// and a new value `v`, which a NaN never beats, as fmax drops it: one compare and a select, where
// fmax takes four instructions.
__device__ __forceinline__ double larger(double acc, double v) {
  return v > acc ? v : acc;
}

__device__ __forceinline__ RowMax max_of(const RowMax& acc, const RowMax& v) {
  return {larger(acc.r, v.r), larger(acc.a, v.a), larger(acc.x, v.x), larger(acc.f, v.f)};
}

__device__ __forceinline__ RowMax shfl_up(const RowMax& v, int offset) {
  return {__shfl_up_sync(kFullMask, v.r, offset), __shfl_up_sync(kFullMask, v.a, offset),
          __shfl_up_sync(kFullMask, v.x, offset), __shfl_up_sync(kFullMask, v.f, offset)};
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

// A lane's rows of one warp that holds whole systems, one after another (group_spike.cu:
// lane_rows_check): the system that ended in the lane without starting there (its `head`: the
// rest of it lies in the lanes before) and the one still open at the lane's end (its `tail`,
// started in the lane where `tail_starts`, or the lane lies inside it). Systems that start and
// end in the lane were classified by the lane itself.
struct LaneSegments {
  RowMax head{0, 0, 0, 0}, tail{0, 0, 0, 0};
  std::size_t head_system = 0;
  bool has_head = false, tail_starts = true;
};

// The verdicts of the systems that span lanes: an inclusive scan of the tails up the lanes,
// restarting where a tail starts, gives each lane the maxima of its open system so far; the lane
// where that system ends adds its head. Max is associative, so the verdicts equal those of one
// pass over the rows in order.
__device__ __forceinline__ void spanning_verdicts(const LaneSegments& s, const CheckTarget& target,
                                                  int lane) {
  RowMax v = s.tail;
  bool starts = s.tail_starts;
#pragma unroll
  for (int offset = 1; offset < 32; offset *= 2) {
    const RowMax other = shfl_up(v, offset);
    const bool other_starts = __shfl_up_sync(kFullMask, static_cast<int>(starts), offset) != 0;
    if (lane >= offset && !starts) {
      v = max_of(v, other);
      starts = other_starts;
    }
  }
  const RowMax before = shfl_up(v, 1);
  if (s.has_head) {
    classify(s.head_system, error_of(max_of(before, s.head)), target.tolerance, target);
  }
}

}  // namespace stripesolve::tridiag::gpu::check
