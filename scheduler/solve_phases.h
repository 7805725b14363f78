// The phases of one dense solve (dense_solve.h) over the state they share: factor (A loaded for
// the GPU tier, the triangulation, the factor persisted), substitute (x, and the condition
// estimate's solves with A and A^T), check (the residual, refinement, the quality warning) and
// finish (the report's figures and logs). dense_solve.cc checks the request, plans, opens the
// inputs into a Solve and runs the phases in order.
//
// Thread-safety: one SolvePhases per solve, used by the thread that runs it; the roles it starts
// own their threads (roles.h, io_role.h).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cache/stripe_cache.h"
#include "gpu/devices.h"
#include "scheduler/condition.h"
#include "scheduler/dense_solve.h"
#include "scheduler/factor_progress.h"
#include "scheduler/io_role.h"
#include "scheduler/multi_gpu_elimination.h"
#include "scheduler/ram_original.h"
#include "storage/matrix_store.h"

namespace stripesolve::scheduler {

using SolveClock = std::chrono::steady_clock;

inline double seconds_since(SolveClock::time_point t0) {
  return std::chrono::duration<double>(SolveClock::now() - t0).count();
}

// Where the estimate is sharpened (rcond below kSharpenRcondBelow), one step of Hager's
// iteration: a solve with a unit vector, 2 passes over the factors (dlacn2's usual 2 steps
// would double that for a better bound on few matrices; scheduler/condition.h).
constexpr int kConditionUnitSolves = 1;

// What one solve is asked: solve_dense's arguments. The options and callbacks are copies, so that
// the safety net's second solve may change them.
struct SolveRequest {
  backend::Backend& backend;
  const std::vector<backend::DeviceEngine*>& engines;
  storage::MatrixStore& store;
  std::string_view matrix_name;
  const double* b = nullptr;
  int64_t nrhs = 0;
  DenseSolveOptions options;
  const EngineConfig& config;
  CancelToken& cancel;
  SolveCallbacks callbacks;
  TraceRecorder* trace = nullptr;
};

// The objects of one solve and what its phases leave for the next.
struct Solve {
  storage::MatrixStore& store;
  std::string name;
  const DenseSolveOptions& options;
  storage::StripeGeometry g;
  SolveReport report;
  // Held while this solve may make the factor. Declared before `writable`, so that it is
  // released after an uncommitted factor is gone (a factor not persisted, or a factorization
  // that failed): a waiting solve must never meet one, or its create fails "already exists".
  storage::ObjectNameLock factor_lock;
  // Declared before the roles so that they outlive every transfer (destroyed after IoRole).
  std::unique_ptr<storage::StripedMatrix> a;
  std::unique_ptr<storage::StripedMatrix> writable;  // the factor being made (or not persisted)
  std::unique_ptr<storage::StripedMatrix> factor;    // the committed factor
  // The factorization's durable progress (factor_progress.h): outlives the I/O role, whose
  // write hook queues records to it, and is destroyed before `writable`, which its recorder
  // syncs.
  std::unique_ptr<FactorProgress> progress;
  ResumePoint resume_point;
  bool resumed = false;
  std::vector<stripe::StripePivots> pivots;
  double max_abs_u = -1;  // -1: not tracked
  // kGepp: A^T, the object factored (transposed_solve.h); A stays for the residual.
  std::unique_ptr<storage::StripedMatrix> transposed;
  // The devices' budget reservations (the engines' order), made for the whole device budget
  // before the plan: the GPU tier gives back what it does not allocate.
  std::vector<gpu::DeviceBudget::Reservation>* device_reservations = nullptr;

  storage::StripedMatrix& factored() const { return transposed ? *transposed : *a; }
};

Status emit_chunk(const SolveCallbacks& cb, const storage::StripeGeometry& g, const double* x,
                  int64_t nrhs, int64_t i);

class SolvePhases {
 public:
  // `config`: the request's, with the devices' budgets; `sv`: the inputs opened, report.plan set.
  SolvePhases(const SolveRequest& req, Solve& sv, const EngineConfig& config);
  ~SolvePhases();
  SolvePhases(const SolvePhases&) = delete;
  SolvePhases& operator=(const SolvePhases&) = delete;

  // Phase 1, unless sv.factor is open already (reused factors).
  Status factor();
  // Phase 2: x in report.x, and the condition estimate when the quality contract asks for it.
  Status substitute();
  // Phase 3: the backward error, refinement, growth, rcond and the quality warning.
  Status check();
  // The report's counters, the solution's chunks when not streamed, the closing log line.
  Result<SolveReport> finish(SolveClock::time_point start);

 private:
  // A persisted factor, else the one being made: the substitutions' source.
  storage::StripedMatrix& factor_object() const { return sv_.factor ? *sv_.factor : *sv_.writable; }
  void use_factor_sources();
  int64_t cores() const;  // engine.cores, else the host's
  Status open_factor_objects();
  Status triangulate();
  Status persist();
  // Solves with A (for gepp, whose factors are A^T's, the transposed solve) and with A^T.
  Status solve_columns(double* v, int64_t cols, const std::function<Status(int64_t)>& on_stripe,
                       const std::string& phase);
  Status solve_transposed_column(double* v);
  // Whether the solve makes a condition estimate (the quality contract, factors on the host).
  bool estimates_condition() const;
  Status estimate_condition(const std::vector<double>& solved_fixed);
  // The rest of the estimate, where rcond is below kSharpenRcondBelow.
  Status sharpen_condition(double a_norm_1);
  // Runs the residual pass (and auto or explicit refinement steps) on x.
  Status residual_and_refinement(double* x);

  // Destroyed in the reverse order: the GPU tier, then the I/O role (joined), then the keeper of
  // a stopped solve's progress (no write in flight by then), the meter and the cache.
  struct KeepProgressOnStop {
    Solve& sv;
    const CancelToken& cancel;
    ~KeepProgressOnStop();
  };
  const SolveRequest& req_;
  Solve& sv_;
  const EngineConfig& config_;
  const bool gepp_;
  const backend::DeviceEngine* engine_;  // the first device, null on the CPU tier
  cache::StripeCache cache_;
  // The copy of A in the RAM cache for the residual (Plan::ram_keeps_original), from the load
  // or the factorization until the residual is final. Shared with the I/O role's read hook on
  // the CPU tier; given back to the cache before it is destroyed (declared after it).
  std::shared_ptr<RamOriginal> ram_original_;
  ProgressMeter progress_;
  KeepProgressOnStop keep_progress_on_stop_;
  IoRole io_;
  EngineContext ctx_;
  std::unique_ptr<MultiGpuElimination> gpu_elim_;
  bool on_device_ = false;      // the factors stay on the device (the fits tier)
  bool stream_chunks_ = false;  // x's rows go out as the backward pass finishes them
  std::optional<InverseNormEstimate> inverse_norm_;  // the condition estimate, where made
  // The condition estimate's transposed start with its first pass made during the
  // factorization (run_factorization's transposed_upper; the CPU tier, fresh factors, not gepp);
  // empty where the estimate makes its transposed solve after the substitution.
  std::vector<double> transposed_upper_;
};

}  // namespace stripesolve::scheduler
