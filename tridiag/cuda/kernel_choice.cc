// The choice of a batch's kernel (kernel_choice.h) against kernel_limits.h, and of kAuto's
// algorithm on the GPU (gpu.h), one definition for the builds with and without CUDA.
#include "tridiag/cuda/kernel_choice.h"

#include "tridiag/cuda/kernel_limits.h"
#include "tridiag/gpu.h"

namespace stripesolve::tridiag {

Algorithm choose_gpu_algorithm(const BatchShape& shape, const SolveOptions& options) {
  if (!options.require_stable) return Algorithm::kThomas;
  const bool gepp = shape.layout == BatchLayout::kInterleaved &&
                    (shape.n <= gpu::kMaxFewGeppSystem || shape.count >= gpu::kMinGeppSystems);
  return gepp ? Algorithm::kGepp : Algorithm::kSpike;
}

namespace gpu {

namespace {

// The smallest power of two p >= lowest with n <= unit * p.
int power_of_two_for(std::size_t n, std::size_t unit, int lowest) {
  int p = lowest;
  while (unit * static_cast<std::size_t>(p) < n) p *= 2;
  return p;
}

KernelChoice choose_spike(BatchLayout layout, std::size_t n, Residence residence) {
  if (residence == Residence::kStreamed) {
    return {layout == BatchLayout::kStrided ? Kernel::kChunked : Kernel::kUnsupported};
  }
  if (layout == BatchLayout::kRagged && n <= static_cast<std::size_t>(kPartitionRows)) {
    return {Kernel::kSmallSystem};
  }
  if (n <= static_cast<std::size_t>(kWarpRows)) return {Kernel::kGroupSpikeSystemsPerWarp, 1};
  if (n <= kMaxGroupSystem) {
    return {Kernel::kGroupSpikeWarpsPerSystem, static_cast<int>((n + kWarpRows - 1) / kWarpRows)};
  }
  return {Kernel::kSpikeTwoPass};
}

KernelChoice choose_reduction(Algorithm algorithm, BatchLayout layout, std::size_t n,
                              Residence residence) {
  if (residence == Residence::kStreamed || layout != BatchLayout::kStrided ||
      n > kMaxReductionSystem) {
    return {Kernel::kUnsupported};
  }
  if (n <= kMaxWarpSystem) return {Kernel::kWarpReduction, power_of_two_for(n, 32, 1)};
  const bool pcr = algorithm == Algorithm::kPcr || algorithm == Algorithm::kPcrThomas;
  if (!pcr || n <= kMaxPcrSharedCopySystem) {
    return {Kernel::kBlockReduction, power_of_two_for(n, kClassRows, kMinBlockWarps)};
  }
  if (n <= kMaxPcrShuffleSystem) return {Kernel::kPcrShuffleSteps};
  return {Kernel::kPcrLevelGroups};
}

}  // namespace

KernelChoice choose_kernel(Algorithm algorithm, BatchLayout layout, std::size_t n,
                           Residence residence) {
  switch (algorithm) {
    case Algorithm::kSpike:
    case Algorithm::kThomas:
      return choose_spike(layout, n, residence);
    case Algorithm::kCr:
    case Algorithm::kPcr:
    case Algorithm::kCrPcr:
    case Algorithm::kPcrThomas:
    case Algorithm::kCrPcrThomas:
      return choose_reduction(algorithm, layout, n, residence);
    case Algorithm::kGepp:  // interleaved batches; else on the CPU only
      if (layout == BatchLayout::kInterleaved && residence == Residence::kOnDevice) {
        return {Kernel::kInterleavedGepp};
      }
      return {Kernel::kUnsupported};
    default:  // kBondeli runs on the CPU only; kAuto is resolved before
      return {Kernel::kUnsupported};
  }
}

std::string_view kernel_name(Kernel kernel) {
  switch (kernel) {
    case Kernel::kUnsupported:
      return "unsupported";
    case Kernel::kSmallSystem:
      return "small_system";
    case Kernel::kGroupSpikeSystemsPerWarp:
      return "group_spike_systems_per_warp";
    case Kernel::kGroupSpikeWarpsPerSystem:
      return "group_spike_warps_per_system";
    case Kernel::kSpikeTwoPass:
      return "spike_two_pass";
    case Kernel::kChunked:
      return "chunked";
    case Kernel::kWarpReduction:
      return "warp_reduction";
    case Kernel::kBlockReduction:
      return "block_reduction";
    case Kernel::kPcrShuffleSteps:
      return "pcr_shuffle_steps";
    case Kernel::kPcrLevelGroups:
      return "pcr_level_groups";
    case Kernel::kInterleavedGepp:
      return "interleaved_gepp";
  }
  return "unknown";
}

}  // namespace gpu
}  // namespace stripesolve::tridiag
