// The quality check's bookkeeping (tridiag.h: quality check), shared by the CPU path
// (solve_batch, check_solution) and the GPU path (solve_batch_gpu, whose device kernel finds the
// systems above their tolerance): what happened to each system the check singled out, the gepp
// fallback of those systems alone, and the report built from them. Internal to tridiag/.
// Threading: settle_suspects spreads its systems over `threads`; the rest is plain functions.
#pragma once

#include <array>
#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "base/status.h"
#include "tridiag/system_solvers.h"
#include "tridiag/tridiag.h"

namespace stripesolve::tridiag {

// What happened to one system of the batch.
struct SystemOutcome {
  double backward_error = 0.0;
  double relative_residual = 0.0;  // solution_quality's, where the check computed it
  double tolerance = 0.0;
  std::string fallback;  // why it was solved again with gepp ("broke down (...)"); or empty
  std::string warning;   // why its kept result may be inaccurate; or empty
  bool by_gepp = false;  // the kept result is gepp's
};

// A system with something to report (a fallback or a warning) and what happened to it.
struct NotedSystem {
  std::size_t system = 0;
  SystemOutcome outcome;
};

// A checked batch, sparse: the systems with nothing to report are summed up by the worst
// backward error among them (the first system of equals); the others are listed, ascending.
struct BatchOutcome {
  std::size_t systems = 0;
  double tolerance = 0.0;  // backward_error_tolerance of the largest system
  double worst_clean_error = 0.0;
  std::size_t worst_clean_system = 0;
  std::vector<NotedSystem> noted;
  // The largest relative residual over every system (noted or not), where the check computed
  // each one's (solve_batch_checked); empty otherwise.
  std::optional<WorstSystem> worst_residual;
};

// A system whose solution missed its backward-error tolerance (+inf for a non-finite one), as
// a check (the CPU's backward_error pass or the GPU's kernel) found it.
struct Suspect {
  std::size_t system = 0;
  double backward_error = 0.0;
};

// The warning of a result above its tolerance: "backward error E above the tolerance T".
std::string above_tolerance(double backward_error, double tolerance);

// Where each system starts (strided and ragged; interleaved uses j * n only for its size);
// offsets[systems] is the number of unknowns.
std::vector<std::size_t> system_offsets(const BatchShape& shape);

// System j as a SystemRef. Interleaved systems are gathered into `g` (x too when `with_x`: the
// check reads it) and their x must be scattered back (scatter_x); the others point into the
// arrays, with f copied to g[3] when x aliases it (in place: f stays for the check and for a
// fallback that starts again from it).
SystemRef system_ref(const BatchShape& shape, const BatchArrays& arrays,
                     const std::vector<std::size_t>& offsets, std::size_t j,
                     std::array<std::vector<double>, 5>& g, bool with_x);
void scatter_x(const BatchShape& shape, const BatchArrays& arrays, std::size_t systems,
               std::size_t j, const SystemRef& s);

// The check's remedy for `suspects` (ascending) of a solution `algorithm` left in arrays.x:
// where `may_fall_back`, each is solved again with gepp from arrays.f (into arrays.x; those
// systems alone, over `threads`) and warned about if gepp misses the tolerance too; otherwise
// each is warned about. Appends one NotedSystem per suspect to `noted`, in the same order.
// arrays.f must hold the right-hand sides (not aliased by x for the suspects' systems).
// Errors: gepp's (a singular system), with "system j" as context.
Status settle_suspects(const BatchShape& shape, const BatchArrays& arrays, Algorithm algorithm,
                       bool may_fall_back, unsigned threads, std::span<const Suspect> suspects,
                       std::vector<NotedSystem>& noted);

// check_solution without its summary: each system's backward error on the CPU (over
// `threads`), then settle_suspects. arrays.x must not alias arrays.f.
Status check_batch(const BatchShape& shape, const BatchArrays& arrays, Algorithm algorithm,
                   bool may_fall_back, unsigned threads, BatchOutcome& outcome);

// solve_batch without its summary: the algorithm and notes in `report`, what the check found in
// `outcome` (summarize finishes the report).
Status solve_batch_checked(const BatchShape& shape, const BatchArrays& arrays,
                           const SolveOptions& options, SolveReport& report, BatchOutcome& outcome);

// Adds the outcome of a part of a batch whose first system is `first_system` to `into` (the
// parts in order, so that the worst system stays the first of equals).
void merge_outcome(const BatchOutcome& part, std::size_t first_system, BatchOutcome& into);

// Sets the report's max_backward_error, worst_system, tolerance, above_tolerance,
// relative_residual, warned and warning from the outcome, and appends its fallbacks to fell_back
// and notes (at most a few notes, then a count).
void summarize(Algorithm algorithm, const BatchOutcome& outcome, SolveReport& report);

// The report of a checked solve: runs solve(report, outcome) (solve_batch_checked or the GPU's
// like of it), then summarizes the outcome into the report.
template <typename Solve>
Result<SolveReport> summarized(Solve&& solve) {
  SolveReport report;
  BatchOutcome outcome;
  STRIPESOLVE_RETURN_IF_ERROR(solve(report, outcome));
  summarize(report.algorithm, outcome, report);
  return report;
}

}  // namespace stripesolve::tridiag
