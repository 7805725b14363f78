// The sizes that decide which CUDA kernel solves a batch, and the row counts the kernels are
// built around, in one place: kernel_choice.cc compares a batch with them, the kernels' headers
// and launches take their shapes from them (docs/tridiag-kernels.md maps each to its kernel).
// Plain C++ with no CUDA type, so that the host-only build and the CPU tests see the same
// numbers. Internal to tridiag/.
#pragma once

#include <cstddef>

namespace stripesolve::tridiag::gpu {

// ---- SPIKE (spike and thomas): group_spike.cu, spike_kernels.cu.

// A SPIKE partition: 8 interior rows and the separator after them (000 §II). The lanes of
// group_spike_kernel, the threads of the 9-row levels (spike_kernels.cu) and the CPU's spike
// (partitioned.cc) all partition by it. A ragged batch of at most this many rows in all is one
// small system (small_system_kernel), which the separator form does not suit.
inline constexpr int kPartitionRows = 9;
inline constexpr int kLaneRows = kPartitionRows;  // a lane's rows in group_spike_kernel

// group_spike_kernel: a warp holds 288 rows; systems of n <= kWarpRows share a warp
// (kWarpRows / n of them), larger ones take a group of ceil(n / kWarpRows) warps, up to
// kMaxGroupWarps (one block of 512 threads); beyond kMaxGroupSystem rows, two passes of lone
// warps around the system of the warps' separators.
inline constexpr int kWarpRows = 32 * kLaneRows;  // 288
inline constexpr int kMaxGroupWarps = 16;
inline constexpr std::size_t kMaxGroupSystem = std::size_t{kWarpRows} * kMaxGroupWarps;  // 4608

// The 9-row SPIKE levels (spike_kernels.cu): a thread a partition, a block a tile of
// kTileRows rows. Systems streamed from host memory go in chunks of whole tiles.
inline constexpr int kPartitionsPerBlock = 128;
inline constexpr int kTileRows = kPartitionRows * kPartitionsPerBlock;  // 1152
inline constexpr std::size_t kChunkGranularity = kTileRows;

// ---- gepp on interleaved batches (interleaved_gepp.cu), a thread a system: rows read ahead into
// registers up to kMaxRegisterGeppSystem, into shared memory above; the pivot rows (24 bytes a
// row) in shared memory up to kMaxSharedGeppSystem. Above, batches of kMinRecomputedGeppSystems
// systems or more keep one chunk's pivot rows on chip and eliminate each earlier chunk again for
// the substitution: chunks of 32 in shared memory up to kMaxSharedChunkGeppSystem, of 16 in
// registers above. Smaller batches of kMinTailGeppSystems or more keep the first 32 rows' pivot
// rows in shared memory and the others in device memory up to kMaxTailGeppSystem; the rest keep
// all in device memory.
inline constexpr std::size_t kMaxRegisterGeppSystem = 32;
inline constexpr std::size_t kMaxSharedGeppSystem = 64;
inline constexpr std::size_t kMinRecomputedGeppSystems = 32768;
inline constexpr std::size_t kMaxSharedChunkGeppSystem = 384;
inline constexpr std::size_t kMinTailGeppSystems = 16384;
inline constexpr std::size_t kMaxTailGeppSystem = 1024;
// Unchecked batches of kMinRecomputedGeppSystems or more of n above kMaxSharedGeppSystem up to
// kMaxTwistedGeppSystem, and of n = 256, go from both ends, two threads a system (the twisted
// variant: interleaved_gepp.cuh). H200, 2^26 unknowns, G unknowns/s against the chunks of 32:
// 75.8 / 70.2 against 64.1 / 61.3 at n = 96 / 128, 56.7-58.5 against 54.6-55.2 at 256; slower at
// 160 / 192 / 384 / 512 (55.8 / 51.9 / 45.0 / 52.2 against 56.9 / 55.2 / 51.3 / 54.5).
inline constexpr std::size_t kMaxTwistedGeppSystem = 128;
inline constexpr bool twisted_gepp_serves(std::size_t n) {
  return (n > kMaxSharedGeppSystem && n <= kMaxTwistedGeppSystem) || n == 256;
}
// kAuto takes gepp for interleaved batches of systems up to kMaxFewGeppSystem rows however few
// they are, larger ones only where they are at least kMinGeppSystems: a thread a system leaves
// the device idle with fewer, where spike spreads each system over many threads (H200,
// n = 16384: 4096 systems, gepp 18.3 G unknowns/s against spike's 12.0).
inline constexpr std::size_t kMaxFewGeppSystem = 128;
inline constexpr std::size_t kMinGeppSystems = 4096;

// ---- cr, pcr, cr_pcr, pcr_thomas, cr_pcr_thomas on strided batches (warp_reduction.cu,
// reduction_kernels.cu, pcr_shuffle_steps.cu, pcr_level_groups.cu).

// A warp a system: up to kMaxLaneRows rows a lane (M = 1, 2, 4 or 8, the smallest with
// n <= 32 M).
inline constexpr int kMaxLaneRows = 8;
inline constexpr std::size_t kMaxWarpSystem = 32 * kMaxLaneRows;  // 256
// Above, a block of W warps a system (W = 2, 4, 8 or 16, the smallest with n <= kClassRows W):
// the levels below W leave W classes of kClassRows rows, a warp each.
inline constexpr std::size_t kClassRows = kMaxWarpSystem;
inline constexpr int kMinBlockWarps = 2;
inline constexpr int kMaxBlockWarps = 16;
inline constexpr std::size_t kMaxReductionSystem = kClassRows * kMaxBlockWarps;  // 4096
// pcr and pcr_thomas take block_reduction_kernel up to kMaxPcrSharedCopyWarps warps, then
// pcr_shuffle_kernel (kPcrShuffleWarps warps), then pcr_level_groups_kernel up to
// kMaxReductionSystem (its padded size).
inline constexpr int kMaxPcrSharedCopyWarps = 4;
inline constexpr std::size_t kMaxPcrSharedCopySystem = kClassRows * kMaxPcrSharedCopyWarps;  // 1024
inline constexpr int kPcrShuffleWarps = 8;
inline constexpr std::size_t kMaxPcrShuffleSystem = kClassRows * kPcrShuffleWarps;  // 2048

}  // namespace stripesolve::tridiag::gpu
