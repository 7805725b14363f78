#include "examples/adi/adi.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <stdexcept>

namespace stripesolve::examples::adi {

PoissonAdi::PoissonAdi(int64_t grid, int alphas, double fixed_alpha)
    : g_(grid), h_(1.0 / static_cast<double>(grid + 1)) {
  if (grid < 2) throw std::invalid_argument("the grid needs at least 2 x 2 inner cells");
  u_.assign(static_cast<size_t>(grid * grid), 0.0);
  exact_.resize(u_.size());
  for (int64_t j = 0; j < g_; ++j) {
    for (int64_t i = 0; i < g_; ++i) exact_[static_cast<size_t>(j * g_ + i)] = exact(i, j);
  }
  if (fixed_alpha > 0) {
    alphas_ = {fixed_alpha};
    return;
  }
  if (alphas < 1) throw std::invalid_argument("at least one alpha");
  // Eigenvalues of -d_xx on G points: 4 sin^2(k pi h / 2), k = 1..G.
  const double s = std::sin(std::numbers::pi * h_ / 2), c = std::cos(std::numbers::pi * h_ / 2);
  const double lo = 4 * s * s, hi = 4 * c * c;
  for (int j = 0; j < alphas; ++j) {
    alphas_.push_back(lo * std::pow(hi / lo, (2.0 * j + 1) / (2.0 * alphas)));
  }
}

double PoissonAdi::alpha(int64_t step) const {
  return alphas_[static_cast<size_t>(step) % alphas_.size()];
}

double PoissonAdi::exact(int64_t i, int64_t j) const {
  const double x = static_cast<double>(i + 1) * h_, y = static_cast<double>(j + 1) * h_;
  return std::exp(x + 2 * y);
}

double PoissonAdi::boundary(int64_t i, int64_t j) const {
  return exact(i, j);
}

double PoissonAdi::value(const std::vector<double>& u, int64_t i, int64_t j) const {
  if (i < 0 || i >= g_ || j < 0 || j >= g_) return boundary(i, j);
  return u[static_cast<size_t>(j * g_ + i)];
}

double PoissonAdi::source_h2(int64_t i, int64_t j) const {
  return h_ * h_ * 5 * exact_[static_cast<size_t>(j * g_ + i)];
}

namespace {

TridiagBatch constant_matrix(int64_t g, double alpha, bool interleaved) {
  TridiagBatch b;
  b.interleaved = interleaved;
  b.systems = g;
  b.n = g;
  const auto count = static_cast<size_t>(g * g);
  b.dl.assign(count, -1.0);
  b.d.assign(count, alpha + 2);
  b.du.assign(count, -1.0);
  b.rhs.assign(count, 0.0);
  return b;
}

}  // namespace

TridiagBatch PoissonAdi::row_half_step(int64_t step) const {
  const double a = alpha(step);
  TridiagBatch b = constant_matrix(g_, a, false);
  for (int64_t j = 0; j < g_; ++j) {
    for (int64_t i = 0; i < g_; ++i) {
      const double u = value(u_, i, j);
      double z = a * u + value(u_, i, j - 1) - 2 * u + value(u_, i, j + 1) - source_h2(i, j);
      // u*'s own boundary neighbours along x (the steady boundary values).
      if (i == 0) z += boundary(-1, j);
      if (i == g_ - 1) z += boundary(g_, j);
      b.rhs[static_cast<size_t>(j * g_ + i)] = z;
    }
  }
  return b;
}

TridiagBatch PoissonAdi::column_half_step(int64_t step, const std::vector<double>& u_star) const {
  if (u_star.size() != u_.size()) throw std::invalid_argument("u* has the wrong size");
  const double a = alpha(step);
  TridiagBatch b = constant_matrix(g_, a, true);
  for (int64_t j = 0; j < g_; ++j) {
    for (int64_t i = 0; i < g_; ++i) {
      const double u = value(u_star, i, j);
      double z =
          a * u + value(u_star, i - 1, j) - 2 * u + value(u_star, i + 1, j) - source_h2(i, j);
      if (j == 0) z += boundary(i, -1);
      if (j == g_ - 1) z += boundary(i, g_);
      // Interleaved: element j of system i at j * G + i, i.e. the field's own index.
      b.rhs[static_cast<size_t>(j * g_ + i)] = z;
    }
  }
  return b;
}

double PoissonAdi::finish_step(const std::vector<double>& u_next) {
  if (u_next.size() != u_.size()) throw std::invalid_argument("u^(k+1) has the wrong size");
  double change = 0;
  for (size_t k = 0; k < u_.size(); ++k) change = std::max(change, std::abs(u_next[k] - u_[k]));
  u_ = u_next;
  return change;
}

double PoissonAdi::max_error() const {
  double e = 0;
  for (int64_t j = 0; j < g_; ++j) {
    for (int64_t i = 0; i < g_; ++i) {
      const auto k = static_cast<size_t>(j * g_ + i);
      e = std::max(e, std::abs(u_[k] - exact_[k]));
    }
  }
  return e;
}

double PoissonAdi::error_bound() const {
  return 17 * std::exp(3.0) * h_ * h_ / 96;
}

}  // namespace stripesolve::examples::adi
