// A parallel solve of the one-pass kernel's warp-level system (group_spike.cu), written against a
// warp policy so that it compiles for the device and, with emulated lanes, for the host:
// tridiag/warp_solves_test.cc checks it on the CPU against LAPACK. Internal to tridiag/.
//
// The split took the kernel's warp level from a serial 31-row solve on 3 lanes to chains of 7
// and 3 rows on 12 lanes: on the H100, spike batches went from 29.5 / 28.6 / 23.6 to
// 34.9 / 37.1 / 27.1 G unknowns/s at n = 256 / 1024 / 4096, and with the later changes listed
// in docs/performance.md to 53.9 / 48.8 / 36.3.
#pragma once

#include <cmath>

#include "tridiag/cuda/small_solves.h"

namespace stripesolve::tridiag::gpu {

// Where a split of the warp-level system puts its 3 separators; partition p is the rows between
// separator p - 1 and separator p (rows 0 and 30 close the ends). The even split has 4
// partitions of 7 rows. The shifted one (11, 7, 7 and 3 rows) has every boundary 4 rows away
// from the even one's, so a partition that made the first ill-conditioned is cut differently.
template <int kS0, int kS1, int kS2>
struct Split {
  static constexpr int sep(int j) { return j == 0 ? kS0 : j == 1 ? kS1 : kS2; }
  // Equal partitions: their size is a constant, and the solves' loops unroll for it.
  static constexpr bool kEqual = kS0 == kS1 - kS0 - 1 && kS0 == kS2 - kS1 - 1 && kS0 == 30 - kS2;
};
using EvenSplit = Split<7, 15, 23>;
using ShiftedSplit = Split<11, 19, 27>;
inline constexpr int kMaxPartition = 11;  // rows, in either split

// The warp-level system: row r (0..30) stands for lane r's separator; row 31 is the warp
// separator, which the system does not include. L[0] and U[30] are couplings outside it.
struct WarpSystem {
  double L[32], D[32], U[32];
  double Z[3][32];  // three right-hand sides, then solutions
  // Scratch: the partitions' spikes, their factors (kMaxPartition per task, or 32 per column
  // for the 31-row fallback), the right-hand sides kept for the check, the 3-row separator
  // system.
  double WL[32], WR[32];
  double ppiv[12 * kMaxPartition], prinv[12 * kMaxPartition];
  double rhs[3][32];
  double SL[4], SD[4], SU[4], SG[3][4], spiv[3][4], srinv[3][4];
  int partition_bad[4];  // each partition's first failing row, or -1
};

#if defined(__CUDACC__)
// The warp policy of the kernel.
struct DeviceWarp {
  __device__ void sync() { __syncwarp(); }
  __device__ double up(double v, int k) { return __shfl_up_sync(0xffffffffu, v, k); }
  __device__ double down(double v, int k) { return __shfl_down_sync(0xffffffffu, v, k); }
  // Every v[i] becomes its largest value over the warp.
  template <int N>
  __device__ void max_each(unsigned (&v)[N]) {
    STRIPESOLVE_UNROLL
    for (int i = 0; i < N; ++i) v[i] = __reduce_max_sync(0xffffffffu, v[i]);
  }
};
#endif

// Whether x = s.Z solves the system for s.rhs to a normwise backward error of 2 eps in every
// column, ||r||inf <= 2 eps (||A||inf ||x||inf + ||b||inf), each norm to 20 bits (high_word);
// false on NaN. Warp-uniform. Reduced one after another by shuffles, the ten norms cost the
// kernel about a tenth of its speed (H100).
template <typename Warp>
STRIPESOLVE_HD bool warp_level_accurate(const WarpSystem& s, int lane, Warp& warp) {
  const int r = lane;
  double v[10] = {};  // ||A||, then per column ||r||, ||x||, ||b||: the lane's part of each
  if (r < 31) {
    v[0] = fabs(s.D[r]) + (r > 0 ? fabs(s.L[r]) : 0.0) + (r < 30 ? fabs(s.U[r]) : 0.0);
    STRIPESOLVE_UNROLL
    for (int c = 0; c < 3; ++c) {
      const double x = s.Z[c][r], b = s.rhs[c][r];
      double res = s.D[r] * x - b;
      if (r > 0) res += s.L[r] * s.Z[c][r - 1];
      if (r < 30) res += s.U[r] * s.Z[c][r + 1];
      v[1 + 3 * c] = fabs(res);
      v[2 + 3 * c] = fabs(x);
      v[3 + 3 * c] = fabs(b);
    }
  }
  unsigned h[10];
  STRIPESOLVE_UNROLL
  for (int i = 0; i < 10; ++i) h[i] = high_word(v[i]);
  warp.max_each(h);
  bool ok = true;
  STRIPESOLVE_UNROLL
  for (int c = 0; c < 3; ++c) {
    const double rmax = from_high_word(h[1 + 3 * c]), xmax = from_high_word(h[2 + 3 * c]);
    const double amax = from_high_word(h[0]), bmax = from_high_word(h[3 + 3 * c]);
    ok &= rmax <= 2.0 * 2.220446049250313e-16 * (amax * xmax + bmax);
  }
  return ok;
}

// Solves rows 0..30 of s for its three right-hand sides, in place, by SPIKE once more, split
// at Sp: lanes 3p..3p+2 solve partition p for 3 columns at once: its part of Z[0]; of Z[1]
// (nonzero in partition 0 only, the coupling to the previous warp) or else its left spike; of
// Z[2] (partition 3 only) or else its right spike. Lanes 0-2 then solve the 3-row separator
// system, one column each, and every lane puts its own row together. Returns the calling lane's
// first failing row (0..30) or -1; a partition's failure is reported rather than the separator
// failures it causes.
template <bool kPivot, typename Sp, typename Warp>
STRIPESOLVE_HD int split_solve(WarpSystem& s, int lane, double tol, Warp& warp) {
  int bad = -1;
  const int r = lane;
  const int part = (r > Sp::sep(0)) + (r > Sp::sep(1)) + (r > Sp::sep(2));  // of a non-separator
  const bool separator = r == Sp::sep(0) || r == Sp::sep(1) || r == Sp::sep(2);
  s.WL[r] = (!separator && part > 0 && r == Sp::sep(part - 1) + 1) ? -s.L[r] : 0.0;
  s.WR[r] = (!separator && part < 3 && r == Sp::sep(part) - 1) ? -s.U[r] : 0.0;
  warp.sync();
  if (lane < 12) {
    const int p = lane / 3, c = lane % 3;
    const int r0 = p == 0 ? 0 : Sp::sep(p - 1) + 1;
    const int q = Sp::kEqual ? Sp::sep(0) : (p == 3 ? 31 : Sp::sep(p)) - r0;
    double* const col = c == 0   ? s.Z[0]
                        : c == 1 ? (p == 0 ? s.Z[1] : s.WL)
                                 : (p == 3 ? s.Z[2] : s.WR);
    double* const piv = s.ppiv + kMaxPartition * lane;
    constexpr int kMaxRows = Sp::kEqual ? Sp::sep(0) : kMaxPartition;
    const int b = kPivot ? pivot_solve<kMaxRows>(s.L + r0, s.D + r0, s.U + r0, col + r0, piv,
                                                 s.prinv + kMaxPartition * lane, q)
                         : thomas_solve(s.L + r0, s.D + r0, s.U + r0, col + r0, piv, q, tol);
    if (b >= 0) bad = r0 + b;
    if (c == 0) s.partition_bad[p] = bad;
  }
  warp.sync();
  if (lane < 3) {  // separator j = lane: its row with the neighbouring partitions substituted
    const int j = lane, sep = Sp::sep(j);
    s.SL[j] = s.L[sep] * s.WL[sep - 1];
    s.SD[j] = s.D[sep] + s.L[sep] * s.WR[sep - 1] + s.U[sep] * s.WL[sep + 1];
    s.SU[j] = s.U[sep] * s.WR[sep + 1];
    for (int c = 0; c < 3; ++c) {
      s.SG[c][j] = s.Z[c][sep] - s.L[sep] * s.Z[c][sep - 1] - s.U[sep] * s.Z[c][sep + 1];
    }
  }
  warp.sync();
  if (lane < 3) {  // column `lane` of the separator system
    const int b = kPivot
                      ? pivot_solve<3>(s.SL, s.SD, s.SU, s.SG[lane], s.spiv[lane], s.srinv[lane], 3)
                      : thomas_solve(s.SL, s.SD, s.SU, s.SG[lane], s.spiv[lane], 3, tol);
    // A separator fails by itself only if every partition solved: after a partition's
    // breakdown the separators inherit its non-finite values, and the partition is the cause.
    const bool partitions_ok = s.partition_bad[0] < 0 && s.partition_bad[1] < 0 &&
                               s.partition_bad[2] < 0 && s.partition_bad[3] < 0;
    if (b >= 0 && partitions_ok && (bad < 0 || Sp::sep(b) < bad)) bad = Sp::sep(b);
  }
  warp.sync();
  if (r < 31) {
    for (int c = 0; c < 3; ++c) {
      if (separator) {
        s.Z[c][r] = s.SG[c][part];
      } else {
        const double xl = part > 0 ? s.SG[c][part - 1] : 0.0, xr = part < 3 ? s.SG[c][part] : 0.0;
        s.Z[c][r] += s.WL[r] * xl + s.WR[r] * xr;
      }
    }
  }
  warp.sync();
  return bad;
}

// The rare path of warp_level_solve with pivoting, for a result of the even split that failed
// the check: the shifted split, and if that fails the check too, the 31 rows whole by 3 lanes.
// Out of line, so that the common path is compiled without it (inlined, it cost the kernel a
// few percent on the H100 although it almost never runs).
template <typename Warp>
STRIPESOLVE_HD STRIPESOLVE_NOINLINE int redo_warp_level(WarpSystem& s, int lane, Warp& warp) {
  auto restore_rhs = [&] {
    warp.sync();  // every lane is done reading the rows it is about to overwrite
    for (int c = 0; c < 3; ++c) s.Z[c][lane] = s.rhs[c][lane];
  };
  restore_rhs();
  const int bad = split_solve<true, ShiftedSplit>(s, lane, 0.0, warp);
  if (warp_level_accurate(s, lane, warp)) return bad;
  restore_rhs();
  warp.sync();
  const int whole =
      lane < 3 ? pivot_solve(s.L, s.D, s.U, s.Z[lane], s.ppiv + 32 * lane, s.prinv + 32 * lane, 31)
               : -1;
  warp.sync();
  return whole;
}

// Solves rows 0..30 of s for its three right-hand sides, in place: a serial chain of 7 + 3
// rows (split_solve at the even split) instead of 31. With pivoting, a partition can be
// ill-conditioned where the 31 rows are not, so a result whose backward error is not at
// rounding level is redone (redo_warp_level): at the shifted split, and if that fails the
// check too, whole. In a model of the kernel's warp-level systems for random U(-1,1) batches,
// the even split failed the check for 1 warp in 1000 and the shifted split for none; without
// the check the worst residual was 8.4 eps against the whole solve's 0.8. Returns the calling
// lane's first failing row or -1. Warp: sync() is __syncwarp, max_each(v) the largest of each
// unsigned v[i] over the warp.
template <bool kPivot, typename Warp>
STRIPESOLVE_HD int warp_level_solve(WarpSystem& s, int lane, double tol, Warp& warp) {
  if constexpr (!kPivot) {
    return split_solve<false, EvenSplit>(s, lane, tol, warp);
  } else {
    for (int c = 0; c < 3; ++c) s.rhs[c][lane] = s.Z[c][lane];
    const int bad = split_solve<true, EvenSplit>(s, lane, tol, warp);
    if (warp_level_accurate(s, lane, warp)) return bad;
    return redo_warp_level(s, lane, warp);
  }
}

}  // namespace stripesolve::tridiag::gpu
