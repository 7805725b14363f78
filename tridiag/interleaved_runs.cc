#include "tridiag/interleaved_runs.h"

#include <algorithm>

namespace stripesolve::tridiag {

std::size_t interleaved_run(std::size_t n) {
  constexpr std::size_t kRunBytes = std::size_t{8} << 20;
  return std::clamp<std::size_t>(kRunBytes / (5 * sizeof(double) * std::max<std::size_t>(1, n)), 1,
                                 8);
}

void gather_run(std::size_t n, std::size_t systems, const std::array<const double*, 5>& src,
                std::size_t first, std::size_t count, std::array<std::vector<double>, 5>& g) {
  for (int k = 0; k < 5; ++k) {
    g[k].resize(count * n);
    if (src[k] == nullptr) continue;
    for (std::size_t i = 0; i < n; ++i) {
      const double* row = src[k] + i * systems + first;
      for (std::size_t b = 0; b < count; ++b) g[k][b * n + i] = row[b];
    }
  }
}

void scatter_run_x(std::size_t n, std::size_t systems, double* x, std::size_t first,
                   std::size_t count, const std::array<std::vector<double>, 5>& g) {
  for (std::size_t i = 0; i < n; ++i) {
    double* row = x + i * systems + first;
    for (std::size_t b = 0; b < count; ++b) row[b] = g[4][b * n + i];
  }
}

}  // namespace stripesolve::tridiag
