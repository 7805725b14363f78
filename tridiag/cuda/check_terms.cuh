// The device quality check's arithmetic (quality_check.h), shared by its own kernels
// (quality_check.cu) and the one-pass solve kernels that check as they write x (group_spike.cu):
// a row's terms of backward_error() with its rounding (no fused multiply-add: the CPU build does
// not contract), maxima kept as the bit patterns of non-negative doubles (their order as unsigned
// integers is their order as numbers, and a NaN lands above +inf), and a system's verdict against
// the shared tolerance. Internal to tridiag/cuda/.
#pragma once

#include <cooperative_groups.h>

#include <climits>
#include <cuda_runtime.h>

#include "tridiag/cuda/device_solve.h"

namespace stripesolve::tridiag::gpu::check {

constexpr unsigned kFullMask = 0xffffffffu;
constexpr unsigned long long kNoSystem = ULLONG_MAX;
constexpr unsigned long long kInfBits = 0x7ff0000000000000ULL;

// CheckTarget::header: the reductions' results.
enum HeaderSlot { kWorstBits = 0, kWorstSystem = 1, kSuspects = 2, kHeaderSlots = 4 };

// A row's (or a system's) maxima of |residual|, |A| row sum, |x| and |f|, as bits.
struct RowBits {
  unsigned long long r, a, x, f;
};

__device__ __forceinline__ unsigned long long bits_of(double v) {
  return static_cast<unsigned long long>(__double_as_longlong(v));
}
__device__ __forceinline__ double double_of(unsigned long long v) {
  return __longlong_as_double(static_cast<long long>(v));
}

__device__ __forceinline__ RowBits max_bits(const RowBits& p, const RowBits& q) {
  return {max(p.r, q.r), max(p.a, q.a), max(p.x, q.x), max(p.f, q.f)};
}

__device__ __forceinline__ RowBits shfl_down(const RowBits& v, int offset) {
  return {__shfl_down_sync(kFullMask, v.r, offset), __shfl_down_sync(kFullMask, v.a, offset),
          __shfl_down_sync(kFullMask, v.x, offset), __shfl_down_sync(kFullMask, v.f, offset)};
}

// One row of backward_error() (backward_error.cc: Maxima::add), in its order of operations.
__device__ __forceinline__ RowBits row_bits(double left, double diag, double right, double x_left,
                                            double x_mid, double x_right, double rhs) {
  const double ax = __dadd_rn(__dadd_rn(__dmul_rn(left, x_left), __dmul_rn(diag, x_mid)),
                              __dmul_rn(right, x_right));
  const double a = __dadd_rn(__dadd_rn(fabs(left), fabs(diag)), fabs(right));
  return {bits_of(fabs(__dsub_rn(rhs, ax))), bits_of(fabs(a)), bits_of(fabs(x_mid)),
          bits_of(fabs(rhs))};
}

// backward_error()'s result from a system's maxima: +inf for a non-finite residual or x.
__device__ __forceinline__ double error_of(const RowBits& m) {
  const double inf = double_of(kInfBits);
  if (m.r >= kInfBits || m.x >= kInfBits) return inf;
  const double r = double_of(m.r);
  const double den = __dadd_rn(__dmul_rn(double_of(m.a), double_of(m.x)), double_of(m.f));
  if (den == 0.0) return r == 0.0 ? 0.0 : inf;
  return __ddiv_rn(r, den);
}

// A system's verdict: within the tolerance, its error (the worst is found afterwards from
// `errors`, worst_kernel: one atomic a system on one address cost more than the check's reads);
// else onto the suspects, one atomic for the suspects of the calling lanes together.
__device__ __forceinline__ void classify(std::size_t system, double error, double tolerance,
                                         const CheckTarget& target) {
  namespace cg = cooperative_groups;
  const bool clean = error <= tolerance;
  target.errors[system] = clean ? error : -1.0;
  const cg::coalesced_group calling = cg::coalesced_threads();
  const cg::coalesced_group same = cg::binary_partition(calling, clean);
  if (clean) return;
  unsigned long long first = 0;
  if (same.thread_rank() == 0) first = atomicAdd(&target.header[kSuspects], same.size());
  const unsigned long long k = same.shfl(first, 0) + same.thread_rank();
  target.suspect_system[k] = system;
  target.suspect_error[k] = error;
}

}  // namespace stripesolve::tridiag::gpu::check
