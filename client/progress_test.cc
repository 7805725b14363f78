#include "client/progress.h"

#include <gtest/gtest.h>

namespace stripesolve::client {
namespace {

TEST(ProgressTest, Formatting) {
  nlohmann::json p = {{"phase", "factor"},   {"fraction", 0.5},
                      {"gflops", 12.34},     {"io_bytes_per_second", 1.2e9},
                      {"eta_seconds", 65.0}, {"stripes_done", 3},
                      {"stripes_total", 6}};
  EXPECT_EQ(format_progress(p, 10),
            "[#####.....]  50.0% factor (3/6 stripes)  12.3 GFLOP/s  I/O 1.20 GB/s  ETA 1m05s");
  EXPECT_EQ(format_progress({{"state", "PENDING"}}, 0), "  0.0% PENDING");
  EXPECT_EQ(format_duration(7384), "2h03m");
  EXPECT_EQ(format_duration(-1), "?");
}

}  // namespace
}  // namespace stripesolve::client

namespace stripesolve::client {
namespace {

TEST(ProgressTest, DonePhaseIsComplete) {
  EXPECT_EQ(format_progress({{"phase", "done"}, {"fraction", 0.0}, {"stripes_total", 0}}, 4),
            "[####] 100.0% done");
  // A completed job from before a daemon restart keeps no progress: whole, not 0%.
  EXPECT_EQ(format_progress({{"state", "COMPLETED"}}, 0), "100.0% COMPLETED");
  EXPECT_EQ(format_progress({{"state", "COMPLETED_WITH_WARNING"}}, 0),
            "100.0% COMPLETED_WITH_WARNING");
  EXPECT_EQ(format_progress({{"state", "FAILED"}}, 0), "  0.0% FAILED");
}

}  // namespace
}  // namespace stripesolve::client

namespace stripesolve::client {
namespace {

TEST(ProgressTest, RatesFromOneThousandGflopsAreInTflops) {
  EXPECT_EQ(format_flop_rate(312.44), "312.4 GFLOP/s");
  EXPECT_EQ(format_flop_rate(33510.0), "33.51 TFLOP/s");
  EXPECT_EQ(format_progress({{"phase", "factor"}, {"fraction", 0.5}, {"gflops", 40850.0}}, 0),
            " 50.0% factor  40.85 TFLOP/s");
}

}  // namespace
}  // namespace stripesolve::client
