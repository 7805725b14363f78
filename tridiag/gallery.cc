#include "tridiag/gallery.h"

#include <algorithm>
#include <cmath>
#include <random>

namespace stripesolve::tridiag {

namespace {

constexpr std::size_t kRandsvdBlock = 512;

struct Uniform {
  explicit Uniform(std::uint64_t seed) : gen(seed) {}
  double operator()() { return dist(gen); }
  std::mt19937_64 gen;
  std::uniform_real_distribution<double> dist{-1.0, 1.0};
};

TridiagonalMatrix zeros(std::size_t n) {
  return {std::vector<double>(n, 0.0), std::vector<double>(n, 0.0), std::vector<double>(n, 0.0)};
}

TridiagonalMatrix uniform_matrix(std::size_t n, Uniform& u) {
  TridiagonalMatrix m = zeros(n);
  for (std::size_t i = 0; i < n; ++i) {
    m.dl[i] = i > 0 ? u() : 0.0;
    m.d[i] = u();
    m.du[i] = i + 1 < n ? u() : 0.0;
  }
  return m;
}

TridiagonalMatrix toeplitz(std::size_t n, double sub, double diag, double super) {
  TridiagonalMatrix m = zeros(n);
  for (std::size_t i = 0; i < n; ++i) {
    m.dl[i] = i > 0 ? sub : 0.0;
    m.d[i] = diag;
    m.du[i] = i + 1 < n ? super : 0.0;
  }
  return m;
}

// Householder reflector (I - beta v v^T) mapping x (length len, stride) to a multiple of e_1.
double reflector(const double* x, std::size_t len, std::size_t stride, std::vector<double>& v) {
  v.assign(len, 0.0);
  double norm2 = 0.0;
  for (std::size_t i = 0; i < len; ++i) {
    v[i] = x[i * stride];
    norm2 += v[i] * v[i];
  }
  if (norm2 == 0.0) return 0.0;
  const double alpha = v[0] >= 0 ? -std::sqrt(norm2) : std::sqrt(norm2);
  v[0] -= alpha;
  double vv = 0.0;
  for (double e : v) vv += e * e;
  return vv == 0.0 ? 0.0 : 2.0 / vv;
}

// A[r0:, c0:] = (I - beta v v^T) A[r0:, c0:] (rows) for a row-major n x n matrix.
void apply_left(std::vector<double>& a, std::size_t n, std::size_t r0, std::size_t c0,
                const std::vector<double>& v, double beta) {
  std::vector<double> w(n, 0.0);
  for (std::size_t i = 0; i < v.size(); ++i) {
    const double* row = &a[(r0 + i) * n];
    for (std::size_t c = c0; c < n; ++c) w[c] += v[i] * row[c];
  }
  for (std::size_t i = 0; i < v.size(); ++i) {
    double* row = &a[(r0 + i) * n];
    for (std::size_t c = c0; c < n; ++c) row[c] -= beta * v[i] * w[c];
  }
}

// A[r0:, c0:] = A[r0:, c0:] (I - beta v v^T) (columns).
void apply_right(std::vector<double>& a, std::size_t n, std::size_t r0, std::size_t c0,
                 const std::vector<double>& v, double beta) {
  for (std::size_t r = r0; r < n; ++r) {
    double* row = &a[r * n + c0];
    double dot = 0.0;
    for (std::size_t i = 0; i < v.size(); ++i) dot += row[i] * v[i];
    for (std::size_t i = 0; i < v.size(); ++i) row[i] -= beta * dot * v[i];
  }
}

// gallery('randsvd', n, kappa, mode, 1, 1) for n <= kRandsvdBlock.
TridiagonalMatrix randsvd(std::size_t n, double kappa, int mode, std::uint64_t seed) {
  std::vector<double> sigma(n, 1.0);
  for (std::size_t i = 0; i < n; ++i) {
    const double t = n > 1 ? static_cast<double>(i) / static_cast<double>(n - 1) : 0.0;
    switch (mode) {
      case 1:
        sigma[i] = i == 0 ? 1.0 : 1.0 / kappa;
        break;  // one large
      case 2:
        sigma[i] = i + 1 == n ? 1.0 / kappa : 1.0;
        break;  // one small
      case 3:
        sigma[i] = std::pow(kappa, -t);
        break;  // geometric
      default:
        sigma[i] = 1.0 - t * (1.0 - 1.0 / kappa);
        break;  // arithmetic
    }
  }
  std::vector<double> a(n * n, 0.0);
  for (std::size_t i = 0; i < n; ++i) a[i * n + i] = sigma[i];
  std::mt19937_64 gen(seed);
  std::normal_distribution<double> normal;
  std::vector<double> v;
  // Random orthogonal factors on both sides (qmult: a product of random reflectors).
  for (int side = 0; side < 2; ++side) {
    for (std::size_t k = 0; k + 1 < n; ++k) {
      v.resize(n - k);
      double vv = 0.0;
      for (double& e : v) {
        e = normal(gen);
        vv += e * e;
      }
      if (vv == 0.0) continue;
      if (side == 0)
        apply_left(a, n, k, 0, v, 2.0 / vv);
      else
        apply_right(a, n, 0, k, v, 2.0 / vv);
    }
  }
  // bandred(A, 1, 1): zero column k below the sub-diagonal, then row k beyond the super-diagonal.
  for (std::size_t k = 0; k + 2 < n; ++k) {
    double beta = reflector(&a[(k + 1) * n + k], n - k - 1, n, v);
    if (beta != 0.0) apply_left(a, n, k + 1, k, v, beta);
    beta = reflector(&a[k * n + k + 1], n - k - 1, 1, v);
    if (beta != 0.0) apply_right(a, n, k, k + 1, v, beta);
  }
  TridiagonalMatrix m = zeros(n);
  for (std::size_t i = 0; i < n; ++i) {
    m.d[i] = a[i * n + i];
    if (i > 0) m.dl[i] = a[i * n + i - 1];
    if (i + 1 < n) m.du[i] = a[i * n + i + 1];
  }
  return m;
}

TridiagonalMatrix tiled(const TridiagonalMatrix& block, std::size_t n) {
  TridiagonalMatrix m = zeros(n);
  const std::size_t b = block.d.size();
  for (std::size_t i = 0; i < n; ++i) {
    const std::size_t k = i % b;
    m.d[i] = block.d[k];
    m.dl[i] = k > 0 ? block.dl[k] : 0.0;
    m.du[i] = (k + 1 < b && i + 1 < n) ? block.du[k] : 0.0;
  }
  return m;
}

// gallery('dorr', n, theta), Matlab's definition.
TridiagonalMatrix dorr(std::size_t n, double theta) {
  std::vector<double> c(n + 1), e(n + 1), d(n + 1);
  const double h = 1.0 / static_cast<double>(n + 1);
  const std::size_t m = (n + 1) / 2;
  const double term = theta / (h * h);
  for (std::size_t i = 1; i <= n; ++i) {
    const double x = static_cast<double>(i) * h;
    if (i <= m) {
      c[i] = -term;
      e[i] = c[i] - (0.5 - x) / h;
    } else {
      e[i] = -term;
      c[i] = e[i] + (0.5 - x) / h;
    }
    d[i] = -(c[i] + e[i]);
  }
  TridiagonalMatrix t = zeros(n);
  for (std::size_t i = 0; i < n; ++i) {
    t.d[i] = d[i + 1];
    if (i > 0) t.dl[i] = c[i + 1];
    if (i + 1 < n) t.du[i] = e[i + 1];
  }
  return t;
}

}  // namespace

std::string_view stability_matrix_description(int type) {
  switch (type) {
    case 1:
      return "U(-1,1) entries";
    case 2:
      return "Toeplitz, diagonal 1e8, off-diagonals U(-1,1)";
    case 3:
      return "gallery('lesp')";
    case 4:
      return "U(-1,1), sub-diagonal element 256 (n/2 if n <= 256) times 1e-50";
    case 5:
      return "U(-1,1) diagonal, off-diagonals 0 or U(-1,1) with probability 1/2";
    case 6:
      return "Toeplitz, diagonal 64, off-diagonals U(-1,1)";
    case 7:
      return "inv(gallery('kms', n, 0.5))";
    case 8:
      return "gallery('randsvd', n, 1e15, 2, 1, 1): one small singular value";
    case 9:
      return "gallery('randsvd', n, 1e15, 3, 1, 1): geometric singular values";
    case 10:
      return "gallery('randsvd', n, 1e15, 1, 1, 1): one large singular value";
    case 11:
      return "gallery('randsvd', n, 1e15, 4, 1, 1): arithmetic singular values";
    case 12:
      return "U(-1,1), sub-diagonal times 1e-50";
    case 13:
      return "gallery('dorr', n, 1e-4)";
    case 14:
      return "Toeplitz, diagonal 1e-8, off-diagonals U(-1,1)";
    case 15:
      return "gallery('clement', n, 0)";
    case 16:
      return "Toeplitz, diagonal 0, off-diagonals U(-1,1)";
    default:
      return "unknown";
  }
}

TridiagonalMatrix stability_matrix(int type, std::size_t n, std::uint64_t seed) {
  Uniform u(seed);
  switch (type) {
    case 1:
      return uniform_matrix(n, u);
    case 2: {
      const double s = u(), t = u();
      return toeplitz(n, s, 1e8, t);
    }
    case 3: {
      TridiagonalMatrix m = zeros(n);
      for (std::size_t i = 0; i < n; ++i) {
        m.d[i] = -(2.0 * static_cast<double>(i) + 5.0);
        if (i > 0) m.dl[i] = 1.0 / static_cast<double>(i + 1);
        if (i + 1 < n) m.du[i] = static_cast<double>(i + 2);
      }
      return m;
    }
    case 4: {
      TridiagonalMatrix m = uniform_matrix(n, u);
      const std::size_t k = n > 256 ? 256 : n / 2;
      if (k > 0) m.dl[k] *= 1e-50;
      return m;
    }
    case 5: {
      TridiagonalMatrix m = zeros(n);
      for (std::size_t i = 0; i < n; ++i) {
        m.d[i] = u();
        const double l = u(), r = u(), pl = u(), pr = u();
        if (i > 0) m.dl[i] = pl < 0 ? 0.0 : l;
        if (i + 1 < n) m.du[i] = pr < 0 ? 0.0 : r;
      }
      return m;
    }
    case 6: {
      const double s = u(), t = u();
      return toeplitz(n, s, 64.0, t);
    }
    case 7: {  // inv(kms(n, rho)) = tridiag(-rho, [1, 1+rho^2, ..., 1], -rho) / (1 - rho^2)
      const double rho = 0.5, s = 1.0 / (1.0 - rho * rho);
      TridiagonalMatrix m = toeplitz(n, -rho * s, (1.0 + rho * rho) * s, -rho * s);
      m.d[0] = n > 1 ? s : 1.0;
      m.d[n - 1] = n > 1 ? s : 1.0;
      return m;
    }
    case 8:
    case 9:
    case 10:
    case 11: {
      const int mode = type == 8 ? 2 : type == 9 ? 3 : type == 10 ? 1 : 4;
      const std::size_t b = n <= kRandsvdBlock ? n : kRandsvdBlock;
      TridiagonalMatrix block = randsvd(b, 1e15, mode, seed);
      return n <= kRandsvdBlock ? block : tiled(block, n);
    }
    case 12: {
      TridiagonalMatrix m = uniform_matrix(n, u);
      for (double& v : m.dl) v *= 1e-50;
      return m;
    }
    case 13:
      return dorr(n, 1e-4);
    case 14: {
      const double s = u(), t = u();
      return toeplitz(n, s, 1e-8, t);
    }
    case 15: {
      TridiagonalMatrix m = zeros(n);
      for (std::size_t i = 0; i < n; ++i) {
        if (i > 0) m.dl[i] = static_cast<double>(n - i);
        if (i + 1 < n) m.du[i] = static_cast<double>(i + 1);
      }
      return m;
    }
    case 16: {
      const double s = u(), t = u();
      return toeplitz(n, s, 0.0, t);
    }
    default:
      return zeros(n);
  }
}

TridiagonalMatrix diagonally_dominant_matrix(std::size_t n, std::uint64_t seed) {
  Uniform u(seed);
  TridiagonalMatrix m = uniform_matrix(n, u);
  for (std::size_t i = 0; i < n; ++i) {
    const double off = std::abs(m.dl[i]) + std::abs(m.du[i]) + 1.0;
    m.d[i] = m.d[i] >= 0 ? m.d[i] + off : m.d[i] - off;
  }
  return m;
}

TridiagonalMatrix toeplitz_matrix(std::size_t n, double sub, double diag, double super) {
  return toeplitz(n, sub, diag, super);
}

TridiagonalMatrix near_singular_matrix(std::size_t n, std::uint64_t seed, double delta) {
  Uniform u(seed);
  TridiagonalMatrix m = uniform_matrix(n, u);
  // Pivots of elimination without pivoting in long double: the last one is d[n-1] minus the
  // Schur complement term, so d[n-1] = term + delta * scale leaves exactly that pivot.
  long double pivot = m.d[0], term = 0.0L;
  for (std::size_t i = 1; i < n; ++i) {
    term = static_cast<long double>(m.dl[i]) * m.du[i - 1] / pivot;
    pivot = m.d[i] - term;
  }
  const std::size_t last = n - 1;
  const double scale = std::max({std::abs(m.dl[last]), std::abs(m.du[last]), 1.0});
  m.d[last] = static_cast<double>(term + static_cast<long double>(delta) * scale);
  return m;
}

std::vector<double> random_vector(std::size_t n, std::uint64_t seed) {
  Uniform u(seed);
  std::vector<double> v(n);
  for (double& e : v) e = u();
  return v;
}

double relative_residual(const double* dl, const double* d, const double* du, const double* x,
                         const double* f, std::size_t n) {
  long double num = 0.0L, den = 0.0L;
  for (std::size_t i = 0; i < n; ++i) {
    if (!std::isfinite(x[i])) return INFINITY;
    long double r = static_cast<long double>(d[i]) * x[i];
    if (i > 0) r += static_cast<long double>(dl[i]) * x[i - 1];
    if (i + 1 < n) r += static_cast<long double>(du[i]) * x[i + 1];
    r -= f[i];
    num += r * r;
    den += static_cast<long double>(f[i]) * f[i];
  }
  if (den == 0.0L) return static_cast<double>(std::sqrt(num));
  return static_cast<double>(std::sqrt(num / den));
}

}  // namespace stripesolve::tridiag
