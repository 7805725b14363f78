// Integration: `stripesolve solve MATRIX --dry-run` prints the plan the daemon would follow
// (scheduler/dense_plan.h) and solves nothing; the same plan as JSON with --json; a missing
// matrix is named.
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "gpu/devices.h"
#include "tests/integration/daemon_fixture.h"

namespace stripesolve::testing {
namespace {

TEST(DryRun, PrintsThePlanAndSolvesNothing) {
  DaemonFixture d;
  Cli cli(d);
  const std::string& out = cli.out();  // what the last cli.run() printed
  ASSERT_EQ(cli.run("matrix create A -n 512 --seed 3 --generator uniform --stripe-rows 64"), 0)
      << out;
  EXPECT_EQ(cli.run("solve A --dry-run"), 0) << out;
  // engine.backend auto: the GPU tier where a device is present.
  const std::string backend = gpu::device_count() > 0 ? "cuda" : "cpu";
  EXPECT_NE(out.find("backend " + backend), std::string::npos) << out;
  EXPECT_NE(out.find("n=512 S=64"), std::string::npos) << out;
  for (const char* strategy : {"basic", "zigzag", "meta_zigzag"}) {
    EXPECT_NE(out.find(strategy), std::string::npos) << strategy << " in: " << out;
  }
  EXPECT_NE(out.find("time >= "), std::string::npos) << out;
  EXPECT_EQ(cli.run("--json solve A --dry-run"), 0) << out;
  const auto j = nlohmann::json::parse(out, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << out;
  EXPECT_EQ(j["backend"], backend);
  EXPECT_EQ(j["plan"]["n"], 512);
  EXPECT_EQ(j["plan"]["stripe_rows"], 64);
  ASSERT_EQ(j["plan"]["forecasts"].size(), 3u) << out;
  for (const auto& f : j["plan"]["forecasts"]) {
    EXPECT_TRUE(f.contains("limited_by")) << f.dump();
    EXPECT_GT(f["time_bound_seconds"].get<double>(), 0) << f.dump();
  }
  // A solve that keeps no factors writes only what its cache spills: a 2 MiB matrix in the
  // fixture's cache, nothing.
  for (const auto& f : j["plan"]["forecasts"]) {
    EXPECT_GT(f["bytes_written"].get<uint64_t>(), 0u) << f.dump();
  }
  EXPECT_EQ(cli.run("--json solve A --dry-run --no-store"), 0) << out;
  const auto none = nlohmann::json::parse(out, nullptr, false);
  ASSERT_FALSE(none.is_discarded()) << out;
  for (const auto& f : none["plan"]["forecasts"]) {
    EXPECT_EQ(f["bytes_written"].get<uint64_t>(), 0u) << f.dump();
  }
  // Nothing ran: no solve job, no factor.
  EXPECT_EQ(cli.run("--json jobs"), 0) << out;
  const auto jobs = nlohmann::json::parse(out);
  for (const auto& job : jobs["jobs"]) {
    EXPECT_EQ(job["type"], "matrix_create") << out;
  }
  EXPECT_EQ(cli.run("matrix ls"), 0) << out;
  EXPECT_EQ(out.find("A.lu"), std::string::npos) << out;
  EXPECT_NE(cli.run("solve B --dry-run"), 0) << out;
  EXPECT_NE(out.find("'B'"), std::string::npos) << out;
}

}  // namespace
}  // namespace stripesolve::testing
