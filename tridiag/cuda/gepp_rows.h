// The row steps of Gaussian elimination with partial pivoting on a tridiagonal system (LAPACK
// dgtsv's algorithm, 000 §II) as the interleaved GPU kernel takes them (interleaved_gepp.cu): a
// thread carries the row being eliminated in registers, meets the next row, keeps the one it
// pivots on as three scaled numbers, and substitutes back from those. Plain functions that
// compile for the device and for the host, so that the CPU tests check the arithmetic against
// LAPACK on machines without a GPU (tridiag/cuda_solves_test.cc). Internal to tridiag/.
//
// Against dgtsv: one reciprocal a row instead of two divisions (the multiplier and the back
// substitution divide by the same pivot; small_solves.h's reciprocal, within an ulp or two on the
// device), and the pivot row kept as (f, u1, u2) / pivot, so the substitution is
// x_i = f_i - u1_i x_(i+1) - u2_i x_(i+2). The row choices are dgtsv's (|d_i| >= |dl_(i+1)|
// keeps row i), so the pivots are LAPACK's; the rounding differs by the reciprocal's.
#pragma once

#include <algorithm>
#include <cmath>

#include "tridiag/cuda/small_solves.h"

namespace stripesolve::tridiag::gpu {

// Row i as eliminated so far: its entries in columns i and i + 1, and its right-hand side.
struct GeppCarry {
  double d, u, f;
};

// The pivot row of step i, scaled by its pivot's reciprocal; u2 is the fill-in two columns
// right of the diagonal (nonzero only where rows were interchanged).
struct GeppSaved {
  double f, u1, u2;
};

// Step i: `c` is row i, (l, d, u, f) row i + 1 as given (u = 0 for the last row). Returns the
// pivot row and leaves row i + 1 as eliminated in `c`; `pivot` is the chosen pivot (0 where
// both candidates are 0: the matrix is singular at row i, dgtsv's info). Both outcomes are
// formed and one selected, so that the threads of a warp, whose systems pivot differently,
// never take separate paths.
STRIPESOLVE_HD STRIPESOLVE_FORCEINLINE GeppSaved gepp_step(GeppCarry& c, double l, double d,
                                                           double u, double f, double& pivot) {
  const bool keep = std::fabs(c.d) >= std::fabs(l);  // row i is the pivot row (NaN: swap)
  pivot = keep ? c.d : l;
  const double r = reciprocal(pivot);
  const double fact = (keep ? l : c.d) * r;
  // The pivot row (row i kept, or row i + 1 moved up) and the other one, eliminated.
  const double pf = keep ? c.f : f, pu1 = keep ? c.u : d, pu2 = keep ? 0.0 : u;
  const double of = keep ? f : c.f, od = keep ? d : c.u, ou = keep ? u : 0.0;
  c = {od - fact * pu1, ou - fact * pu2, of - fact * pf};
  return {pf * r, pu1 * r, pu2 * r};
}

// x_i from the saved row and the two unknowns after it.
STRIPESOLVE_HD STRIPESOLVE_FORCEINLINE double gepp_back(const GeppSaved& s, double x1, double x2) {
  return s.f - s.u1 * x1 - s.u2 * x2;
}

// Back substitution from row `last` (x_last, and x_after beyond it) up to row 0 with the pivot
// rows saved[0 .. last - 1]; row i's x goes to x[place(i)].
template <typename Place>
inline void gepp_rows_back(const GeppSaved* saved, long last, double x_last, double x_after,
                           double* x, Place place) {
  double x1 = x_last, x2 = x_after;
  x[place(last)] = x1;
  for (long i = last - 1; i >= 0; --i) {
    const double xi = gepp_back(saved[i], x1, x2);
    x[place(i)] = xi;
    x2 = x1;
    x1 = xi;
  }
}

// One system of n rows (dl[0] and du[n-1] ignored) by the steps above, for the CPU tests.
// Returns the first row whose pivot is zero, or -1; x may alias f.
inline long gepp_rows_solve(const double* dl, const double* d, const double* du, const double* f,
                            double* x, long n, GeppSaved* saved) {
  long bad = -1;
  GeppCarry c{d[0], n > 1 ? du[0] : 0.0, f[0]};
  for (long i = 0; i + 1 < n; ++i) {
    double pivot = 0.0;
    saved[i] = gepp_step(c, dl[i + 1], d[i + 1], i + 2 < n ? du[i + 1] : 0.0, f[i + 1], pivot);
    if (pivot == 0.0 && bad < 0) bad = i;
  }
  if (c.d == 0.0 && bad < 0) bad = n - 1;
  gepp_rows_back(saved, n - 1, c.f * reciprocal(c.d), 0.0, x, [](long i) { return i; });
  return bad;
}

// The same solve keeping only `chunk` pivot rows (the interleaved kernel's variant that recomputes
// them, interleaved_gepp.cu): the elimination saves the row as eliminated at the start of each
// chunk of `chunk` steps (`starts`, ceil((n - 1) / chunk) of them) and the pivot rows of the
// current chunk only (`saved`, chunk of them); the substitution takes the last chunk's from the
// elimination and, for each chunk before it, eliminates again from its start. Gives the bits of
// gepp_rows_solve. x may alias f: a chunk's first x waits until the chunk before has been
// eliminated again (its last step reads that row's f).
inline long gepp_rows_solve_chunked(const double* dl, const double* d, const double* du,
                                    const double* f, double* x, long n, long chunk,
                                    GeppSaved* saved, GeppCarry* starts) {
  long bad = -1;
  GeppCarry c{d[0], n > 1 ? du[0] : 0.0, f[0]};
  auto steps = [&](long from, long to, bool flag) {  // steps from .. to - 1, pivot rows in saved
    for (long i = from; i < to; ++i) {
      double pivot = 0.0;
      saved[i % chunk] =
          gepp_step(c, dl[i + 1], d[i + 1], i + 2 < n ? du[i + 1] : 0.0, f[i + 1], pivot);
      if (flag && pivot == 0.0 && bad < 0) bad = i;
    }
  };
  const long chunks = (n - 1 + chunk - 1) / chunk;
  for (long k = 0; k < chunks; ++k) {
    starts[k] = c;
    steps(k * chunk, std::min((k + 1) * chunk, n - 1), true);
  }
  if (c.d == 0.0 && bad < 0) bad = n - 1;
  double x1 = c.f * reciprocal(c.d), x2 = 0.0;
  x[n - 1] = x1;
  for (long k = chunks; k-- > 0;) {
    const long from = k * chunk, to = std::min((k + 1) * chunk, n - 1);
    if (k + 1 < chunks) {
      c = starts[k];
      steps(from, to, false);
      x[to] = x1;  // row `to`, the next chunk's first, is read no more
    }
    for (long i = to; i-- > from;) {
      const double xi = gepp_back(saved[i % chunk], x1, x2);
      if (i > from) x[i] = xi;
      x2 = x1;
      x1 = xi;
    }
  }
  if (n > 1) x[0] = x1;
  return bad;
}

// The two rows where a system eliminated from both ends meets (the twisted variant,
// gepp_rows_solve_twisted): `upper`, the upper half's last row as eliminated (columns m - 1 and
// m), and `lower`, the lower half's (columns m and m - 1, as that half numbers them from the
// bottom). Takes the last two columns as gepp's last step would (the upper row first), gives
// x_(m-1) and x_m, and the two pivots (0 where the matrix is singular there).
struct GeppMeet {
  double x_upper, x_lower, pivot, last_pivot;
};
STRIPESOLVE_HD STRIPESOLVE_FORCEINLINE GeppMeet gepp_meet(const GeppCarry& upper,
                                                          const GeppCarry& lower) {
  GeppCarry c = upper;
  double pivot = 0.0;
  const GeppSaved s = gepp_step(c, lower.u, lower.d, 0.0, lower.f, pivot);
  const double x_lower = c.f * reciprocal(c.d);
  return {gepp_back(s, x_lower, 0.0), x_lower, pivot, c.d};
}

// The rows a system of n rows gives its upper half when eliminated from both ends: rows 0 to
// n / 2 - 1 from the top, the others from the bottom.
STRIPESOLVE_HD constexpr long gepp_upper_rows(long n) {
  return n / 2;
}

// One system of n >= 2 rows eliminated from both ends at once (two threads a system in the
// interleaved kernel's twisted variant): rows 0 to m - 1 (m = n / 2) from the top, as
// gepp_rows_solve takes them, and rows n - 1 down to m from the bottom, each row's dl and du
// exchanged; the halves' last rows meet in a 2 x 2 step (gepp_meet), and each half substitutes
// back from x_(m-1) and x_m. It is Gaussian elimination with partial pivoting on the matrix with
// its rows and columns taken in the order 0 .. m - 2, n - 1 .. m + 1, m - 1, m: in a tridiagonal
// matrix only two rows ever hold a column's candidates, so the pivots are chosen among the rows
// dgtsv would see, and the growth stays within dgtsv's bound of 2 a column. The bits differ from
// gepp_rows_solve's (another order of the same eliminations). Returns the first row found with
// a zero pivot, or -1; x may alias f; saved: n rows.
inline long gepp_rows_solve_twisted(const double* dl, const double* d, const double* du,
                                    const double* f, double* x, long n, GeppSaved* saved) {
  const long m = gepp_upper_rows(n), below = n - m;
  long bad = -1;
  auto note = [&](double pivot, long row) {
    if (pivot == 0.0 && (bad < 0 || row < bad)) bad = row;
  };
  GeppCarry up{d[0], du[0], f[0]};
  for (long i = 0; i + 1 < m; ++i) {
    double pivot = 0.0;
    saved[i] = gepp_step(up, dl[i + 1], d[i + 1], du[i + 1], f[i + 1], pivot);
    note(pivot, i);
  }
  // The lower half from the bottom: its row r is row n - 1 - r, dl and du exchanged.
  GeppSaved* const low = saved + m;
  GeppCarry down{d[n - 1], dl[n - 1], f[n - 1]};
  for (long r = 0; r + 1 < below; ++r) {
    const long p = n - 2 - r;
    double pivot = 0.0;
    low[r] = gepp_step(down, du[p], d[p], dl[p], f[p], pivot);
    note(pivot, p + 1);
  }
  const GeppMeet meet = gepp_meet(up, down);
  note(meet.pivot, m - 1);
  note(meet.last_pivot, m);
  gepp_rows_back(saved, m - 1, meet.x_upper, meet.x_lower, x, [](long i) { return i; });
  gepp_rows_back(low, below - 1, meet.x_lower, meet.x_upper, x, [n](long r) { return n - 1 - r; });
  return bad;
}

}  // namespace stripesolve::tridiag::gpu
