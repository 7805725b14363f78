#include "scheduler/dense_solve.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>

#include "backend/cpu/cpu_backend.h"
#include "backend/device_engine.h"
#include "base/logging.h"
#include "base/units.h"
#include "cache/stripe_cache.h"
#include "gpu/devices.h"
#include "scheduler/condition.h"
#include "scheduler/dense_plan.h"
#include "scheduler/factor_blobs.h"
#include "scheduler/factor_run.h"
#include "scheduler/io_role.h"
#include "scheduler/multi_gpu_elimination.h"
#include "scheduler/substitution.h"
#include "scheduler/transposed_solve.h"

namespace stripesolve::scheduler {

namespace {

using Clock = std::chrono::steady_clock;
// One step of Hager's iteration after the fixed vectors: a transposed solve and a solve with a
// unit vector, 4 passes over the factors (dlacn2's usual 2 steps would double the estimate's
// I/O for a better bound on few matrices; scheduler/condition.h).
constexpr int kConditionUnitSolves = 1;

double norm_inf(const double* v, int64_t n, int64_t nrhs) {
  double m = 0;
  for (int64_t k = 0; k < n * nrhs; ++k) m = std::max(m, std::fabs(v[k]));
  return m;
}

Status emit_chunk(const SolveCallbacks& cb, const storage::StripeGeometry& g, const double* x,
                  int64_t nrhs, int64_t i) {
  const int64_t h = g.rows(i);
  const int64_t r0 = g.row_begin(i);
  std::vector<double> chunk(static_cast<size_t>(h * nrhs));
  for (int64_t k = 0; k < nrhs; ++k) {
    std::memcpy(chunk.data() + k * h, x + r0 + k * g.n, sizeof(double) * static_cast<size_t>(h));
  }
  return cb.on_solution_chunk(r0, h, chunk.data());
}

Status check_finite(const double* x, int64_t n, int64_t nrhs) {
  for (int64_t j = 0; j < nrhs; ++j) {
    for (int64_t r = 0; r < n; ++r) {
      if (!std::isfinite(x[r + j * n])) {
        return Status::numerical("non-finite solution at row " + std::to_string(r));
      }
    }
  }
  return Status::ok();
}

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// The state of one solve between its phases (factor, substitute, refine).
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

  storage::StripedMatrix& factored() const { return transposed ? *transposed : *a; }
};

// Reads all of A into the RAM cache (idle, clean cells from column 0) when it fits, so that the
// factorization starts with the matrix in (pinned) RAM: the GPU tier's "host-resident A".
Status load_matrix(EngineContext& ctx, const storage::StripedMatrix& a, uint64_t budget) {
  const storage::StripeGeometry& g = a.geometry();
  uint64_t total = 0;
  std::vector<PartOrder> order;
  for (int64_t i = 0; i < g.stripes; ++i) {
    total += cache::Arena::round_up(a.part_layout(i, 0).buffer_bytes);
    order.push_back({i, 0});
  }
  if (total > budget) return Status::ok();
  return stream_parts(ctx, a, order, "load", true,
                      [](int64_t, const stripe::StripePart&) { return Status::ok(); });
}

// Makes sv.writable the factor object to factor A into: a new one, or the one a killed process
// left half made when its progress can be resumed (factor_progress.h: factors stored, the same
// recipe). Any other half-made one is removed (the run starts from A).
Status open_factor_to_make(Solve& sv, const Plan& plan) {
  static const auto log = logger("scheduler");
  const std::string& factor_name = sv.report.factor_name;
  const bool recorded = sv.options.store_factors && sv.options.record_progress;
  const FactorRecipe recipe{sv.a->info().id,     sv.g.n,
                            sv.g.stripes,        sv.options.pivot,
                            sv.options.strategy, plan.meta_stripes,
                            plan.substripe_rows};
  // The factor records A (not A^T for kGepp) as what it factors: reuse checks A.
  auto left = sv.store.reopen_factor(factor_name, *sv.a);
  if (!left.is_ok() && left.status().code() != StatusCode::kNotFound) return left.status();
  if (left.is_ok()) {
    auto progress = recorded ? FactorProgress::resume(**left, recipe, &sv.resume_point)
                             : Result<std::unique_ptr<FactorProgress>>(Status::failed_precondition(
                                   "this solve records no progress (its factors are not stored)"));
    if (progress.is_ok()) {
      sv.writable = std::move(*left);
      sv.progress = std::move(*progress);
      sv.resumed = true;
      return Status::ok();
    }
    log->warn(
        "the half-made factor '{}' left by an earlier process cannot be resumed ({}); "
        "factoring from the start",
        factor_name, progress.status().message());
    left->reset();  // uncommitted: removed
  }
  STRIPESOLVE_ASSIGN_OR_RETURN(sv.writable, sv.store.create_factor(factor_name, *sv.a));
  if (recorded) {
    STRIPESOLVE_ASSIGN_OR_RETURN(sv.progress, FactorProgress::start(*sv.writable, recipe));
  }
  return Status::ok();
}

}  // namespace

// The longest factor suffix, ".lu.local", fits in what the store keeps free in matrix names.
static_assert(std::string_view(".lu.local").size() <= storage::kDerivedNameReserve);

std::string factor_name_for(std::string_view matrix_name, const DenseSolveOptions& options) {
  if (options.in_place) return std::string(matrix_name);
  return std::string(matrix_name) + ".lu." + std::string(backend::pivot_mode_name(options.pivot));
}

namespace {

// The request's shape and options, before anything is opened.
Status check_request(const std::string& name, const double* b, int64_t nrhs,
                     const DenseSolveOptions& options) {
  if (nrhs < 1 || b == nullptr) {
    return Status::invalid_argument("dense solve of '" + name +
                                    "': need at least one right-hand side, got " +
                                    std::to_string(nrhs));
  }
  if (options.in_place && options.refinement_steps > 0) {
    return Status::invalid_argument(
        "dense solve of '" + name +
        "': refinement needs the original matrix, which in_place overwrites");
  }
  if (options.in_place && options.pivot == stripe::PivotMode::kGepp) {
    return Status::invalid_argument("dense solve of '" + name +
                                    "': gepp factors the transpose of the matrix, not the matrix "
                                    "in place");
  }
  if (options.in_place && !options.store_factors) {
    return Status::invalid_argument(
        "dense solve of '" + name +
        "': in_place turns the matrix into its factors, which are then stored");
  }
  return Status::ok();
}

// The engines' device budgets: each within what the daemon's other GPU jobs leave of its device
// (a default budget shrinks to it; an engine.gpu_memory it cannot give fails naming both
// figures), the plan taking the smallest; reserved for this solve until `reservations` go.
// Without engines: the CPU tier.
Status reserve_devices(const std::vector<backend::DeviceEngine*>& engines,
                       const EngineConfig& config_in, const std::string& name, EngineConfig* config,
                       SolveReport* report,
                       std::vector<gpu::DeviceBudget::Reservation>* reservations) {
  const backend::DeviceEngine* engine = engines.empty() ? nullptr : engines.front();
  report->backend = engine == nullptr ? "cpu" : engine->device() >= 0 ? "cuda" : "host";
  config->gpus = static_cast<int64_t>(engines.size());
  config->gpu_memory = 0;
  if (engine == nullptr) return Status::ok();
  report->device = engines.size() == 1 ? engine->description()
                                       : std::to_string(engines.size()) +
                                             " devices: " + engine->description() + ", ...";
  for (const backend::DeviceEngine* e : engines) {
    gpu::DeviceBudget& shared = gpu::DeviceBudget::of(e->device());
    uint64_t budget = device_budget(config_in, e->free_memory());
    if (config_in.gpu_memory == 0) budget = std::min(budget, shared.available());
    config->gpu_memory = config->gpu_memory == 0 ? budget : std::min(config->gpu_memory, budget);
  }
  for (const backend::DeviceEngine* e : engines) {
    STRIPESOLVE_ASSIGN_OR_RETURN(auto r,
                                 gpu::DeviceBudget::of(e->device())
                                     .reserve(config->gpu_memory, "dense solve of '" + name + "'"));
    reservations->push_back(std::move(r));
  }
  return Status::ok();
}

// Opens what the solve reads: A (unless in place), and the stored factor with its pivots and
// growth when one of this very matrix may be reused (sv.factor then set); holds the factor's
// name lock while this solve may make it. kGepp with no factor to reuse: A's transpose too, made
// within `ram_budget` when missing (before the solve's cache takes that memory).
Status open_inputs(Solve& sv, const storage::MatrixInfo& info, uint64_t ram_budget,
                   CancelToken& cancel) {
  if (sv.options.in_place) {
    if (info.kind == "factor") {
      if (!sv.options.reuse_factors) {
        return Status::failed_precondition("matrix '" + sv.name +
                                           "' was factored in place; its original values are gone");
      }
      STRIPESOLVE_ASSIGN_OR_RETURN(sv.factor, sv.store.open_factor(sv.name));
    }
  } else {
    STRIPESOLVE_ASSIGN_OR_RETURN(sv.a, sv.store.open_matrix(sv.name));
    // Concurrent first solves of one matrix make one factor: the later ones wait here until it
    // is committed (or given up), then reuse it (issue 15).
    STRIPESOLVE_ASSIGN_OR_RETURN(
        sv.factor_lock,
        sv.store.lock_name(sv.report.factor_name, [&cancel] { return cancel.cancelled(); }));
    auto existing = sv.store.open_factor(sv.report.factor_name);
    if (existing.is_ok()) {
      // Only the factor of this very matrix: its id (made at creation, so a matrix removed and
      // made again under its name never matches), order and data checksums (issue 15).
      const bool same = storage::is_factor_of((*existing)->info(), sv.a->info());
      if (sv.options.reuse_factors && same) {
        sv.factor = std::move(*existing);
      } else {
        existing->reset();
        STRIPESOLVE_RETURN_IF_ERROR(sv.store.remove(sv.report.factor_name));
      }
    } else if (existing.status().code() != StatusCode::kNotFound) {
      return existing.status();
    }
    if (!sv.factor && sv.options.pivot == stripe::PivotMode::kGepp) {
      const auto t0 = Clock::now();
      STRIPESOLVE_ASSIGN_OR_RETURN(sv.transposed,
                                   open_transpose(sv.store, *sv.a, ram_budget, cancel));
      sv.report.transpose_seconds = seconds_since(t0);
    }
  }
  if (sv.factor) {
    STRIPESOLVE_ASSIGN_OR_RETURN(sv.pivots,
                                 read_pivots(*sv.factor, sv.g.stripes, sv.report.factor_name));
    // A factor made before the growth was recorded has no such blob: growth -1.
    sv.max_abs_u = read_max_abs_u(*sv.factor);
    if (!sv.pivots.empty() && sv.pivots[0].mode != backend::elimination_pivot(sv.options.pivot)) {
      return Status::failed_precondition("factor '" + sv.report.factor_name + "' was made with " +
                                         std::string(backend::pivot_mode_name(sv.pivots[0].mode)) +
                                         " pivoting, not " +
                                         std::string(backend::pivot_mode_name(sv.options.pivot)));
    }
    sv.report.reused_factors = true;
  }
  return Status::ok();
}

// One solve with the options' pivoting (solve_with below may make a second).
Result<SolveReport> solve_once(backend::Backend& backend,
                               const std::vector<backend::DeviceEngine*>& engines,
                               storage::MatrixStore& store, std::string_view matrix_name,
                               const double* b, int64_t nrhs, const DenseSolveOptions& options_in,
                               const EngineConfig& config_in, CancelToken& cancel,
                               const SolveCallbacks& callbacks, TraceRecorder* trace) {
  const auto start = Clock::now();
  const std::string name(matrix_name);
  const bool gepp = options_in.pivot == stripe::PivotMode::kGepp;
  DenseSolveOptions options = options_in;
  // The device has no transposed solve: gepp substitutes from the host, so its factors are
  // written back even where the GPU tier would keep them on the device only.
  if (gepp && !engines.empty()) options.store_factors = true;
  STRIPESOLVE_RETURN_IF_ERROR(check_request(name, b, nrhs, options));
  STRIPESOLVE_ASSIGN_OR_RETURN(storage::MatrixInfo info, store.info(name));
  Solve sv{store,   name,    options, info.geometry, {}, {}, nullptr, nullptr,
           nullptr, nullptr, {},      false,         {}, -1, nullptr};
  const storage::StripeGeometry& g = sv.g;
  const int64_t n = g.n;
  SolveReport& report = sv.report;

  EngineConfig config = config_in;
  const backend::DeviceEngine* engine = engines.empty() ? nullptr : engines.front();
  std::vector<gpu::DeviceBudget::Reservation> device_reservations;
  STRIPESOLVE_RETURN_IF_ERROR(
      reserve_devices(engines, config_in, name, &config, &report, &device_reservations));
  STRIPESOLVE_ASSIGN_OR_RETURN(
      report.plan, plan_dense(n, g.stripe_rows, config, describe_machine(config, info.path_count)));
  const Plan& plan = report.plan;
  static const auto log = logger("scheduler");
  log->info("dense solve of '{}' ({} pivoting, {} strategy, {} backend{}{}): {}", name,
            backend::pivot_mode_name(options.pivot), strategy_name(options.strategy),
            report.backend, report.device.empty() ? "" : " on ", report.device, plan_to_text(plan));
  report.factor_name = factor_name_for(name, options);

  STRIPESOLVE_RETURN_IF_ERROR(open_inputs(sv, info, config.ram_budget, cancel));

  cache::StripeCache cache(config.ram_budget);
  ProgressMeter progress(callbacks.on_progress, config.progress_interval_seconds);
  progress.set_cache_counts([&cache](uint64_t* hits, uint64_t* misses) {
    const cache::CacheStats s = cache.stats();
    *hits = s.hits;
    *misses = s.misses;
  });
  // A solve stopped for now (CancelToken::keep_progress) leaves its half-made factor and its
  // progress as a crash would, for the next run to resume. Declared before the I/O role, so it
  // runs after the role is joined: no write is in flight by then.
  struct KeepProgressOnStop {
    Solve& sv;
    const CancelToken& cancel;
    ~KeepProgressOnStop() {
      if (cancel.cancelled() && cancel.keep_progress() && sv.progress && sv.writable) {
        sv.writable->keep_uncommitted();
      }
    }
  } keep_progress_on_stop{sv, cancel};
  IoRole io(cache, progress, trace);
  EngineContext ctx{backend, cache, progress, cancel, trace, config.progress_interval_seconds};
  std::unique_ptr<MultiGpuElimination> gpu_elim;

  // Phase 1: factor (load A into RAM for the GPU tier, triangulate, persist).
  if (!sv.factor) {
    if (options.in_place) {
      STRIPESOLVE_ASSIGN_OR_RETURN(sv.writable, store.open_for_in_place(name));
      io.set_sources(sv.writable.get(), sv.writable.get());
    } else {
      STRIPESOLVE_RETURN_IF_ERROR(open_factor_to_make(sv, plan));
      io.set_sources(&sv.factored(), sv.writable.get());
      if (sv.resumed) io.mark_written(sv.resume_point.written());
      if (sv.progress) {
        FactorProgress* p = sv.progress.get();
        io.set_write_hook(
            {[p](const cache::CellView& cell) { return p->checksum(cell); },
             [p](const cache::CellView& cell, uint32_t crc) { return p->record(cell, crc); }});
      }
    }
    // Dirty parts are written back in the persist step below (timed apart from the arithmetic).
    FactorParams params{.pivot = backend::elimination_pivot(options.pivot),
                        .strategy = options.strategy,
                        .meta_stripes = plan.meta_stripes,
                        .substripe_rows = plan.substripe_rows,
                        .elim_j_workers = plan.elim_j_workers,
                        .lookahead_workers = engine != nullptr ? plan.lookahead_workers : 0,
                        .write_back = false,
                        .parts_from_meta_start = engine != nullptr};
    if (engine != nullptr) {
      const auto t_load = Clock::now();
      STRIPESOLVE_ASSIGN_OR_RETURN(
          gpu_elim, MultiGpuElimination::create(ctx, engines, *sv.writable, params, plan));
      if (!options.in_place) {
        progress.begin_phase("load", 0, g.stripes);
        STRIPESOLVE_RETURN_IF_ERROR(load_matrix(ctx, sv.factored(), config.ram_budget));
      }
      report.load_seconds = seconds_since(t_load);
    }
    const double flops = factorization_flops(g);
    progress.begin_phase("factor", flops, g.stripes);
    const auto t0 = Clock::now();
    ResumeStats skipped;
    STRIPESOLVE_ASSIGN_OR_RETURN(
        sv.pivots,
        run_factorization(ctx, *sv.writable, params, gpu_elim.get(), &sv.max_abs_u,
                          {sv.resumed ? &sv.resume_point : nullptr, sv.progress.get(), &skipped}));
    report.resumed = sv.resumed;
    report.resumed_eliminations = skipped.eliminations;
    report.resumed_updates = skipped.updates;
    if (cancel.cancelled()) return Status::cancelled("dense solve cancelled");
    report.factor_seconds = seconds_since(t0);
    report.gflops = report.factor_seconds > 0 ? flops / report.factor_seconds / 1e9 : 0.0;
    if (options.store_factors) {
      const auto t_persist = Clock::now();
      {
        // Dirty parts go to the factor object but stay cached (clean) for the substitution.
        TraceRecorder::Span span(trace, "master", "write_back");
        STRIPESOLVE_RETURN_IF_ERROR(cache.write_back());
      }
      STRIPESOLVE_RETURN_IF_ERROR(write_pivots(*sv.writable, sv.pivots));
      STRIPESOLVE_RETURN_IF_ERROR(write_max_abs_u(*sv.writable, sv.max_abs_u));
      STRIPESOLVE_RETURN_IF_ERROR(sv.writable->commit());
      io.set_write_hook({});
      sv.progress.reset();  // its recorder syncs the factor: stopped before the factor closes
      io.set_sources(nullptr, nullptr);
      sv.writable.reset();
      STRIPESOLVE_ASSIGN_OR_RETURN(sv.factor, store.open_factor(report.factor_name));
      report.persist_seconds = seconds_since(t_persist);
    }
  }
  if (sv.factor) sv.factor_lock.release();  // committed and open: the next solve may reuse it
  storage::StripedMatrix& factor = sv.factor ? *sv.factor : *sv.writable;
  auto factor_sources = [&] {
    if (sv.factor) {
      io.set_sources(sv.factor.get(), nullptr);
    } else {
      io.set_sources(sv.writable.get(), sv.writable.get());  // not persisted: dirty parts stay
    }
  };
  const bool on_device = gpu_elim && gpu_elim->factors_resident() && !gepp;
  // Solves with A: for gepp, whose factors are A^T's, the transposed solve.
  auto substitute_columns = [&](double* v, int64_t cols,
                                const std::function<Status(int64_t)>& on_stripe,
                                const std::string& phase) -> Status {
    if (on_device) {
      STRIPESOLVE_RETURN_IF_ERROR(gpu_elim->substitute(v, cols));
      return check_finite(v, n, cols);
    }
    factor_sources();
    if (gepp) {
      STRIPESOLVE_RETURN_IF_ERROR(substitute_transposed(ctx, factor, sv.pivots, v, cols,
                                                        phase.empty() ? "substitute" : phase));
      return check_finite(v, n, cols);
    }
    return substitute(ctx, factor, sv.pivots, v, cols, on_stripe, phase);
  };
  // Solves with A^T (the condition estimate's other operator).
  auto substitute_transposed_column = [&](double* v) -> Status {
    factor_sources();
    if (gepp) return substitute(ctx, factor, sv.pivots, v, 1, nullptr, "condition");
    return substitute_transposed(ctx, factor, sv.pivots, v);
  };
  auto substitute_into = [&](double* v, const std::function<Status(int64_t)>& on_stripe) {
    return substitute_columns(v, nrhs, on_stripe, "");
  };
  // The condition estimate needs the factors in RAM or the store, and ||A||_1 (from the residual
  // pass) and so A: not in place.
  const bool factors_on_host = !on_device || sv.factor != nullptr;
  const bool estimate_condition = options.check_quality && !options.in_place && factors_on_host;

  // Phase 2: substitute. The estimator's two fixed vectors ride along as columns nrhs and
  // nrhs + 1 (the same passes over the factors), which saves it two of its usual six solves.
  const int64_t extra = estimate_condition ? 2 : 0;
  report.x.assign(b, b + n * nrhs);
  if (extra > 0) {
    const std::vector<double> fixed = estimator_fixed_vectors(n);
    report.x.insert(report.x.end(), fixed.begin(), fixed.end());
  }
  double* x = report.x.data();
  // Rows are final as the backward pass leaves them only without column interchanges.
  const bool stream_chunks =
      callbacks.on_solution_chunk && !on_device &&
      (options.pivot == stripe::PivotMode::kLocal || options.pivot == stripe::PivotMode::kNone) &&
      options.refinement_steps == 0;
  if (on_device)
    progress.begin_phase("substitute", 4.0 * static_cast<double>(n) * n * nrhs, g.stripes);
  const auto t_subst = Clock::now();
  STRIPESOLVE_RETURN_IF_ERROR(substitute_columns(
      x, nrhs + extra,
      [&](int64_t i) {
        return stream_chunks ? emit_chunk(callbacks, g, x, nrhs, i) : Status::ok();
      },
      ""));
  report.substitution_seconds = seconds_since(t_subst);
  const std::vector<double> solved_fixed(report.x.begin() + n * nrhs, report.x.end());
  report.x.resize(static_cast<size_t>(n * nrhs));
  x = report.x.data();

  // The rest of the condition estimate, while the factors are still cached from the
  // substitution (002's zigzag: each pass starts where the previous one ended).
  double inverse_norm_1 = -1;
  if (estimate_condition) {
    const auto t_condition = Clock::now();
    auto estimate = estimate_inverse_norm_1(
        n, [&](double* v) { return substitute_columns(v, 1, nullptr, "condition"); },
        substitute_transposed_column, solved_fixed.data(), kConditionUnitSolves);
    // A numerical error here (an overflow in a solve with a unit vector) has failed the cache,
    // so it ends the solve like one of the main substitution would.
    STRIPESOLVE_RETURN_IF_ERROR(estimate.status());
    inverse_norm_1 = *estimate;
    report.condition_seconds = seconds_since(t_condition);
  }

  // Phase 3: residual and refinement (x += A^-1 (b - A x)).
  const auto t_residual = Clock::now();
  report.tolerance = backward_error_tolerance(n);
  if (!options.in_place) {
    // Factors neither stored nor resident on the device would have to be written out before
    // the residual pass just in case: auto refinement leaves them alone (explicit steps still
    // write them), and a solve above the tolerance then ends with its warning.
    const bool factors_kept = sv.factor != nullptr || on_device;
    const bool refine_auto = options.refinement_steps == DenseSolveOptions::kRefineAuto &&
                             options.check_quality && factors_kept;
    const int max_steps =
        refine_auto ? DenseSolveOptions::kMaxAutoRefinement : std::max(0, options.refinement_steps);
    std::vector<double> r(static_cast<size_t>(n * nrhs));
    std::vector<double> x_before;  // the x before the last auto step, in case it got worse
    const double b_norm = norm_inf(b, n, nrhs);
    if (!sv.factor && (on_device || max_steps == 0)) {
      cache.discard_idle();  // factors not persisted and not needed from RAM any more
    } else if (!sv.factor) {
      STRIPESOLVE_RETURN_IF_ERROR(cache.write_back());  // refinement reads them again
    }
    double a_norm_1 = 0;
    double a_max_abs = 0;
    for (int step = 0;; ++step) {
      STRIPESOLVE_RETURN_IF_ERROR(cache.flush());  // factor cells must not serve reads of A
      io.set_sources(sv.a.get(), nullptr);
      STRIPESOLVE_ASSIGN_OR_RETURN(ResidualResult res, residual(ctx, *sv.a, b, x, nrhs, r.data()));
      a_norm_1 = res.a_norm_1;
      a_max_abs = res.a_max_abs;
      const double denom = res.a_norm_inf * norm_inf(x, n, nrhs) + b_norm;
      const double berr = denom > 0 ? res.r_norm_inf / denom : res.r_norm_inf;
      report.residual_history.push_back(berr);
      report.residual = berr;
      if (step == max_steps) break;
      if (refine_auto) {
        // LAPACK dgerfs's rule: go on while above eps and each step at least halves the error.
        const double eps = std::numeric_limits<double>::epsilon() / 2;
        if ((step == 0 && berr <= report.tolerance) || berr <= eps) break;
        if (step > 0) {
          const double before = report.residual_history[static_cast<size_t>(step - 1)];
          if (berr > before) {
            std::copy(x_before.begin(), x_before.end(), x);
            report.residual = before;
          }
          if (berr > 0.5 * before) break;
        }
        x_before.assign(x, x + n * nrhs);
      }
      STRIPESOLVE_RETURN_IF_ERROR(cache.flush());
      STRIPESOLVE_RETURN_IF_ERROR(substitute_into(r.data(), nullptr));
      for (int64_t k = 0; k < n * nrhs; ++k) x[k] += r[static_cast<size_t>(k)];
    }
    if (sv.max_abs_u >= 0 && a_max_abs > 0) report.growth = sv.max_abs_u / a_max_abs;
    if (inverse_norm_1 > 0 && a_norm_1 > 0) report.rcond = 1.0 / (a_norm_1 * inverse_norm_1);
    report.residual_seconds = std::chrono::duration<double>(Clock::now() - t_residual).count();
  }
  if (options.check_quality) {
    report.warning = quality_warning(
        {.n = n,
         .backward_error = report.residual,
         .rcond = report.rcond,
         .growth = report.growth,
         .refinement_steps = report.residual_history.empty()
                                 ? 0
                                 : static_cast<int>(report.residual_history.size()) - 1,
         .pivot = options.pivot});
  }
  if (callbacks.on_solution_chunk && !stream_chunks) {
    for (int64_t i = g.stripes - 1; i >= 0; --i) {
      STRIPESOLVE_RETURN_IF_ERROR(emit_chunk(callbacks, g, x, nrhs, i));
    }
  }
  report.pivot = options.pivot;
  progress.begin_phase("done", 0, 0);
  const cache::CacheStats cs = cache.stats();
  report.cache_hits = cs.hits;
  report.cache_misses = cs.misses;
  report.cache_peak_bytes = cs.peak_bytes;
  report.cache_budget = cs.budget;
  report.io_read_bytes = progress.io_read_bytes();
  report.io_written_bytes = progress.io_written_bytes();
  report.seconds = seconds_since(start);
  if (!report.warning.empty()) log->warn("dense solve of '{}': {}", name, report.warning);
  log->info(
      "dense solve of '{}' done in {:.3f} s on {}: residual {:.3g}, rcond {:.3g}, growth "
      "{:.3g}, factor {:.2f} GFLOP/s "
      "({:.3f} s){}, substitution {:.3f} s{}, SSD read {} written {}",
      name, report.seconds, report.device.empty() ? report.backend : report.device, report.residual,
      report.rcond, report.growth, report.gflops, report.factor_seconds,
      report.reused_factors ? " (reused factors)" : "", report.substitution_seconds,
      on_device ? " (device)" : "", format_bytes(report.io_read_bytes),
      format_bytes(report.io_written_bytes));
  if (gpu_elim) gpu_elim->release_factors();
  return report;
}

// solve_once(), and the safety net's switch (transposed_solve.h): a kRow solve whose pivoting
// grew is made again with kGepp. X goes to on_solution_chunk only once it is final, so a solve
// that may switch hands it over here, after the second solve (kRow streams no chunks anyway).
Result<SolveReport> solve_with(backend::Backend& backend,
                               const std::vector<backend::DeviceEngine*>& engines,
                               storage::MatrixStore& store, std::string_view matrix_name,
                               const double* b, int64_t nrhs, const DenseSolveOptions& options,
                               const EngineConfig& config, CancelToken& cancel,
                               const SolveCallbacks& callbacks, TraceRecorder* trace) {
  const bool may_switch = options.pivot == stripe::PivotMode::kRow && !options.in_place &&
                          options.check_quality &&
                          options.refinement_steps == DenseSolveOptions::kRefineAuto;
  if (!may_switch) {
    return solve_once(backend, engines, store, matrix_name, b, nrhs, options, config, cancel,
                      callbacks, trace);
  }
  SolveCallbacks held = callbacks;
  held.on_solution_chunk = nullptr;
  STRIPESOLVE_ASSIGN_OR_RETURN(
      SolveReport report, solve_once(backend, engines, store, matrix_name, b, nrhs, options, config,
                                     cancel, held, trace));
  if (should_switch_to_gepp(options, report)) {
    static const auto log = logger("scheduler");
    const std::string note = gepp_switch_note(report);
    log->warn("dense solve of '{}': {}", matrix_name, note);
    DenseSolveOptions gepp = options;
    gepp.pivot = stripe::PivotMode::kGepp;
    STRIPESOLVE_ASSIGN_OR_RETURN(
        SolveReport second, solve_once(backend, engines, store, matrix_name, b, nrhs, gepp, config,
                                       cancel, held, trace));
    second.pivot_switch = note;
    second.seconds += report.seconds;
    second.io_read_bytes += report.io_read_bytes;
    second.io_written_bytes += report.io_written_bytes;
    report = std::move(second);
  }
  if (callbacks.on_solution_chunk) {
    STRIPESOLVE_ASSIGN_OR_RETURN(storage::MatrixInfo info, store.info(matrix_name));
    for (int64_t i = info.geometry.stripes - 1; i >= 0; --i) {
      STRIPESOLVE_RETURN_IF_ERROR(emit_chunk(callbacks, info.geometry, report.x.data(), nrhs, i));
    }
  }
  return report;
}

}  // namespace

Result<SolveReport> solve_dense(storage::MatrixStore& store, std::string_view matrix_name,
                                const double* b, int64_t nrhs, const DenseSolveOptions& options,
                                const EngineConfig& config, CancelToken& cancel,
                                const SolveCallbacks& callbacks, TraceRecorder* trace) {
  std::vector<std::string> warnings;
  STRIPESOLVE_ASSIGN_OR_RETURN(ComputeBackend which, resolve_backend(config, &warnings));
  static const auto log = logger("scheduler");
  for (const auto& w : warnings) log->warn("{}", w);
  auto cpu = backend::make_cpu_backend();
  // engine.gpus devices (0: every device the host has), device 0 first.
  std::vector<std::unique_ptr<backend::DeviceEngine>> owned;
  std::vector<backend::DeviceEngine*> engines;
  if (which == ComputeBackend::kCuda) {
    const int64_t available = std::max(1, gpu::device_count());
    const int64_t count = config.gpus > 0 ? std::min(config.gpus, available) : available;
    for (int64_t d = 0; d < count; ++d) {
      STRIPESOLVE_ASSIGN_OR_RETURN(
          auto engine,
          backend::DeviceEngine::open(static_cast<int>(d),
                                      {.panel_sms = static_cast<int>(config.gpu_panel_sms),
                                       .update_k = config.gpu_update_k}));
      engines.push_back(engine.get());
      owned.push_back(std::move(engine));
    }
  }
  return solve_with(*cpu, engines, store, matrix_name, b, nrhs, options, config, cancel, callbacks,
                    trace);
}

Result<SolveReport> solve_dense(backend::Backend& backend, storage::MatrixStore& store,
                                std::string_view matrix_name, const double* b, int64_t nrhs,
                                const DenseSolveOptions& options, const EngineConfig& config,
                                CancelToken& cancel, const SolveCallbacks& callbacks,
                                TraceRecorder* trace) {
  return solve_with(backend, {}, store, matrix_name, b, nrhs, options, config, cancel, callbacks,
                    trace);
}

Result<SolveReport> solve_dense(backend::Backend& backend, backend::DeviceEngine* engine,
                                storage::MatrixStore& store, std::string_view matrix_name,
                                const double* b, int64_t nrhs, const DenseSolveOptions& options,
                                const EngineConfig& config, CancelToken& cancel,
                                const SolveCallbacks& callbacks, TraceRecorder* trace) {
  std::vector<backend::DeviceEngine*> engines;
  if (engine != nullptr) engines.push_back(engine);
  return solve_with(backend, engines, store, matrix_name, b, nrhs, options, config, cancel,
                    callbacks, trace);
}

Result<SolveReport> solve_dense(backend::Backend& backend,
                                const std::vector<backend::DeviceEngine*>& engines,
                                storage::MatrixStore& store, std::string_view matrix_name,
                                const double* b, int64_t nrhs, const DenseSolveOptions& options,
                                const EngineConfig& config, CancelToken& cancel,
                                const SolveCallbacks& callbacks, TraceRecorder* trace) {
  return solve_with(backend, engines, store, matrix_name, b, nrhs, options, config, cancel,
                    callbacks, trace);
}

}  // namespace stripesolve::scheduler
