#include "daemon/tridiag_auto_device.h"

#include <cmath>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace stripesolve::daemon {
namespace {

TEST(PathCost, LineThroughTwoPoints) {
  const PathCost c = PathCost::through(1000, 0.002, 5000, 0.006);
  EXPECT_DOUBLE_EQ(c.seconds_per_unknown, 1e-6);
  EXPECT_NEAR(c.fixed_seconds, 0.001, 1e-15);
  EXPECT_NEAR(c.seconds(10000), 0.011, 1e-15);
}

TEST(PathCost, NoiseNeverGivesANegativeTime) {
  // The larger batch measured quicker: no slope, its time as the fixed cost.
  const PathCost flat = PathCost::through(1000, 0.005, 5000, 0.004);
  EXPECT_EQ(flat.seconds_per_unknown, 0.0);
  EXPECT_DOUBLE_EQ(flat.fixed_seconds, 0.004);
  // A steep line through a quick small batch: no negative intercept.
  const PathCost steep = PathCost::through(1000, 0.0001, 5000, 0.009);
  EXPECT_GE(steep.fixed_seconds, 0.0);
  EXPECT_GT(steep.seconds(5000), 0.0);
}

TEST(ChoosePath, TheQuickerPredictionWinsAndTheNoteSaysBoth) {
  // A GPU path with a large fixed cost and a quicker rate: the CPU for small batches, the GPU
  // for large ones.
  const PathCosts costs{.cpu = {0.0, 1e-8}, .gpu = {0.01, 1e-9}};
  const AutoChoice small = choose_path(costs, 100000);  // CPU 0.001 s, GPU 0.0101 s
  EXPECT_FALSE(small.gpu);
  EXPECT_EQ(small.note,
            "device auto chose the CPU: predicted 0.001 s on the CPU, 0.0101 s on the GPU with "
            "the copies (this host's paths, measured at its first such job)");
  const AutoChoice large = choose_path(costs, 100000000);  // CPU 1 s, GPU 0.11 s
  EXPECT_TRUE(large.gpu);
  EXPECT_TRUE(large.note.starts_with("device auto chose the GPU: predicted 1 s on the CPU"));
  // A tie goes to the CPU.
  EXPECT_FALSE(choose_path({.cpu = {0.0, 1e-8}, .gpu = {0.0, 1e-8}}, 1000).gpu);
}

// A path that counts its calls and checks the batch it is given.
struct CountingPath {
  std::vector<std::size_t> sizes;
  Status status = Status::ok();
  PathRun run() {
    return [this](const TridiagPlan& plan, const tridiag::BatchArrays& arrays) {
      sizes.push_back(plan.unknowns);
      EXPECT_EQ(plan.n * plan.count, plan.unknowns);
      EXPECT_EQ(plan.shape().unknowns(), plan.unknowns);
      for (std::size_t i = 0; i < plan.unknowns; i += 4099) {  // dominant rows, finite values
        EXPECT_GT(std::fabs(arrays.d[i]), std::fabs(arrays.dl[i]) + std::fabs(arrays.du[i]));
        EXPECT_TRUE(std::isfinite(arrays.f[i]));
      }
      if (status.is_ok()) arrays.x[0] = 1.0;
      return status;
    };
  }
};

TEST(MeasurePaths, EachPathWarmsUpThenRunsTwiceAtEachSize) {
  CountingPath cpu, gpu;
  auto costs = measure_paths(cpu.run(), gpu.run());
  ASSERT_TRUE(costs.is_ok()) << costs.status().to_string();
  const std::vector<std::size_t> expected = {kMeasureSmall, kMeasureSmall, kMeasureSmall,
                                             kMeasureLarge, kMeasureLarge};
  EXPECT_EQ(cpu.sizes, expected);
  EXPECT_EQ(gpu.sizes, expected);
  EXPECT_GE(costs->cpu.seconds(kMeasureLarge), 0.0);
  EXPECT_GE(costs->gpu.seconds(kMeasureLarge), 0.0);
}

TEST(AutoDevice, MeasuresOnceAndAFailureSendsEveryBatchToTheCpu) {
  CountingPath cpu, gpu;
  gpu.status = Status::unavailable("no device memory");
  AutoDevice auto_device;
  EXPECT_EQ(auto_device.to_json(), nlohmann::json({{"measured", false}}));
  std::vector<std::string> lines;
  const auto log = [&](const std::string& line) { lines.push_back(line); };
  const AutoChoice first = auto_device.choose(1 << 20, cpu.run(), gpu.run(), log);
  EXPECT_FALSE(first.gpu);
  EXPECT_TRUE(first.measured_now);
  EXPECT_EQ(first.note,
            "device auto chose the CPU: the paths could not be measured (measuring the GPU path: "
            "no device memory)");
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_NE(lines[0].find("measuring the GPU path: no device memory"), std::string::npos)
      << lines[0];
  const std::size_t calls = cpu.sizes.size() + gpu.sizes.size();
  const AutoChoice second = auto_device.choose(1 << 24, cpu.run(), gpu.run(), log);
  EXPECT_FALSE(second.gpu);
  EXPECT_FALSE(second.measured_now);
  EXPECT_EQ(cpu.sizes.size() + gpu.sizes.size(), calls);  // not measured again
  EXPECT_EQ(lines.size(), 1u);
  const nlohmann::json status = auto_device.to_json();
  EXPECT_TRUE(status["measured"].get<bool>());
  EXPECT_EQ(status["error"], "Unavailable: measuring the GPU path: no device memory");
}

TEST(AutoDevice, ADeviceBudgetHeldByOtherJobsIsMeasuredAgainLater) {
  CountingPath cpu, gpu;
  gpu.status = Status::resource_exhausted("the device budget holds 1 GiB of other jobs");
  AutoDevice auto_device;
  const auto quiet = [](const std::string&) {};
  const AutoChoice first = auto_device.choose(1 << 20, cpu.run(), gpu.run(), quiet);
  EXPECT_FALSE(first.gpu);
  EXPECT_NE(first.note.find("could not be measured"), std::string::npos) << first.note;
  EXPECT_EQ(auto_device.to_json(), nlohmann::json({{"measured", false}}));
  gpu.status = Status::ok();  // the other jobs have ended
  const std::size_t gpu_calls = gpu.sizes.size();
  const AutoChoice second = auto_device.choose(1 << 20, cpu.run(), gpu.run(), quiet);
  EXPECT_TRUE(second.measured_now);
  EXPECT_EQ(gpu.sizes.size(), gpu_calls + 5);
  EXPECT_TRUE(auto_device.to_json()["measured"].get<bool>());
}

TEST(AutoDevice, StatusGivesEachPathsRate) {
  CountingPath cpu, gpu;
  AutoDevice auto_device;
  auto_device.choose(1 << 20, cpu.run(), gpu.run(), [](const std::string&) {});
  const nlohmann::json status = auto_device.to_json();
  EXPECT_TRUE(status["measured"].get<bool>());
  for (const char* path : {"cpu", "gpu"}) {
    ASSERT_TRUE(status.contains(path)) << status.dump();
    EXPECT_GE(status[path]["seconds_per_unknown"].get<double>(), 0.0);
    EXPECT_GE(status[path]["fixed_seconds"].get<double>(), 0.0);
    EXPECT_GE(status[path]["unknowns_per_second"].get<double>(), 0.0);
  }
}

TEST(AutoDevice, ConcurrentJobsShareOneMeasurement) {
  CountingPath cpu, gpu;
  AutoDevice auto_device;
  std::vector<std::thread> jobs;
  jobs.reserve(4);
  std::vector<int> lines(4, 0);
  for (int j = 0; j < 4; ++j) {
    jobs.emplace_back([&, j] {
      auto_device.choose(1 << 20, cpu.run(), gpu.run(), [&](const std::string&) { ++lines[j]; });
    });
  }
  for (auto& t : jobs) t.join();
  EXPECT_EQ(cpu.sizes.size(), 5u);
  EXPECT_EQ(gpu.sizes.size(), 5u);
  EXPECT_EQ(lines[0] + lines[1] + lines[2] + lines[3], 1);
}

}  // namespace
}  // namespace stripesolve::daemon
