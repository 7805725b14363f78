// choose_kernel on each side of every limit of kernel_limits.h: no GPU needed (the kernels the
// choices name are tested on the GPU by gpu_boundaries_test.cc at the same sizes).
#include "tridiag/cuda/kernel_choice.h"

#include <cstddef>
#include <ostream>
#include <string>

#include <gtest/gtest.h>

#include "tridiag/cuda/kernel_limits.h"
#include "tridiag/gpu.h"

namespace stripesolve::tridiag::gpu {

// For gtest's messages: gtest finds PrintTo, under that name, by argument-dependent lookup.
void PrintTo(const KernelChoice& c, std::ostream* os) {  // NOLINT(readability-identifier-naming)
  *os << kernel_name(c.kernel) << " width " << c.width;
}

namespace {

constexpr Algorithm kSpikeFamily[] = {Algorithm::kSpike, Algorithm::kThomas};
constexpr Algorithm kCrFamily[] = {Algorithm::kCr, Algorithm::kCrPcr, Algorithm::kCrPcrThomas};
constexpr Algorithm kPcrFamily[] = {Algorithm::kPcr, Algorithm::kPcrThomas};

KernelChoice strided(Algorithm a, std::size_t n) {
  return choose_kernel(a, BatchLayout::kStrided, n);
}

std::string trace(Algorithm a, std::size_t n) {
  return std::string(algorithm_name(a)) + " n=" + std::to_string(n);
}

TEST(KernelChoiceTest, LimitsAreTheDocumentedSizes) {
  EXPECT_EQ(kPartitionRows, 9);
  EXPECT_EQ(kLaneRows, kPartitionRows);
  EXPECT_EQ(kWarpRows, 288);
  EXPECT_EQ(kMaxGroupSystem, 4608u);
  EXPECT_EQ(kTileRows, 1152);
  EXPECT_EQ(kChunkGranularity, static_cast<std::size_t>(kTileRows));
  EXPECT_EQ(kMaxWarpSystem, 256u);
  EXPECT_EQ(kMaxPcrSharedCopySystem, 1024u);
  EXPECT_EQ(kMaxPcrShuffleSystem, 2048u);
  EXPECT_EQ(kMaxReductionSystem, 4096u);
}

TEST(KernelChoiceTest, SpikeAndThomasOnStridedBatches) {
  for (Algorithm a : kSpikeFamily) {
    for (std::size_t n : {1, 2, 9, 10, 100, 287, 288}) {
      SCOPED_TRACE(trace(a, n));
      EXPECT_EQ(strided(a, n), (KernelChoice{Kernel::kGroupSpikeSystemsPerWarp, 1}));
    }
    EXPECT_EQ(strided(a, 289), (KernelChoice{Kernel::kGroupSpikeWarpsPerSystem, 2}));
    EXPECT_EQ(strided(a, 576), (KernelChoice{Kernel::kGroupSpikeWarpsPerSystem, 2}));
    EXPECT_EQ(strided(a, 577), (KernelChoice{Kernel::kGroupSpikeWarpsPerSystem, 3}));
    for (std::size_t n : {512, 513, 1024, 1025, 2048, 2049, 4096, 4097}) {
      SCOPED_TRACE(trace(a, n));
      EXPECT_EQ(strided(a, n), (KernelChoice{Kernel::kGroupSpikeWarpsPerSystem,
                                             static_cast<int>((n + 287) / 288)}));
    }
    EXPECT_EQ(strided(a, 4608), (KernelChoice{Kernel::kGroupSpikeWarpsPerSystem, 16}));
    EXPECT_EQ(strided(a, 4609), (KernelChoice{Kernel::kSpikeTwoPass}));
    EXPECT_EQ(strided(a, std::size_t{1} << 26), (KernelChoice{Kernel::kSpikeTwoPass}));
  }
}

// A ragged batch is one system of all its rows; up to 9 rows it is one small system, which a
// strided batch of one system of up to 9 rows is not.
TEST(KernelChoiceTest, RaggedBatchesByTheirRowsInAll) {
  for (Algorithm a : kSpikeFamily) {
    auto ragged = [&](std::size_t rows) { return choose_kernel(a, BatchLayout::kRagged, rows); };
    EXPECT_EQ(ragged(1), (KernelChoice{Kernel::kSmallSystem}));
    EXPECT_EQ(ragged(9), (KernelChoice{Kernel::kSmallSystem}));
    EXPECT_EQ(ragged(10), (KernelChoice{Kernel::kGroupSpikeSystemsPerWarp, 1}));
    EXPECT_EQ(ragged(288), (KernelChoice{Kernel::kGroupSpikeSystemsPerWarp, 1}));
    EXPECT_EQ(ragged(289), (KernelChoice{Kernel::kGroupSpikeWarpsPerSystem, 2}));
    EXPECT_EQ(ragged(4608), (KernelChoice{Kernel::kGroupSpikeWarpsPerSystem, 16}));
    EXPECT_EQ(ragged(4609), (KernelChoice{Kernel::kSpikeTwoPass}));
  }
}

TEST(KernelChoiceTest, InterleavedBatches) {
  for (Algorithm a : kSpikeFamily) {
    for (std::size_t n : {1, 9, 10, 288, 289, 4608, 4609, 100000}) {
      SCOPED_TRACE(trace(a, n));
      EXPECT_EQ(choose_kernel(a, BatchLayout::kInterleaved, n),
                choose_kernel(a, BatchLayout::kStrided, n));
    }
  }
  for (Algorithm a : {Algorithm::kCr, Algorithm::kPcr, Algorithm::kCrPcr, Algorithm::kPcrThomas,
                      Algorithm::kCrPcrThomas}) {
    SCOPED_TRACE(trace(a, 64));
    EXPECT_EQ(choose_kernel(a, BatchLayout::kInterleaved, 64),
              (KernelChoice{Kernel::kUnsupported}));
  }
}

TEST(KernelChoiceTest, StreamedBatchesAreChunkedSpikeOnStridedBatchesOnly) {
  for (Algorithm a : kSpikeFamily) {
    for (std::size_t n :
         {std::size_t{1}, std::size_t{9}, std::size_t{4609}, std::size_t{1} << 30}) {
      SCOPED_TRACE(trace(a, n));
      EXPECT_EQ(choose_kernel(a, BatchLayout::kStrided, n, Residence::kStreamed),
                (KernelChoice{Kernel::kChunked}));
    }
    EXPECT_EQ(choose_kernel(a, BatchLayout::kRagged, 5000, Residence::kStreamed),
              (KernelChoice{Kernel::kUnsupported}));
    EXPECT_EQ(choose_kernel(a, BatchLayout::kInterleaved, 5000, Residence::kStreamed),
              (KernelChoice{Kernel::kUnsupported}));
  }
  EXPECT_EQ(choose_kernel(Algorithm::kCr, BatchLayout::kStrided, 100, Residence::kStreamed),
            (KernelChoice{Kernel::kUnsupported}));
}

TEST(KernelChoiceTest, CrFamilyWarpAndBlockSizes) {
  for (Algorithm a : {Algorithm::kCr, Algorithm::kPcr, Algorithm::kCrPcr, Algorithm::kPcrThomas,
                      Algorithm::kCrPcrThomas}) {
    SCOPED_TRACE(algorithm_name(a));
    EXPECT_EQ(strided(a, 1), (KernelChoice{Kernel::kWarpReduction, 1}));
    EXPECT_EQ(strided(a, 32), (KernelChoice{Kernel::kWarpReduction, 1}));
    EXPECT_EQ(strided(a, 33), (KernelChoice{Kernel::kWarpReduction, 2}));
    EXPECT_EQ(strided(a, 64), (KernelChoice{Kernel::kWarpReduction, 2}));
    EXPECT_EQ(strided(a, 65), (KernelChoice{Kernel::kWarpReduction, 4}));
    EXPECT_EQ(strided(a, 128), (KernelChoice{Kernel::kWarpReduction, 4}));
    EXPECT_EQ(strided(a, 129), (KernelChoice{Kernel::kWarpReduction, 8}));
    EXPECT_EQ(strided(a, 256), (KernelChoice{Kernel::kWarpReduction, 8}));
    EXPECT_EQ(strided(a, 257), (KernelChoice{Kernel::kBlockReduction, 2}));
    EXPECT_EQ(strided(a, 288), (KernelChoice{Kernel::kBlockReduction, 2}));
    EXPECT_EQ(strided(a, 289), (KernelChoice{Kernel::kBlockReduction, 2}));
    EXPECT_EQ(strided(a, 512), (KernelChoice{Kernel::kBlockReduction, 2}));
    EXPECT_EQ(strided(a, 513), (KernelChoice{Kernel::kBlockReduction, 4}));
    EXPECT_EQ(strided(a, 1024), (KernelChoice{Kernel::kBlockReduction, 4}));
    EXPECT_EQ(strided(a, 4097), (KernelChoice{Kernel::kUnsupported}));
    EXPECT_EQ(strided(a, 4608), (KernelChoice{Kernel::kUnsupported}));
    EXPECT_EQ(strided(a, 4609), (KernelChoice{Kernel::kUnsupported}));
    EXPECT_EQ(choose_kernel(a, BatchLayout::kRagged, 100), (KernelChoice{Kernel::kUnsupported}));
  }
}

TEST(KernelChoiceTest, CrAndItsHybridsAboveAThousandRows) {
  for (Algorithm a : kCrFamily) {
    SCOPED_TRACE(algorithm_name(a));
    EXPECT_EQ(strided(a, 1025), (KernelChoice{Kernel::kBlockReduction, 8}));
    EXPECT_EQ(strided(a, 2048), (KernelChoice{Kernel::kBlockReduction, 8}));
    EXPECT_EQ(strided(a, 2049), (KernelChoice{Kernel::kBlockReduction, 16}));
    EXPECT_EQ(strided(a, 4096), (KernelChoice{Kernel::kBlockReduction, 16}));
  }
}

TEST(KernelChoiceTest, PcrAndPcrThomasAboveAThousandRows) {
  for (Algorithm a : kPcrFamily) {
    SCOPED_TRACE(algorithm_name(a));
    EXPECT_EQ(strided(a, 1025), (KernelChoice{Kernel::kPcrShuffleSteps}));
    EXPECT_EQ(strided(a, 2048), (KernelChoice{Kernel::kPcrShuffleSteps}));
    EXPECT_EQ(strided(a, 2049), (KernelChoice{Kernel::kPcrLevelGroups}));
    EXPECT_EQ(strided(a, 4096), (KernelChoice{Kernel::kPcrLevelGroups}));
  }
}

TEST(KernelChoiceTest, CpuOnlyAlgorithmsHaveNoKernel) {
  for (Algorithm a : {Algorithm::kBondeli, Algorithm::kGepp}) {
    for (BatchLayout layout : {BatchLayout::kStrided, BatchLayout::kRagged}) {
      for (std::size_t n : {1, 100, 5000}) {
        SCOPED_TRACE(trace(a, n));
        EXPECT_EQ(choose_kernel(a, layout, n), (KernelChoice{Kernel::kUnsupported}));
      }
    }
    EXPECT_EQ(choose_kernel(a, BatchLayout::kStrided, 100, Residence::kStreamed),
              (KernelChoice{Kernel::kUnsupported}));
  }
  EXPECT_EQ(choose_kernel(Algorithm::kBondeli, BatchLayout::kInterleaved, 100),
            (KernelChoice{Kernel::kUnsupported}));
}

TEST(KernelChoiceTest, GeppRunsOnInterleavedBatches) {
  for (std::size_t n : {std::size_t{1}, std::size_t{2}, std::size_t{64}, std::size_t{100000}}) {
    SCOPED_TRACE(trace(Algorithm::kGepp, n));
    EXPECT_EQ(choose_kernel(Algorithm::kGepp, BatchLayout::kInterleaved, n),
              (KernelChoice{Kernel::kInterleavedGepp}));
  }
  EXPECT_EQ(choose_kernel(Algorithm::kGepp, BatchLayout::kInterleaved, 64, Residence::kStreamed),
            (KernelChoice{Kernel::kUnsupported}));
  EXPECT_EQ(kernel_name(Kernel::kInterleavedGepp), "interleaved_gepp");
}

TEST(KernelChoiceTest, AutoIsSpikeWhenStableElseThomasInEveryBuild) {
  SolveOptions options;
  const BatchShape shape{BatchLayout::kStrided, 100, 10, {}};
  options.require_stable = true;
  EXPECT_EQ(choose_gpu_algorithm(shape, options), Algorithm::kSpike);
  options.require_stable = false;
  EXPECT_EQ(choose_gpu_algorithm(shape, options), Algorithm::kThomas);
}

// Stable solves of interleaved batches take gepp, a thread a system (faster than spike at every
// n measured, docs/performance.md), where the systems are small or many; strided batches spike.
TEST(KernelChoiceTest, AutoTakesGeppForInterleavedBatches) {
  SolveOptions options;
  const auto choice = [&](BatchLayout layout, std::size_t n, std::size_t count) {
    return choose_gpu_algorithm(BatchShape{layout, n, count, {}}, options);
  };
  for (std::size_t n : {std::size_t{1}, std::size_t{16}, kMaxFewGeppSystem}) {
    EXPECT_EQ(choice(BatchLayout::kInterleaved, n, 10), Algorithm::kGepp) << n;
    EXPECT_EQ(choice(BatchLayout::kStrided, n, 100000), Algorithm::kSpike) << n;
  }
  for (std::size_t n : {kMaxFewGeppSystem + 1, std::size_t{16384}}) {
    EXPECT_EQ(choice(BatchLayout::kInterleaved, n, kMinGeppSystems), Algorithm::kGepp) << n;
    EXPECT_EQ(choice(BatchLayout::kInterleaved, n, kMinGeppSystems - 1), Algorithm::kSpike) << n;
  }
  options.require_stable = false;
  EXPECT_EQ(choice(BatchLayout::kInterleaved, 16, 100000), Algorithm::kThomas);
}

}  // namespace
}  // namespace stripesolve::tridiag::gpu
