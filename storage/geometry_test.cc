#include "storage/geometry.h"

#include <gtest/gtest.h>

namespace stripesolve::storage {
namespace {

TEST(Geometry, FollowsEq3) {
  auto g = make_geometry(10, 4);
  ASSERT_TRUE(g.is_ok()) << g.status().to_string();
  EXPECT_EQ(g->stripes, 3);  // ceil(10/4)
  // I*n/N: 0, 3, 6, 10
  EXPECT_EQ(g->row_begin(0), 0);
  EXPECT_EQ(g->row_begin(1), 3);
  EXPECT_EQ(g->row_begin(2), 6);
  EXPECT_EQ(g->row_end(2), 10);
  EXPECT_EQ(g->rows(2), 4);
  EXPECT_EQ(g->stripe_bytes(1), 8u * 3 * 10);
  EXPECT_EQ(g->element_offset(1, 4, 2), 8u * (1 + 2 * 3));
}

TEST(Geometry, StripesCoverRowsOnceAndFitS) {
  for (int64_t n : {1, 2, 7, 100, 1001, 4099}) {
    for (int64_t s : {1, 3, 64, 999, 5000}) {
      auto g = make_geometry(n, s);
      ASSERT_TRUE(g.is_ok());
      int64_t next = 0;
      for (int64_t I = 0; I < g->stripes; ++I) {
        EXPECT_EQ(g->row_begin(I), next);
        EXPECT_GE(g->rows(I), 1);
        EXPECT_LE(g->rows(I), s);
        for (int64_t r = g->row_begin(I); r < g->row_end(I); ++r) ASSERT_EQ(g->stripe_of_row(r), I);
        next = g->row_end(I);
      }
      EXPECT_EQ(next, n);
    }
  }
}

TEST(Geometry, RejectsBadInput) {
  EXPECT_EQ(make_geometry(0, 4).status().message(),
            "matrix order n=0 out of range [1, 1073741824]");
  EXPECT_EQ(make_geometry(5, 0).status().message(), "stripe_rows=0 must be at least 1");
  auto g = make_geometry(5, 100);
  ASSERT_TRUE(g.is_ok());
  EXPECT_EQ(g->stripes, 1);
  EXPECT_EQ(g->rows(0), 5);
}

}  // namespace
}  // namespace stripesolve::storage
