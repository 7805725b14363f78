// Fused SPIKE for strided batches of small systems (000 §II-III): one launch, one read of the
// input and one write of x. Internal to tridiag/cuda/; see tile_kernels.cu.
#pragma once

#include <cstddef>

namespace stripesolve::tridiag::gpu {

// The largest system a tile holds: 512 partitions of kPartitionRows rows.
inline constexpr std::size_t kMaxTileSystem = 512 * 9;

// Whether strided systems of size n take the fused tile path.
bool tile_batch_supported(std::size_t n);

// Solves `rows / n` systems of size n stored one after another (dl[first], du[last] ignored)
// with diagonal pivoting (pivoting) or Thomas, each block holding whole systems in shared
// memory. flags as in LevelArgs (spike_kernels.cuh): [0] first row with a bad pivot, [1] first
// row with a non-finite solution.
void launch_tile_batch(bool pivoting, const double* dl, const double* d, const double* du,
                       const double* f, double* x, std::size_t rows, std::size_t n, double tol,
                       unsigned long long* flags, void* stream);

// Raises the tile kernels' dynamic shared memory limits (once per process).
void set_tile_shared_limits();

}  // namespace stripesolve::tridiag::gpu
