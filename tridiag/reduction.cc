// Cyclic reduction (001 §2.1, 003 §2.3.2), parallel cyclic reduction (003 §2.3.3) and the
// hybrids CR-PCR, PCR-Thomas and CR-PCR-Thomas (003 §2.3.6, §4.2.2), for any n >= 1.
//
// CR works in place on copies of the diagonals: at level l the active rows are
// i = 2^l - 1 + k 2^l (floor(n / 2^l) of them); a row of level l+1 is combined from its two
// neighbours at distance 2^l, which are never active at level l+1, so in-place updates are safe.
// Rows whose neighbour falls outside [0, n) use a zero coefficient, which is what makes
// non-powers of two, n = 1 and n = 2 work.
#include <algorithm>
#include <cmath>

#include "tridiag/system_solvers.h"

namespace stripesolve::tridiag {

namespace {

struct Tri {
  double* a;
  double* b;
  double* c;
  double* f;
};

double row_scale(const Tri& t, std::size_t i) {
  return std::max({std::abs(t.a[i]), std::abs(t.b[i]), std::abs(t.c[i])});
}

Tri copy_system(const SystemRef& s, Workspace& w) {
  const std::size_t n = s.n;
  w.a.assign(s.dl, s.dl + n);
  w.b.assign(s.d, s.d + n);
  w.c.assign(s.du, s.du + n);
  w.f.assign(s.f, s.f + n);
  w.a[0] = 0.0;
  w.c[n - 1] = 0.0;
  return {w.a.data(), w.b.data(), w.c.data(), w.f.data()};
}

// CR forward reduction until at most `limit` rows stay active; returns the level reached.
Status cr_reduce(const char* name, Tri t, std::size_t n, std::size_t limit, double tol,
                 std::size_t* level) {
  std::size_t l = 0;
  while ((n >> l) > limit && (n >> (l + 1)) >= 1) {
    const std::size_t h = std::size_t{1} << l;
    for (std::size_t i = 2 * h - 1; i < n; i += 2 * h) {
      const std::size_t left = i - h, right = i + h;
      STRIPESOLVE_RETURN_IF_ERROR(check_pivot(name, t.b[left], row_scale(t, left), tol, left));
      const double alpha = -t.a[i] / t.b[left];
      double beta = 0.0;
      if (right < n) {
        STRIPESOLVE_RETURN_IF_ERROR(check_pivot(name, t.b[right], row_scale(t, right), tol, right));
        beta = -t.c[i] / t.b[right];
        t.b[i] += beta * t.a[right];
        t.f[i] += beta * t.f[right];
      }
      t.b[i] += alpha * t.c[left];
      t.f[i] += alpha * t.f[left];
      t.a[i] = alpha * t.a[left];
      t.c[i] = right < n ? beta * t.c[right] : 0.0;
    }
    ++l;
  }
  *level = l;
  return Status::ok();
}

// CR backward substitution from `level` (whose rows are solved in x) down to level 0.
Status cr_back(const char* name, Tri t, double* x, std::size_t n, std::size_t level, double tol) {
  for (std::size_t l = level; l-- > 0;) {
    const std::size_t h = std::size_t{1} << l;
    for (std::size_t i = h - 1; i < n; i += 2 * h) {
      STRIPESOLVE_RETURN_IF_ERROR(check_pivot(name, t.b[i], row_scale(t, i), tol, i));
      double r = t.f[i] - t.a[i] * (i >= h ? x[i - h] : 0.0);
      if (i + h < n) r -= t.c[i] * x[i + h];
      x[i] = r / t.b[i];
    }
  }
  return Status::ok();
}

// `steps` PCR steps (all of them when steps >= log2 n) on the contiguous system t, using `u`
// as the second buffer; the result ends in t. Returns the distance reached.
Status pcr_steps(const char* name, Tri& t, Tri& u, std::size_t n, std::size_t steps, double tol,
                 std::size_t* distance) {
  std::size_t delta = 1;
  for (std::size_t s = 0; s < steps && delta < n; ++s, delta *= 2) {
    for (std::size_t i = 0; i < n; ++i) {
      double alpha = 0.0, beta = 0.0;
      double nb = t.b[i], nf = t.f[i], na = 0.0, nc = 0.0;
      if (i >= delta) {
        const std::size_t left = i - delta;
        STRIPESOLVE_RETURN_IF_ERROR(check_pivot(name, t.b[left], row_scale(t, left), tol, left));
        alpha = -t.a[i] / t.b[left];
        nb += alpha * t.c[left];
        nf += alpha * t.f[left];
        na = alpha * t.a[left];
      }
      if (i + delta < n) {
        const std::size_t right = i + delta;
        STRIPESOLVE_RETURN_IF_ERROR(check_pivot(name, t.b[right], row_scale(t, right), tol, right));
        beta = -t.c[i] / t.b[right];
        nb += beta * t.a[right];
        nf += beta * t.f[right];
        nc = beta * t.c[right];
      }
      u.a[i] = na;
      u.b[i] = nb;
      u.c[i] = nc;
      u.f[i] = nf;
    }
    std::swap(t, u);
  }
  *distance = delta;
  return Status::ok();
}

// Thomas on the rows start, start + stride, ... (count of them) of t; x written likewise.
Status thomas_strided(const char* name, const Tri& t, double* x, std::size_t start,
                      std::size_t stride, std::size_t count, double tol, double* cp) {
  double prev_c = 0.0, prev_y = 0.0;
  for (std::size_t k = 0; k < count; ++k) {
    const std::size_t i = start + k * stride;
    const double a = k > 0 ? t.a[i] : 0.0;
    const double c = k + 1 < count ? t.c[i] : 0.0;
    const double p = t.b[i] - a * prev_c;
    STRIPESOLVE_RETURN_IF_ERROR(check_pivot(name, p, row_scale(t, i), tol, i));
    prev_c = c / p;
    prev_y = (t.f[i] - a * prev_y) / p;
    cp[k] = prev_c;
    x[i] = prev_y;
  }
  for (std::size_t k = count - 1; k-- > 0;) {
    x[start + k * stride] -= cp[k] * x[start + (k + 1) * stride];
  }
  return Status::ok();
}

// Solves contiguous t (size n) by PCR (`pcr_only`) or by PCR steps then Thomas per residue class.
Status solve_reduced(const char* name, Tri t, double* x, std::size_t n, bool pcr_only, double tol,
                     std::vector<double>* buffers) {
  for (int k = 0; k < 4; ++k) buffers[k].resize(n);
  Tri u{buffers[0].data(), buffers[1].data(), buffers[2].data(), buffers[3].data()};
  std::size_t delta = 1;
  const std::size_t steps = pcr_only ? 64 : kPcrThomasSteps;
  STRIPESOLVE_RETURN_IF_ERROR(pcr_steps(name, t, u, n, steps, tol, &delta));
  if (delta >= n) {
    for (std::size_t i = 0; i < n; ++i) {
      STRIPESOLVE_RETURN_IF_ERROR(check_pivot(name, t.b[i], std::abs(t.b[i]), 0.0, i));
      x[i] = t.f[i] / t.b[i];
    }
    return Status::ok();
  }
  buffers[4].resize(n / delta + 1);
  for (std::size_t r = 0; r < delta; ++r) {
    const std::size_t count = (n - r + delta - 1) / delta;
    STRIPESOLVE_RETURN_IF_ERROR(
        thomas_strided(name, t, x, r, delta, count, tol, buffers[4].data()));
  }
  return Status::ok();
}

// CR down to at most kCrPcrSize rows, the reduced system by PCR or PCR-Thomas, CR back up.
Status solve_cr_hybrid(const char* name, const SystemRef& s, bool pcr_only, double tol,
                       Workspace& w) {
  const std::size_t n = s.n;
  Tri t = copy_system(s, w);
  std::size_t level = 0;
  STRIPESOLVE_RETURN_IF_ERROR(cr_reduce(name, t, n, kCrPcrSize, tol, &level));
  const std::size_t h = std::size_t{1} << level;
  const std::size_t m = n >> level;
  for (int k = 0; k < 5; ++k) w.small[k].resize(m);
  Tri r{w.small[0].data(), w.small[1].data(), w.small[2].data(), w.small[3].data()};
  for (std::size_t k = 0; k < m; ++k) {
    const std::size_t i = h - 1 + k * h;
    r.a[k] = t.a[i];
    r.b[k] = t.b[i];
    r.c[k] = t.c[i];
    r.f[k] = t.f[i];
  }
  double* rx = w.small[4].data();
  STRIPESOLVE_RETURN_IF_ERROR(solve_reduced(name, r, rx, m, pcr_only, tol, w.small + 5));
  for (std::size_t k = 0; k < m; ++k) s.x[h - 1 + k * h] = rx[k];
  STRIPESOLVE_RETURN_IF_ERROR(cr_back(name, t, s.x, n, level, tol));
  return check_finite(name, s.x, n);
}

}  // namespace

Status solve_cr(const SystemRef& s, double tol, Workspace& w) {
  const std::size_t n = s.n;
  Tri t = copy_system(s, w);
  std::size_t level = 0;
  STRIPESOLVE_RETURN_IF_ERROR(cr_reduce("cr", t, n, 1, tol, &level));
  const std::size_t top = (std::size_t{1} << level) - 1;
  STRIPESOLVE_RETURN_IF_ERROR(check_pivot("cr", t.b[top], row_scale(t, top), tol, top));
  s.x[top] = t.f[top] / t.b[top];
  STRIPESOLVE_RETURN_IF_ERROR(cr_back("cr", t, s.x, n, level, tol));
  return check_finite("cr", s.x, n);
}

Status solve_pcr(const SystemRef& s, double tol, Workspace& w) {
  Tri t = copy_system(s, w);
  STRIPESOLVE_RETURN_IF_ERROR(solve_reduced("pcr", t, s.x, s.n, true, tol, w.small));
  return check_finite("pcr", s.x, s.n);
}

Status solve_pcr_thomas(const SystemRef& s, double tol, Workspace& w) {
  Tri t = copy_system(s, w);
  STRIPESOLVE_RETURN_IF_ERROR(solve_reduced("pcr_thomas", t, s.x, s.n, false, tol, w.small));
  return check_finite("pcr_thomas", s.x, s.n);
}

Status solve_cr_pcr(const SystemRef& s, double tol, Workspace& w) {
  return solve_cr_hybrid("cr_pcr", s, true, tol, w);
}

Status solve_cr_pcr_thomas(const SystemRef& s, double tol, Workspace& w) {
  return solve_cr_hybrid("cr_pcr_thomas", s, false, tol, w);
}

}  // namespace stripesolve::tridiag
