// Batched tridiagonal solvers (papers 000, 001, 003): the public interface of tridiag/.
//
// Contract
// - A batch is m systems A_j x_j = f_j. Each system of size n is given by four arrays of length n:
//   dl (sub-diagonal, dl[0] is ignored), d (diagonal), du (super-diagonal, du[n-1] is ignored)
//   and f. The solution is written to x, which may be the same array as f (in place).
// - Layouts (BatchLayout):
//     kStrided     system j, element i at index j*n + i (one system after another);
//     kInterleaved system j, element i at index i*m + j (element i of every system together);
//     kRagged      systems of different sizes one after another; sizes[j] gives each size.
// - Algorithms: thomas, cr, pcr, cr_pcr, pcr_thomas, cr_pcr_thomas, bondeli (unpivoted; they
//   detect a zero or tiny pivot and non-finite values and fail with a Status naming the system
//   and the row), spike (SPIKE partitioning with 1x1/2x2 asymmetric Bunch-Kaufman diagonal
//   pivoting, 000 §II-III) and gepp (Gaussian elimination with partial pivoting, the algorithm of
//   LAPACK dgtsv; the CPU reference). kAuto picks by size, batch and SolveOptions::require_stable
//   (default: stable).
// - Quality check (issue 17): a pivot can stay above the tolerance while the elimination grows
//   without bound (Toeplitz (1, 1e-8, 1): pivots 1e-8, -1e8, 1e-8, ...), so every system's
//   solution is checked by its normwise backward error (backward_error(), one O(n) pass) against
//   backward_error_tolerance(n), and a pivot below sqrt(eps) of its row (multipliers above
//   1/sqrt(eps)) counts as a near breakdown. A system that breaks down, nearly breaks down or
//   lands above the tolerance is solved again with gepp where the fallback is allowed: always
//   under kAuto and spike (both promise a stable result), for the other algorithms when
//   SolveOptions::fallback. Only those systems are solved again; SolveReport lists them.
//   Otherwise a breakdown (pivot_tolerance) stays an error, and a near breakdown or a result
//   above the tolerance is kept and reported in SolveReport::warning, never silently.
// - Every algorithm accepts every n >= 1 (non powers of two, n = 1 and n = 2 included).
// - Inputs are checked once here: null pointers, sizes, sizes that do not sum up. Values are not
//   scanned unless SolveOptions::refuse_non_finite (tested where the solve reads them); else
//   non-finite inputs show up as non-finite pivots or solutions and are reported.
// - Errors: kInvalidArgument for a bad description, kNumerical for breakdown, a singular matrix or
//   a non-finite solution ("system 3: thomas: zero or tiny pivot 0 at row 17"). On an error the
//   contents of x are unspecified (x is caller memory; nothing else is written).
// - Cost: O(n) flops per system for thomas/gepp/spike (about 8n, 10n, 14n), O(n log n) for pcr,
//   cr about 17n; the quality check adds one backward_error pass (~10n flops, reading the four
//   arrays and x again: measured 15-20% of thomas's time, 9-12% of gepp's, one core) to each,
//   and a fallback one gepp solve. CPU work is spread over `threads` std::threads (0 = hardware
//   concurrency) by systems; a batch of fewer systems than threads with large n runs spike
//   partitions in parallel instead (see parallel_for.h). gepp and thomas take batches of one
//   size eight systems at a time, one in each vector lane, the check summed beside (lanes.h:
//   2-2.4x a core, the same x and backward errors to the bit).
// Threading: solve_batch is reentrant; concurrent calls on disjoint outputs are safe.
#pragma once

#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace stripesolve::tridiag {

enum class Algorithm {
  kAuto,
  kThomas,
  kCr,
  kPcr,
  kCrPcr,
  kPcrThomas,
  kCrPcrThomas,
  kBondeli,
  kSpike,
  kGepp,
};

// "auto", "thomas", "cr", "pcr", "cr_pcr", "pcr_thomas", "cr_pcr_thomas", "bondeli", "spike",
// "gepp".
std::string_view algorithm_name(Algorithm algorithm);
Result<Algorithm> parse_algorithm(std::string_view name);
// The concrete algorithms, in the order above (without kAuto).
std::span<const Algorithm> all_algorithms();
// Whether the algorithm pivots (spike, gepp) and so is stable on every nonsingular matrix that
// LAPACK solves.
bool is_pivoting(Algorithm algorithm);

enum class BatchLayout { kStrided, kInterleaved, kRagged };

// Shape of a batch. For kStrided and kInterleaved: `count` systems of size `n`. For kRagged:
// `sizes` (one per system; count and n are ignored).
struct BatchShape {
  BatchLayout layout = BatchLayout::kStrided;
  std::size_t n = 0;
  std::size_t count = 1;
  std::span<const std::size_t> sizes;

  // Total unknowns, 0 for an invalid shape.
  std::size_t unknowns() const;
  std::size_t systems() const;
};

// Caller-owned arrays, each of shape.unknowns() doubles. x may alias f.
struct BatchArrays {
  const double* dl = nullptr;
  const double* d = nullptr;
  const double* du = nullptr;
  const double* f = nullptr;
  double* x = nullptr;
};

struct SolveOptions {
  Algorithm algorithm = Algorithm::kAuto;
  // Only for kAuto: choose among pivoting algorithms. Unpivoted algorithms are chosen when the
  // caller knows the matrices are diagonally dominant (or accepts a fallback on breakdown).
  bool require_stable = true;
  // Worker threads for the CPU path; 0 = std::thread::hardware_concurrency().
  unsigned threads = 0;
  // Unpivoted algorithms fail when |pivot| <= pivot_tolerance * (largest |entry| of the row
  // being pivoted on). DBL_EPSILON by default: beyond it the elimination has lost every digit.
  double pivot_tolerance = 2.220446049250313e-16;
  // An explicitly chosen unpivoted algorithm solves again with gepp the systems that break down
  // or miss the backward-error tolerance (kAuto and spike always do).
  bool fallback = false;
  // Refuse non-finite input values: every value of dl, d, du and f is tested (the ignored dl[0]
  // and du[n-1] too), where the solve reads it (the lanes fold the test into their check, other
  // paths scan each system before solving it). A system with one fails the solve with
  // kInvalidArgument "system j: non-finite input: d is nan at row 5" (the first of that system;
  // another system's may be the first of the batch). Off: values are not scanned (above).
  bool refuse_non_finite = false;
};

// The largest of a per-system figure over a batch and its system (the first of equals).
struct WorstSystem {
  double value = 0.0;
  std::size_t system = 0;
};

struct SolveReport {
  Algorithm algorithm = Algorithm::kAuto;  // the algorithm that ran (the first, if several did)
  std::vector<std::string> notes;          // fallbacks and choices, human readable
  // The largest backward error over the systems (after any fallback) and its system (the first
  // of equals).
  double max_backward_error = 0.0;
  std::size_t worst_system = 0;
  // backward_error_tolerance of the largest system (each system is held to its own size's).
  double tolerance = 0.0;
  // Systems whose kept backward error is above their tolerance (each is also warned about).
  std::size_t above_tolerance = 0;
  // The largest relative residual (solution_quality) over the systems, after any fallback, and
  // its system (the first of equals). The CPU path (solve_batch) computes it in the same pass as
  // the backward errors; empty where the check did not compute every system's (the GPU's
  // device check, check_solution).
  std::optional<WorstSystem> relative_residual;
  std::vector<std::size_t> fell_back;  // systems solved again with gepp, ascending
  // Systems whose kept result may be inaccurate: above their tolerance, or (no fallback
  // allowed) solved through a near breakdown.
  std::size_t warned = 0;
  // Empty unless warned > 0: how many, the worst and why, and what to try.
  std::string warning;
  // The GPU path's check (tridiag/gpu.h) in seconds: the device kernel, by CUDA events, or the
  // CPU pass after a solve in chunks; for several devices the longest part's. The gepp
  // fallbacks are not in it. 0 on the CPU path, whose check is part of each system's solve.
  double check_seconds = 0.0;
};

// Solves the batch on the CPU.
Result<SolveReport> solve_batch(const BatchShape& shape, const BatchArrays& arrays,
                                const SolveOptions& options = {});

// ||f - A x||_inf / (||A||_inf ||x||_inf + ||f||_inf) for one system (arrays of length n,
// dl[0] and du[n-1] ignored); +inf for a non-finite x. ~10n flops.
double backward_error(const double* dl, const double* d, const double* du, const double* x,
                      const double* f, std::size_t n);

// Both figures the check reports for a computed solution, from one pass over the system.
struct SolutionQuality {
  double backward_error = 0.0;  // backward_error() above, the same bits
  // ||f - A x||_2 / ||f||_2 (||f - A x||_2 where f = 0; +inf where x or the residual is not
  // finite), in double as LAPACK's dgtt02 checks a solve: each row's residual in the operations
  // of backward_error, squared and summed from the last row to the first. Where the largest
  // |residual| or |f| is outside [2^-480, 2^480] (and not 0) the squares are taken scaled by
  // powers of two in a second pass, so that they neither overflow nor underflow. The residual of
  // a backward-stable solve is at the rounding level of the products it sums, so in double the
  // figure is good to its order of magnitude (gallery.h's relative_residual, in long double,
  // to about three digits), which is what it is read for: 1e-16 against 1e-6.
  double relative_residual = 0.0;
};
// ~14n flops (the second pass, where taken, ~10n more).
SolutionQuality solution_quality(const double* dl, const double* d, const double* du,
                                 const double* x, const double* f, std::size_t n);
// The backward error a solve should reach: max(2, log2(n) / 2) eps, as the dense solve's
// (scheduler/condition.h): gepp lands at about eps whatever n, and pcr's log2 n levels of
// rounding fit under the slow growth. 4.4e-16 up to n = 16, 1e-15 at 512, 2.2e-15 at 10^6.
double backward_error_tolerance(std::size_t n);

// The quality check (above) of a solution another solver left in arrays.x (the GPU path checks
// its own on the device, solve_batch_gpu):
// each system's backward error against its tolerance; where `may_fall_back`, the systems above
// it are solved again with gepp on the CPU (only those, into arrays.x), else they are warned
// about. Fills `report`'s max_backward_error, worst_system, tolerance, warned and warning, and
// appends to fell_back and notes, as solve_batch does. arrays.x must not alias arrays.f. ~10n
// flops per system (plus a gepp solve for each that falls back), over `threads` (0 = all).
Status check_solution(const BatchShape& shape, const BatchArrays& arrays, Algorithm algorithm,
                      bool may_fall_back, unsigned threads, SolveReport& report);

// Checks a shape and arrays: "ragged batch: sizes is empty", "dl is null", "n must be >= 1".
Status validate_batch(const BatchShape& shape, const BatchArrays& arrays);

// The algorithm kAuto picks for this batch on the CPU.
Algorithm choose_cpu_algorithm(const BatchShape& shape, const SolveOptions& options);

}  // namespace stripesolve::tridiag
