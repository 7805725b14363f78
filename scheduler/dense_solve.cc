#include "scheduler/dense_solve.h"

#include <algorithm>
#include <chrono>
#include <memory>

#include "backend/cpu/cpu_backend.h"
#include "backend/device_engine.h"
#include "base/logging.h"
#include "base/units.h"
#include "gpu/devices.h"
#include "scheduler/dense_plan.h"
#include "scheduler/factor_blobs.h"
#include "scheduler/multi_gpu_elimination.h"
#include "scheduler/solve_phases.h"
#include "scheduler/transposed_solve.h"

namespace stripesolve::scheduler {

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
  config->devices.clear();  // the engines are the devices now
  config->gpu_memory = 0;
  if (engine == nullptr) return Status::ok();
  // "device 1: NVIDIA H200 (...)", "2 devices (1, 0): NVIDIA H200 (...), ..." (the host
  // engine of the tests has no ordinal).
  std::string ordinals;
  for (const backend::DeviceEngine* e : engines) {
    if (e->device() >= 0) ordinals += (ordinals.empty() ? "" : ", ") + std::to_string(e->device());
  }
  if (engines.size() == 1) {
    report->device = (ordinals.empty() ? "" : "device " + ordinals + ": ") + engine->description();
  } else {
    report->device = std::to_string(engines.size()) + " devices" +
                     (ordinals.empty() ? "" : " (" + ordinals + ")") + ": " +
                     engine->description() + ", ...";
  }
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
      const auto t0 = SolveClock::now();
      STRIPESOLVE_ASSIGN_OR_RETURN(sv.transposed,
                                   open_transpose(sv.store, *sv.a, ram_budget, cancel));
      sv.report.transpose_seconds = std::chrono::duration<double>(SolveClock::now() - t0).count();
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
Result<SolveReport> solve_once(const SolveRequest& asked) {
  const auto start = SolveClock::now();
  SolveRequest req = asked;
  const std::string name(req.matrix_name);
  // gepp's factors are written back on the GPU tier, whatever the options: where they do not stay
  // on the device, its transposed solve reads them on the host.
  if (req.options.pivot == stripe::PivotMode::kGepp && !req.engines.empty()) {
    req.options.store_factors = true;
  }
  STRIPESOLVE_RETURN_IF_ERROR(check_request(name, req.b, req.nrhs, req.options));
  STRIPESOLVE_ASSIGN_OR_RETURN(storage::MatrixInfo info, req.store.info(name));
  Solve sv{req.store, name,    req.options, info.geometry, {}, {}, nullptr, nullptr,
           nullptr,   nullptr, {},          false,         {}, -1, nullptr, nullptr};
  SolveReport& report = sv.report;
  EngineConfig config = req.config;
  std::vector<gpu::DeviceBudget::Reservation> device_reservations;
  STRIPESOLVE_RETURN_IF_ERROR(
      reserve_devices(req.engines, req.config, name, &config, &report, &device_reservations));
  sv.device_reservations = &device_reservations;
  STRIPESOLVE_ASSIGN_OR_RETURN(report.plan, plan_dense(sv.g.n, sv.g.stripe_rows, config,
                                                       describe_machine(config, info.path_count),
                                                       keeps_factors(req.options)));
  STRIPESOLVE_RETURN_IF_ERROR(check_schedule_fits(report.plan, req.options.strategy,
                                                  req.engines.empty() ? 0 : report.plan.early_next,
                                                  "matrix '" + name + "'"));
  static const auto log = logger("scheduler");
  log->info("dense solve of '{}' ({} pivoting, {} strategy, {} backend{}{}): {}", name,
            backend::pivot_mode_name(req.options.pivot), strategy_name(req.options.strategy),
            report.backend, report.device.empty() ? "" : " on ", report.device,
            plan_to_text(report.plan));
  report.factor_name = factor_name_for(name, req.options);
  STRIPESOLVE_RETURN_IF_ERROR(open_inputs(sv, info, config.ram_budget, req.cancel));

  SolvePhases phases(req, sv, config);
  STRIPESOLVE_RETURN_IF_ERROR(phases.factor());
  STRIPESOLVE_RETURN_IF_ERROR(phases.substitute());
  STRIPESOLVE_RETURN_IF_ERROR(phases.check());
  return phases.finish(start);
}

// solve_once(), and the safety net's switch (transposed_solve.h): a kRow solve whose pivoting
// grew is made again with kGepp. X goes to on_solution_chunk only once it is final, so a solve
// that may switch hands it over here, after the second solve (kRow streams no chunks anyway).
Result<SolveReport> solve_with(const SolveRequest& req) {
  const DenseSolveOptions& options = req.options;
  const bool may_switch = options.pivot == stripe::PivotMode::kRow && !options.in_place &&
                          options.check_quality &&
                          options.refinement_steps == DenseSolveOptions::kRefineAuto;
  if (!may_switch) return solve_once(req);
  SolveRequest held = req;
  held.callbacks.on_solution_chunk = nullptr;
  STRIPESOLVE_ASSIGN_OR_RETURN(SolveReport report, solve_once(held));
  if (should_switch_to_gepp(options, report)) {
    static const auto log = logger("scheduler");
    const std::string note = gepp_switch_note(report);
    log->warn("dense solve of '{}': {}", req.matrix_name, note);
    SolveRequest gepp = held;
    gepp.options.pivot = stripe::PivotMode::kGepp;
    STRIPESOLVE_ASSIGN_OR_RETURN(SolveReport second, solve_once(gepp));
    second.pivot_switch = note;
    second.seconds += report.seconds;
    second.io_read_bytes += report.io_read_bytes;
    second.io_written_bytes += report.io_written_bytes;
    report = std::move(second);
  }
  if (req.callbacks.on_solution_chunk) {
    STRIPESOLVE_ASSIGN_OR_RETURN(storage::MatrixInfo info, req.store.info(req.matrix_name));
    for (int64_t i = info.geometry.stripes - 1; i >= 0; --i) {
      STRIPESOLVE_RETURN_IF_ERROR(
          emit_chunk(req.callbacks, info.geometry, report.x.data(), req.nrhs, i));
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
  // engine.devices in their order, or the first engine.gpus devices (0: every device).
  std::vector<std::unique_ptr<backend::DeviceEngine>> owned;
  std::vector<backend::DeviceEngine*> engines;
  if (which == ComputeBackend::kCuda) {
    STRIPESOLVE_ASSIGN_OR_RETURN(
        const std::vector<int> chosen,
        gpu::choose_devices(config.devices, config.gpus, std::max(1, gpu::device_count())));
    // Failed devices left out (resolve_backend made sure one is left, and warned).
    for (const int d : gpu::without_failed(chosen)) {
      STRIPESOLVE_ASSIGN_OR_RETURN(
          auto engine, backend::DeviceEngine::open(
                           d, {.panel_sms = static_cast<int>(config.gpu_panel_sms),
                               .update_k = config.gpu_update_k,
                               .panel_blocks = static_cast<int>(config.gpu_panel_blocks)}));
      engines.push_back(engine.get());
      owned.push_back(std::move(engine));
    }
  }
  return solve_with(
      {*cpu, engines, store, matrix_name, b, nrhs, options, config, cancel, callbacks, trace});
}

Result<SolveReport> solve_dense(backend::Backend& backend, storage::MatrixStore& store,
                                std::string_view matrix_name, const double* b, int64_t nrhs,
                                const DenseSolveOptions& options, const EngineConfig& config,
                                CancelToken& cancel, const SolveCallbacks& callbacks,
                                TraceRecorder* trace) {
  const std::vector<backend::DeviceEngine*> none;
  return solve_with(
      {backend, none, store, matrix_name, b, nrhs, options, config, cancel, callbacks, trace});
}

Result<SolveReport> solve_dense(backend::Backend& backend, backend::DeviceEngine* engine,
                                storage::MatrixStore& store, std::string_view matrix_name,
                                const double* b, int64_t nrhs, const DenseSolveOptions& options,
                                const EngineConfig& config, CancelToken& cancel,
                                const SolveCallbacks& callbacks, TraceRecorder* trace) {
  std::vector<backend::DeviceEngine*> engines;
  if (engine != nullptr) engines.push_back(engine);
  return solve_with(
      {backend, engines, store, matrix_name, b, nrhs, options, config, cancel, callbacks, trace});
}

Result<SolveReport> solve_dense(backend::Backend& backend,
                                const std::vector<backend::DeviceEngine*>& engines,
                                storage::MatrixStore& store, std::string_view matrix_name,
                                const double* b, int64_t nrhs, const DenseSolveOptions& options,
                                const EngineConfig& config, CancelToken& cancel,
                                const SolveCallbacks& callbacks, TraceRecorder* trace) {
  return solve_with(
      {backend, engines, store, matrix_name, b, nrhs, options, config, cancel, callbacks, trace});
}

}  // namespace stripesolve::scheduler
