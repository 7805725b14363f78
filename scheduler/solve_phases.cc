#include "scheduler/solve_phases.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <thread>

#include "backend/cpu/cpu_backend.h"
#include "backend/device_engine.h"
#include "base/logging.h"
#include "base/units.h"
#include "scheduler/condition.h"
#include "scheduler/factor_blobs.h"
#include "scheduler/factor_run.h"
#include "scheduler/substitution.h"
#include "scheduler/transposed_solve.h"

namespace stripesolve::scheduler {

namespace {

// Columns the condition estimate solves beside the right-hand sides (substitute()).
constexpr int64_t kEstimateColumns = 3;

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

// The RAM cache's bytes for all of A's stripes at once (each part as stored: 4 KiB aligned).
uint64_t cells_bytes(const storage::StripeGeometry& g) {
  uint64_t total = 0;
  for (int64_t i = 0; i < g.stripes; ++i) {
    total += cache::Arena::round_up(storage::align_up(g.stripe_bytes(i)));
  }
  return total;
}

// The arena a solve takes: its budget, but no more than twice A's cells (all of them, and as
// much again for the holes between extents), three times where the plan keeps a copy of A in
// the RAM cache for the residual: a larger arena is never filled. The GPU tier faults in and
// pins the whole arena, so a small solve under the daemon's default budget (half the host's
// available memory) paid for all of it: on the H200 host (62.6 GiB) 3-8 s for n = 1000, where
// the solve takes 0.12 s; and where the device keeps the copy, a third of the arena was pinned
// and never used (8 GiB of 24 at n = 32768).
uint64_t arena_bytes(const storage::StripeGeometry& g, uint64_t budget, bool keeps_copy) {
  return std::min(budget, (keeps_copy ? 3 : 2) * cells_bytes(g));
}

// Whether all of A's stripes fit a RAM cache of `budget` bytes at once.
bool fits_cache(const storage::StripedMatrix& a, uint64_t budget) {
  return cells_bytes(a.geometry()) <= budget;
}

// Reads all of A into the RAM cache (idle, clean cells from column 0) when it fits, so that the
// factorization starts with the matrix in (pinned) RAM: the GPU tier's "host-resident A". Each
// stripe's part (from column 0) goes to `also` as it arrives, where given. False: A does not
// fit, nothing read.
Result<bool> load_matrix(EngineContext& ctx, const storage::StripedMatrix& a, uint64_t budget,
                         const std::function<Status(int64_t, const stripe::StripePart&)>& also) {
  if (!fits_cache(a, budget)) return false;
  std::vector<PartOrder> order;
  for (int64_t i = 0; i < a.geometry().stripes; ++i) order.push_back({i, 0});
  STRIPESOLVE_RETURN_IF_ERROR(
      stream_parts(ctx, a, order, "load", true, [&](int64_t i, const stripe::StripePart& part) {
        return also ? also(i, part) : Status::ok();
      }));
  return true;
}

// Makes sv.writable the factor object to factor A into: a new one, or the one a killed process
// left half made when its progress can be resumed (factor_progress.h: factors stored, the same
// recipe). Any other half-made one is removed (the run starts from A). `space`: how a new one
// takes its disk space (MatrixStore::create_factor).
Status open_factor_to_make(Solve& sv, const Plan& plan, storage::DiskSpace space) {
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
  STRIPESOLVE_ASSIGN_OR_RETURN(sv.writable, sv.store.create_factor(factor_name, *sv.a, space));
  if (recorded) {
    STRIPESOLVE_ASSIGN_OR_RETURN(sv.progress, FactorProgress::start(*sv.writable, recipe));
  }
  return Status::ok();
}

}  // namespace

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

SolvePhases::KeepProgressOnStop::~KeepProgressOnStop() {
  // A solve stopped for now (CancelToken::keep_progress) leaves its half-made factor and its
  // progress as a crash would, for the next run to resume.
  if (cancel.cancelled() && cancel.keep_progress() && sv.progress && sv.writable) {
    sv.writable->keep_uncommitted();
  }
}

SolvePhases::SolvePhases(const SolveRequest& req, Solve& sv, const EngineConfig& config)
    : req_(req),
      sv_(sv),
      config_(config),
      gepp_(req.options.pivot == stripe::PivotMode::kGepp),
      engine_(req.engines.empty() ? nullptr : req.engines.front()),
      cache_(arena_bytes(sv.g, config.ram_budget, sv.report.plan.ram_keeps_original),
             config.huge_pages ? cache::HugePages::kWhenLarge : cache::HugePages::kNo),
      progress_(req.callbacks.on_progress, config.progress_interval_seconds),
      keep_progress_on_stop_{sv, req.cancel},
      io_(cache_, progress_, req.trace, static_cast<int>(config.io_threads)),
      ctx_{req.backend, cache_,    progress_,
           req.cancel,  req.trace, config.progress_interval_seconds} {
  progress_.set_cache_counts([this](uint64_t* hits, uint64_t* misses) {
    const cache::CacheStats s = cache_.stats();
    *hits = s.hits;
    *misses = s.misses;
  });
}

SolvePhases::~SolvePhases() {
  // The GPU tier's teardown (its device memory freed, the RAM cache unpinned) on the trace; the
  // members after it (the I/O role joined, the arena unmapped) follow in their usual order.
  TraceRecorder::Span span(req_.trace, "master", "teardown: GPU tier");
  // A failed factorization leaves the device's copy of A as the I/O role's read hook, and the
  // reads in flight at the failure still arrive: it goes before the tier does.
  io_.set_read_hook({});
  gpu_elim_.reset();
}

int64_t SolvePhases::cores() const {
  return config_.cores > 0 ? config_.cores
                           : std::max<int64_t>(1, std::thread::hardware_concurrency());
}

Status SolvePhases::factor() {
  if (const uint64_t refused = cache_.arena().refused(); refused > 0) {
    return Status::resource_exhausted(
        fmt::format("this host refused the {} of RAM the solve's stripe cache asked for "
                    "(engine.ram_budget {}): "
                    "lower engine.ram_budget (or the daemon's --ram-budget)",
                    format_bytes(refused), format_bytes(config_.ram_budget)));
  }
  if (!sv_.factor) STRIPESOLVE_RETURN_IF_ERROR(triangulate());
  if (sv_.factor) sv_.factor_lock.release();  // committed and open: the next solve may reuse it
  on_device_ = gpu_elim_ && gpu_elim_->factors_resident();
  if (gpu_elim_ && gpu_elim_->final_on_device_only() && !on_device_) {
    // The factors went nowhere else: the host's substitution would read what was never written.
    return Status::internal("GPU tier: the factors kept on the device only are not all there");
  }
  return Status::ok();
}

// The object to factor into and the I/O role's sources for it.
Status SolvePhases::open_factor_objects() {
  if (req_.options.in_place) {
    STRIPESOLVE_ASSIGN_OR_RETURN(sv_.writable, sv_.store.open_for_in_place(sv_.name));
    io_.set_sources(sv_.writable.get(), sv_.writable.get());
    return Status::ok();
  }
  // Factors that are not stored and fit the RAM cache beside nothing else are never written:
  // their object takes no disk space up front (a host whose disks hold A but not A twice still
  // solves in RAM). Should a cell be written all the same, a full disk fails it with kNoSpace.
  const bool stays_in_ram =
      !req_.options.store_factors && fits_cache(sv_.factored(), config_.ram_budget);
  STRIPESOLVE_RETURN_IF_ERROR(open_factor_to_make(
      sv_, sv_.report.plan,
      stays_in_ram ? storage::DiskSpace::kSparse : storage::DiskSpace::kReserved));
  io_.set_sources(&sv_.factored(), sv_.writable.get());
  if (sv_.resumed) io_.mark_written(sv_.resume_point.written());
  if (sv_.progress) {
    FactorProgress* p = sv_.progress.get();
    io_.set_write_hook(
        {[p](const cache::CellView& cell) { return p->checksum(cell); },
         [p](const cache::CellView& cell, uint32_t crc) { return p->record(cell, crc); }});
  }
  return Status::ok();
}

Status SolvePhases::triangulate() {
  STRIPESOLVE_RETURN_IF_ERROR(open_factor_objects());
  const Plan& plan = sv_.report.plan;
  SolveReport& report = sv_.report;
  // Dirty parts are written back in the persist step below (timed apart from the arithmetic).
  FactorParams params{.pivot = backend::elimination_pivot(req_.options.pivot),
                      .strategy = req_.options.strategy,
                      .meta_stripes = plan.meta_stripes,
                      .upward_lead = plan.upward_lead,
                      .early_next = engine_ != nullptr ? plan.early_next : 0,
                      .substripe_rows = plan.substripe_rows,
                      .elim_j_workers = plan.elim_j_workers,
                      .lookahead_workers = engine_ != nullptr ? plan.lookahead_workers : 0,
                      .write_back = false,
                      .parts_from_meta_start = engine_ != nullptr,
                      .critical_threads = engine_ == nullptr ? plan.critical_threads : 0,
                      .split_sweeps = engine_ == nullptr && plan.split_sweeps,
                      .rhs_columns = req_.nrhs + kEstimateColumns,
                      .factors_on_host = keeps_factors(req_.options)};
  // A copy of A in the RAM cache for the residual where its budget holds it beside A's cells and
  // the device keeps none (not for gepp, whose object is A^T, nor a resumed factorization, whose
  // reads bring the factors made so far): reserved at the arena's top before the devices pin
  // the arena, so that they pin only the cells' span below it.
  if (!gepp_ && !req_.options.in_place && !sv_.resumed && plan.ram_keeps_original) {
    ram_original_ = RamOriginal::reserve(cache_, sv_.g, cells_bytes(sv_.factored().geometry()));
  }
  if (engine_ != nullptr) {
    const auto t_load = SolveClock::now();
    STRIPESOLVE_ASSIGN_OR_RETURN(
        gpu_elim_, MultiGpuElimination::create(ctx_, req_.engines, *sv_.writable, params, plan));
    // The tier has allocated what it will use: the rest of each device's budget goes back to
    // the other jobs (a tridiagonal batch on the GPU meanwhile), the libraries' slack kept.
    if (sv_.device_reservations != nullptr) {
      const auto held = static_cast<int>(sv_.device_reservations->size());
      for (int d = 0; d < std::min(gpu_elim_->devices(), held); ++d) {
        (*sv_.device_reservations)[static_cast<size_t>(d)].shrink_to(
            gpu_elim_->device_bytes(d) + device_library_slack(plan.gpu_memory));
      }
    }
    bool loaded = false;
    const bool device_copy = !req_.options.in_place && gpu_elim_->keeps_original();
    // One device keeping the whole matrix: no load; the factorization's reads overlap its
    // arithmetic (where a copy of A for the residual is kept, the device's, from those reads).
    // An H200, n = 32768, a RAM cache that holds A, factors not kept: see docs/performance.md.
    const bool streams_a = !req_.options.load_first && plan.device_resident &&
                           gpu_elim_->devices() == 1 && !sv_.resumed &&
                           (device_copy || !ram_original_);
    if (!req_.options.in_place && !streams_a) {
      progress_.begin_phase("load", 0, sv_.g.stripes);
      // Where the device keeps a copy of A for the residual, the stripes go there as they come,
      // else to the copy in RAM.
      std::function<Status(int64_t, const stripe::StripePart&)> keep;
      if (device_copy) {
        keep = [this](int64_t i, const stripe::StripePart& part) {
          return gpu_elim_->keep_original(i, part.data);
        };
      } else if (ram_original_) {
        keep = [this](int64_t i, const stripe::StripePart& part) {
          ram_original_->keep(i, part.data, static_cast<int>(std::min<int64_t>(cores(), 8)));
          return Status::ok();
        };
      }
      STRIPESOLVE_ASSIGN_OR_RETURN(
          loaded,
          load_matrix(ctx_, sv_.factored(), config_.ram_budget - cache_.reserved_bytes(), keep));
    }
    if (device_copy && !loaded && !sv_.resumed) {
      // A RAM cache smaller than A: the device's copy takes each stripe as the factorization
      // first reads it (the hook is cleared after the factorization).
      io_.set_read_hook(
          [elim = gpu_elim_.get()](const cache::CellView& cell, const storage::PartLayout& layout) {
            elim->keep_read(cell, layout);
          });
    } else {
      gpu_elim_->release_original_unless_complete();  // no whole copy made: its memory back
    }
    report.load_seconds = seconds_since(t_load);
  }
  // The CPU tier fills its copy of A as the factorization first reads each stripe. The hook
  // holds the copy too: a batch that took the hook before it is cleared still finds it there.
  if (engine_ == nullptr && ram_original_) {
    io_.set_read_hook(
        [copy = ram_original_](const cache::CellView& cell, const storage::PartLayout& layout) {
          copy->keep_read(cell, layout);
        });
  }
  // The CPU tier: each worker's BLAS calls on its share of the cores (cpu_backend.h), or on one
  // when the sweeps split over the helpers (OpenBLAS's pool serves one caller at a time).
  std::optional<backend::BlasThreadsScope> blas_threads;
  if (engine_ == nullptr) {
    blas_threads.emplace(
        plan.split_sweeps ? 1
                          : static_cast<int>(std::max<int64_t>(1, cores() / plan.elim_j_workers)));
  }
  // The condition estimate's transposed solve starts here where it can (factor_run.h).
  if (estimates_condition() && engine_ == nullptr && !gepp_ && !sv_.resumed) {
    transposed_upper_ = estimator_transposed_start(sv_.g.n);
  }
  const double flops = factorization_flops(sv_.g);
  progress_.begin_phase("factor", flops, sv_.g.stripes);
  const auto t0 = SolveClock::now();
  ResumeStats skipped;
  TransposedUpperPass transposed{transposed_upper_.data()};
  STRIPESOLVE_ASSIGN_OR_RETURN(
      sv_.pivots,
      run_factorization(ctx_, *sv_.writable, params, gpu_elim_.get(), &sv_.max_abs_u,
                        {sv_.resumed ? &sv_.resume_point : nullptr, sv_.progress.get(), &skipped},
                        transposed_upper_.empty() ? nullptr : &transposed));
  io_.set_read_hook({});  // the copies of A the factorization's reads filled are made
  if (ram_original_) {
    // A copy not filled (a stripe first read in part, a load cut short) gives its memory back;
    // on the GPU tier only now, so that no cell lies above the span the devices pinned while
    // they copy cells.
    if (!ram_original_->complete()) ram_original_.reset();
  }
  if (gpu_elim_) gpu_elim_->release_original_unless_complete();
  if (gpu_elim_) report.pinned_bytes = gpu_elim_->pinned_bytes();
  report.condition_seconds_in_factor = transposed.seconds;
  report.resumed = sv_.resumed;
  report.resumed_eliminations = skipped.eliminations;
  report.resumed_updates = skipped.updates;
  if (req_.cancel.cancelled()) return Status::cancelled("dense solve cancelled");
  report.factor_seconds = seconds_since(t0);
  report.gflops = report.factor_seconds > 0 ? flops / report.factor_seconds / 1e9 : 0.0;
  return req_.options.store_factors ? persist() : Status::ok();
}

// Dirty parts to the factor object (they stay cached, clean, for the substitution), the pivots and
// growth beside them, the factor committed and opened read-only.
Status SolvePhases::persist() {
  const auto t_persist = SolveClock::now();
  {
    TraceRecorder::Span span(req_.trace, "master", "write_back");
    STRIPESOLVE_RETURN_IF_ERROR(cache_.write_back());
  }
  STRIPESOLVE_RETURN_IF_ERROR(write_pivots(*sv_.writable, sv_.pivots));
  STRIPESOLVE_RETURN_IF_ERROR(write_max_abs_u(*sv_.writable, sv_.max_abs_u));
  STRIPESOLVE_RETURN_IF_ERROR(sv_.writable->commit());
  io_.set_write_hook({});
  sv_.progress.reset();  // its recorder syncs the factor: stopped before the factor closes
  io_.set_sources(nullptr, nullptr);
  sv_.writable.reset();
  STRIPESOLVE_ASSIGN_OR_RETURN(sv_.factor, sv_.store.open_factor(sv_.report.factor_name));
  sv_.report.persist_seconds = seconds_since(t_persist);
  return Status::ok();
}

void SolvePhases::use_factor_sources() {
  if (sv_.factor) {
    io_.set_sources(sv_.factor.get(), nullptr);
  } else {
    io_.set_sources(sv_.writable.get(), sv_.writable.get());  // not persisted: dirty parts stay
  }
}

Status SolvePhases::solve_columns(double* v, int64_t cols,
                                  const std::function<Status(int64_t)>& on_stripe,
                                  const std::string& phase) {
  const int64_t n = sv_.g.n;
  if (on_device_) {
    // gepp's factors are A^T's: A^-1 = (A^T)^-T.
    STRIPESOLVE_RETURN_IF_ERROR(gepp_ ? gpu_elim_->substitute_transposed(v, cols)
                                      : gpu_elim_->substitute(v, cols));
    return check_finite(v, n, cols);
  }
  use_factor_sources();
  if (gepp_) {
    STRIPESOLVE_RETURN_IF_ERROR(substitute_transposed(ctx_, factor_object(), sv_.pivots, v, cols,
                                                      phase.empty() ? "substitute" : phase));
    return check_finite(v, n, cols);
  }
  return scheduler::substitute(ctx_, factor_object(), sv_.pivots, v, cols, on_stripe, phase);
}

Status SolvePhases::solve_transposed_column(double* v) {
  if (on_device_) {
    STRIPESOLVE_RETURN_IF_ERROR(gepp_ ? gpu_elim_->substitute(v, 1)
                                      : gpu_elim_->substitute_transposed(v, 1));
    return check_finite(v, sv_.g.n, 1);
  }
  use_factor_sources();
  if (gepp_)
    return scheduler::substitute(ctx_, factor_object(), sv_.pivots, v, 1, nullptr, "condition");
  return substitute_transposed(ctx_, factor_object(), sv_.pivots, v);
}

bool SolvePhases::estimates_condition() const {
  // The estimate needs the factors (on the device, in RAM or the store) and ||A||_1 (from the
  // residual pass) and so A: not in place.
  return req_.options.check_quality && !req_.options.in_place;
}

Status SolvePhases::substitute() {
  const DenseSolveOptions& options = req_.options;
  const int64_t n = sv_.g.n;
  const int64_t nrhs = req_.nrhs;
  SolveReport& report = sv_.report;
  const bool estimate = estimates_condition();
  // The transposed solve first where the factorization made its first pass (an overflow there
  // left a NaN: then it comes after, as without): its second pass starts where the
  // factorization left the cache and leaves the first stripes' L for the forward pass, and the
  // unit vector it picks rides along with the solve.
  const bool transposed_first =
      estimate && !transposed_upper_.empty() && std::isfinite(transposed_upper_[0]);
  if (transposed_first) {
    const auto t_condition = SolveClock::now();
    use_factor_sources();
    STRIPESOLVE_RETURN_IF_ERROR(
        substitute_transposed_lower(ctx_, factor_object(), sv_.pivots, transposed_upper_.data()));
    report.condition_seconds += seconds_since(t_condition);
  }
  // The estimator's two fixed vectors ride along as columns nrhs and nrhs + 1 (the same passes
  // over the factors), which saves it two of its usual six solves; after the transposed solve,
  // the unit vector e_j of Hager's first step too. Without it a zero column takes its place:
  // the BLAS calls keep their shapes, so that x has the same bits either way (a resumed
  // factorization makes no transposed start, and its solution must equal an uninterrupted
  // run's bit for bit).
  const int64_t extra = estimate ? kEstimateColumns : 0;
  report.x.assign(req_.b, req_.b + n * nrhs);
  if (extra > 0) {
    const std::vector<double> fixed = estimator_fixed_vectors(n);
    report.x.insert(report.x.end(), fixed.begin(), fixed.end());
  }
  if (extra > 0) report.x.resize(report.x.size() + static_cast<size_t>(n), 0.0);
  if (transposed_first) {
    report.x[static_cast<size_t>(n * (nrhs + 2) + estimator_unit_column(transposed_upper_))] = 1.0;
  }
  double* x = report.x.data();
  // Rows are final as the backward pass leaves them only without column interchanges.
  stream_chunks_ =
      req_.callbacks.on_solution_chunk && !on_device_ &&
      (options.pivot == stripe::PivotMode::kLocal || options.pivot == stripe::PivotMode::kNone) &&
      options.refinement_steps == 0;
  if (on_device_) {
    progress_.begin_phase("substitute", 4.0 * static_cast<double>(n) * n * nrhs, sv_.g.stripes);
  }
  const auto t_subst = SolveClock::now();
  STRIPESOLVE_RETURN_IF_ERROR(solve_columns(
      x, nrhs + extra,
      [&](int64_t i) {
        return stream_chunks_ ? emit_chunk(req_.callbacks, sv_.g, x, nrhs, i) : Status::ok();
      },
      ""));
  report.substitution_seconds = seconds_since(t_subst);
  const std::vector<double> solved_fixed(report.x.begin() + n * nrhs, report.x.end());
  report.x.resize(static_cast<size_t>(n * nrhs));
  if (transposed_first) {
    inverse_norm_ = InverseNormEstimate::from_transposed(n, transposed_upper_, solved_fixed.data());
    // Its one unit solve is made: sharpen(kConditionUnitSolves) only closes it, solving nothing.
    const VectorSolve none = [](double*) {
      return Status::internal("the condition estimate asked for a solve after its last");
    };
    return inverse_norm_->sharpen(none, none, kConditionUnitSolves);
  }
  return estimate ? estimate_condition(solved_fixed) : Status::ok();
}

Result<SolveReport> SolvePhases::finish(SolveClock::time_point start) {
  SolveReport& report = sv_.report;
  const storage::StripeGeometry& g = sv_.g;
  if (req_.callbacks.on_solution_chunk && !stream_chunks_) {
    for (int64_t i = g.stripes - 1; i >= 0; --i) {
      STRIPESOLVE_RETURN_IF_ERROR(emit_chunk(req_.callbacks, g, report.x.data(), req_.nrhs, i));
    }
  }
  report.pivot = req_.options.pivot;
  progress_.begin_phase("done", 0, 0);
  const cache::CacheStats cs = cache_.stats();
  report.cache_hits = cs.hits;
  report.cache_misses = cs.misses;
  report.cache_peak_bytes = cs.peak_bytes;
  report.cache_budget = cs.budget;
  report.io_read_bytes = progress_.io_read_bytes();
  report.io_written_bytes = progress_.io_written_bytes();
  report.seconds = seconds_since(start);
  static const auto log = logger("scheduler");
  if (!report.warning.empty()) log->warn("dense solve of '{}': {}", sv_.name, report.warning);
  log->info(
      "dense solve of '{}' done in {:.3f} s on {}: residual {:.3g}, rcond {:.3g}, growth "
      "{:.3g}, factor {:.2f} GFLOP/s ({:.3f} s){}, substitution {:.3f} s{}, SSD read {} written {}",
      sv_.name, report.seconds, report.device.empty() ? report.backend : report.device,
      report.residual, report.rcond, report.growth, report.gflops, report.factor_seconds,
      report.reused_factors ? " (reused factors)" : "", report.substitution_seconds,
      on_device_ ? " (device)" : "", format_bytes(report.io_read_bytes),
      format_bytes(report.io_written_bytes));
  if (gpu_elim_) gpu_elim_->release_factors();
  return std::move(report);
}

}  // namespace stripesolve::scheduler
