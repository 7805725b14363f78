#include "stripe/dense_reference.h"

#include <algorithm>
#include <cmath>
#include <random>

#include <cblas.h>
#include <lapacke.h>

namespace stripesolve::stripe {

std::vector<double> uniform_matrix(int64_t rows, int64_t cols, uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::uniform_real_distribution<double> dist(-0.5, 0.5);
  std::vector<double> a(static_cast<size_t>(rows * cols));
  for (auto& v : a) v = dist(gen);
  return a;
}

double scaled_residual(const double* a, int64_t n, const double* x, const double* b, int64_t nrhs) {
  std::vector<double> r(b, b + n * nrhs);
  cblas_dgemm(CblasColMajor, CblasNoTrans, CblasNoTrans, static_cast<blasint>(n),
              static_cast<blasint>(nrhs), static_cast<blasint>(n), 1.0, a, static_cast<blasint>(n),
              x, static_cast<blasint>(n), -1.0, r.data(), static_cast<blasint>(n));
  std::vector<double> row_sums(static_cast<size_t>(n), 0.0);
  for (int64_t c = 0; c < n; ++c) {
    for (int64_t i = 0; i < n; ++i) row_sums[i] += std::abs(a[i + c * n]);
  }
  const double norm_a = *std::max_element(row_sums.begin(), row_sums.end());
  double worst = 0;
  for (int64_t j = 0; j < nrhs; ++j) {
    double rn = 0, xn = 0, bn = 0;
    for (int64_t i = 0; i < n; ++i) {
      rn = std::max(rn, std::abs(r[i + j * n]));
      xn = std::max(xn, std::abs(x[i + j * n]));
      bn = std::max(bn, std::abs(b[i + j * n]));
    }
    worst = std::max(worst, rn / (norm_a * xn + bn));
  }
  return worst;
}

double max_abs(const std::vector<double>& x) {
  double m = 0;
  for (double v : x) m = std::max(m, std::abs(v));
  return m;
}

std::vector<double> lapack_solve(const std::vector<double>& a, int64_t n,
                                 const std::vector<double>& b, int64_t nrhs) {
  std::vector<double> lu = a;
  std::vector<double> x = b;
  std::vector<lapack_int> ipiv(static_cast<size_t>(n));
  const lapack_int info = LAPACKE_dgesv(
      LAPACK_COL_MAJOR, static_cast<lapack_int>(n), static_cast<lapack_int>(nrhs), lu.data(),
      static_cast<lapack_int>(n), ipiv.data(), x.data(), static_cast<lapack_int>(n));
  if (info != 0) return {};
  return x;
}

double norm_1(const std::vector<double>& a, int64_t n) {
  double most = 0;
  for (int64_t c = 0; c < n; ++c) {
    double sum = 0;
    for (int64_t r = 0; r < n; ++r) sum += std::fabs(a[static_cast<size_t>(r + c * n)]);
    most = std::max(most, sum);
  }
  return most;
}

double inverse_norm_1(const std::vector<double>& a, int64_t n) {
  std::vector<double> inv = a;
  std::vector<lapack_int> ipiv(static_cast<size_t>(n));
  const auto ln = static_cast<lapack_int>(n);
  if (LAPACKE_dgetrf(LAPACK_COL_MAJOR, ln, ln, inv.data(), ln, ipiv.data()) != 0) return -1;
  if (LAPACKE_dgetri(LAPACK_COL_MAJOR, ln, inv.data(), ln, ipiv.data()) != 0) return -1;
  return norm_1(inv, n);
}

}  // namespace stripesolve::stripe
