// CR, PCR and the hybrids on the GPU (003 §4.2.2): one block per system of n <=
// kMaxReductionSystem rows held in registers (reduction_kernels.cu). Internal to tridiag/cuda/.
#pragma once

#include <cstddef>

#include "tridiag/cuda/kernel_choice.h"
#include "tridiag/tridiag.h"

namespace stripesolve::tridiag::gpu {

// Launches `kernel` (choose_kernel's choice for algorithm on a strided batch of n-row systems:
// kWarpReduction, kBlockReduction, kPcrBlock or kPcr4096).
void launch_reduction_solver(KernelChoice kernel, Algorithm algorithm, const double* dl,
                             const double* d, const double* du, const double* f, double* x,
                             std::size_t n, std::size_t count, double tol,
                             unsigned long long* flags, void* stream);
cudaError_t set_reduction_shared_limits();

// pcr and pcr_thomas for 1024 < n <= 2048 (pcr_blocks.cu) and 2048 < n <= 4096
// (pcr_4096.cu).
void launch_pcr_blocks(Algorithm algorithm, const double* dl, const double* d, const double* du,
                       const double* f, double* x, std::size_t n, std::size_t count, double tol,
                       unsigned long long* flags, void* stream);
void launch_pcr_4096(Algorithm algorithm, const double* dl, const double* d, const double* du,
                     const double* f, double* x, std::size_t n, std::size_t count, double tol,
                     unsigned long long* flags, void* stream);

}  // namespace stripesolve::tridiag::gpu
