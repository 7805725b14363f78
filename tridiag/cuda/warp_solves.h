// A parallel solve of the one-pass kernel's warp-level system (group_spike.cu), written against a
// warp policy so that it compiles for the device and, with emulated lanes, for the host:
// tridiag/warp_solves_test.cc checks it on the CPU against LAPACK. Internal to tridiag/.
//
// The split took the kernel's warp level from a serial 31-row solve on 3 lanes to chains of 7
// and 3 rows on 12 lanes: on the H100, spike batches went from 29.5 / 28.6 / 23.6 to
// 34.9 / 37.1 / 27.1 G unknowns/s at n = 256 / 1024 / 4096 (docs/performance.md).
#pragma once

#include <cmath>

#include "tridiag/cuda/small_solves.h"

namespace stripesolve::tridiag::gpu {

// The warp-level system: row r (0..30) stands for lane r's separator; row 31 is the warp
// separator, which the system does not include. L[0] and U[30] are couplings outside it.
struct WarpSystem {
  double L[32], D[32], U[32];
  double Z[3][32];  // three right-hand sides, then solutions
  // Scratch: the partitions' spikes, their factors (8 per task, or 32 per column for the
  // 31-row fallback), the right-hand sides kept for the check, the 3-row separator system.
  double WL[32], WR[32];
  double ppiv[96], prinv[96];
  double rhs[3][32];
  double SL[4], SD[4], SU[4], SG[3][4], spiv[3][4], srinv[3][4];
  int partition_bad[4];  // each partition's first failing row, or -1
};

// The larger of a and b, NaN when either is (fmax would drop a NaN).
STRIPESOLVE_HD inline double nan_max(double a, double b) { return (a > b || a != a) ? a : b; }

#if defined(__CUDACC__)
// The warp policy of the kernel.
struct DeviceWarp {
  __device__ void sync() { __syncwarp(); }
  __device__ double max(double v) {
    for (int d = 16; d > 0; d /= 2) v = nan_max(v, __shfl_xor_sync(0xffffffffu, v, d));
    return v;
  }
};
#endif

// Whether x = s.Z solves the system for s.rhs to a normwise backward error of 2 eps in every
// column, ||r||inf <= 2 eps (||A||inf ||x||inf + ||b||inf); false on NaN. Warp-uniform.
template <typename Warp>
STRIPESOLVE_HD bool warp_level_accurate(const WarpSystem& s, int lane, Warp& warp) {
  const int r = lane;
  double a = 0.0;
  if (r < 31) a = fabs(s.D[r]) + (r > 0 ? fabs(s.L[r]) : 0.0) + (r < 30 ? fabs(s.U[r]) : 0.0);
  const double amax = warp.max(a);
  bool ok = true;
  for (int c = 0; c < 3; ++c) {
    double res = 0.0, x = 0.0, b = 0.0;
    if (r < 31) {
      x = s.Z[c][r];
      b = s.rhs[c][r];
      res = s.D[r] * x - b;
      if (r > 0) res += s.L[r] * s.Z[c][r - 1];
      if (r < 30) res += s.U[r] * s.Z[c][r + 1];
    }
    const double rmax = warp.max(fabs(res)), xmax = warp.max(fabs(x)), bmax = warp.max(fabs(b));
    ok = ok && rmax <= 2.0 * 2.220446049250313e-16 * (amax * xmax + bmax);
  }
  return ok;
}

// Solves rows 0..30 of s for its three right-hand sides, in place, by SPIKE once more: 4
// partitions of 7 rows (0-6, 8-14, 16-22, 24-30) and 3 separators (rows 7, 15, 23). Lanes
// 3p..3p+2 solve partition p for 3 columns at once: its part of Z[0]; of Z[1] (nonzero in
// partition 0 only, the coupling to the previous warp) or else its left spike; of Z[2]
// (partition 3 only) or else its right spike. Lanes 0-2 then solve the 3-row separator system,
// one column each, and every lane puts its row together: a serial chain of 7 + 3 rows instead
// of 31. With pivoting, a partition can be ill-conditioned where the 31 rows are not, so a
// result whose backward error is not at rounding level is redone whole (in a model of random
// U(-1,1) systems, 3% of warps; the worst residual then stays within 31x of the whole solve's,
// 665x without the check). Returns the calling lane's first failing row (0..30) or -1; a
// partition's failure is reported rather than the separator failures it causes.
// Warp: sync() is __syncwarp, max(v) the largest v over the warp.
template <bool kPivot, typename Warp>
STRIPESOLVE_HD int warp_level_solve(WarpSystem& s, int lane, double tol, Warp& warp) {
  int bad = -1;
  const int r = lane;
  if (kPivot) {
    for (int c = 0; c < 3; ++c) s.rhs[c][r] = s.Z[c][r];
  }
  s.WL[r] = (r % 8 == 0 && r >= 8 && r < 31) ? -s.L[r] : 0.0;
  s.WR[r] = (r % 8 == 6 && r < 24) ? -s.U[r] : 0.0;
  warp.sync();
  if (lane < 12) {
    const int p = lane / 3, c = lane % 3, r0 = 8 * p;
    double* const col = c == 0   ? s.Z[0]
                        : c == 1 ? (p == 0 ? s.Z[1] : s.WL)
                                 : (p == 3 ? s.Z[2] : s.WR);
    double* const piv = s.ppiv + 8 * lane;
    const int b = kPivot ? pivot_solve(s.L + r0, s.D + r0, s.U + r0, col + r0, piv,
                                       s.prinv + 8 * lane, 7)
                         : thomas_solve(s.L + r0, s.D + r0, s.U + r0, col + r0, piv, 7, tol);
    if (b >= 0) bad = r0 + b;
    if (c == 0) s.partition_bad[p] = bad;
  }
  warp.sync();
  if (lane < 3) {  // separator j = lane: its row with the neighbouring partitions substituted
    const int j = lane, sep = 8 * j + 7;
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
                      ? pivot_solve(s.SL, s.SD, s.SU, s.SG[lane], s.spiv[lane], s.srinv[lane], 3)
                      : thomas_solve(s.SL, s.SD, s.SU, s.SG[lane], s.spiv[lane], 3, tol);
    // A separator fails by itself only if every partition solved: after a partition's
    // breakdown the separators inherit its non-finite values, and the partition is the cause.
    const bool partitions_ok = s.partition_bad[0] < 0 && s.partition_bad[1] < 0 &&
                               s.partition_bad[2] < 0 && s.partition_bad[3] < 0;
    if (b >= 0 && partitions_ok && (bad < 0 || 8 * b + 7 < bad)) bad = 8 * b + 7;
  }
  warp.sync();
  if (r < 31) {
    const int p = r / 8;
    for (int c = 0; c < 3; ++c) {
      if (r % 8 == 7) {
        s.Z[c][r] = s.SG[c][p];
      } else {
        const double xl = p > 0 ? s.SG[c][p - 1] : 0.0, xr = p < 3 ? s.SG[c][p] : 0.0;
        s.Z[c][r] += s.WL[r] * xl + s.WR[r] * xr;
      }
    }
  }
  warp.sync();
  if (kPivot && !warp_level_accurate(s, lane, warp)) {
    for (int c = 0; c < 3; ++c) s.Z[c][r] = s.rhs[c][r];
    warp.sync();
    bad = -1;
    if (lane < 3) {
      bad = pivot_solve(s.L, s.D, s.U, s.Z[lane], s.ppiv + 32 * lane, s.prinv + 32 * lane, 31);
    }
    warp.sync();
  }
  return bad;
}

}  // namespace stripesolve::tridiag::gpu
