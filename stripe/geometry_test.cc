#include "stripe/geometry.h"

#include <gtest/gtest.h>

namespace stripesolve::stripe {
namespace {

TEST(EvenPartition, SpreadsTheRemainderOverAllParts) {
  // 002 Eq 3: n = 10, S = 4 -> N = 3 stripes [0,3) [3,6) [6,10).
  const auto p = EvenPartition::with_max_part(10, 4);
  EXPECT_EQ(p.count, 3);
  EXPECT_EQ(p.begin(0), 0);
  EXPECT_EQ(p.begin(1), 3);
  EXPECT_EQ(p.begin(2), 6);
  EXPECT_EQ(p.end(2), 10);
  EXPECT_EQ(p.size(2), 4);
}

TEST(EvenPartition, PartsCoverTheRangeAndRespectTheMaximum) {
  for (int64_t length = 0; length <= 70; ++length) {
    for (int64_t max_part = 1; max_part <= 20; ++max_part) {
      const auto p = EvenPartition::with_max_part(length, max_part);
      int64_t next = 0;
      for (int64_t q = 0; q < p.count; ++q) {
        ASSERT_EQ(p.begin(q), next);
        ASSERT_GE(p.size(q), 1);
        ASSERT_LE(p.size(q), max_part);
        ASSERT_LE(p.size(q) - p.size(0), 1);
        for (int64_t i = p.begin(q); i < p.end(q); ++i) ASSERT_EQ(p.part_of(i), q);
        next = p.end(q);
      }
      ASSERT_EQ(next, length);
    }
  }
}

TEST(EvenPartition, SmallerThanOnePart) {
  const auto p = EvenPartition::with_max_part(5, 512);
  EXPECT_EQ(p.count, 1);
  EXPECT_EQ(p.size(0), 5);
}

}  // namespace
}  // namespace stripesolve::stripe
