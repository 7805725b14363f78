#include "daemon/tridiag_jobs.h"

#include <algorithm>
#include <array>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "daemon/job_files.h"
#include "daemon/npy_file.h"
#include "daemon/tridiag_arrays.h"
#include "daemon/tridiag_auto_device.h"
#include "daemon/tridiag_input.h"
#include "daemon/tridiag_sources.h"
#include "gpu/devices.h"
#include "protocol/messages.h"
#include "protocol/npy.h"
#include "tridiag/gpu.h"
#include "tridiag/tridiag.h"

namespace stripesolve::daemon {
namespace {

// Above this the job log warns that the solution is inaccurate (a backward-stable solve of a
// reasonably conditioned system is near 1e-16).
constexpr double kInaccurateResidual = 1e-6;

// At most this many of the systems that fell back are listed in the result (then the count).
constexpr std::size_t kListedFallbacks = 8;

nlohmann::json first_fallbacks(const std::vector<std::size_t>& fell_back) {
  const std::size_t listed = std::min(fell_back.size(), kListedFallbacks);
  return std::vector<std::size_t>(fell_back.begin(),
                                  fell_back.begin() + static_cast<std::ptrdiff_t>(listed));
}

// Why the result may not be trusted, or empty. The solver's own warning (CPU: it names near
// breakdowns too); otherwise the daemon's check, which covers every device: a plain COMPLETED
// never has a system above its backward-error tolerance.
std::string quality_warning(const tridiag::SolveReport& report, const ResidualSummary& residual,
                            std::string_view algorithm, std::string_view device) {
  if (!report.warning.empty()) return report.warning;
  if (residual.above_tolerance == 0) return {};
  return fmt::format(
      "{} systems above the backward-error tolerance (worst: system {}: backward error {:.2e} "
      "against {:.2e}) after {} on the {}; try algorithm gepp on the CPU",
      residual.above_tolerance, residual.worst_backward_system, residual.max_backward_error,
      residual.tolerance, algorithm, device);
}

double micros_since(Clock::time_point origin, Clock::time_point t) {
  return std::chrono::duration<double, std::micro>(t - origin).count();
}

// The devices batches are shared by (engine.devices, else the first engine.gpus) less those that
// hit a sticky CUDA error (gpu/devices.h); kUnavailable naming them when none is left.
Result<std::vector<int>> batch_devices(const TridiagJobConfig& config, int available) {
  STRIPESOLVE_ASSIGN_OR_RETURN(const std::vector<int> chosen,
                               gpu::choose_devices(config.devices, config.gpus, available));
  std::vector<int> usable = gpu::without_failed(chosen);
  if (usable.empty() && !chosen.empty()) {
    return Status::unavailable("every GPU the daemon's jobs use has failed (" +
                               gpu::describe_failures(chosen) +
                               "); restart the daemon to use them again");
  }
  return usable;
}

// The batch on the GPUs. The job's device memory comes from the budget the daemon's GPU jobs
// share (a dense solve's GPU tier holds its own from it): what the batch needs (its five arrays
// and about as much workspace), at most tridiag.gpu_memory or 90% of the free memory; when the
// budget cannot give it, kResourceExhausted naming both figures. The batch is shared by the
// daemon's devices (engine.devices or engine.gpus; tridiag::solve_batch_gpus: runs of whole
// systems, an interleaved batch's as columns of its rows), each with its part's share of the
// memory from its own budget.
Result<tridiag::SolveReport> solve_on_gpus(const tridiag::BatchShape& shape,
                                           const tridiag::BatchArrays& arrays,
                                           const tridiag::SolveOptions& options,
                                           const TridiagPlan& plan,
                                           const TridiagJobConfig& config) {
  tridiag::GpuOptions gpu;
  gpu.solve = options;
  const std::vector<gpu::DeviceInfo> all = gpu::list_devices();
  STRIPESOLVE_ASSIGN_OR_RETURN(std::vector<int> devices,
                               batch_devices(config, static_cast<int>(all.size())));
  if (devices.empty()) return Status::unavailable("the daemon sees no CUDA device");
  devices.resize(std::min(devices.size(), std::max<std::size_t>(1, shape.systems())));
  uint64_t cap = config.gpu_memory;
  if (cap == 0) cap = all[static_cast<std::size_t>(devices.front())].free_memory / 10 * 9;
  const uint64_t parts = devices.size();
  const uint64_t need = std::min<uint64_t>(
      cap, (sizeof(double) * 2 * 5 * static_cast<uint64_t>(plan.unknowns) + parts - 1) / parts);
  std::vector<gpu::DeviceBudget::Reservation> held;
  for (const int d : devices) {
    STRIPESOLVE_ASSIGN_OR_RETURN(
        auto r, gpu::DeviceBudget::of(d).reserve(need, "tridiagonal batch on the GPU"));
    held.push_back(std::move(r));
  }
  gpu.device = devices.front();
  gpu.device_memory_budget = need;
  return tridiag::solve_batch_gpus(shape, arrays, gpu, devices);
}

// What the phases of one job share: the job, its inputs, its checked parameters and the batch's
// plan.
struct TridiagRun {
  TridiagRun(JobContext& c, const TridiagJobConfig& cfg) : ctx(c), config(cfg) {}

  JobContext& ctx;
  const TridiagJobConfig& config;
  TridiagInputs in;
  TridiagParams params;
  TridiagPlan plan;
  int out_fd = -1;  // the client's file for the solution, or -1
  bool have_gpu = false;
  bool use_gpu = false;     // where the batch goes (device auto: AutoDevice's choice)
  std::string device_note;  // why, for device auto
  std::string gpus_failed;  // why have_gpu is false on a host with GPUs (they failed), or empty
  unsigned threads = 0;
  // Whether the load scanned the inputs for non-finite values; else the CPU solver refuses
  // them as it reads them (SolveOptions::refuse_non_finite).
  bool inputs_scanned = false;

  void progress(std::string_view phase, double fraction) const {
    ctx.job().set_progress({{"phase", phase},
                            {"fraction", fraction},
                            {"systems", plan.count},
                            {"unknowns", plan.unknowns}});
  }
  void span(const char* name, Clock::time_point start) const {
    Job& job = ctx.job();
    job.add_trace_span({name, "tridiag", micros_since(job.created(), start),
                        micros_since(start, Clock::now()), 0});
  }
};

// Takes the inputs and checks the request (parameters, device, the arrays' shapes, the output
// file) before any array is read.
Status prepare_run(TridiagRun& r, UploadStore& uploads) {
  STRIPESOLVE_ASSIGN_OR_RETURN(r.in, take_tridiag_inputs(r.ctx, uploads, r.config.max_bytes));
  STRIPESOLVE_ASSIGN_OR_RETURN(r.params, parse_tridiag_params(r.ctx.params()));
  r.have_gpu = tridiag::gpu_available();
  if (r.have_gpu) {
    auto usable = batch_devices(r.config, gpu::device_count());
    if (!usable.is_ok() && r.params.device == TridiagDevice::kGpu) {
      return Status::failed_precondition("device 'gpu' was requested but " +
                                         usable.status().message() +
                                         "; use device 'cpu' or 'auto'");
    }
    if (!usable.is_ok()) r.gpus_failed = usable.status().message();
    r.have_gpu = usable.is_ok() && !usable->empty();
  }
  if (r.params.device == TridiagDevice::kGpu && !r.have_gpu) {
    return Status::failed_precondition(
        "device 'gpu' was requested but the daemon has no usable GPU (no CUDA device, or built "
        "without CUDA); use device 'cpu' or 'auto'");
  }
  std::vector<NamedHeader> named;
  for (std::size_t k = 0; k < kTridiagArrays.size(); ++k)
    named.push_back({kTridiagArrays[k], r.in.arrays[k].header});
  STRIPESOLVE_ASSIGN_OR_RETURN(
      r.plan, check_tridiag_batch(named, r.params.layout, r.in.sizes, r.config.max_bytes));
  // The solution goes into the client's file when it passed one ("out"), else it is kept for
  // `result` to stream. The output is checked before the inputs are read.
  if (names_file(r.ctx.params(), "out")) {
    STRIPESOLVE_ASSIGN_OR_RETURN(r.out_fd, job_output_file(r.ctx, "out"));
  }
  r.threads = static_cast<unsigned>(r.config.threads);
  return Status::ok();
}

// The first non-finite input value, in the order dl, d, du, rhs: "d[17] is not finite (nan):
// system 2, row 16".
Status check_inputs_finite(const TridiagPlan& plan, const tridiag::BatchArrays& a,
                           unsigned threads) {
  const std::array<const double*, 4> inputs{a.dl, a.d, a.du, a.f};
  for (std::size_t k = 0; k < inputs.size(); ++k) {
    STRIPESOLVE_RETURN_IF_ERROR(check_finite(
        kTridiagArrays[k], std::span<const double>(inputs[k], plan.unknowns), plan, threads));
  }
  return Status::ok();
}

// The CPU path as a job runs it: the solver refuses non-finite values as it reads them and
// reports the residuals itself.
PathRun cpu_path(const TridiagJobConfig& config) {
  return [&config](const TridiagPlan& plan, const tridiag::BatchArrays& arrays) {
    tridiag::SolveOptions options;
    options.threads = static_cast<unsigned>(config.threads);
    options.refuse_non_finite = true;
    return tridiag::solve_batch(plan.shape(), arrays, options).status();
  };
}

// The GPU path as a job runs it: the inputs scanned, the batch on the daemon's GPUs (copies
// both ways), the daemon's residual check.
PathRun gpu_path(const TridiagJobConfig& config) {
  return [&config](const TridiagPlan& plan, const tridiag::BatchArrays& arrays) {
    const auto threads = static_cast<unsigned>(config.threads);
    STRIPESOLVE_RETURN_IF_ERROR(check_inputs_finite(plan, arrays, threads));
    STRIPESOLVE_RETURN_IF_ERROR(
        solve_on_gpus(plan.shape(), arrays, tridiag::SolveOptions{}, plan, config).status());
    max_relative_residual(plan, arrays.dl, arrays.d, arrays.du, arrays.f, arrays.x, threads);
    return Status::ok();
  };
}

// Where the batch goes: the device the job names, or under auto the CPU without a GPU and else
// the path AutoDevice predicts quicker for this many unknowns.
void choose_device(TridiagRun& r, AutoDevice& auto_device) {
  switch (r.params.device) {
    case TridiagDevice::kGpu:
      r.use_gpu = true;
      return;
    case TridiagDevice::kCpu:
      r.use_gpu = false;
      return;
    case TridiagDevice::kAuto:
      break;
  }
  if (!r.have_gpu) {
    r.use_gpu = false;
    r.device_note = r.gpus_failed.empty() ? "device auto chose the CPU (no GPU available)"
                                          : "device auto chose the CPU (" + r.gpus_failed + ")";
    return;
  }
  const auto start = Clock::now();
  AutoChoice choice = auto_device.choose(r.plan.unknowns, cpu_path(r.config), gpu_path(r.config),
                                         [&](const std::string& line) { r.ctx.log(line); });
  if (choice.measured_now) r.span("measure paths", start);
  r.use_gpu = choice.gpu;
  r.device_note = std::move(choice.note);
}

void log_batch_request(const TridiagRun& r) {
  const TridiagParams& p = r.params;
  r.ctx.log(fmt::format("tridiagonal batch: {}, {} unknowns, {}; algorithm {}{}{}, device {}",
                        r.plan.describe(), r.plan.unknowns, protocol::npy_dtype_name(r.plan.dtype),
                        tridiag::algorithm_name(p.algorithm), p.unstable_ok ? " (unstable ok)" : "",
                        p.fallback ? " (fallback to gepp)" : "", tridiag_device_name(p.device)));
}

// The batch in memory: the four input arrays and the solution's.
struct LoadedBatch {
  std::array<TridiagArray, 4> a;
  TridiagSolution solution;

  tridiag::BatchArrays arrays() const {
    return {a[0].data(), a[1].data(), a[2].data(), a[3].data(), solution.x.data()};
  }
};

// Load: a passed float64 file is mapped where it lies (no copy), other files are read and
// converted (float32 widens); an upload is converted and dropped before the next, so the
// peak holds one array twice at most. The values are scanned here for the GPU only: the CPU
// solver tests them as it reads them, which saves a pass over the four arrays (a third of the
// CPU job's time at 2^24 unknowns).
Result<LoadedBatch> load_batch(TridiagRun& r) {
  const auto load_start = Clock::now();
  r.progress("load", 0.0);
  LoadedBatch l;
  for (std::size_t k = 0; k < kTridiagArrays.size(); ++k) {
    auto values = load_array(r.in.arrays[k], r.plan.unknowns);
    if (!values.is_ok()) return values.status().with_context(kTridiagArrays[k]);
    l.a[k] = std::move(values).value();
    r.progress("load", 0.1 * static_cast<double>(k + 1) / 4);
  }
  if (r.use_gpu) {
    STRIPESOLVE_RETURN_IF_ERROR(check_inputs_finite(r.plan, l.arrays(), r.threads));
    r.inputs_scanned = true;
  }
  STRIPESOLVE_ASSIGN_OR_RETURN(l.solution, solution_array(r.out_fd, r.plan));
  r.span("load", load_start);
  STRIPESOLVE_RETURN_IF_ERROR(check_not_truncated(l.a, l.solution.x));
  return l;
}

// What the solve hands on: the solver's report, where it ran, how long it took, and the notes
// for the job (the daemon's, then the solver's).
struct SolvedBatch {
  tridiag::SolveReport report;
  bool on_gpu = false;
  double seconds = 0;
  std::vector<std::string> notes;
};

tridiag::SolveOptions solve_options(const TridiagRun& r) {
  tridiag::SolveOptions options;
  options.algorithm = r.params.algorithm;
  options.require_stable = !r.params.unstable_ok;
  options.fallback = r.params.fallback;
  options.threads = r.threads;
  options.refuse_non_finite = !r.inputs_scanned;
  return options;
}

// Solve: on the GPUs when chosen; with device auto, a batch the GPU cannot take is solved on the
// CPU instead.
Result<SolvedBatch> solve_on_chosen_device(const TridiagRun& r, const LoadedBatch& l) {
  const tridiag::BatchShape shape = r.plan.shape();
  const tridiag::BatchArrays arrays = l.arrays();
  const tridiag::SolveOptions options = solve_options(r);
  SolvedBatch s;
  s.on_gpu = r.use_gpu;
  if (!r.device_note.empty()) s.notes.push_back(r.device_note);
  r.progress("solve", 0.1);
  const auto solve_start = Clock::now();
  Result<tridiag::SolveReport> report = Status::internal("the batch was not solved");
  if (s.on_gpu) {
    report = solve_on_gpus(shape, arrays, options, r.plan, r.config);
    const StatusCode code = report.is_ok() ? StatusCode::kOk : report.status().code();
    if (r.params.device == TridiagDevice::kAuto &&
        (code == StatusCode::kUnimplemented || code == StatusCode::kResourceExhausted)) {
      s.notes.push_back("the GPU could not take the batch (" + report.status().message() +
                        "); solved on the CPU");
      s.on_gpu = false;
      report = tridiag::solve_batch(shape, arrays, options);
    }
  } else {
    report = tridiag::solve_batch(shape, arrays, options);
  }
  s.seconds = std::chrono::duration<double>(Clock::now() - solve_start).count();
  r.span("solve", solve_start);
  if (!report.is_ok() && !r.inputs_scanned) {
    // The solver refused a non-finite input (or failed on one, as x became non-finite): the
    // scan names the batch's first, as the load does for the GPU.
    STRIPESOLVE_RETURN_IF_ERROR(check_inputs_finite(r.plan, l.arrays(), r.threads));
  }
  // Breakdown and singular systems (kNumerical) end the job FAILED with tridiag's message.
  if (!report.is_ok()) return report.status();
  s.report = std::move(report).value();
  s.notes.insert(s.notes.end(), s.report.notes.begin(), s.report.notes.end());
  return s;
}

// The figures of the daemon's check as the CPU solver's report has them (it checked every
// system's kept solution in its own pass: the same figures to the bit).
ResidualSummary summary_from_report(const tridiag::SolveReport& report) {
  ResidualSummary s;
  s.max_relative = report.relative_residual->value;
  s.worst_system = report.relative_residual->system;
  s.max_backward_error = report.max_backward_error;
  s.worst_backward_system = report.worst_system;
  s.tolerance = report.tolerance;
  s.above_tolerance = report.above_tolerance;
  return s;
}

// Check: every system's residual (the solver's own figures where it reports them: the CPU's),
// then that the client truncated no file meanwhile. The input arrays are released after.
Result<ResidualSummary> check_solution(const TridiagRun& r, const SolvedBatch& s, LoadedBatch& l) {
  r.progress("check", 0.9);
  const auto check_start = Clock::now();
  auto& a = l.a;
  const TridiagArray& x = l.solution.x;
  const ResidualSummary residual =
      s.report.relative_residual
          ? summary_from_report(s.report)
          : max_relative_residual(r.plan, a[0].data(), a[1].data(), a[2].data(), a[3].data(),
                                  x.data(), r.threads);
  r.span("check", check_start);
  STRIPESOLVE_RETURN_IF_ERROR(check_not_truncated(a, x));
  for (auto& a_k : a) a_k = TridiagArray{};
  return residual;
}

const char* solved_on(const SolvedBatch& s) {
  return s.on_gpu ? "gpu" : "cpu";
}

void log_batch_outcome(const TridiagRun& r, const SolvedBatch& s, const ResidualSummary& residual) {
  for (const std::string& note : s.notes) r.ctx.log("note: " + note);
  r.ctx.log(
      fmt::format("solved with {} on the {} in {:.3f} s; max relative residual {:.3e} (system {})",
                  tridiag::algorithm_name(s.report.algorithm), solved_on(s), s.seconds,
                  residual.max_relative, residual.worst_system));
  if (!(residual.max_relative <= kInaccurateResidual)) {
    r.ctx.warn(fmt::format("relative residual {:.3e} in system {}: the solution is inaccurate",
                           residual.max_relative, residual.worst_system));
  }
}

nlohmann::json tridiag_result(const TridiagRun& r, const SolvedBatch& s,
                              const ResidualSummary& residual) {
  const TridiagPlan& plan = r.plan;
  const std::string algorithm(tridiag::algorithm_name(s.report.algorithm));
  const std::string warning = quality_warning(s.report, residual, algorithm, solved_on(s));
  nlohmann::json result = {
      {"shape", plan.array_shape},
      {"systems", plan.count},
      {"unknowns", plan.unknowns},
      {"layout", plan.layout == tridiag::BatchLayout::kRagged        ? "ragged"
                 : plan.layout == tridiag::BatchLayout::kInterleaved ? "interleaved"
                                                                     : "strided"},
      {"dtype", protocol::npy_dtype_name(plan.dtype)},
      {"algorithm", algorithm},
      {"requested_algorithm", tridiag::algorithm_name(r.params.algorithm)},
      {"device", solved_on(s)},
      {"seconds", s.seconds},
      {"max_relative_residual", residual.max_relative},
      {"worst_system", residual.worst_system},
      {"backward_error", residual.max_backward_error},
      {"worst_backward_system", residual.worst_backward_system},
      {"tolerance", residual.tolerance},
      {"fell_back", s.report.fell_back.size()},
      {"fell_back_systems", first_fallbacks(s.report.fell_back)},
      {"notes", s.notes}};
  // The job manager ends a result with a warning COMPLETED_WITH_WARNING.
  if (!warning.empty()) result["warning"] = warning;
  return result;
}

// Deliver: the solution is in the client's file (written here when it could not be mapped), or
// handed to the job for `result` to stream.
Status deliver_solution(const TridiagRun& r, const TridiagSolution& solution,
                        nlohmann::json& result) {
  const TridiagArray& x = solution.x;
  if (!solution.out) {
    return r.ctx.job().set_solution(r.plan.array_shape,
                                    std::vector<double>(x.data(), x.data() + x.size));
  }
  if (x.mapping.data() == nullptr) {  // not mapped: write what the solver produced
    r.progress("write", 0.95);
    const auto write_start = Clock::now();
    Status st = solution.out->write(0, x.data(), x.size);
    if (!st.is_ok()) return st.with_context("writing the solution into the client's file (out)");
    r.span("write", write_start);
  }
  result["output"] = {{"bytes", solution.out->file_bytes()},
                      {"mapped", x.mapping.data() != nullptr}};
  return Status::ok();
}

Result<nlohmann::json> run_tridiag(JobContext& ctx, UploadStore& uploads,
                                   const TridiagJobConfig& config, AutoDevice& auto_device) {
  TridiagRun r{ctx, config};
  STRIPESOLVE_RETURN_IF_ERROR(prepare_run(r, uploads));
  log_batch_request(r);
  choose_device(r, auto_device);
  STRIPESOLVE_ASSIGN_OR_RETURN(LoadedBatch loaded, load_batch(r));
  if (ctx.cancelled()) return Status::cancelled("cancelled before the solve");
  STRIPESOLVE_ASSIGN_OR_RETURN(SolvedBatch solved, solve_on_chosen_device(r, loaded));
  if (ctx.cancelled())
    return Status::cancelled("cancelled during the solve (the solution was discarded)");
  STRIPESOLVE_ASSIGN_OR_RETURN(ResidualSummary residual, check_solution(r, solved, loaded));
  log_batch_outcome(r, solved, residual);
  nlohmann::json result = tridiag_result(r, solved, residual);
  STRIPESOLVE_RETURN_IF_ERROR(deliver_solution(r, loaded.solution, result));
  r.progress("done", 1.0);
  return result;
}

}  // namespace

void register_tridiag_jobs(JobRegistry& registry, UploadStore& uploads,
                           const TridiagJobConfig& config, AutoDevice& auto_device) {
  registry.add("tridiag_solve", Lane::kTridiag, [&uploads, &config, &auto_device](JobContext& ctx) {
    return run_tridiag(ctx, uploads, config, auto_device);
  });
}

}  // namespace stripesolve::daemon
