// The serial solves of the one-pass SPIKE kernel (group_spike.cu), as plain functions that
// compile for the device and for the host: the CPU tests check their arithmetic against LAPACK
// (tridiag/cuda_solves_test.cc) on machines without a GPU. Internal to tridiag/.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "tridiag/cuda/kernel_limits.h"

#if defined(__CUDACC__)
#define STRIPESOLVE_HD __host__ __device__
#define STRIPESOLVE_FORCEINLINE __forceinline__
#define STRIPESOLVE_NOINLINE __noinline__
#else
#define STRIPESOLVE_HD
#define STRIPESOLVE_FORCEINLINE inline
#define STRIPESOLVE_NOINLINE
#endif
// Unrolling hints for the device pass only (host compilers do not know "#pragma unroll").
#if defined(__CUDA_ARCH__)
#define STRIPESOLVE_UNROLL _Pragma("unroll")
#define STRIPESOLVE_UNROLL_2 _Pragma("unroll 2")
#else
#define STRIPESOLVE_UNROLL
#define STRIPESOLVE_UNROLL_2
#endif

namespace stripesolve::tridiag::gpu {

#if !defined(__CUDACC__)
using std::fabs;
using std::isfinite;
#endif

inline constexpr int kLaneQ = kLaneRows - 1;  // a lane's interior rows (kernel_limits.h)
inline constexpr double kPivotKappa = 0.6180339887498949;  // 000 §III: (sqrt(5) - 1) / 2

STRIPESOLVE_HD inline bool pivot_ok(double p) {
  return p != 0.0 && isfinite(p);
}

// The high 32 bits of a non-negative double: they order non-negative doubles, infinity and NaN
// (above infinity) as the doubles themselves, to 20 bits of mantissa, and a warp takes their
// maximum in one instruction (__reduce_max_sync) rather than ten shuffles for a double.
STRIPESOLVE_HD inline unsigned high_word(double v) {
#if defined(__CUDA_ARCH__)
  return static_cast<unsigned>(__double2hiint(v));
#else
  std::uint64_t bits;
  std::memcpy(&bits, &v, sizeof bits);
  return static_cast<unsigned>(bits >> 32);
#endif
}

STRIPESOLVE_HD inline double from_high_word(unsigned h) {
#if defined(__CUDA_ARCH__)
  return __hiloint2double(static_cast<int>(h), 0);
#else
  const std::uint64_t bits = std::uint64_t{h} << 32;
  double v;
  std::memcpy(&v, &bits, sizeof v);
  return v;
#endif
}

// The largest magnitude of the values, to 20 bits of mantissa, rounded down, and infinity where
// one is NaN (so that a NaN on the diagonal takes a 1x1 pivot before it and is reported at its
// own row): the pivot test's sigma and the tiny-pivot test's scale, on the high words by integer
// instructions rather than by fmax on the FP64 pipe. Spike on the H100, same session: 52.9 /
// 49.0 / 44.7 to 59.3 / 54.3 / 47.8 G unknowns/s at n = 256 / 1024 / 4096, one system 31.3 to
// 33.8 (sigma alone).
template <typename... Ts>
STRIPESOLVE_HD inline double largest_magnitude(Ts... values) {
  const double v[] = {static_cast<double>(values)...};
  unsigned h = 0;
  for (double x : v) {
    const unsigned m = high_word(x) & 0x7fffffffu;
    h = m > h ? m : h;
  }
  return from_high_word(h < 0x7ff00000u ? h : 0x7ff00000u);  // NaN: infinity
}

// The unpivoted solvers' near-breakdown test (issue 17): a pivot passes when it is finite and
// above `tol` times its row's largest entry (`scale`). A build with
// -DSTRIPESOLVE_TRIDIAG_MEASURE_NO_PIVOT_TEST (CMAKE_CUDA_FLAGS and CMAKE_CXX_FLAGS), only to
// measure what the test costs the kernels (docs/performance.md, "The near-breakdown test's own
// cost"), passes every finite pivot: a zero one then shows as a non-finite x, and the tests of
// near-breakdown fail.
#ifdef STRIPESOLVE_TRIDIAG_MEASURE_NO_PIVOT_TEST
inline constexpr bool kPivotTest = false;
#else
inline constexpr bool kPivotTest = true;
#endif
STRIPESOLVE_HD inline bool pivot_passes(double pivot, double tol, double scale) {
  return kPivotTest ? fabs(pivot) > tol * scale && isfinite(pivot) : isfinite(pivot);
}
// The same test after the row is divided by its pivot (warp_rows.cuh: test_divided()): the row's
// other entries below 1 / tol (a zero or non-finite pivot leaves one infinite or NaN).
STRIPESOLVE_HD inline bool divided_row_passes(double a, double c, double inv_tol) {
  return !kPivotTest || (fabs(a) < inv_tol && fabs(c) < inv_tol);
}

// 1 / d on the serial chains of the solves. On the device: the hardware's approximation and a
// third-order Newton step, within an ulp or two of 1.0 / d and shorter than the correctly
// rounded division that 1.0 / d compiles to (spike batches 8% faster on the H100). d = 0 or
// infinite gives NaN (a failed pivot either way: pivot_ok rejects it), and magnitudes below
// 2^-1022 count as 0. Set STRIPESOLVE_FAST_RECIPROCAL to 0 for the division.
#define STRIPESOLVE_FAST_RECIPROCAL 1
STRIPESOLVE_HD inline double reciprocal(double d) {
#if defined(__CUDA_ARCH__) && STRIPESOLVE_FAST_RECIPROCAL
  double r;
  asm("rcp.approx.ftz.f64 %0, %1;" : "=d"(r) : "d"(d));
  const double e = fma(-d, r, 1.0);  // r (1 + e + e^2): the error cubed, in one step
  return fma(r, fma(e, e, e), r);
#else
  return 1.0 / d;
#endif
}

// Factors the interior (rows 0..Q-1) of a lane's partition and solves it in place for y and
// the spikes sl (right-hand side -a_0 e_0) and sr (-c_last e_last). Returns the first interior
// row with a failed pivot test, or -1. a and c are the lane's rows in shared memory (Thomas
// overwrites c with its multipliers); the rest stays in registers. Fully unrolled: every index
// is a constant. The right spike's forward-eliminated values are zero but in the last row, so
// the forward sweeps skip it.
template <bool kPivot>
STRIPESOLVE_HD STRIPESOLVE_FORCEINLINE int lane_solve(const double* __restrict__ a,
                                                      double (&b)[kLaneRows],
                                                      double* __restrict__ c,
                                                      double (&y)[kLaneRows], double (&sl)[kLaneQ],
                                                      double (&sr)[kLaneQ], double tol) {
  constexpr int Q = kLaneQ;
  STRIPESOLVE_UNROLL
  for (int k = 0; k < Q; ++k) sl[k] = sr[k] = 0.0;
  sl[0] = -a[0];
  sr[Q - 1] = -c[Q - 1];
  int bad = -1;
  if constexpr (kPivot) {
    // Branch-free: both pivot kinds are computed and the right one selected, so lanes taking
    // different kinds do not diverge; one reciprocal per pivot serves both sweeps.
    double rinv[kLaneQ];  // 1 / pivot, or 1 / determinant at the first row of a 2x2 pivot
    bool two[kLaneQ];     // row k is the second row of a 2x2 pivot
    double cur = b[0];
    bool skip = false;
    STRIPESOLVE_UNROLL
    for (int k = 0; k < Q; ++k) {
      two[k] = skip;
      const bool active = !skip;
      if (k == Q - 1) {
        rinv[k] = reciprocal(cur);
        if (active && !pivot_ok(cur) && bad < 0) bad = k;
        b[k] = active ? cur : b[k];
        break;
      }
      const double a2 = a[k + 1], c1 = c[k], b2 = b[k + 1];
      const double a3 = k + 2 < Q ? a[k + 2] : 0.0, c2 = k + 2 < Q ? c[k + 1] : 0.0;
      const double sigma = largest_magnitude(a2, a3, b2, c1, c2);
      const bool one = fabs(cur) * sigma >= kPivotKappa * fabs(a2 * c1);
      const double det = one ? cur : cur * b2 - a2 * c1;
      const double r = reciprocal(det);
      rinv[k] = r;
      if (active && !pivot_ok(det) && bad < 0) bad = k;
      const bool do1 = active && one, do2 = active && !one;
      b[k] = active ? cur : b[k];
      const double m = a2 * r;
      y[k + 1] = do1 ? y[k + 1] - m * y[k] : y[k + 1];
      sl[k + 1] = do1 ? sl[k + 1] - m * sl[k] : sl[k + 1];
      double next = do1 ? b2 - m * c1 : cur;
      if (k + 2 < Q) {
        const double ratio = a3 * r;
        y[k + 2] = do2 ? y[k + 2] - ratio * (cur * y[k + 1] - a2 * y[k]) : y[k + 2];
        sl[k + 2] = do2 ? sl[k + 2] - ratio * (cur * sl[k + 1] - a2 * sl[k]) : sl[k + 2];
        next = do2 ? b[k + 2] - a3 * cur * c2 * r : next;
      }
      cur = next;
      skip = do2;
    }
    bool done = false;  // row j was solved with row j + 1 (first row of a 2x2 pivot)
    STRIPESOLVE_UNROLL
    for (int j = Q - 1; j >= 0; --j) {
      const bool act = !done;
      const bool pair = j > 0 && two[j];
      const double cj = j + 1 < Q ? c[j] : 0.0;
      const double yn = j + 1 < Q ? y[j + 1] : 0.0;
      const double ln = j + 1 < Q ? sl[j + 1] : 0.0;
      const double rn = j + 1 < Q ? sr[j + 1] : 0.0;
      const double y1 = (y[j] - cj * yn) * rinv[j];
      const double l1 = (sl[j] - cj * ln) * rinv[j];
      const double r1 = (sr[j] - cj * rn) * rinv[j];
      if (j > 0) {
        const int i = j - 1;
        const double pi = b[i], pj = b[j], aj = a[j], ci = c[i], r2 = rinv[i];
        const double yi = y[i], yj = y[j], li = sl[i], lj = sl[j], ri = sr[i], rj = sr[j];
        const bool set2 = act && pair;
        y[j] = set2 ? (pi * yj - aj * yi - pi * cj * yn) * r2 : act ? y1 : yj;
        y[i] = set2 ? (pj * yi - ci * yj + ci * cj * yn) * r2 : yi;
        sl[j] = set2 ? (pi * lj - aj * li - pi * cj * ln) * r2 : act ? l1 : lj;
        sl[i] = set2 ? (pj * li - ci * lj + ci * cj * ln) * r2 : li;
        sr[j] = set2 ? (pi * rj - aj * ri - pi * cj * rn) * r2 : act ? r1 : rj;
        sr[i] = set2 ? (pj * ri - ci * rj + ci * cj * rn) * r2 : ri;
        done = set2;
      } else if (act) {
        y[0] = y1;
        sl[0] = l1;
        sr[0] = r1;
      }
    }
  } else {
    double pc = 0.0;
    STRIPESOLVE_UNROLL
    for (int k = 0; k < Q; ++k) {
      const double lo = k > 0 ? a[k] : 0.0, up = k < Q - 1 ? c[k] : 0.0;
      const double piv = b[k] - lo * pc;
      const double scale = largest_magnitude(lo, b[k], up);
      if (!pivot_passes(piv, tol, scale) && bad < 0) bad = k;
      const double inv = reciprocal(piv);
      pc = up * inv;
      c[k] = pc;
      if (k > 0) {
        y[k] = (y[k] - lo * y[k - 1]) * inv;
        sl[k] = (sl[k] - lo * sl[k - 1]) * inv;
      } else {
        y[k] *= inv;
        sl[k] *= inv;
      }
      if (k == Q - 1) sr[k] *= inv;
    }
    STRIPESOLVE_UNROLL
    for (int k = Q - 2; k >= 0; --k) {
      y[k] -= c[k] * y[k + 1];
      sl[k] -= c[k] * sl[k + 1];
      sr[k] -= c[k] * sr[k + 1];
    }
  }
  return bad;
}

// Thomas on the tridiagonal system (L, D, U) of q rows (L[0] and U[q-1] ignored) for the
// right-hand side z, in place; cp is the calling thread's scratch for the multipliers. Returns
// the first row whose pivot fails the tiny-pivot test, or -1.
STRIPESOLVE_HD inline int thomas_solve(const double* __restrict__ L, const double* __restrict__ D,
                                       const double* __restrict__ U, double* __restrict__ z,
                                       double* __restrict__ cp, int q, double tol) {
  int bad = -1;
  double pc = 0.0, zp = 0.0;
  for (int k = 0; k < q; ++k) {
    const double lo = k > 0 ? L[k] : 0.0, up = k < q - 1 ? U[k] : 0.0;
    const double dk = D[k];
    const double pv = dk - lo * pc;
    const double scale = largest_magnitude(lo, dk, up);
    if (!pivot_passes(pv, tol, scale) && bad < 0) bad = k;
    const double inv = reciprocal(pv);
    pc = up * inv;
    cp[k] = pc;
    zp = (z[k] - lo * zp) * inv;
    z[k] = zp;
  }
  for (int k = q - 2; k >= 0; --k) {
    zp = z[k] - cp[k] * zp;
    z[k] = zp;
  }
  return bad;
}

// Diagonal pivoting (as lane_solve, 000 §III) on the system (L, D, U) of q rows for z, in place,
// branch-free: every row is a step of the loop, both pivot kinds are computed and the right one
// selected, and one reciprocal per pivot serves both sweeps. A regular loop lets the compiler
// overlap the shared-memory loads with the serial chain; a loop with a data-dependent stride
// (1 or 2 rows) made this level three times slower than Thomas. The 2x2 rows are bits of a
// register (q <= 32). With kMax > 0 (q <= kMax), z is held in registers and the loops are
// unrolled whole, so that the serial chain does not go through memory at every row.
template <int kMax = 0>
STRIPESOLVE_HD inline int pivot_solve(const double* __restrict__ L, const double* __restrict__ D,
                                      const double* __restrict__ U, double* __restrict__ z_in,
                                      double* __restrict__ piv, double* __restrict__ rinv, int q) {
  constexpr bool kFixed = kMax > 0;
  double held[kFixed ? kMax + 1 : 1];  // z in registers (one spare: reads past q are guarded)
  double* const z = kFixed ? held : z_in;
  if constexpr (kFixed) {
    STRIPESOLVE_UNROLL
    for (int i = 0; i <= kMax; ++i) held[i] = i < q ? z_in[i] : 0.0;
  }
  unsigned two = 0;  // bit k: row k is the second row of a 2x2 pivot
  int bad = -1;
  double cur = D[0];
  bool skip = false;
  auto eliminate = [&](int k) {
    const bool active = !skip;
    two |= skip ? 1u << k : 0u;
    const double a2 = L[k + 1], c1 = U[k], b2 = D[k + 1];
    const bool more = k + 2 < q;
    const double a3 = more ? L[k + 2] : 0.0, c2 = more ? U[k + 1] : 0.0;
    const double sigma = largest_magnitude(a2, a3, b2, c1, c2);
    const bool one = fabs(cur) * sigma >= kPivotKappa * fabs(a2 * c1);
    const double det = one ? cur : cur * b2 - a2 * c1;
    const double r = reciprocal(det);
    if (active && !pivot_ok(det) && bad < 0) bad = k;
    const bool do1 = active && one, do2 = active && !one && more;
    rinv[k] = r;
    piv[k] = active ? cur : D[k];
    const double zk = z[k], zk1 = z[k + 1];
    const double m = a2 * r;
    z[k + 1] = do1 ? zk1 - m * zk : zk1;
    double next = do1 ? b2 - m * c1 : cur;
    if (do2) {
      const double ratio = a3 * r;
      z[k + 2] -= ratio * (cur * zk1 - a2 * zk);
      next = D[k + 2] - ratio * cur * c2;
    }
    cur = next;
    skip = active && !one;
  };
  if constexpr (kFixed) {
    STRIPESOLVE_UNROLL
    for (int k = 0; k < kMax - 1; ++k) {
      if (k >= q - 1) break;
      eliminate(k);
    }
  } else {
    STRIPESOLVE_UNROLL_2
    for (int k = 0; k < q - 1; ++k) eliminate(k);
  }
  {
    const int k = q - 1;
    const bool active = !skip;
    two |= skip ? 1u << k : 0u;
    rinv[k] = reciprocal(cur);
    piv[k] = active ? cur : D[k];
    if (active && !pivot_ok(cur) && bad < 0) bad = k;
  }
  bool done = false;
  auto substitute = [&](int j) {
    const bool act = !done;
    const bool pair = j > 0 && ((two >> j) & 1u);
    const double cj = j + 1 < q ? U[j] : 0.0;
    const double zn = j + 1 < q ? z[j + 1] : 0.0;
    const double zj = z[j];
    if (act && pair) {
      const int i = j - 1;
      const double pi = piv[i], pj = piv[j], aj = L[j], ci = U[i], r2 = rinv[i];
      const double zi = z[i];
      z[j] = (pi * zj - aj * zi - pi * cj * zn) * r2;
      z[i] = (pj * zi - ci * zj + ci * cj * zn) * r2;
    } else if (act) {
      z[j] = (zj - cj * zn) * rinv[j];
    }
    done = act && pair;
  };
  if constexpr (kFixed) {
    STRIPESOLVE_UNROLL
    for (int j = kMax - 1; j >= 0; --j) {
      if (j < q) substitute(j);
    }
  } else {
    STRIPESOLVE_UNROLL_2
    for (int j = q - 1; j >= 0; --j) substitute(j);
  }
  if constexpr (kFixed) {
    STRIPESOLVE_UNROLL
    for (int i = 0; i < kMax; ++i) {
      if (i < q) z_in[i] = held[i];
    }
  }
  return bad;
}

}  // namespace stripesolve::tridiag::gpu
