// The out-of-core dense solve A X = B (paper 002 end to end) on a stored matrix.
//
// solve_dense():
//   1. plans the parameters (planner.h) from the stored geometry and the EngineConfig;
//   2. factors A into the factor object "<matrix>.lu.<pivot>" (A stays intact), or reuses that
//      object when it is committed, records this A as what it factors (storage::is_factor_of:
//      object id, order, checksum summary) and reuse_factors is set; with in_place the matrix
//      itself becomes its factor (A is gone, so no residual and no refinement). Pivots are
//      stored as the blob "pivots". A failed or cancelled factorization leaves no factor object
//      (storage deletes an uncommitted one);
//   3. forward + backward substitution with the stored factors, streaming the stripes through the
//      cache (DSR role);
//   4. the residual ||A x - b||_inf / (||A||_inf ||x||_inf + ||b||_inf) from the original A read
//      again by stripes, and `refinement_steps` steps x += U^-1 L^-1 (b - A x).
// With kGepp, step 2 factors A's stored transpose "<matrix>.t" (made first when missing) with
// kRow into "<matrix>.lu.gepp", and step 3 is the transposed solve (scheduler/transposed_solve.h).
// A kRow solve with auto refinement that misses the tolerance because its pivoting grew is made
// again with kGepp (the report's pivot_switch says so).
// Roles (002 Fig 18): master (calling thread), I/O, elim.I, k elim.J, DSR, plus a monitor for
// cancellation and progress. Cancellation is honoured within one stripe step.
//
// Memory: the cache arena (EngineConfig::ram_budget, but at most twice A's stripes, three times
// with a copy of A in RAM for the residual; a budget the host refuses is the solve's
// kResourceExhausted) + elim.I's workspace (~8 S' n bytes) +
// the right-hand sides, solution and residual (3 n nrhs doubles).
//
// Quality (issue 17): the report carries the backward error, the rcond estimate, the pivot
// growth and, when the solve misses the tolerance or A is singular to working precision, a
// warning (scheduler/condition.h). The condition estimate solves two fixed vectors as extra
// columns of the substitution, then usually one transposed solve and one solve with one
// right-hand side (at most five of each), while the factors are still cached; the growth costs a
// read of U's rows of each stripe while it is in RAM.
//
// Errors: kInvalidArgument (bad b/nrhs, refinement with in_place), kNotFound (matrix),
// kNumerical ("zero pivot at row R", ... from stripe/), kCancelled, kIoError, kResourceExhausted
// (cache budget below one stripe beside the stuck ones).
//
// Thread-safety: concurrent calls on one matrix share its factor: the first makes it while the
// others wait (MatrixStore::lock_name) and then reuse it. In-place solves of one matrix cannot run
// concurrently (the store refuses a second in-place open). Callbacks run on engine threads.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "backend/backend.h"
#include "backend/device_engine.h"
#include "base/status.h"
#include "scheduler/planner.h"
#include "scheduler/progress.h"
#include "scheduler/strategy.h"
#include "scheduler/trace.h"
#include "storage/matrix_store.h"
#include "stripe/stripe_ops.h"

namespace stripesolve::scheduler {

struct DenseSolveOptions {
  // refinement_steps: kRefineAuto refines while the backward error is above
  // backward_error_tolerance(n) (scheduler/condition.h), until it reaches eps, stagnates (a step
  // does not halve it; x keeps the better of the last two) or kMaxAutoRefinement steps; N >= 0
  // makes exactly N steps. Auto makes none when the factors are neither stored (store_factors)
  // nor resident on the device: keeping them for a refinement that is rarely needed would cost
  // a write of all of them.
  static constexpr int kRefineAuto = -1;
  static constexpr int kMaxAutoRefinement = 10;

  // kRow (the default: the fastest stable one on most matrices), kLocal, kNone, or kGepp (LAPACK's
  // row partial pivoting through the transpose; not in place).
  stripe::PivotMode pivot = stripe::PivotMode::kRow;
  Strategy strategy = Strategy::kMetaZigzag;
  int refinement_steps = kRefineAuto;
  // The quality contract (condition estimate, warning). Off only to measure what it costs.
  bool check_quality = true;
  bool in_place = false;
  bool reuse_factors = true;
  // false: the factors live only for this solve (in the RAM and GPU tiers, spilled to an
  // uncommitted object only if they do not fit) and are not persisted; nothing to reuse later.
  bool store_factors = true;
  // Record the factorization's durable progress so that a crash does not lose it
  // (factor_progress.h; stored factors, not in place). Off only to measure its cost.
  bool record_progress = true;
  // The GPU tier reads all of A into a RAM cache that holds it before factoring (the load), but
  // where one device keeps the whole matrix: there the factorization reads each stripe as it
  // first needs it, and the reads overlap the arithmetic. true: the load there too (the
  // benchmarks' host-resident A, factored from pinned RAM).
  bool load_first = false;
};

// Whether the solve's factors go to the host (and to the store where stored): stored, in place,
// or gepp (the GPU tier writes gepp's factors back whatever the options). False: they may stay
// on the device only (FactorParams::factors_on_host), and nothing but spills is written.
inline bool keeps_factors(const DenseSolveOptions& o) {
  return o.store_factors || o.in_place || o.pivot == stripe::PivotMode::kGepp;
}

struct SolveCallbacks {
  // From engine threads, rate-limited by EngineConfig::progress_interval_seconds.
  std::function<void(const Progress&)> on_progress;
  // Rows [row_begin, row_begin + rows) of X (rows x nrhs, column-major, ld = rows) are final.
  // Called last stripe first: during back substitution for kLocal/kNone without refinement,
  // otherwise once X is final. Returning an error cancels the solve with that error.
  std::function<Status(int64_t row_begin, int64_t rows, const double* x)> on_solution_chunk;
};

enum class ResidualSource { kStore, kDevice, kRam };
std::string_view residual_source_name(ResidualSource source);  // "store", "device", "ram"

struct SolveReport {
  std::vector<double> x;  // n x nrhs, column-major (ld = n)
  // The backward error of x: ||b - A x||_inf / (||A||_inf ||x||_inf + ||b||_inf), the largest
  // over the columns; -1 when not computed (in_place).
  double residual = -1;
  std::vector<double> residual_history;  // before each refinement step, then the final one
  double tolerance = 0;                  // backward_error_tolerance(n)
  // 1 / (||A||_1 est ||A^-1||_1), LAPACK dgecon's estimate from the stored factors (a few solves
  // with A and A^T, out of core); -1 when not estimated (in_place, check_quality off, factors
  // kept only on the device).
  double rcond = -1;
  // max|U| / max|A|, U's maximum tracked as each stripe is eliminated; -1 when not tracked (the
  // GPU tier, in_place, a reused factor made before it was recorded).
  double growth = -1;
  // Non-empty when the solve should end COMPLETED_WITH_WARNING: the cause and what to try
  // (scheduler/condition.h quality_warning()).
  std::string warning;
  // The pivoting that made x: the options', or kGepp after a switch.
  stripe::PivotMode pivot = stripe::PivotMode::kRow;
  // Non-empty when a kRow solve was made again with kGepp (transposed_solve.h): why. seconds and
  // the I/O counts are then those of both solves, the other figures the gepp solve's.
  std::string pivot_switch;
  double seconds = 0;
  double load_seconds = 0;          // A read from the SSDs into the RAM cache before the
                                    // factorization (only when the cache holds all of A)
  double transpose_seconds = 0;     // kGepp: making A's transpose (about 0 when it is stored)
  double factor_seconds = 0;        // the triangulation, factors in RAM / on the device; 0 when
                                    // the factors were reused
  double persist_seconds = 0;       // writing the factors back to the store and committing them
  double substitution_seconds = 0;  // the first forward + backward pass
  double residual_seconds = 0;      // residual passes and refinement steps
  // Where the residual read A: the store again, or a copy the load made on the device
  // (Plan::device_keeps_original) or in the RAM cache (Plan::ram_keeps_original).
  ResidualSource residual_source = ResidualSource::kStore;
  double condition_seconds = 0;            // the condition estimate's solves
  double condition_seconds_in_factor = 0;  // its part made by elim.I in factor_seconds (CPU)
  double gflops = 0;                       // factorization flops / factor_seconds (0 when reused)
  uint64_t io_read_bytes = 0;
  uint64_t io_written_bytes = 0;
  uint64_t cache_hits = 0;
  uint64_t cache_misses = 0;
  uint64_t cache_peak_bytes = 0;  // never above the budget
  uint64_t cache_budget = 0;
  // The GPU tier: the RAM cache's bytes pinned for the devices (the cells' span, without a copy
  // of A kept above it; 0 where pinning failed, and on the CPU tier).
  uint64_t pinned_bytes = 0;
  std::string backend;  // "cpu" or "cuda"
  std::string device;   // the GPU's description with the cuda backend
  std::string factor_name;
  bool reused_factors = false;
  // A factorization resumed after a crash (scheduler/factor_progress.h): the work it found
  // durable in the half-made factor and did not do again.
  bool resumed = false;
  int64_t resumed_eliminations = 0;  // stripes final
  int64_t resumed_updates = 0;       // (J, I) stripe updates
  Plan plan;
};

// b: n x nrhs column-major in RAM (ld = n).
Result<SolveReport> solve_dense(storage::MatrixStore& store, std::string_view matrix_name,
                                const double* b, int64_t nrhs, const DenseSolveOptions& options,
                                const EngineConfig& config, CancelToken& cancel,
                                const SolveCallbacks& callbacks, TraceRecorder* trace);

// The same with an explicit backend (tests, GPU later).
Result<SolveReport> solve_dense(backend::Backend& backend, storage::MatrixStore& store,
                                std::string_view matrix_name, const double* b, int64_t nrhs,
                                const DenseSolveOptions& options, const EngineConfig& config,
                                CancelToken& cancel, const SolveCallbacks& callbacks,
                                TraceRecorder* trace);

// The same with an explicit backend and GPU-tier engine (null: the CPU path). Tests run the GPU
// tier's roles without a GPU through backend/host_device_engine.h.
Result<SolveReport> solve_dense(backend::Backend& backend, backend::DeviceEngine* engine,
                                storage::MatrixStore& store, std::string_view matrix_name,
                                const double* b, int64_t nrhs, const DenseSolveOptions& options,
                                const EngineConfig& config, CancelToken& cancel,
                                const SolveCallbacks& callbacks, TraceRecorder* trace);

// The same on several devices (engines[d] is the solve's device d, stripe j going to device
// j mod engines; scheduler/multi_gpu_elimination.h).
Result<SolveReport> solve_dense(backend::Backend& backend,
                                const std::vector<backend::DeviceEngine*>& engines,
                                storage::MatrixStore& store, std::string_view matrix_name,
                                const double* b, int64_t nrhs, const DenseSolveOptions& options,
                                const EngineConfig& config, CancelToken& cancel,
                                const SolveCallbacks& callbacks, TraceRecorder* trace);

// "<matrix>.lu.<pivot>" (or the matrix itself in place); "<matrix>.lu.gepp" factors A^T.
std::string factor_name_for(std::string_view matrix_name, const DenseSolveOptions& options);

}  // namespace stripesolve::scheduler
