// Sequential eliminations: Thomas (003 §2.3.1), LAPACK dgtsv's partial pivoting, and diagonal
// pivoting (000 §III).
#include <algorithm>
#include <cmath>
#include <string>
#include <utility>

#include <fmt/format.h>

#include "tridiag/diagonal_pivoting.h"
#include "tridiag/system_solvers.h"

namespace stripesolve::tridiag {

Status check_pivot(const char* name, double pivot, double scale, double tol, std::size_t row) {
  if (std::abs(pivot) > tol * scale && std::isfinite(pivot)) return Status::ok();
  if (!std::isfinite(pivot)) {
    return Status::numerical(
        fmt::format("{}: non-finite pivot {:.3g} at row {}", name, pivot, row));
  }
  return Status::numerical(
      fmt::format("{}: zero or tiny pivot {:.3g} at row {}", name, pivot, row));
}

Status check_finite(const char* name, const double* x, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) {
    if (!std::isfinite(x[i])) {
      return Status::numerical(std::string(name) + ": non-finite solution at row " +
                               std::to_string(i));
    }
  }
  return Status::ok();
}

Status check_finite_inputs(const BatchArrays& a, std::size_t n, std::size_t stride) {
  const std::pair<const double*, const char*> inputs[] = {
      {a.dl, "dl"}, {a.d, "d"}, {a.du, "du"}, {a.f, "f"}};
  for (const auto& [values, name] : inputs) {
    for (std::size_t i = 0; i < n; ++i) {
      const double v = values[i * stride];
      if (std::isfinite(v)) continue;
      return Status::invalid_argument(fmt::format("non-finite input: {} is {} at row {}", name,
                                                  std::isnan(v) ? "nan"
                                                  : v > 0       ? "inf"
                                                                : "-inf",
                                                  i));
    }
  }
  return Status::ok();
}

// 003 §2.3.1: forward sweep c'_i = c_i / p_i, y_i = (f_i - a_i y_{i-1}) / p_i with
// p_i = b_i - a_i c'_{i-1}, then x_i = y_i - c'_i x_{i+1}. 8n flops.
Status solve_thomas(const SystemRef& s, double tol, Workspace& work) {
  const std::size_t n = s.n;
  work.c.resize(n);
  double* cp = work.c.data();
  double prev_c = 0.0, prev_y = 0.0;
  for (std::size_t i = 0; i < n; ++i) {
    const double a = i > 0 ? s.dl[i] : 0.0;
    const double c = i + 1 < n ? s.du[i] : 0.0;
    const double p = s.d[i] - a * prev_c;
    const double scale = std::max({std::abs(a), std::abs(s.d[i]), std::abs(c)});
    STRIPESOLVE_RETURN_IF_ERROR(check_pivot("thomas", p, scale, tol, i));
    const double inv = 1.0 / p;
    prev_c = c * inv;
    prev_y = (s.f[i] - a * prev_y) * inv;
    cp[i] = prev_c;
    s.x[i] = prev_y;
  }
  for (std::size_t i = n - 1; i-- > 0;) s.x[i] -= cp[i] * s.x[i + 1];
  return check_finite("thomas", s.x, n);
}

// The operations of LAPACK dgtsv (nrhs = 1), in the same order, on copies of the diagonals.
Status solve_gepp(const SystemRef& s, Workspace& work) {
  const std::size_t n = s.n;
  work.a.assign(n, 0.0);  // dl, later the second super-diagonal
  work.b.assign(s.d, s.d + n);
  work.c.assign(n, 0.0);
  if (n > 1) {
    std::copy(s.dl + 1, s.dl + n, work.a.begin());
    std::copy(s.du, s.du + n - 1, work.c.begin());
  }
  double* dl = work.a.data();
  double* d = work.b.data();
  double* du = work.c.data();
  double* b = s.x;
  if (b != s.f) std::copy(s.f, s.f + n, b);
  auto singular = [](std::size_t row) {
    return Status::numerical("gepp: matrix is singular: zero pivot at row " + std::to_string(row));
  };
  for (std::size_t i = 0; i + 1 < n; ++i) {
    const bool last = i + 2 == n;
    if (std::abs(d[i]) >= std::abs(dl[i])) {
      if (d[i] == 0.0) return singular(i);
      const double fact = dl[i] / d[i];
      d[i + 1] -= fact * du[i];
      b[i + 1] -= fact * b[i];
      dl[i] = 0.0;
    } else {
      const double fact = d[i] / dl[i];
      d[i] = dl[i];
      const double temp = d[i + 1];
      d[i + 1] = du[i] - fact * temp;
      if (!last) {
        dl[i] = du[i + 1];
        du[i + 1] = -fact * dl[i];
      }
      du[i] = temp;
      const double tb = b[i];
      b[i] = b[i + 1];
      b[i + 1] = tb - fact * b[i + 1];
    }
  }
  if (d[n - 1] == 0.0) return singular(n - 1);
  b[n - 1] /= d[n - 1];
  if (n > 1) b[n - 2] = (b[n - 2] - du[n - 2] * b[n - 1]) / d[n - 2];
  for (std::size_t i = n >= 2 ? n - 2 : 0; i-- > 0;) {
    b[i] = (b[i] - du[i] * b[i + 1] - dl[i] * b[i + 2]) / d[i];
  }
  return check_finite("gepp", b, n);
}

Status dp_factor(const double* dl, const double* d, const double* du, std::size_t n, double* piv,
                 std::uint8_t* kinds, std::size_t row_offset) {
  auto bad = [row_offset](double v, std::size_t row) {
    return Status::numerical(
        fmt::format("spike: singular or non-finite pivot {:.3g} at row {}", v, row + row_offset));
  };
  double cur = d[0];
  std::size_t k = 0;
  while (k < n) {
    if (k + 1 == n) {
      piv[k] = cur;
      kinds[k] = 1;
      if (cur == 0.0 || !std::isfinite(cur)) return bad(cur, k);
      break;
    }
    const double a2 = dl[k + 1], c1 = du[k], b2 = d[k + 1];
    const double a3 = k + 2 < n ? dl[k + 2] : 0.0;
    const double c2 = k + 2 < n ? du[k + 1] : 0.0;
    const double sigma =
        std::max({std::abs(a2), std::abs(a3), std::abs(b2), std::abs(c1), std::abs(c2)});
    if (std::abs(cur) * sigma >= kBunchKaufmanKappa * std::abs(a2 * c1)) {
      piv[k] = cur;
      kinds[k] = 1;
      if (cur == 0.0 || !std::isfinite(cur)) return bad(cur, k);
      cur = b2 - a2 * c1 / cur;  // Eq 12, d = 1
      k += 1;
    } else {
      piv[k] = cur;
      piv[k + 1] = b2;
      kinds[k] = 2;
      kinds[k + 1] = 0;
      const double delta = cur * b2 - a2 * c1;
      if (delta == 0.0 || !std::isfinite(delta)) return bad(delta, k);
      if (k + 2 < n) cur = d[k + 2] - a3 * cur * c2 / delta;  // Eq 12, d = 2
      k += 2;
    }
  }
  return Status::ok();
}

void dp_solve(const double* dl, const double* du, const double* piv, const std::uint8_t* kinds,
              std::size_t n, double* x) {
  // Forward: L z = f, folded with the block solves of B (000 Fig 5).
  for (std::size_t k = 0; k < n;) {
    if (kinds[k] == 1) {
      if (k + 1 < n) x[k + 1] -= dl[k + 1] / piv[k] * x[k];
      k += 1;
    } else {
      if (k + 2 < n) {
        const double delta = piv[k] * piv[k + 1] - dl[k + 1] * du[k];
        x[k + 2] -= dl[k + 2] * (piv[k] * x[k + 1] - dl[k + 1] * x[k]) / delta;
      }
      k += 2;
    }
  }
  // Backward: M^T x = y.
  std::size_t k = n;
  while (k > 0) {
    const std::size_t j = k - 1;
    const double next = j + 1 < n ? x[j + 1] : 0.0;
    if (kinds[j] == 0) {
      const std::size_t i = j - 1;
      const double c2 = j + 1 < n ? du[j] : 0.0;
      const double delta = piv[i] * piv[j] - dl[j] * du[i];
      const double fi = x[i], fj = x[j];
      x[j] = (piv[i] * fj - dl[j] * fi - piv[i] * c2 * next) / delta;
      x[i] = (piv[j] * fi - du[i] * fj + du[i] * c2 * next) / delta;
      k -= 2;
    } else {
      const double c = j + 1 < n ? du[j] : 0.0;
      x[j] = (x[j] - c * next) / piv[j];
      k -= 1;
    }
  }
}

Status solve_diagonal_pivoting(const SystemRef& s, Workspace& work) {
  work.p.resize(s.n);
  work.kinds.resize(s.n);
  STRIPESOLVE_RETURN_IF_ERROR(dp_factor(s.dl, s.d, s.du, s.n, work.p.data(), work.kinds.data()));
  if (s.x != s.f) std::copy(s.f, s.f + s.n, s.x);
  dp_solve(s.dl, s.du, work.p.data(), work.kinds.data(), s.n, s.x);
  return check_finite("spike", s.x, s.n);
}

}  // namespace stripesolve::tridiag
