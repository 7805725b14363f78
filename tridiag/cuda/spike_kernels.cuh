// SPIKE kernels (000 §II-III), internal to tridiag/cuda/. See spike_kernels.cu.
#pragma once

#include <cstddef>

#include "tridiag/cuda/kernel_limits.h"

namespace stripesolve::tridiag::gpu {

inline constexpr int kSharedPitch = kPartitionsPerBlock + 1;  // odd pitch: no bank conflicts
inline constexpr std::size_t kSharedBytes =
    std::size_t{kPartitionRows} * kSharedPitch * (4 * sizeof(double) + 1);
// Pass 1 also holds the left spike: one more array, 8-byte aligned after the kind bytes.
inline constexpr std::size_t kSharedBytesPass1 =
    (4 * std::size_t{kPartitionRows} * kSharedPitch + (kPartitionRows * kSharedPitch + 7) / 8 +
     std::size_t{kPartitionRows} * kSharedPitch) *
    sizeof(double);

// flags[0]: smallest (original) row with a zero, tiny or non-finite pivot; flags[1]: smallest
// row with a non-finite solution. ULLONG_MAX when none.
struct LevelArgs {
  std::size_t rows;           // rows of this level's system
  std::size_t system_size;    // strided batch boundary (level 0 only), else 0
  std::size_t level_stride;   // 9^level: maps a row of this level to the separator it stands for
  std::size_t original_rows;  // rows of level 0
  double tol;
  unsigned long long* flags;
};

// Per-partition outputs of pass 1: the interior ends as affine functions of the two separators
// (yf + r xl + s xr, yl + p xl + q xr) and the separator row's own coefficients.
struct PartitionData {
  double *yf, *r, *s, *yl, *p, *q, *sa, *sb, *sc, *sf;
};

// Pass 1 over the tiles [tile0, tile0 + tiles): arrays hold rows from chunk_row0 on.
void launch_partition_ends(bool pivoting, const double* dl, const double* d, const double* du,
                           const double* f, std::size_t chunk_row0, std::size_t tile0,
                           std::size_t tiles, const LevelArgs& args, PartitionData out,
                           void* stream);
// Builds the reduced (separator) system: rl, rd, ru, rf of `parts` rows.
void launch_form_reduced(const PartitionData& in, std::size_t parts, double* rl, double* rd,
                         double* ru, double* rf, void* stream);
// Pass 2: interiors from the separator solutions rx; writes x (rows from chunk_row0 on).
void launch_partition_solve(bool pivoting, const double* dl, const double* d, const double* du,
                            const double* f, double* x, std::size_t chunk_row0, std::size_t tile0,
                            std::size_t tiles, const double* rx, const LevelArgs& args,
                            void* stream);
// A system of at most kPartitionRows rows solved directly by one thread (diagonal pivoting, or
// Thomas when !pivoting).
void launch_small_system(bool pivoting, const double* dl, const double* d, const double* du,
                         const double* f, double* x, const LevelArgs& args, void* stream);

// Raises the kernels' dynamic shared memory limit to kSharedBytes (once per process).
cudaError_t set_shared_memory_limits();

}  // namespace stripesolve::tridiag::gpu
