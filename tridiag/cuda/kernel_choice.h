// Which CUDA kernel solves a batch: the one function that compares a batch's algorithm, layout
// and size with the kernels' limits (kernel_limits.h). The launch code (device_solve.cu,
// reduction_kernels.cu, gpu_solver.cu) runs the kernel it names and chooses nothing itself;
// docs/tridiag-kernels.md maps each choice to its kernel, launch shape and file.
// A host function with no CUDA type, built with or without CUDA, so that the choice is tested
// on machines without a GPU (kernel_choice_test.cc). Internal to tridiag/.
#pragma once

#include <cstddef>
#include <string_view>

#include "tridiag/tridiag.h"

namespace stripesolve::tridiag::gpu {

enum class Kernel {
  kUnsupported,  // none: the solve fails (kUnimplemented; over the budget kResourceExhausted)
  // spike and thomas (pivoting or not, the same kernels).
  kSmallSystem,               // small_system_kernel: <= kPartitionRows rows, one thread
  kGroupSpikeSystemsPerWarp,  // group_spike_kernel: a warp holds kWarpRows / n whole systems
  kGroupSpikeWarpsPerSystem,  // group_spike_kernel: a group of ceil(n / kWarpRows) warps a system
  kSpikeTwoPass,  // group_spike_kernel's two passes of lone warps around the separators' system
  kChunked,       // the 9-row SPIKE levels, the batch streamed from host memory in chunks
  // cr, pcr, cr_pcr, pcr_thomas, cr_pcr_thomas.
  kWarpReduction,    // warp_reduction_kernel<A, M>: a warp a system
  kBlockReduction,   // block_reduction_kernel<A, W>: a block of W warps a system
  kPcrShuffleSteps,  // pcr_shuffle_kernel<A>: pcr and pcr_thomas, 8 warps, 8 rows a thread
  kPcrLevelGroups,   // pcr_level_groups_kernel<A>: pcr and pcr_thomas, 8 warps, 16 rows a thread
  // gepp.
  kInterleavedGepp,  // interleaved_gepp_kernel: interleaved batches, a thread a system
};

struct KernelChoice {
  Kernel kernel = Kernel::kUnsupported;
  // The launch's size parameter: warps a system for kGroupSpike* (1 for SystemsPerWarp), rows
  // a lane M for kWarpReduction, warps a block W for kBlockReduction; 0 for the others.
  int width = 0;
  friend bool operator==(const KernelChoice&, const KernelChoice&) = default;
};

// Whether the batch, with its workspace, fits the device budget (gpu_solver.cu decides), or
// must be streamed from host memory.
enum class Residence { kOnDevice, kStreamed };

// The kernel for `algorithm` (not kAuto) on a batch of `layout` whose systems have n rows; a
// ragged batch, whose couplings between systems are cut, is one system of n = all its rows.
// Count never enters: it sets only the grid.
KernelChoice choose_kernel(Algorithm algorithm, BatchLayout layout, std::size_t n,
                           Residence residence = Residence::kOnDevice);

// "group_spike_warps_per_system" and the like, for messages and tests.
std::string_view kernel_name(Kernel kernel);

}  // namespace stripesolve::tridiag::gpu
