// Device code shared by the SPIKE kernels (000 §II-III): the per-thread partition solve on
// transposed shared-memory tiles, coupling fixes and breakdown flags. Internal to tridiag/cuda/.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

#include "tridiag/cuda/spike_kernels.cuh"

namespace stripesolve::tridiag::gpu {

inline constexpr double kKappa = 0.6180339887498949;  // 000 §III: (sqrt(5) - 1) / 2

__device__ inline void flag_row(unsigned long long* flag, std::size_t row, const LevelArgs& a) {
  std::size_t o = a.row_offset + (row + 1) * a.level_stride - 1;
  if (o >= a.original_rows) o = a.original_rows - 1;
  atomicMin(flag, static_cast<unsigned long long>(o));
}


// Shared-memory arrays of one level, transposed: element k of partition t at k * ld + t.
struct Tile {
  double *dl, *d, *du, *f;
  unsigned char* kind;
  int ld;
};

// Zeroes, in the calling thread's own partition (rows start..start+q), the couplings at the
// ends of the system and across strided-batch system boundaries. One modulo per thread.
__device__ inline void fix_couplings(const Tile& s, int t, std::size_t start, int q, const LevelArgs& a) {
  if (start == 0) s.dl[t] = 0.0;
  if (start + q + 1 == a.rows) s.du[q * s.ld + t] = 0.0;
  if (a.system_size == 0) return;
  std::size_t r = start % a.system_size;
  for (int k = 0; k <= q; ++k, ++r) {
    if (r == a.system_size) r = 0;
    if (r == 0) s.dl[k * s.ld + t] = 0.0;
    if (r + 1 == a.system_size) s.du[k * s.ld + t] = 0.0;
  }
}

// Factors the interior of partition t (q rows) in place (pivots over d, block kinds in kind;
// Thomas: c' over du) and solves for the right-hand side in f, in place, and optionally for
// the left spike (its right-hand side in `spike`, solved in place) and the right spike
// -c_last e_q, whose forward-eliminated values are zero but in the last row, so it is carried in
// registers; its two ends go to r_ends. Diagonal pivoting follows 000 §III (Eq 11-12, Fig 5);
// without kPivot it is Thomas with the tiny-pivot test. Every right-hand side sees the same
// factorisation in both passes, so the separators and the interiors agree to rounding.
// With store_v, the right spike's values (the solution for -c_last e_q) are also kept, in d,
// row by row as the backward sweep finishes with each row's pivot: the fused tile kernels then
// form x = y + w x_left + v x_right without a second solve.
template <bool kPivot>
__device__ inline bool solve_interior(const Tile& s, int t, int q, std::size_t start, const LevelArgs& a,
                               double* spike, double c_last, double r_ends[2],
                               bool store_v = false) {
  auto at = [&](int k) { return k * s.ld + t; };
  auto A = [&](int k) { return k > 0 ? s.dl[at(k)] : 0.0; };
  auto C = [&](int k) { return k < q - 1 ? s.du[at(k)] : 0.0; };
  const double r_rhs = -c_last;
  auto rv = [&](int k) { return k == q - 1 ? r_rhs : 0.0; };  // right spike, forward values
  double rn = 0.0, r_first = 0.0, r_last = 0.0;
  if (kPivot) {
    double cur = s.d[at(0)];
    for (int k = 0; k < q;) {
      const int row = k;
      bool ok = true;
      if (k == q - 1) {
        s.d[at(k)] = cur;
        s.kind[at(k)] = 1;
        ok = cur != 0.0 && isfinite(cur);
        if (!ok) { flag_row(&a.flags[0], start + row, a); return false; }
        break;
      }
      const double a2 = A(k + 1), c1 = C(k), b2 = s.d[at(k + 1)];
      const double a3 = k + 2 < q ? A(k + 2) : 0.0, c2 = k + 2 < q ? C(k + 1) : 0.0;
      const double sigma = fmax(fmax(fabs(a2), fabs(a3)), fmax(fabs(b2), fmax(fabs(c1), fabs(c2))));
      s.d[at(k)] = cur;
      if (fabs(cur) * sigma >= kKappa * fabs(a2 * c1)) {
        s.kind[at(k)] = 1;
        ok = cur != 0.0 && isfinite(cur);
        const double m = a2 / cur;
        s.f[at(k + 1)] -= m * s.f[at(k)];
        if (spike) spike[at(k + 1)] -= m * spike[at(k)];
        cur = b2 - m * c1;
        k += 1;
      } else {
        s.kind[at(k)] = 2;
        s.kind[at(k + 1)] = 0;
        const double delta = cur * b2 - a2 * c1;
        ok = delta != 0.0 && isfinite(delta);
        if (k + 2 < q) {
          const double ratio = a3 / delta;
          s.f[at(k + 2)] -= ratio * (cur * s.f[at(k + 1)] - a2 * s.f[at(k)]);
          if (spike) spike[at(k + 2)] -= ratio * (cur * spike[at(k + 1)] - a2 * spike[at(k)]);
          cur = s.d[at(k + 2)] - a3 * cur * c2 / delta;
        }
        k += 2;
      }
      if (!ok) { flag_row(&a.flags[0], start + row, a); return false; }
    }
    for (int k = q; k > 0;) {
      const int j = k - 1;
      const bool has_next = j + 1 < q;
      const double next = has_next ? s.f[at(j + 1)] : 0.0;
      const double snext = spike && has_next ? spike[at(j + 1)] : 0.0;
      if (s.kind[at(j)] == 0) {
        const int i = j - 1;
        const double c2 = C(j), pi = s.d[at(i)], pj = s.d[at(j)];
        const double inv = 1.0 / (pi * pj - A(j) * C(i));
        const double fi = s.f[at(i)], fj = s.f[at(j)];
        s.f[at(j)] = (pi * fj - A(j) * fi - pi * c2 * next) * inv;
        s.f[at(i)] = (pj * fi - C(i) * fj + C(i) * c2 * next) * inv;
        if (spike) {
          const double gi = spike[at(i)], gj = spike[at(j)];
          spike[at(j)] = (pi * gj - A(j) * gi - pi * c2 * snext) * inv;
          spike[at(i)] = (pj * gi - C(i) * gj + C(i) * c2 * snext) * inv;
        }
        const double ri = rv(i), rj = rv(j);
        const double xj = (pi * rj - A(j) * ri - pi * c2 * rn) * inv;
        const double xi = (pj * ri - C(i) * rj + C(i) * c2 * rn) * inv;
        if (j == q - 1) r_last = xj;
        rn = xi;
        if (store_v) {  // rows i and j are finished: their pivots are no longer read
          s.d[at(j)] = xj;
          s.d[at(i)] = xi;
        }
        k -= 2;
      } else {
        const double inv = 1.0 / s.d[at(j)];
        s.f[at(j)] = (s.f[at(j)] - C(j) * next) * inv;
        if (spike) spike[at(j)] = (spike[at(j)] - C(j) * snext) * inv;
        rn = (rv(j) - C(j) * rn) * inv;
        if (j == q - 1) r_last = rn;
        if (store_v) s.d[at(j)] = rn;
        k -= 1;
      }
    }
    r_first = rn;
  } else {
    double pc = 0.0, py = 0.0, ps = 0.0, pr = 0.0;
    for (int k = 0; k < q; ++k) {
      const double lo = A(k), up = C(k);
      const double piv = s.d[at(k)] - lo * pc;
      const double scale = fmax(fabs(lo), fmax(fabs(s.d[at(k)]), fabs(up)));
      if (!(fabs(piv) > a.tol * scale && isfinite(piv))) { flag_row(&a.flags[0], start + k, a); return false; }
      const double inv = 1.0 / piv;
      pc = up * inv;
      py = (s.f[at(k)] - lo * py) * inv;
      s.du[at(k)] = pc;
      s.f[at(k)] = py;
      if (spike) {
        ps = (spike[at(k)] - lo * ps) * inv;
        spike[at(k)] = ps;
      }
      pr = (rv(k) - lo * pr) * inv;
    }
    r_last = pr;
    rn = pr;
    if (store_v) s.d[at(q - 1)] = pr;  // the backward sweep reads only du (c') and f
    for (int k = q - 1; k-- > 0;) {
      s.f[at(k)] -= s.du[at(k)] * s.f[at(k + 1)];
      if (spike) spike[at(k)] -= s.du[at(k)] * spike[at(k + 1)];
      rn = -s.du[at(k)] * rn;  // forward value 0 above the last row
      if (store_v) s.d[at(k)] = rn;
    }
    r_first = rn;
  }
  if (r_ends) {
    r_ends[0] = r_first;
    r_ends[1] = r_last;
  }
  return true;
}

}  // namespace stripesolve::tridiag::gpu
