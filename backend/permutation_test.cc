#include <numeric>
#include <random>

#include <gtest/gtest.h>

#include "backend/device_engine.h"

namespace stripesolve::backend {
namespace {

// Applies the sequential swaps and the pairs to the same columns; both must agree.
TEST(PermutationPairs, MatchesSequentialSwaps) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 50; ++trial) {
    const int h = 1 + static_cast<int>(rng() % 40);
    const int width = h + static_cast<int>(rng() % 60);
    std::vector<int32_t> swaps(static_cast<size_t>(h));
    for (int k = 0; k < h; ++k) swaps[k] = k + static_cast<int32_t>(rng() % (width - k));
    std::vector<int> expect(static_cast<size_t>(width));
    std::iota(expect.begin(), expect.end(), 100);
    std::vector<int> got = expect;
    for (int k = 0; k < h; ++k) std::swap(expect[k], expect[swaps[k]]);
    const auto pairs = permutation_pairs(swaps);
    ASSERT_EQ(pairs.size() % 2, 0u);
    ASSERT_LE(pairs.size() / 2, 2u * h);
    const std::vector<int> old = got;
    for (size_t p = 0; p < pairs.size(); p += 2) got[pairs[p]] = old[pairs[p + 1]];
    EXPECT_EQ(got, expect) << "trial " << trial;
  }
}

TEST(PermutationPairs, IdentityIsEmpty) {
  EXPECT_TRUE(permutation_pairs({0, 1, 2, 3}).empty());
  EXPECT_EQ(permutation_pairs({1, 1}).size(), 4u);  // swap 0<->1, then 1<->1
}

}  // namespace
}  // namespace stripesolve::backend
