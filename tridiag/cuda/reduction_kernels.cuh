// CR, PCR and the hybrids on the GPU (003 §4.2.2) for strided batches of n <=
// kMaxReductionSystem rows held in registers: a warp a system (warp_reduction.cu), a block a
// system (reduction_kernels.cu, and for pcr and pcr_thomas above kMaxPcrSharedCopySystem rows
// pcr_shuffle_steps.cu and pcr_level_groups.cu). Internal to tridiag/cuda/.
#pragma once

#include <cstddef>

#include "tridiag/cuda/kernel_choice.h"
#include "tridiag/tridiag.h"

namespace stripesolve::tridiag::gpu {

// The flags a reduction kernel raises (atomicMin into flags[0..2]): the first input row whose
// pivot failed, the first row with a non-finite right-hand side or solution, and in
// flags[kLevelFlag] the first row of the first system whose elimination levels failed the pivot
// test (warp_rows.cuh: note_level, report). device_solve.cu words them (read_flags).
constexpr int kLevelFlag = 2;

// Launches `kernel` (choose_kernel's choice for algorithm on a strided batch of n-row systems:
// kWarpReduction, kBlockReduction, kPcrShuffleSteps or kPcrLevelGroups).
void launch_reduction_solver(KernelChoice kernel, Algorithm algorithm, const double* dl,
                             const double* d, const double* du, const double* f, double* x,
                             std::size_t n, std::size_t count, double tol,
                             unsigned long long* flags, void* stream);
cudaError_t set_reduction_shared_limits();

// pcr and pcr_thomas (any other algorithm runs as pcr_thomas) for 1024 < n <= 2048
// (pcr_shuffle_steps.cu) and 2048 < n <= 4096 (pcr_level_groups.cu).
void launch_pcr_shuffle(Algorithm algorithm, const double* dl, const double* d, const double* du,
                        const double* f, double* x, std::size_t n, std::size_t count, double tol,
                        unsigned long long* flags, void* stream);
void launch_pcr_level_groups(Algorithm algorithm, const double* dl, const double* d,
                             const double* du, const double* f, double* x, std::size_t n,
                             std::size_t count, double tol, unsigned long long* flags,
                             void* stream);

}  // namespace stripesolve::tridiag::gpu
