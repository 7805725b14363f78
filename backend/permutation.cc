#include <numeric>

#include "backend/device_engine.h"

namespace stripesolve::backend {

std::vector<int32_t> permutation_pairs(const std::vector<int32_t>& swaps) {
  int32_t width = static_cast<int32_t>(swaps.size());
  for (int32_t s : swaps) width = std::max(width, s + 1);
  // content[c]: the original column that ends up in column c.
  std::vector<int32_t> content(static_cast<size_t>(width));
  std::iota(content.begin(), content.end(), 0);
  for (size_t k = 0; k < swaps.size(); ++k)
    std::swap(content[k], content[static_cast<size_t>(swaps[k])]);
  std::vector<int32_t> pairs;
  for (int32_t c = 0; c < width; ++c) {
    if (content[static_cast<size_t>(c)] != c) {
      pairs.push_back(c);
      pairs.push_back(content[static_cast<size_t>(c)]);
    }
  }
  return pairs;
}

}  // namespace stripesolve::backend
