// Per-system solvers on contiguous arrays: the CPU kernels behind solve_batch (internal to
// tridiag/, also used by tests, benchmarks and the GPU fallback).
//
// Each function solves one system of size n >= 1 (dl[0] and du[n-1] ignored), writes x (which
// may alias f) and uses `work` as scratch (resized as needed; one Workspace per thread).
// Errors are kNumerical with the row (0-based) and the algorithm's name, without the system
// index (the batch layer adds "system j: "). Inputs are never modified.
// Threading: pure functions; a Workspace must not be shared between threads.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "base/status.h"
#include "tridiag/cuda/kernel_limits.h"
#include "tridiag/tridiag.h"

namespace stripesolve::tridiag {

// One system: its arrays, each of n doubles (x may alias f).
struct SystemRef : BatchArrays {
  std::size_t n = 0;
};

struct Workspace {
  std::vector<double> a, b, c, f, g, h, p, q;
  std::vector<double> small[10];  // the reduced system of the CR hybrids
  std::vector<std::uint8_t> kinds;
};

// Parameters of the hybrids and partitioned methods (003 §2.3.6, 001 §2.2, 000 §II).
inline constexpr std::size_t kCrPcrSize = 64;      // CR reduces until <= this many rows, then PCR
inline constexpr std::size_t kPcrThomasSteps = 3;  // PCR steps before Thomas (8 subsystems)
inline constexpr std::size_t kBondeliBlock = 256;  // block size k of Bondeli's method
// SPIKE partition: 8 interior rows + separator, the GPU kernels' (cuda/kernel_limits.h).
inline constexpr std::size_t kSpikePartition = gpu::kPartitionRows;

Status solve_thomas(const SystemRef& s, double tol, Workspace& work);
Status solve_cr(const SystemRef& s, double tol, Workspace& work);
Status solve_pcr(const SystemRef& s, double tol, Workspace& work);
Status solve_cr_pcr(const SystemRef& s, double tol, Workspace& work);
Status solve_pcr_thomas(const SystemRef& s, double tol, Workspace& work);
Status solve_cr_pcr_thomas(const SystemRef& s, double tol, Workspace& work);
Status solve_bondeli(const SystemRef& s, double tol, Workspace& work);
// Gaussian elimination with partial pivoting, the algorithm of LAPACK dgtsv (same operations in
// the same order). Fails only on an exactly zero pivot (singular) or a non-finite solution.
Status solve_gepp(const SystemRef& s, Workspace& work);
// Diagonal pivoting (asymmetric Bunch-Kaufman 1x1/2x2, 000 §III, Eq 10-12) on the whole system.
Status solve_diagonal_pivoting(const SystemRef& s, Workspace& work);
// SPIKE (000 §II) in separator form over partitions of kSpikePartition rows, each interior
// solved by diagonal pivoting, the reduced system solved recursively; `threads` > 1 solves the
// partitions in parallel.
Status solve_spike(const SystemRef& s, unsigned threads);

// Dispatch by algorithm (kAuto is not allowed here). spike runs with one thread.
Status solve_system(Algorithm algorithm, const SystemRef& s, double tol, Workspace& work);

// Fails "<name>: zero or tiny pivot <v> at row <row>" unless |pivot| > tol * scale and finite.
Status check_pivot(const char* name, double pivot, double scale, double tol, std::size_t row);
// Fails "<name>: non-finite solution at row <row>" for the first non-finite x.
Status check_finite(const char* name, const double* x, std::size_t n);
// Fails kInvalidArgument "non-finite input: d is nan at row 5" for the first non-finite value
// of one system's dl, d, du and f (in that order, each from row 0; dl[0] and du[n-1] too), row i
// at [i * stride] from each pointer (SolveOptions::refuse_non_finite).
Status check_finite_inputs(const BatchArrays& a, std::size_t n, std::size_t stride = 1);

}  // namespace stripesolve::tridiag
