#include "tridiag/lanes.h"

#include <array>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "tridiag/quality_sums.h"
#include "tridiag/system_solvers.h"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace stripesolve::tridiag {

namespace {

// GCC's vector extensions (clang reads them too): two lanes in an SSE2 register, the x86-64
// baseline, and a lane mask (all ones or zero per lane, as comparisons give). A row of the lanes
// is kVectors of them, independent chains the core overlaps. (GCC lowered vectors of all eight
// lanes at once to scalar code with branches for the masks: no faster than one system at a time.)
using V = double __attribute__((vector_size(16)));
using M = std::int64_t __attribute__((vector_size(16)));
constexpr std::size_t kWidth = sizeof(V) / sizeof(double);
constexpr std::size_t kVectors = kLanes / kWidth;  // vectors in a row

V load(const double* p) {
  V v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

void store(double* p, V v) {
  std::memcpy(p, &v, sizeof v);
}

V splat(double x) {
  return V{x, x};
}

V magnitude(V v) {
  return (V)((M)v & 0x7fffffffffffffffLL);
}

// a where m, else b.
V select(M m, V a, V b) {
  return (V)(((M)a & m) | ((M)b & ~m));
}

// std::max(a, b) lane by lane: b where a < b, else a (a NaN b is dropped, as there).
V max_of(V a, V b) {
  return b > a ? b : a;
}

// The run's rows into the lanes, as they are (a = dl, d0 = d, c = du with 0 on the last row,
// f): row by row, so that the writes run through the work arrays once. Unused lanes repeat
// lane 0. Returns the lanes whose dl[0] or du[n - 1], which the lanes never read, is not finite.
std::uint32_t load_lanes(const LaneRun& run, LaneWork& w) {
  const std::size_t n = run.n;
  for (std::vector<double>* a : {&w.dl, &w.d, &w.du, &w.b, &w.a, &w.d0, &w.c, &w.f})
    a->resize(n * kLanes);
  std::array<std::size_t, kLanes> lane{};
  for (std::size_t k = 0; k < kLanes; ++k) lane[k] = (k < run.lanes ? k : 0) * run.lane_stride;
  for (std::size_t i = 0; i < n; ++i) {
    const std::size_t r = i * run.row_stride;
    const bool last = i + 1 == n;
    for (std::size_t k = 0; k < kLanes; ++k) {
      const std::size_t o = i * kLanes + k;
      w.a[o] = i > 0 ? run.dl[r + lane[k]] : 0.0;
      w.d0[o] = run.d[r + lane[k]];
      w.c[o] = last ? 0.0 : run.du[r + lane[k]];
      w.f[o] = run.f[r + lane[k]];
    }
  }
  std::uint32_t ignored_non_finite = 0;
  for (std::size_t k = 0; k < run.lanes; ++k) {
    if (!std::isfinite(run.dl[lane[k]]) ||
        !std::isfinite(run.du[(n - 1) * run.row_stride + lane[k]]))
      ignored_non_finite |= 1u << k;
  }
  return ignored_non_finite;
}

// One row's contribution to the check's maxima and sums, as solution_quality's Maxima::add.
// A non-finite residual also flags every non-finite input of the row: no sum or product with a
// non-finite operand comes out finite.
struct LaneMaxima {
  V r, a, x, f, r2, f2;
  M non_finite;
  void add(V left, V diag, V right, V x_left, V x_mid, V x_right, V rhs) {
    const V res = magnitude(rhs - (left * x_left + diag * x_mid + right * x_right));
    non_finite |= ~(M)(res <= splat(DBL_MAX));
    r = max_of(r, res);
    a = max_of(a, magnitude(left) + magnitude(diag) + magnitude(right));
    x = max_of(x, magnitude(x_mid));
    f = max_of(f, magnitude(rhs));
    r2 = r2 + res * res;
    f2 = f2 + rhs * rhs;
  }
};

// Each lane's figures from its maxima and sums, as solution_quality ends, into `checks`, and
// the lanes with a non-finite input (those `suspect` or with a non-finite residual, confirmed
// on the run's arrays: an x that overflowed flags a lane too). Returns the lanes whose relative
// residual needs the scaled second pass.
std::uint32_t lane_checks(const LaneRun& run, const LaneMaxima* m, std::uint32_t suspect,
                          LaneChecks& checks) {
  std::uint32_t rescale = 0;
  checks.non_finite_input = 0;
  for (std::size_t k = 0; k < run.lanes; ++k) {
    const LaneMaxima& e = m[k / kWidth];
    const std::size_t j = k % kWidth;
    if (e.non_finite[j] != 0 || (suspect >> k & 1u) != 0) {
      const std::size_t o = k * run.lane_stride;
      const BatchArrays system{run.dl + o, run.d + o, run.du + o, run.f + o, nullptr};
      if (!check_finite_inputs(system, run.n, run.row_stride).is_ok())
        checks.non_finite_input |= 1u << k;
    }
    if (e.non_finite[j] != 0 || !std::isfinite(e.x[j])) {
      checks.backward_error[k] = checks.relative_residual[k] = INFINITY;
      continue;
    }
    const double den = e.a[j] * e.x[j] + e.f[j];
    checks.backward_error[k] = den == 0.0 ? (e.r[j] == 0.0 ? 0.0 : INFINITY) : e.r[j] / den;
    if (squares_in_range(e.r[j], e.f[j])) {
      checks.relative_residual[k] = relative_residual_of_sums(e.r2[j], e.f2[j], e.f[j]);
    } else {
      rescale |= 1u << k;
    }
  }
  return rescale;
}

// The back substitution of every lane, row by row from the last (the rows' divisions overlap):
// x of row n - 1 is last(q), of row n - 2 second(q, x of n - 1), of row i general(q, x of i + 1,
// x of i + 2), q the row's work offset; x goes into the work's b. Each row is checked as soon as
// its x and its neighbours' are known into m; `finite` gets the lanes whose x is finite (a mask
// per vector).
template <typename Last, typename Second, typename General>
void back_substitute(std::size_t n, LaneWork& w, Last last, Second second, General general,
                     M* finite, LaneMaxima* m) {
  const V zero = splat(0.0), big = splat(DBL_MAX);
  const double* a = w.a.data();
  const double* d0 = w.d0.data();
  const double* c = w.c.data();
  const double* f = w.f.data();
  double* b = w.b.data();
  for (std::size_t p = 0; p < kVectors; ++p) m[p] = {zero, zero, zero, zero, zero, zero, (M)zero};
  V x0[kVectors], x1[kVectors];
  for (std::size_t p = 0; p < kVectors; ++p) {
    const std::size_t q = (n - 1) * kLanes + p * kWidth;
    x1[p] = last(q);
    store(b + q, x1[p]);
    finite[p] = magnitude(x1[p]) <= big;
    if (n == 1) m[p].add(zero, load(d0 + q), zero, zero, x1[p], zero, load(f + q));
  }
  if (n == 1) return;
  for (std::size_t p = 0; p < kVectors; ++p) {
    const std::size_t q = (n - 2) * kLanes + p * kWidth, ql = q + kLanes;
    x0[p] = second(q, x1[p]);
    store(b + q, x0[p]);
    finite[p] &= magnitude(x0[p]) <= big;
    m[p].add(load(a + ql), load(d0 + ql), zero, x0[p], x1[p], zero, load(f + ql));
  }
  for (std::size_t i = n - 2; i-- > 0;) {
    for (std::size_t p = 0; p < kVectors; ++p) {
      const std::size_t q = i * kLanes + p * kWidth, qn = q + kLanes;
      const V x = general(q, x0[p], x1[p]);
      store(b + q, x);
      finite[p] &= magnitude(x) <= big;
      m[p].add(load(a + qn), load(d0 + qn), load(c + qn), x, x0[p], x1[p], load(f + qn));
      x1[p] = x0[p];
      x0[p] = x;
    }
  }
  for (std::size_t p = 0; p < kVectors; ++p) {  // row 0
    const std::size_t q = p * kWidth;
    m[p].add(zero, load(d0 + q), load(c + q), zero, x0[p], x1[p], load(f + q));
  }
}

// Whether the run's x go out a whole row of kLanes values at a time by streaming stores: an
// interleaved run of kLanes systems, none failed, rows 16-byte aligned, on a target with SSE2.
bool whole_lines(const LaneRun& run, std::uint32_t failed) {
#if defined(__SSE2__)
  return failed == 0 && run.lanes == kLanes && run.lane_stride == 1 &&
         reinterpret_cast<std::uintptr_t>(run.x) % 16 == 0 && run.row_stride % 2 == 0;
#else
  (void)run;
  (void)failed;
  return false;
#endif
}

// Each lane's check into `checks` (lane_checks; `suspect` as there), and the run's x from the
// work's b into the batch but for the failed lanes: those `bad`, with a non-finite x, an error
// above max_error or a residual for the scaled pass. Returns them.
std::uint32_t finish(const LaneRun& run, const LaneWork& w, const M* finite, const M* bad,
                     const LaneMaxima* m, std::uint32_t suspect, double max_error,
                     LaneChecks& checks) {
  std::uint32_t failed = lane_checks(run, m, suspect, checks);
  for (std::size_t k = 0; k < run.lanes; ++k) {
    if (bad[k / kWidth][k % kWidth] != 0 || finite[k / kWidth][k % kWidth] == 0 ||
        !(checks.backward_error[k] <= max_error))
      failed |= 1u << k;
  }
  const double* b = w.b.data();
  if (run.lane_stride >= run.row_stride) {
    for (std::size_t k = 0; k < run.lanes; ++k) {  // each system's rows in order
      if ((failed >> k & 1u) != 0) continue;
      double* x = run.x + k * run.lane_stride;
      for (std::size_t i = 0; i < run.n; ++i) x[i * run.row_stride] = b[i * kLanes + k];
    }
  } else if (whole_lines(run, failed)) {
#if defined(__SSE2__)
    // Each row's eight x are 64 contiguous bytes (one cache line where the batch is 64-byte
    // aligned): streaming stores write them without reading the line first (interleaved
    // batches about 10% faster on the dev VM).
    for (std::size_t i = 0; i < run.n; ++i) {
      double* row = run.x + i * run.row_stride;
      for (std::size_t k = 0; k < kLanes; k += 2)
        _mm_stream_pd(row + k, _mm_loadu_pd(b + i * kLanes + k));
    }
    _mm_sfence();
#endif
  } else {
    for (std::size_t i = 0; i < run.n; ++i) {  // each row's systems in order
      double* row = run.x + i * run.row_stride;
      for (std::size_t k = 0; k < run.lanes; ++k) {
        if ((failed >> k & 1u) == 0) row[k] = b[i * kLanes + k];
      }
    }
  }
  return failed;
}

}  // namespace

std::uint32_t solve_gepp_lanes(const LaneRun& run, LaneWork& work, LaneChecks& checks) {
  if (run.lanes == 0 || run.n == 0) return 0;
  const std::size_t n = run.n;
  const std::uint32_t suspect = load_lanes(run, work);
  double* dl = work.dl.data();  // the factors: dl the second super-diagonal where rows swapped
  double* d = work.d.data();
  double* du = work.du.data();
  double* b = work.b.data();
  const double* a = work.a.data();
  const double* d0 = work.d0.data();
  const double* c = work.c.data();
  const double* f = work.f.data();
  const V zero = splat(0.0);
  M singular[kVectors] = {};
  // Forward elimination, solve_gepp's two branches as one with each lane's pivot choice. Row i's
  // d, du and b as the rows above left them are carried over in registers; row i + 1's come in
  // as given.
  V cd[kVectors], cdu[kVectors], cb[kVectors];
  for (std::size_t p = 0; p < kVectors; ++p) {
    cd[p] = load(d0 + p * kWidth);
    cdu[p] = load(c + p * kWidth);
    cb[p] = load(f + p * kWidth);
  }
  for (std::size_t i = 0; i + 1 < n; ++i) {
    for (std::size_t p = 0; p < kVectors; ++p) {
      const std::size_t o = i * kLanes + p * kWidth, on = o + kLanes;
      const V dli = load(a + on), dn = load(d0 + on), bn = load(f + on), dun = load(c + on);
      const V di = cd[p], dui = cdu[p], bi = cb[p];
      const M keep = magnitude(di) >= magnitude(dli);  // no interchange
      const V den = select(keep, di, dli);
      singular[p] |= den == zero;
      const V fact = select(keep, dli, di) / den;
      store(d + o, den);
      store(b + o, select(keep, bi, bn));
      store(du + o, select(keep, dui, dn));
      store(dl + o, select(keep, zero, i + 2 < n ? dun : dli));
      cd[p] = select(keep, dn - fact * dui, dui - fact * dn);
      cb[p] = select(keep, bn - fact * bi, bi - fact * bn);
      cdu[p] = select(keep, dun, -fact * dun);
    }
  }
  for (std::size_t p = 0; p < kVectors; ++p) {
    const std::size_t o = (n - 1) * kLanes + p * kWidth;
    store(d + o, cd[p]);
    store(b + o, cb[p]);
    store(du + o, cdu[p]);
    store(dl + o, zero);
  }
  // Back substitution and the check.
  M finite[kVectors];
  LaneMaxima m[kVectors];
  back_substitute(
      n, work, [&](std::size_t q) { return load(b + q) / load(d + q); },
      [&](std::size_t q, V x1) { return (load(b + q) - load(du + q) * x1) / load(d + q); },
      [&](std::size_t q, V x1, V x2) {
        return (load(b + q) - load(du + q) * x1 - load(dl + q) * x2) / load(d + q);
      },
      finite, m);
  for (std::size_t p = 0; p < kVectors; ++p)
    singular[p] |= load(d + (n - 1) * kLanes + p * kWidth) == zero;
  return finish(run, work, finite, singular, m, suspect, INFINITY, checks);
}

std::uint32_t solve_thomas_lanes(const LaneRun& run, double tol, double max_error, LaneWork& work,
                                 LaneChecks& checks) {
  if (run.lanes == 0 || run.n == 0) return 0;
  const std::size_t n = run.n;
  const std::uint32_t suspect = load_lanes(run, work);
  double* cp = work.du.data();  // c / pivot of each row
  double* y = work.b.data();    // the forward pass's values, then x
  const double* a = work.a.data();
  const double* d0 = work.d0.data();
  const double* c = work.c.data();
  const double* f = work.f.data();
  const V zero = splat(0.0), one = splat(1.0), big = splat(DBL_MAX), floor = splat(tol);
  M bad[kVectors] = {};
  V prev_c[kVectors], prev_y[kVectors];
  for (std::size_t p = 0; p < kVectors; ++p) prev_c[p] = prev_y[p] = zero;
  // Forward: solve_thomas's pivots, each checked as check_pivot does.
  for (std::size_t i = 0; i < n; ++i) {
    for (std::size_t p = 0; p < kVectors; ++p) {
      const std::size_t o = i * kLanes + p * kWidth;
      const V av = load(a + o), dv = load(d0 + o), cv = load(c + o);
      const V pivot = dv - av * prev_c[p];
      const V scale = max_of(max_of(magnitude(av), magnitude(dv)), magnitude(cv));
      const M ok = (magnitude(pivot) > floor * scale) & (magnitude(pivot) <= big);
      bad[p] |= ~ok;
      const V inv = one / pivot;
      prev_c[p] = cv * inv;
      prev_y[p] = (load(f + o) - av * prev_y[p]) * inv;
      store(cp + o, prev_c[p]);
      store(y + o, prev_y[p]);
    }
  }
  M finite[kVectors];
  LaneMaxima m[kVectors];
  back_substitute(
      n, work, [&](std::size_t q) { return load(y + q); },
      [&](std::size_t q, V x1) { return load(y + q) - load(cp + q) * x1; },
      [&](std::size_t q, V x1, V) { return load(y + q) - load(cp + q) * x1; }, finite, m);
  return finish(run, work, finite, bad, m, suspect, max_error, checks);
}

}  // namespace stripesolve::tridiag
