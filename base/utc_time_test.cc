#include "base/utc_time.h"

#include <chrono>

#include <gtest/gtest.h>

namespace stripesolve {
namespace {

TEST(UtcTimeTest, WholeSecondsInUtcThatSortAsTheTimesDo) {
  using namespace std::chrono;
  const system_clock::time_point t{seconds{1796293600}};  // 2026-12-03T10:26:40Z
  EXPECT_EQ(utc_time(t), "2026-12-03T10:26:40Z");
  EXPECT_EQ(utc_time(t + milliseconds(999)), "2026-12-03T10:26:40Z");  // truncated
  EXPECT_LT(utc_time(t + seconds(1)), utc_time(t + seconds(60)));
  EXPECT_LT(utc_time(t - hours(24 * 400)), utc_time(t));
  EXPECT_EQ(utc_time(system_clock::time_point{}), "1970-01-01T00:00:00Z");
}

}  // namespace
}  // namespace stripesolve
