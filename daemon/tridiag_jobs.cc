#include "daemon/tridiag_jobs.h"

#include <fmt/format.h>

#include <array>
#include <optional>
#include <string>
#include <vector>

#include "daemon/tridiag_input.h"
#include "protocol/messages.h"
#include "protocol/npy.h"
#include "tridiag/gpu.h"
#include "tridiag/tridiag.h"

namespace stripesolve::daemon {
namespace {

constexpr std::array<std::string_view, 4> kArrayNames = {"dl", "d", "du", "rhs"};
// Above this the job log warns that the solution is inaccurate (a backward-stable solve of a
// reasonably conditioned system is near 1e-16).
constexpr double kInaccurateResidual = 1e-6;

// The uploaded arrays of a job, their headers and the ragged sizes.
struct Inputs {
  std::array<std::string, 4> bytes;
  std::array<protocol::NpyHeader, 4> headers;
  std::optional<std::vector<int64_t>> sizes;
};

Result<int64_t> upload_id(const nlohmann::json& job, std::string_view field) {
  auto it = job.find(field);
  if (it == job.end()) {
    return Status::invalid_argument(
        fmt::format("missing field '{}' (an uploaded .npy: {{\"upload\": id}})", field));
  }
  if (!it->is_object() || !it->contains("upload")) {
    return Status::invalid_argument(
        fmt::format("field '{}' must be {{\"upload\": id}}, got {}", field, it->dump()));
  }
  auto id = protocol::get_int(*it, "upload", 1, INT64_MAX);
  if (!id.is_ok()) return id.status().with_context(field);
  return *id;
}

Result<std::string> take_upload(UploadStore& uploads, uid_t owner, const nlohmann::json& job,
                                std::string_view field) {
  STRIPESOLVE_ASSIGN_OR_RETURN(int64_t id, upload_id(job, field));
  auto bytes = uploads.take(owner, static_cast<uint64_t>(id));
  if (!bytes.is_ok()) return bytes.status().with_context(field);
  return std::move(bytes).value();
}

Result<std::vector<int64_t>> read_sizes(UploadStore& uploads, uid_t owner,
                                        const nlohmann::json& job) {
  const nlohmann::json& field = job["sizes"];
  if (!field.is_object()) return parse_inline_sizes(field);
  STRIPESOLVE_ASSIGN_OR_RETURN(std::string bytes, take_upload(uploads, owner, job, "sizes"));
  auto header = protocol::inspect_npy(bytes);
  if (!header.is_ok()) return header.status().with_context("sizes");
  if (header->shape.size() != 1) {
    return Status::invalid_argument(
        fmt::format("sizes has shape {}; it must be 1-D", protocol::format_shape(header->shape)));
  }
  auto values = protocol::npy_int_values(bytes, *header);
  if (!values.is_ok()) return values.status().with_context("sizes");
  return std::move(values).value();
}

// Takes every upload the job names before checking any of them, so that none is left behind in
// the store (holding memory until it expires) when the job fails.
Result<Inputs> take_inputs(UploadStore& uploads, uid_t owner, const nlohmann::json& job) {
  Inputs in;
  Status first_error;
  for (std::size_t k = 0; k < kArrayNames.size(); ++k) {
    auto bytes = take_upload(uploads, owner, job, kArrayNames[k]);
    if (bytes.is_ok()) {
      in.bytes[k] = std::move(bytes).value();
    } else if (first_error.is_ok()) {
      first_error = bytes.status();
    }
  }
  if (job.contains("sizes")) {
    auto sizes = read_sizes(uploads, owner, job);
    if (sizes.is_ok()) {
      in.sizes = std::move(sizes).value();
    } else if (first_error.is_ok()) {
      first_error = sizes.status();
    }
  }
  STRIPESOLVE_RETURN_IF_ERROR(first_error);
  for (std::size_t k = 0; k < kArrayNames.size(); ++k) {
    auto header = protocol::inspect_npy(in.bytes[k]);
    if (!header.is_ok()) return header.status().with_context(kArrayNames[k]);
    in.headers[k] = *header;
  }
  return in;
}

double micros_since(Clock::time_point origin, Clock::time_point t) {
  return std::chrono::duration<double, std::micro>(t - origin).count();
}

Result<nlohmann::json> run_tridiag(JobContext& ctx, UploadStore& uploads,
                                   const TridiagJobConfig& config) {
  Job& job = ctx.job();
  STRIPESOLVE_ASSIGN_OR_RETURN(Inputs in, take_inputs(uploads, job.owner(), ctx.params()));
  STRIPESOLVE_ASSIGN_OR_RETURN(TridiagParams params, parse_tridiag_params(ctx.params()));
  const bool have_gpu = tridiag::gpu_available();
  if (params.device == TridiagDevice::kGpu && !have_gpu) {
    return Status::failed_precondition(
        "device 'gpu' was requested but the daemon has no usable GPU (no CUDA device, or built "
        "without CUDA); use device 'cpu' or 'auto'");
  }
  std::vector<NamedHeader> named;
  for (std::size_t k = 0; k < kArrayNames.size(); ++k)
    named.push_back({kArrayNames[k], in.headers[k]});
  STRIPESOLVE_ASSIGN_OR_RETURN(
      TridiagPlan plan, check_tridiag_batch(named, params.layout, in.sizes, config.max_bytes));
  bool use_gpu =
      params.device == TridiagDevice::kGpu || (params.device == TridiagDevice::kAuto && have_gpu);
  ctx.log(fmt::format("tridiagonal batch: {}, {} unknowns, {}; algorithm {}{}, device {}",
                      plan.describe(), plan.unknowns, protocol::npy_dtype_name(plan.dtype),
                      tridiag::algorithm_name(params.algorithm),
                      params.unstable_ok ? " (unstable ok)" : "",
                      tridiag_device_name(params.device)));
  auto progress = [&](std::string_view phase, double fraction) {
    job.set_progress({{"phase", phase},
                      {"fraction", fraction},
                      {"systems", plan.count},
                      {"unknowns", plan.unknowns}});
  };
  auto span = [&](const char* name, Clock::time_point start) {
    job.add_trace_span({name, "tridiag", micros_since(job.created(), start),
                        micros_since(start, Clock::now()), 0});
  };

  // Load: convert each array (float32 widens) and drop its upload before the next, so the peak
  // holds one array twice at most.
  const auto load_start = Clock::now();
  progress("load", 0.0);
  std::array<std::vector<double>, 4> a;
  for (std::size_t k = 0; k < kArrayNames.size(); ++k) {
    auto values = protocol::npy_float_values(in.bytes[k], in.headers[k]);
    if (!values.is_ok()) return values.status().with_context(kArrayNames[k]);
    std::string().swap(in.bytes[k]);
    a[k] = std::move(values).value();
    STRIPESOLVE_RETURN_IF_ERROR(check_finite(kArrayNames[k], a[k], plan));
    progress("load", 0.1 * static_cast<double>(k + 1) / 4);
  }
  span("load", load_start);
  if (ctx.cancelled()) return Status::cancelled("cancelled before the solve");

  std::vector<double> x(plan.unknowns);
  const tridiag::BatchShape shape = plan.shape();
  const tridiag::BatchArrays arrays{a[0].data(), a[1].data(), a[2].data(), a[3].data(), x.data()};
  tridiag::SolveOptions options;
  options.algorithm = params.algorithm;
  options.require_stable = !params.unstable_ok;
  options.threads = static_cast<unsigned>(config.threads);
  std::vector<std::string> notes;
  if (params.device == TridiagDevice::kAuto) {
    notes.push_back(have_gpu ? "device auto chose the GPU"
                             : "device auto chose the CPU (no GPU available)");
  }
  progress("solve", 0.1);
  const auto solve_start = Clock::now();
  Result<tridiag::SolveReport> report = Status::internal("the batch was not solved");
  if (use_gpu) {
    tridiag::GpuOptions gpu;
    gpu.solve = options;
    gpu.device_memory_budget = config.gpu_memory;
    report = tridiag::solve_batch_gpu(shape, arrays, gpu);
    const StatusCode code = report.is_ok() ? StatusCode::kOk : report.status().code();
    if (params.device == TridiagDevice::kAuto &&
        (code == StatusCode::kUnimplemented || code == StatusCode::kResourceExhausted)) {
      notes.push_back("the GPU could not take the batch (" + report.status().message() +
                      "); solved on the CPU");
      use_gpu = false;
      report = tridiag::solve_batch(shape, arrays, options);
    }
  } else {
    report = tridiag::solve_batch(shape, arrays, options);
  }
  const double seconds = std::chrono::duration<double>(Clock::now() - solve_start).count();
  span("solve", solve_start);
  // Breakdown and singular systems (kNumerical) end the job FAILED with tridiag's message.
  if (!report.is_ok()) return report.status();
  if (ctx.cancelled())
    return Status::cancelled("cancelled during the solve (the solution was discarded)");

  progress("check", 0.9);
  const auto check_start = Clock::now();
  const ResidualSummary residual =
      max_relative_residual(plan, a[0].data(), a[1].data(), a[2].data(), a[3].data(), x.data());
  span("check", check_start);
  for (auto& a_k : a) std::vector<double>().swap(a_k);
  notes.insert(notes.end(), report->notes.begin(), report->notes.end());
  for (const std::string& note : notes) ctx.log("note: " + note);
  const std::string algorithm(tridiag::algorithm_name(report->algorithm));
  const char* device = use_gpu ? "gpu" : "cpu";
  ctx.log(
      fmt::format("solved with {} on the {} in {:.3f} s; max relative residual {:.3e} (system {})",
                  algorithm, device, seconds, residual.max_relative, residual.worst_system));
  if (!(residual.max_relative <= kInaccurateResidual)) {
    ctx.warn(fmt::format("relative residual {:.3e} in system {}: the solution is inaccurate",
                         residual.max_relative, residual.worst_system));
  }
  nlohmann::json result = {
      {"shape", plan.array_shape},
      {"systems", plan.count},
      {"unknowns", plan.unknowns},
      {"layout", plan.layout == tridiag::BatchLayout::kRagged        ? "ragged"
                 : plan.layout == tridiag::BatchLayout::kInterleaved ? "interleaved"
                                                                     : "strided"},
      {"dtype", protocol::npy_dtype_name(plan.dtype)},
      {"algorithm", algorithm},
      {"requested_algorithm", tridiag::algorithm_name(params.algorithm)},
      {"device", device},
      {"seconds", seconds},
      {"max_relative_residual", residual.max_relative},
      {"worst_system", residual.worst_system},
      {"notes", notes}};
  STRIPESOLVE_RETURN_IF_ERROR(job.set_solution(plan.array_shape, std::move(x)));
  progress("done", 1.0);
  return result;
}

}  // namespace

void register_tridiag_jobs(JobRegistry& registry, UploadStore& uploads,
                           const TridiagJobConfig& config) {
  registry.add("tridiag_solve", Lane::kTridiag,
               [&uploads, &config](JobContext& ctx) { return run_tridiag(ctx, uploads, config); });
}

}  // namespace stripesolve::daemon
