// The group level of the one-pass kernel (group_spike.cu): a group's system of warp separators,
// q <= 16 rows, solved by one warp. Written against a warp policy, as warp_solves.h is, so that
// the CPU tests run it on emulated lanes (tridiag/cuda_solves_test.cc). Internal to tridiag/.
#pragma once

#include <cmath>

#include "tridiag/cuda/small_solves.h"
#include "tridiag/cuda/warp_solves.h"  // high_word, from_high_word

namespace stripesolve::tridiag::gpu {

inline constexpr int kMaxGroupRows = 16;  // pcr_first_solve's 4 steps

// A group's system in shared memory: its rows (L[0] and U[q - 1] ignored) and right-hand side
// G, which becomes the solution; piv and rinv are the serial fallback's scratch.
struct GroupSystem {
  double L[kMaxGroupRows], D[kMaxGroupRows], U[kMaxGroupRows], G[kMaxGroupRows];
  double piv[kMaxGroupRows], rinv[kMaxGroupRows];
};

// Solves the q-row system whose row k lane k holds (l, d, u, g; lanes from q on hold none), first
// without pivoting by PCR (003 Algorithm 6: log2 q steps, each lane's row in registers, its
// neighbours' by shuffle), and where that does not leave a residual at rounding level,
// ||r||inf <= 2 eps ||g||inf (each norm to 20 bits, as the warp level's test; false on a zero
// pivot's NaN), again by lane 0 alone with diagonal pivoting (pivot_solve). The test is on the
// residual rather than on the normwise backward error (||r|| <= c eps (||A|| ||x|| + ||g||)):
// where ||A|| ||x|| is far above ||g||, PCR's backward error at 0.7 eps left a residual 14 times
// LAPACK's (stability type 14, q = 16). The group systems of random and diagonally dominant
// batches pass it (a CPU model of n = 600-4096: worst residual 0.94 eps ||g||). The rows are
// stored in s; the solution is left in s.G. Returns lane 0's pivot_solve failure row, or -1 on
// every lane. The serial Thomas that this replaced was a chain of about 15 dependent reciprocals
// at q = 15 with 14 warps waiting. Warp: sync() is __syncwarp; up(v, k) and down(v, k) return
// lane - k's and lane + k's v (any value where that lane is outside the warp); max_each(h) the
// largest of each unsigned h[i].
template <typename Warp>
STRIPESOLVE_HD int pcr_first_solve(GroupSystem& s, int q, int lane, double l, double d, double u,
                                   double g, Warp& warp) {
  const bool row = lane < q;
  if (row) {
    s.L[lane] = l;
    s.D[lane] = d;
    s.U[lane] = u;
    s.G[lane] = g;
  }
  double a = row && lane > 0 ? l : 0.0, b = row ? d : 1.0, c = row && lane + 1 < q ? u : 0.0;
  double f = row ? g : 0.0;
  // PCR step k: row i takes rows i - k and i + k divided by their diagonals (one reciprocal and
  // 6 shuffles a step); a and c are the couplings to rows i - k and i + k. 4 steps: q <= 16.
  STRIPESOLVE_UNROLL
  for (int step = 0; step < 4; ++step) {
    const int k = 1 << step;
    if (k >= q) break;
    const double rb = reciprocal(b), na = a * rb, nc = c * rb, nf = f * rb;
    const double la = warp.up(na, k), lc = warp.up(nc, k), lf = warp.up(nf, k);
    const double ra = warp.down(na, k), rc = warp.down(nc, k), rf = warp.down(nf, k);
    const double al = row && lane >= k ? a : 0.0, cr = lane + k < q ? c : 0.0;
    b -= al * lc + cr * ra;
    f -= al * lf + cr * rf;
    a = -al * la;
    c = -cr * rc;
  }
  const double x = row ? f * reciprocal(b) : 0.0;
  const double xl = warp.up(x, 1), xr = warp.down(x, 1);
  double r = 0.0;
  if (row) {
    r = d * x - g;
    if (lane > 0) r += l * xl;
    if (lane + 1 < q) r += u * xr;
  }
  unsigned h[2] = {high_word(fabs(r)), high_word(row ? fabs(g) : 0.0)};
  warp.max_each(h);
  if (from_high_word(h[0]) <= 2.0 * 2.220446049250313e-16 * from_high_word(h[1])) {
    if (row) s.G[lane] = x;
    return -1;
  }
  warp.sync();  // every row is in s
  return lane == 0 ? pivot_solve(s.L, s.D, s.U, s.G, s.piv, s.rinv, q) : -1;
}

}  // namespace stripesolve::tridiag::gpu
