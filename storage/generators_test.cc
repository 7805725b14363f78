#include "storage/generators.h"

#include <cmath>
#include <vector>

#include <gtest/gtest.h>

namespace stripesolve::storage {
namespace {

TEST(Generators, UniformIsInRangeReproducibleAndSeeded) {
  GeneratorSpec a{"uniform", 7}, b{"uniform", 8};
  double sum = 0, lo = 1, hi = -1;
  int differ = 0;
  for (int r = 0; r < 100; ++r) {
    for (int c = 0; c < 100; ++c) {
      const double v = generated_value(a, 100, r, c);
      EXPECT_EQ(v, generated_value(a, 100, r, c));
      lo = std::min(lo, v);
      hi = std::max(hi, v);
      sum += v;
      differ += v != generated_value(b, 100, r, c);
    }
  }
  EXPECT_GE(lo, -0.5);
  EXPECT_LT(hi, 0.5);
  EXPECT_LT(lo, -0.49);
  EXPECT_GT(hi, 0.49);
  EXPECT_LT(std::abs(sum / 10000), 0.02);
  EXPECT_GT(differ, 9990);
}

TEST(Generators, DiagDominantIsStrictlyDominant) {
  GeneratorSpec s{"diag_dominant", 1};
  const int n = 50;
  for (int r = 0; r < n; ++r) {
    double off = 0;
    for (int c = 0; c < n; ++c) off += c == r ? 0 : std::abs(generated_value(s, n, r, c));
    EXPECT_GT(std::abs(generated_value(s, n, r, r)), off);
  }
}

TEST(Generators, NamedMatrices) {
  EXPECT_EQ(generated_value({"identity", 0}, 5, 2, 2), 1.0);
  EXPECT_EQ(generated_value({"identity", 0}, 5, 2, 3), 0.0);
  EXPECT_EQ(generated_value({"hilbert", 0}, 5, 1, 2), 0.25);
  EXPECT_EQ(generated_value({"gepp_growth", 0}, 5, 3, 1), -1.0);
  EXPECT_EQ(generated_value({"gepp_growth", 0}, 5, 1, 4), 1.0);
  EXPECT_EQ(generated_value({"gepp_growth", 0}, 5, 1, 3), 0.0);
  double sq = 0;
  for (int i = 0; i < 4000; ++i) sq += std::pow(generated_value({"normal", 3}, 4000, i, 1), 2);
  EXPECT_NEAR(sq / 4000, 1.0, 0.1);
}

// Issue 17's hard matrices.
TEST(Generators, HardMatricesForThePivotModes) {
  const int64_t n = 6;
  for (int64_t r = 0; r < n; ++r) {
    for (int64_t c = 0; c < n; ++c) {
      EXPECT_EQ(generated_value({"wilkinson", 0}, n, r, c),
                generated_value({"gepp_growth", 0}, n, r, c));
      EXPECT_EQ(generated_value({"wilkinson_t", 0}, n, r, c),
                generated_value({"wilkinson", 0}, n, c, r));
    }
  }
  EXPECT_EQ(generated_value({"graded", 4}, 100, 10, 20),
            1e-14 * generated_value({"uniform", 4}, 100, 10, 20));
  EXPECT_EQ(generated_value({"graded", 4}, 100, 70, 20),
            generated_value({"uniform", 4}, 100, 70, 20));
  // near_singular: the last row equals the first to working precision, the others are uniform's.
  EXPECT_EQ(generated_value({"near_singular", 2}, 50, 3, 7),
            generated_value({"uniform", 2}, 50, 3, 7));
  for (int64_t c = 0; c < 50; ++c) {
    const double first = generated_value({"near_singular", 2}, 50, 0, c);
    EXPECT_NEAR(generated_value({"near_singular", 2}, 50, 49, c), first, 1e-19);
  }
}

TEST(Generators, FillMatchesValuesInStripeOrder) {
  GeneratorSpec s{"uniform", 11};
  const int64_t n = 9, row0 = 3, rows = 4;
  std::vector<double> out(13);
  fill_generated(s, n, row0, rows, 5, 13, out.data());
  for (int64_t k = 0; k < 13; ++k) {
    const int64_t e = 5 + k;
    EXPECT_EQ(out[k], generated_value(s, n, row0 + e % rows, e / rows));
  }
}

TEST(Generators, UnknownNameListsKnownOnes) {
  EXPECT_EQ(check_generator({"random", 0}).message(),
            "unknown generator 'random' (expected one of: uniform, diag_dominant, normal, "
            "identity, hilbert, gepp_growth, wilkinson, wilkinson_t, graded, near_singular)");
}

TEST(Generators, RightHandSides) {
  const auto ones = generate_rhs("ones", 5, 2, 1).value();
  EXPECT_EQ(ones, std::vector<double>(10, 1.0));
  const auto u = generate_rhs("uniform", 100, 3, 42).value();
  ASSERT_EQ(u.size(), 300u);
  for (double v : u) {
    EXPECT_GE(v, -0.5);
    EXPECT_LT(v, 0.5);
  }
  EXPECT_NE(u[0], u[1]);
  EXPECT_NE(u[0], u[100]);  // columns differ
  EXPECT_EQ(u, generate_rhs("uniform", 100, 3, 42).value());
  EXPECT_NE(u, generate_rhs("uniform", 100, 3, 43).value());
  EXPECT_EQ(generate_rhs("normal", 4, 1, 0).status().message(),
            "rhs.generate must be 'ones' or 'uniform', got 'normal'");
}

}  // namespace
}  // namespace stripesolve::storage
