// One-pass SPIKE for strided batches of small and medium systems (n <= kMaxGroupSystem), internal
// to tridiag/cuda/. See group_spike.cu.
#pragma once

#include <cstddef>

#include "tridiag/cuda/small_solves.h"  // kLaneRows

namespace stripesolve::tridiag::gpu {

inline constexpr int kWarpRows = 32 * kLaneRows;           // 288
inline constexpr int kMaxGroupWarps = 16;                  // one block of 512 threads
inline constexpr std::size_t kMaxGroupSystem = std::size_t{kWarpRows} * kMaxGroupWarps;  // 4608

// Solves `rows / n` systems of n rows stored one after another, each read once and written
// once. flags as in LevelArgs: [0] first row with a zero, tiny or non-finite pivot, [1] first
// row with a non-finite solution (ULLONG_MAX when none).
void launch_group_spike(bool pivoting, const double* dl, const double* d, const double* du,
                        const double* f, double* x, std::size_t rows, std::size_t n, double tol,
                        unsigned long long* flags, void* stream);

}  // namespace stripesolve::tridiag::gpu
