#include "scheduler/planner.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "base/config.h"
#include "base/units.h"
#include "gpu/devices.h"

namespace stripesolve::scheduler {
namespace {

Machine cpu_machine(uint64_t ram, int64_t cores = 2) {
  EngineConfig c;
  c.ram_budget = ram;
  c.cores = cores;
  return describe_machine(c, 1);
}

// The sizes a plan chose for the stripes and the workers, as text to compare at once.
std::string shape_of(const Plan& p) {
  return "S " + std::to_string(p.stripe_rows) + ", N " + std::to_string(p.stripes) +
         ", substripe " + std::to_string(p.substripe_rows) + ", S^m " +
         std::to_string(p.meta_stripes) + ", J workers " + std::to_string(p.elim_j_workers);
}

// A GPU host of 16 cores and 64 GiB of RAM cache with `gpu_memory` of device budget.
EngineConfig gpu_host(uint64_t gpu_memory) {
  EngineConfig c;
  c.ram_budget = 64 * kGiB;
  c.gpu_memory = gpu_memory;
  c.cores = 16;
  return c;
}

// The plan for n on `gpus` devices of the host `c` (stripe rows chosen by the planner).
Plan plan_on(const EngineConfig& c, int64_t n, int gpus = 1) {
  return plan_dense(n, 0, c, describe_machine(c, gpus)).value();
}

TEST(PlannerTest, ParsesEveryKey) {
  ConfigMap map = ConfigMap::parse(
      "ram_budget: 2GiB\nstripe_rows: 512\nsubstripe_rows: 64\nmeta_stripes: 3\n"
      "elim_j_workers: 4\ncores: 8\nround_robin_levels: 6\nsegment_columns: 10000\n"
      "gpu_memory: 40GiB\ngpus: 1\nassumed_gflops: 100\nssd_bytes_per_second: 3e9\n"
      "progress_interval_seconds: 1\ncritical_threads: 0\nio_threads: 2\nhuge_pages: false\n"
      "gpu_panel_sms: 8\ngpu_update_k: 2048\ngpu_panel_blocks: 48\n",
      "engine.yaml");
  EngineConfig c;
  parse_engine_config(map, c);
  EXPECT_EQ(c.io_threads, 2);
  EXPECT_FALSE(c.huge_pages);
  EXPECT_TRUE(EngineConfig{}.huge_pages);
  EXPECT_EQ(c.ram_budget, 2 * kGiB);
  EXPECT_EQ(c.stripe_rows, 512);
  EXPECT_EQ(c.substripe_rows, 64);
  EXPECT_EQ(c.meta_stripes, 3);
  EXPECT_EQ(c.elim_j_workers, 4);
  EXPECT_EQ(c.cores, 8);
  EXPECT_EQ(c.critical_threads, 0);
  EXPECT_EQ(c.round_robin_levels, 6);
  EXPECT_EQ(c.segment_columns, 10000);
  EXPECT_EQ(c.gpu_memory, 40 * kGiB);
  EXPECT_EQ(c.gpus, 1);
  EXPECT_EQ(c.assumed_gflops, 100.0);
  EXPECT_EQ(c.gpu_panel_sms, 8);
  EXPECT_EQ(c.gpu_update_k, 2048);
  EXPECT_EQ(c.gpu_panel_blocks, 48);
  EXPECT_EQ(EngineConfig{}.gpu_panel_blocks, 0);  // getrf unless asked
}

// engine.gpu_panel_blocks: 0 to 64 (the one-launch panel's most blocks); beyond, a config error
// naming the key.
TEST(PlannerTest, PanelBlocksOutOfRangeIsAConfigError) {
  for (const char* text : {"gpu_panel_blocks: -1\n", "gpu_panel_blocks: 65\n"}) {
    ConfigMap map = ConfigMap::parse(text, "engine.yaml");
    EngineConfig c;
    try {
      parse_engine_config(map, c);
      ADD_FAILURE() << text << " was accepted";
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find("gpu_panel_blocks"), std::string::npos) << e.what();
    }
  }
}

// engine.devices names the GPUs by ordinal; with engine.gpus too, the two must agree.
TEST(PlannerTest, DevicesListTheGpusByOrdinal) {
  {
    ConfigMap map = ConfigMap::parse("devices: [2, 0]\ngpus: 2\n", "engine.yaml");
    EngineConfig c;
    parse_engine_config(map, c);
    EXPECT_EQ(c.devices, (std::vector<int64_t>{2, 0}));
  }
  ConfigMap map = ConfigMap::parse("gpus: 3\ndevices: [1]\n", "engine.yaml");
  EngineConfig c;
  try {
    parse_engine_config(map, c);
    ADD_FAILURE() << "gpus: 3 with one device listed was accepted";
  } catch (const ConfigError& e) {
    EXPECT_STREQ(e.what(),
                 "engine.yaml:1: gpus: 3 GPUs, but engine.devices lists 1; set one of them");
  }
  // On a host without a device the CPU runs, with a warning that names the key.
  if (gpu::device_count() == 0) {
    EngineConfig listed;
    listed.devices = {1};
    std::vector<std::string> warnings;
    EXPECT_EQ(resolve_backend(listed, &warnings).value(), ComputeBackend::kCpu);
    ASSERT_EQ(warnings.size(), 1u);
    EXPECT_NE(warnings[0].find("engine.devices"), std::string::npos);
  } else {
    EngineConfig absent;
    absent.devices = {gpu::device_count()};
    const auto r = resolve_backend(absent);
    ASSERT_FALSE(r.is_ok());
    EXPECT_NE(r.status().message().find("engine.devices names device"), std::string::npos);
  }
}

TEST(PlannerTest, UnknownKeyIsAConfigError) {
  ConfigMap map = ConfigMap::parse("meta_stripe: 3\n", "engine.yaml");
  EngineConfig c;
  EXPECT_THROW(parse_engine_config(map, c), ConfigError);
}

TEST(PlannerTest, IoThreadsOutOfRangeIsAConfigError) {
  for (const char* text : {"io_threads: 0\n", "io_threads: 9\n"}) {
    ConfigMap map = ConfigMap::parse(text, "engine.yaml");
    EngineConfig c;
    EXPECT_THROW(parse_engine_config(map, c), ConfigError) << text;
  }
}

TEST(PlannerTest, WholeMatrixInCacheGivesOneMetaStripe) {
  // n = 4096, 128 MiB matrix, 1 GiB cache: S = 1024, N = 4, one meta-stripe (S^m = N).
  Plan p = plan_dense(4096, 0, EngineConfig{}, cpu_machine(kGiB)).value();
  EXPECT_EQ(shape_of(p), "S 1024, N 4, substripe 128, S^m 4, J workers 2");
  EXPECT_EQ(p.segment_columns, 0);
  ASSERT_EQ(p.forecasts.size(), 3u);
  for (const auto& f : p.forecasts) {
    ASSERT_TRUE(f.feasible);
    EXPECT_EQ(f.traffic.bytes_read, f.traffic.matrix_bytes);
  }
}

TEST(PlannerTest, SmallCacheFollowsEq18AndPredictsLessTrafficForMetaZigzag) {
  // n = 65536, stored S = 1024: stripe = 512 MiB; 4 GiB holds 7 stripes -> S^m = (7-2)/2 = 2.
  Plan p = plan_dense(65536, 1024, EngineConfig{}, cpu_machine(4 * kGiB)).value();
  EXPECT_EQ(p.stripes, 64);
  EXPECT_EQ(p.meta_stripes, 2);
  const auto& basic = p.forecasts[0];
  const auto& meta = p.forecasts[2];
  ASSERT_TRUE(basic.feasible && meta.feasible);
  EXPECT_LT(meta.traffic.bytes_read, basic.traffic.bytes_read);
  EXPECT_GT(meta.time_bound_seconds, 0.0);
  EXPECT_NE(plan_to_text(p).find("meta_zigzag"), std::string::npos);
  auto j = nlohmann::json::parse(plan_to_json(p));
  EXPECT_EQ(j["meta_stripes"], 2);
  EXPECT_EQ(j["forecasts"].size(), 3u);
}

TEST(PlannerTest, PinnedValuesWin) {
  EngineConfig c;
  c.stripe_rows = 300;
  c.substripe_rows = 50;
  c.meta_stripes = 3;
  c.elim_j_workers = 5;
  c.round_robin_levels = 7;
  Plan p = plan_dense(1000, 0, c, cpu_machine(kGiB)).value();
  EXPECT_EQ(shape_of(p), "S 300, N 4, substripe 50, S^m 3, J workers 5");
  EXPECT_EQ(p.round_robin_levels, 7);
  EXPECT_GE(p.notes.size(), 5u);
}

TEST(PlannerTest, CriticalPathHelpersOnManyCoresOnly) {
  EXPECT_EQ(plan_dense(4096, 0, EngineConfig{}, cpu_machine(kGiB, 2)).value().critical_threads, 0);
  // The whole matrix cached: k = 16 single-threaded workers, half the cores help the chain.
  const Plan many = plan_dense(16384, 0, EngineConfig{}, cpu_machine(4 * kGiB, 16)).value();
  EXPECT_EQ(many.meta_stripes, many.stripes);
  EXPECT_EQ(many.elim_j_workers, 16);
  EXPECT_EQ(many.critical_threads, 8);
  EXPECT_FALSE(many.split_sweeps);
  EXPECT_NE(plan_to_text(many).find("(+8 critical-path helpers)"), std::string::npos);
  // Out of core: cores / 4 workers split every update over the other cores.
  const Plan ooc = plan_dense(16384, 0, EngineConfig{}, cpu_machine(kGiB, 16)).value();
  EXPECT_LT(ooc.meta_stripes, ooc.stripes);
  EXPECT_EQ(ooc.elim_j_workers, 4);
  EXPECT_EQ(ooc.critical_threads, 12);
  EXPECT_TRUE(ooc.split_sweeps);
  EXPECT_NE(plan_to_text(ooc).find("(+12 critical-path helpers, every update split over them)"),
            std::string::npos);
  EngineConfig none;
  none.critical_threads = 0;
  const Plan pinned = plan_dense(16384, 0, none, cpu_machine(kGiB, 16)).value();
  EXPECT_EQ(pinned.critical_threads, 0);
  EXPECT_FALSE(pinned.split_sweeps);
  EXPECT_EQ(plan_on(gpu_host(40 * kGiB), 100000).critical_threads, 0);  // the GPU tier: none
}

// The CPU tier out of core moves the next meta-stripe up in the upward sweeps, after the stripes
// the sweep before left cached; whole cached and on the GPU tier 002's order stays (-1).
TEST(PlannerTest, UpwardLeadOutOfCoreOnTheCpuTierOnly) {
  const Plan ooc = plan_dense(16384, 512, EngineConfig{}, cpu_machine(kGiB, 16)).value();
  ASSERT_LT(ooc.meta_stripes, ooc.stripes);
  // 1 GiB holds 15 stripes of 64 MiB (each with its slack): S^m = 6, lead 15 - 12 + 1 = 4.
  EXPECT_EQ(ooc.meta_stripes, 6);
  EXPECT_EQ(ooc.upward_lead, 4);
  EXPECT_NE(plan_to_text(ooc).find("upward sweeps: the next meta-stripe after the first 4 stripes"),
            std::string::npos);
  EXPECT_NE(plan_to_json(ooc).find("\"upward_lead\":4"), std::string::npos);
  EXPECT_EQ(plan_dense(16384, 512, EngineConfig{}, cpu_machine(4 * kGiB, 16)).value().early_next,
            0);  // the CPU tier keeps 002's ranges
  EXPECT_EQ(plan_dense(16384, 512, EngineConfig{}, cpu_machine(4 * kGiB, 16)).value().upward_lead,
            -1);
  EXPECT_EQ(plan_on(gpu_host(8 * kGiB), 100000).upward_lead, -1);
  EngineConfig pinned;
  pinned.upward_lead = 1000;
  const Plan p = plan_dense(16384, 512, pinned, cpu_machine(kGiB, 16)).value();
  EXPECT_EQ(p.upward_lead, 1000);
  EXPECT_NE(plan_to_text(p).find("pinned by engine.upward_lead"), std::string::npos);
}

TEST(PlannerTest, GpuSegmentLengthFollowsEq15) {
  Plan p = plan_on(gpu_host(40 * kGiB), 100000, 4);
  EXPECT_EQ(p.stripe_rows, 1024);
  EXPECT_EQ(p.elim_j_workers, 2);
  // Eq 15 gives 524288 columns; copies overlap GEMMs only with several segments: at most 8192.
  EXPECT_EQ(p.segment_columns, 8192);
  // 8b: K = S^m S of about 8192 rows for the J updates, and the working set fits 40 GiB.
  EXPECT_EQ(p.meta_stripes, 8);
  EXPECT_LE(p.device_bytes_needed, 40 * kGiB);
  EXPECT_FALSE(p.device_resident);  // 80 GB of matrix
}

TEST(PlannerTest, GpuBudgetBoundsTheMetaStripeAndSaysWhenAllFits) {
  EngineConfig c = gpu_host(12 * kGiB);
  // n = 57344, S = 1024: the U block of K = 8192 rows is 3.5 GiB, a stripe 0.45 GiB.
  Plan p = plan_on(c, 57344);
  EXPECT_EQ(p.stripe_rows, 1024);
  // Issue 16's RAM tier: 12 GiB still holds K = 8192 (the look-ahead lane's J parts are the next
  // meta-stripe's stripes, kept anyway).
  EXPECT_EQ(p.meta_stripes, 8);
  EXPECT_EQ(p.lookahead_workers, 1);
  EngineConfig two_lanes = c;
  two_lanes.lookahead_lanes = 2;
  two_lanes.gpus = 2;
  EXPECT_EQ(plan_on(two_lanes, 57344).lookahead_workers, 4);  // two a device
  EXPECT_EQ(p.early_next, 1);  // the next meta-stripe's first stripe inside the chain
  EngineConfig two_early = c;
  two_early.early_next = 2;
  EXPECT_EQ(plan_on(two_early, 57344).early_next, 2);
  EXPECT_EQ(plan_on(gpu_host(40 * kGiB), 100000).early_next, 0);  // out of core: none
  EXPECT_LE(p.device_bytes_needed, 12 * kGiB);
  EXPECT_FALSE(p.device_resident);
  EXPECT_NE(plan_to_text(p).find("J stripes stream through the device"), std::string::npos);
  // 7 meta-stripes of 8 stripes; sweep m streams 56 - 8m stripes from column 8192 m on, 7 - m
  // sevenths of a stripe: 8 (49 + 36 + ... + 1) / 7 = 160 stripes of 448 MiB to the device,
  // 1.5 s at 50 GB/s beside 2.5 s of compute at 50 TFLOP/s, and 26 s to read A from one disk
  // at the default 1 GB/s.
  EXPECT_EQ(p.pcie_bytes, 160 * p.stripe_bytes);
  auto limits = [](const Plan& plan) {
    std::string out;
    for (const auto& f : plan.forecasts) out += f.feasible ? f.limited_by + " " : "- ";
    return out;
  };
  EXPECT_EQ(limits(p), "disk disk disk ");
  EXPECT_NE(plan_to_text(p).find("(disk-bound)"), std::string::npos) << plan_to_text(p);
  c.ssd_bytes_per_second = 1e12;
  EXPECT_EQ(limits(plan_on(c, 57344)), "compute compute compute ");
  c.pcie_bytes_per_second = 25e9;  // 3.0 s
  const Plan slow_link = plan_on(c, 57344);
  EXPECT_EQ(limits(slow_link), "PCIe PCIe PCIe ");
  EXPECT_NE(plan_to_json(slow_link).find("\"limited_by\":\"PCIe\""), std::string::npos);
  c.gpu_memory = 70 * kGiB;
  Plan q = plan_on(c, 32768);
  EXPECT_TRUE(q.device_resident);
  EXPECT_NE(plan_to_text(q).find("the whole matrix stays on the device"), std::string::npos);
  EXPECT_EQ(q.pcie_bytes, 8ull * 32768 * 32768);  // A once
  // 70 GiB holds A (8 GiB) twice: a copy stays on the device for the residual; 16 GiB does not.
  EXPECT_TRUE(q.device_keeps_original);
  EXPECT_NE(plan_to_text(q).find("a copy of A for the residual"), std::string::npos);
  c.gpu_memory = 16 * kGiB;
  const Plan once = plan_on(c, 32768);
  EXPECT_TRUE(once.device_resident);
  EXPECT_FALSE(once.device_keeps_original);
  // Without the device's copy, a RAM budget of 64 GiB holds A (8 GiB) twice: the copy stays in
  // the RAM cache, not where the device keeps one. At n = 57344 (24.5 GiB) on the RAM tier it
  // takes 49 of the 64 GiB, on one device or two; 40 GiB hold A once.
  EXPECT_TRUE(once.ram_keeps_original);
  EXPECT_NE(plan_to_text(once).find("a copy of A in the RAM cache for the residual"),
            std::string::npos);
  EXPECT_NE(plan_to_json(once).find("\"ram_keeps_original\":true"), std::string::npos);
  EXPECT_FALSE(q.ram_keeps_original);
  EXPECT_TRUE(p.ram_keeps_original);
  EXPECT_TRUE(plan_on(gpu_host(12 * kGiB), 57344, 2).ram_keeps_original);
  EngineConfig small_ram = gpu_host(12 * kGiB);
  small_ram.ram_budget = 40 * kGiB;
  EXPECT_FALSE(plan_on(small_ram, 57344).ram_keeps_original);
  // The CPU tier alike: 64 GiB hold A twice at n = 32768, not at n = 70000.
  EngineConfig cpu = gpu_host(0);
  EXPECT_TRUE(plan_dense(32768, 0, cpu, describe_machine(cpu, 0)).value().ram_keeps_original);
  EXPECT_FALSE(plan_dense(70000, 0, cpu, describe_machine(cpu, 0)).value().ram_keeps_original);
}

// A device that holds the whole matrix beside a RAM cache of a quarter of it keeps the parts
// between their updates (their RAM goes back to the cache): every strategy reads A once and
// writes the factors once, as the GPU tier does (GpuDenseTest.ADeviceHoldingTheMatrixBeside
// ASmallRamCacheReadsAOnce). The link carries A once, twice where the device's copy of A for the
// residual comes with the factorization's reads.
TEST(PlannerTest, ADeviceHoldingTheMatrixForecastsOneReadOfA) {
  EngineConfig c = gpu_host(16 * kGiB);
  c.ram_budget = 2 * kGiB;  // a quarter of A at n = 32768
  const Plan p = plan_on(c, 32768);
  ASSERT_TRUE(p.device_resident);
  const uint64_t matrix = static_cast<uint64_t>(p.stripes) * p.stripe_bytes;
  for (const StrategyForecast& f : p.forecasts) {
    ASSERT_TRUE(f.feasible) << f.why;
    EXPECT_EQ(f.traffic.bytes_read, matrix);
    EXPECT_EQ(f.traffic.bytes_written, matrix);
  }
  EXPECT_FALSE(p.device_keeps_original);  // 16 GiB do not hold A (8 GiB) twice beside the rest
  EXPECT_EQ(p.pcie_bytes, matrix);
  // 40 GiB do: the copy of A for the residual comes from the factorization's reads (no load
  // into a RAM cache a quarter of A), so A crosses the link twice.
  c.gpu_memory = 40 * kGiB;
  const Plan copy = plan_on(c, 32768);
  EXPECT_TRUE(copy.device_keeps_original);
  EXPECT_FALSE(copy.ram_keeps_original);
  EXPECT_EQ(copy.pcie_bytes, 2 * matrix);
  EXPECT_NE(plan_to_text(copy).find("a copy of A for the residual"), std::string::npos);
  c.gpu_memory = 4 * kGiB;  // streaming: RAM alone holds the parts between their updates
  for (const StrategyForecast& f : plan_on(c, 32768).forecasts) {
    if (f.feasible) {
      EXPECT_GT(f.traffic.bytes_read, matrix);
    }
  }
}

// A solve that keeps no factors writes only what its cache spills: nothing where the device
// keeps the whole matrix (or the RAM cache holds it), the evictions of a cache smaller than A
// elsewhere, and no final flush either way.
TEST(PlannerTest, ASolveKeepingNoFactorsForecastsOnlyTheSpills) {
  EngineConfig c = gpu_host(16 * kGiB);
  c.ram_budget = 2 * kGiB;  // a quarter of A at n = 32768; the device keeps the whole matrix
  auto kept = plan_dense(32768, 0, c, describe_machine(c, 1), /*factors_kept=*/true);
  auto none = plan_dense(32768, 0, c, describe_machine(c, 1), /*factors_kept=*/false);
  ASSERT_TRUE(kept.is_ok() && none.is_ok());
  ASSERT_TRUE(none->device_resident);
  const uint64_t matrix = static_cast<uint64_t>(none->stripes) * none->stripe_bytes;
  ASSERT_EQ(kept->forecasts.size(), none->forecasts.size());
  for (size_t k = 0; k < none->forecasts.size(); ++k) {
    ASSERT_TRUE(none->forecasts[k].feasible) << none->forecasts[k].why;
    EXPECT_EQ(kept->forecasts[k].traffic.bytes_written, matrix);
    EXPECT_EQ(none->forecasts[k].traffic.bytes_written, 0u);
    EXPECT_EQ(none->forecasts[k].traffic.bytes_read, matrix);
    EXPECT_LE(none->forecasts[k].time_bound_seconds, kept->forecasts[k].time_bound_seconds);
  }
  // The CPU tier with a cache a quarter of A: the spills stay, the final flush goes.
  EngineConfig cpu;
  cpu.backend = ComputeBackend::kCpu;
  cpu.ram_budget = 512 * kMiB;
  cpu.cores = 2;
  auto cpu_kept = plan_dense(16384, 0, cpu, describe_machine(cpu, 1), true);
  auto cpu_none = plan_dense(16384, 0, cpu, describe_machine(cpu, 1), false);
  ASSERT_TRUE(cpu_kept.is_ok() && cpu_none.is_ok());
  for (size_t k = 0; k < cpu_none->forecasts.size(); ++k) {
    if (!cpu_none->forecasts[k].feasible) continue;
    const Traffic& a = cpu_kept->forecasts[k].traffic;
    const Traffic& b = cpu_none->forecasts[k].traffic;
    EXPECT_EQ(b.bytes_read, a.bytes_read);
    EXPECT_LT(b.bytes_written, a.bytes_written);
    EXPECT_GT(b.bytes_written, 0u) << "the spills of a cache a quarter of A";
    EXPECT_GE(a.bytes_written - b.bytes_written, 512 * kMiB / 2) << "the flush of what stays";
  }
}

TEST(PlannerTest, BackendNamesAndResolution) {
  EXPECT_EQ(parse_compute_backend("cuda").value(), ComputeBackend::kCuda);
  EXPECT_FALSE(parse_compute_backend("gpu").is_ok());
  EngineConfig c;
  c.backend = ComputeBackend::kCpu;
  c.gpu_memory = kGiB;
  std::vector<std::string> warnings;
  EXPECT_EQ(resolve_backend(c, &warnings).value(), ComputeBackend::kCpu);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("ignored"), std::string::npos);
  if (!gpu::device_count()) {
    c.backend = ComputeBackend::kCuda;
    auto r = resolve_backend(c);
    ASSERT_FALSE(r.is_ok());
    EXPECT_NE(r.status().message().find("engine.backend is cuda"), std::string::npos);
    c.backend = ComputeBackend::kAuto;
    EXPECT_EQ(resolve_backend(c).value(), ComputeBackend::kCpu);
  }
}

// A GPU that hit a sticky CUDA error (gpu/devices.h) is out of use: when every device the jobs
// use has failed, auto falls back to the CPU with a warning naming them, and cuda is refused.
TEST(PlannerTest, FailedGpusSendAutoToTheCpuAndRefuseCuda) {
  if (gpu::device_count() == 0) GTEST_SKIP() << "no CUDA device: nothing can fail";
  const gpu::ScopedDeviceFailuresForTesting clean;
  EngineConfig c;
  c.gpus = 1;  // device 0 only
  EXPECT_EQ(resolve_backend(c).value(), ComputeBackend::kCuda);
  gpu::note_device_failure(0, "cudaStreamSynchronize: cudaErrorIllegalAddress");
  std::vector<std::string> warnings;
  EXPECT_EQ(resolve_backend(c, &warnings).value(), ComputeBackend::kCpu);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("device 0: cudaStreamSynchronize: cudaErrorIllegalAddress"),
            std::string::npos)
      << warnings[0];
  c.backend = ComputeBackend::kCuda;
  auto refused = resolve_backend(c);
  ASSERT_FALSE(refused.is_ok());
  EXPECT_NE(refused.status().message().find("restart the daemon"), std::string::npos);
  if (gpu::device_count() > 1) {  // another device left: the GPU tier goes on there
    c.gpus = 2;
    warnings.clear();
    EXPECT_EQ(resolve_backend(c, &warnings).value(), ComputeBackend::kCuda);
    ASSERT_EQ(warnings.size(), 1u);
    EXPECT_NE(warnings[0].find("leaving out the failed GPU(s): device 0"), std::string::npos);
  }
}

TEST(PlannerTest, TinyCacheShrinksTheStripeAndSaysItIsIoBound) {
  // 1024-row stripes of n = 100000 are 819 MB: halved until four fit in 512 MiB.
  Plan p = plan_dense(100000, 0, EngineConfig{}, cpu_machine(512 * kMiB)).value();
  EXPECT_EQ(p.stripe_rows, 128);
  EXPECT_LE(4 * p.stripe_bytes, 512 * kMiB);
  Plan q = plan_dense(100000, 1024, EngineConfig{}, cpu_machine(kGiB)).value();
  ASSERT_FALSE(q.notes.empty());
  EXPECT_NE(q.notes.back().find("I/O bound"), std::string::npos);
  EXPECT_EQ(plan_dense(0, 0, EngineConfig{}, cpu_machine(kGiB)).status().message(),
            "plan: matrix order must be >= 1, got 0");
}

}  // namespace
}  // namespace stripesolve::scheduler

namespace stripesolve::scheduler {
namespace {

// A plan's fields the schedule check reads (plan_dense's forecasts of 3000 thin stripes take
// seconds: not needed here).
Plan thin_plan(int64_t n, int64_t stripe_rows, int64_t meta_stripes, uint64_t ram_budget) {
  Plan p;
  p.n = n;
  p.stripe_rows = stripe_rows;
  p.stripes = (n + stripe_rows - 1) / stripe_rows;
  p.meta_stripes = meta_stripes;
  p.ram_budget = ram_budget;
  return p;
}

TEST(PlannerTest, AScheduleOverAQuarterOfTheRamBudgetIsRefusedWithAHeightThatFits) {
  // 32 MiB: 8 MiB of bookkeeping, 209715 tasks at 40 bytes.
  const Plan thin = thin_plan(3000, 1, 520, 32 * kMiB);
  const Status st = check_schedule_fits(thin, Strategy::kMetaZigzag, 0, "matrix 'T'");
  EXPECT_EQ(st.code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(st.message(),
            "matrix 'T' is stored in 3000 stripes of 1 row: a factorization by the meta_zigzag "
            "strategy schedules more than 209715 tasks (8.00 MiB of bookkeeping beside the RAM "
            "cache), over a quarter of the RAM budget (32.00 MiB); store it in taller stripes "
            "(create or import it again with --stripe-rows 5 or more) or give the engine a "
            "larger RAM budget");
  // The height it names fits every strategy (600 stripes: 180300 tasks at most).
  for (Strategy s : {Strategy::kBasic, Strategy::kZigzag, Strategy::kMetaZigzag}) {
    EXPECT_TRUE(check_schedule_fits(thin_plan(3000, 5, 100, 32 * kMiB), s, 0, "m").is_ok())
        << strategy_name(s);
  }
  // Past the closed form's bound, meta_zigzag is counted: 1000 stripes in meta-stripes of 40
  // make far fewer tasks than basic's 500500, which is refused.
  const Plan counted = thin_plan(1000, 1, 40, 32 * kMiB);
  EXPECT_TRUE(check_schedule_fits(counted, Strategy::kMetaZigzag, 1, "m").is_ok());
  EXPECT_EQ(check_schedule_fits(counted, Strategy::kBasic, 0, "m").code(),
            StatusCode::kResourceExhausted);
  // The usual plans are far inside: n = 65536 in 1024-row stripes on a 4 GiB cache.
  EXPECT_TRUE(
      check_schedule_fits(thin_plan(65536, 1024, 8, 4 * kGiB), Strategy::kBasic, 0, "m").is_ok());
}

// A plan the solve would refuse is not forecast: the replay of 3000 thin stripes' tasks took a
// dry run 25 s before the refusal, in the daemon's own time.
TEST(PlannerTest, AStrategyOverTheScheduleBoundIsNotForecast) {
  EngineConfig c;
  c.ram_budget = 32 * kMiB;
  auto p = plan_dense(3000, 1, c, cpu_machine(32 * kMiB));
  ASSERT_TRUE(p.is_ok()) << p.status().to_string();
  ASSERT_EQ(p->forecasts.size(), 3u);
  for (const auto& f : p->forecasts) {
    EXPECT_FALSE(f.feasible) << strategy_name(f.strategy);
    EXPECT_EQ(f.why, "its schedule is over the bound on tasks (a solve refuses it)");
  }
  EXPECT_NE(plan_to_text(*p).find("basic        infeasible: its schedule is over the bound"),
            std::string::npos)
      << plan_to_text(*p);
  // A usual plan still forecasts all three.
  auto usual = plan_dense(4096, 0, c, cpu_machine(32 * kMiB));
  ASSERT_TRUE(usual.is_ok());
  for (const auto& f : usual->forecasts) EXPECT_TRUE(f.feasible) << f.why;
}

}  // namespace
}  // namespace stripesolve::scheduler
