#include "daemon/tridiag_jobs.h"

#include <algorithm>
#include <array>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "daemon/client_mapping.h"
#include "daemon/job_files.h"
#include "daemon/npy_file.h"
#include "daemon/tridiag_input.h"
#include "gpu/devices.h"
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

// One input array of a job: an upload's image, or a file the client passed (read in place).
struct Source {
  std::string bytes;  // the upload, or empty
  int fd = -1;        // the passed file, or -1
  protocol::NpyHeader header;
};

// The input arrays of a job, their headers and the ragged sizes.
struct Inputs {
  std::array<Source, 4> arrays;
  std::optional<std::vector<int64_t>> sizes;
};

Result<int64_t> upload_id(const nlohmann::json& job, std::string_view field) {
  auto it = job.find(field);
  if (it == job.end()) {
    return Status::invalid_argument(fmt::format(
        "missing field '{}' (an .npy file: {{\"fd\": i}}, or an upload: {{\"upload\": id}})",
        field));
  }
  if (!it->is_object() || !it->contains("upload")) {
    return Status::invalid_argument(fmt::format(
        "field '{}' must be {{\"fd\": i}} or {{\"upload\": id}}, got {}", field, it->dump()));
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

// The sizes of a ragged batch: inline, an upload or a passed file. A file's entries are
// bounded before they are read: no more than rhs has elements (every system has an unknown),
// and rhs within tridiag.max_bytes.
Result<std::vector<int64_t>> read_sizes(const JobContext& ctx, const std::string& upload,
                                        const protocol::NpyHeader& rhs, uint64_t max_bytes) {
  const nlohmann::json& field = ctx.params()["sizes"];
  if (!field.is_object()) return parse_inline_sizes(field);
  auto header = Result<protocol::NpyHeader>(Status::internal("no sizes header"));
  int fd = -1;
  if (names_file(ctx.params(), "sizes")) {
    STRIPESOLVE_ASSIGN_OR_RETURN(fd, job_input_file(ctx, "sizes"));
    header = read_npy_header(fd);
  } else {
    header = protocol::inspect_npy(upload);
  }
  if (!header.is_ok()) return header.status().with_context("sizes");
  if (header->shape.size() != 1) {
    return Status::invalid_argument(
        fmt::format("sizes has shape {}; it must be 1-D", protocol::format_shape(header->shape)));
  }
  if (fd < 0) {
    auto values = protocol::npy_int_values(upload, *header);
    if (!values.is_ok()) return values.status().with_context("sizes");
    return std::move(values).value();
  }
  STRIPESOLVE_RETURN_IF_ERROR(check_batch_bytes(static_cast<uint64_t>(rhs.elements()), max_bytes));
  if (header->elements() > rhs.elements()) {
    return Status::invalid_argument(fmt::format(
        "sizes has {} entries but rhs has {} elements (every system needs at least one unknown)",
        header->elements(), rhs.elements()));
  }
  auto values = read_npy_ints(fd, *header);
  if (!values.is_ok()) return values.status().with_context("sizes");
  return std::move(values).value();
}

// Takes every upload the job names before checking any of them, so that none is left behind in
// the store (holding memory until it expires) when the job fails. Passed files are only looked
// at here (their headers); their data is read in the load phase.
Result<Inputs> take_inputs(const JobContext& ctx, UploadStore& uploads, uint64_t max_bytes) {
  const nlohmann::json& job = ctx.params();
  const uid_t owner = ctx.owner();
  Inputs in;
  Status first_error;
  auto keep_first = [&](const Status& st) {
    if (first_error.is_ok()) first_error = st;
  };
  for (std::size_t k = 0; k < kArrayNames.size(); ++k) {
    if (names_file(job, kArrayNames[k])) continue;
    auto bytes = take_upload(uploads, owner, job, kArrayNames[k]);
    if (bytes.is_ok()) {
      in.arrays[k].bytes = std::move(bytes).value();
    } else {
      keep_first(bytes.status());
    }
  }
  std::string sizes_upload;
  if (job.contains("sizes") && job["sizes"].is_object() && !names_file(job, "sizes")) {
    auto bytes = take_upload(uploads, owner, job, "sizes");
    if (bytes.is_ok()) {
      sizes_upload = std::move(bytes).value();
    } else {
      keep_first(bytes.status());
    }
  }
  STRIPESOLVE_RETURN_IF_ERROR(first_error);
  for (std::size_t k = 0; k < kArrayNames.size(); ++k) {
    Source& a = in.arrays[k];
    Result<protocol::NpyHeader> header = Status::internal("no header");
    if (names_file(job, kArrayNames[k])) {
      auto fd = job_input_file(ctx, kArrayNames[k]);
      if (!fd.is_ok()) return fd.status();
      a.fd = *fd;
      header = read_npy_header(a.fd);
    } else {
      header = protocol::inspect_npy(a.bytes);
    }
    if (!header.is_ok()) return header.status().with_context(kArrayNames[k]);
    a.header = *header;
  }
  if (job.contains("sizes")) {
    STRIPESOLVE_ASSIGN_OR_RETURN(in.sizes,
                                 read_sizes(ctx, sizes_upload, in.arrays[3].header, max_bytes));
  }
  return in;
}

// One float64 array of the batch: the client's file mapped in place (daemon/client_mapping.h),
// or values of the daemon's own, not zero-filled (a read or the solver fills every one).
struct Array {
  std::unique_ptr<double[]> owned;
  ClientMapping mapping;
  double* values = nullptr;
  std::size_t size = 0;

  static Array own(std::size_t count) {
    Array a;
    a.owned = std::make_unique_for_overwrite<double[]>(count);
    a.values = a.owned.get();
    a.size = count;
    return a;
  }
  double* data() const { return values; }
  std::span<const double> span() const { return {values, size}; }
  bool truncated() const { return mapping.truncated(); }
};

// A passed float64 file in C order is mapped and used where it lies; anything else (float32,
// Fortran order, an odd data offset, an upload, no mapping slot left) is converted into an
// array of the daemon's own.
Result<Array> load_array(Source& source, std::size_t count) {
  const protocol::NpyHeader& h = source.header;
  if (source.fd >= 0 && h.dtype == protocol::NpyDtype::kFloat64 &&
      (!h.fortran_order || h.shape.size() == 1) && h.data_offset % alignof(double) == 0) {
    auto mapping = ClientMapping::map(source.fd, h.data_offset + 8 * count, /*writable=*/false);
    if (mapping.is_ok()) {
      Array a;
      a.mapping = std::move(mapping).value();
      a.values = reinterpret_cast<double*>(a.mapping.data() + h.data_offset);
      a.size = count;
      return a;
    }
  }
  Array a = Array::own(count);
  if (source.fd >= 0) {
    STRIPESOLVE_RETURN_IF_ERROR(read_npy_floats(source.fd, h, a.data()));
    return a;
  }
  STRIPESOLVE_ASSIGN_OR_RETURN(std::vector<double> values,
                               protocol::npy_float_values(source.bytes, h));
  std::string().swap(source.bytes);
  std::copy(values.begin(), values.end(), a.data());
  return a;
}

// The solution's array: with an output file, the file itself (sized, header written, mapped
// shared, so the solver writes the .npy's data directly); else, or where the file cannot be
// mapped (opened write-only), an array of the daemon's own.
struct Solution {
  std::optional<NpyOutput> out;
  Array x;
};

Result<Solution> solution_array(int out_fd, const TridiagPlan& plan) {
  Solution s;
  if (out_fd >= 0) {
    auto out = NpyOutput::begin(out_fd, plan.array_shape);
    if (!out.is_ok()) return out.status().with_context("out");
    s.out = *out;
    auto mapping = ClientMapping::map(out_fd, out->file_bytes(), /*writable=*/true);
    if (mapping.is_ok()) {
      s.x.mapping = std::move(mapping).value();
      s.x.values = reinterpret_cast<double*>(s.x.mapping.data() + out->data_offset());
      s.x.size = plan.unknowns;
      return s;
    }
  }
  s.x = Array::own(plan.unknowns);
  return s;
}

// A client that truncated one of its files while the job ran gets an error, not what the
// daemon read or wrote past the new end.
Status check_not_truncated(const std::array<Array, 4>& a, const Array& x) {
  for (std::size_t k = 0; k < a.size(); ++k) {
    if (a[k].truncated()) {
      return Status::invalid_argument(
          fmt::format("{}: the file was truncated while the daemon read it", kArrayNames[k]));
    }
  }
  if (x.truncated()) {
    return Status::invalid_argument("out: the file was truncated while the daemon wrote it");
  }
  return Status::ok();
}

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

// The batch on the GPUs. The job's device memory comes from the budget the daemon's GPU jobs
// share (a dense solve's GPU tier holds its own from it): what the batch needs (its five arrays
// and about as much workspace), at most tridiag.gpu_memory or 90% of the free memory; when the
// budget cannot give it, kResourceExhausted naming both figures. A strided or ragged batch is
// shared by every device (tridiag::solve_batch_gpus), each with its part's share of the memory
// from its own budget.
Result<tridiag::SolveReport> solve_on_gpus(const tridiag::BatchShape& shape,
                                           const tridiag::BatchArrays& arrays,
                                           const tridiag::SolveOptions& options,
                                           const TridiagPlan& plan,
                                           const TridiagJobConfig& config) {
  tridiag::GpuOptions gpu;
  gpu.solve = options;
  uint64_t cap = config.gpu_memory;
  if (cap == 0) {
    const auto devices = gpu::list_devices();
    cap = devices.empty() ? 0 : devices.front().free_memory / 10 * 9;
  }
  const int devices =
      shape.layout == tridiag::BatchLayout::kInterleaved
          ? 1
          : std::max(1, std::min<int>(gpu::device_count(), static_cast<int>(shape.systems())));
  const uint64_t need = std::min<uint64_t>(
      cap, (sizeof(double) * 2 * 5 * static_cast<uint64_t>(plan.unknowns) + devices - 1) / devices);
  std::vector<gpu::DeviceBudget::Reservation> held;
  for (int d = 0; d < devices; ++d) {
    STRIPESOLVE_ASSIGN_OR_RETURN(
        auto r, gpu::DeviceBudget::of(d).reserve(need, "tridiagonal batch on the GPU"));
    held.push_back(std::move(r));
  }
  gpu.device_memory_budget = need;
  return tridiag::solve_batch_gpus(shape, arrays, gpu, devices);
}

Result<nlohmann::json> run_tridiag(JobContext& ctx, UploadStore& uploads,
                                   const TridiagJobConfig& config) {
  Job& job = ctx.job();
  STRIPESOLVE_ASSIGN_OR_RETURN(Inputs in, take_inputs(ctx, uploads, config.max_bytes));
  STRIPESOLVE_ASSIGN_OR_RETURN(TridiagParams params, parse_tridiag_params(ctx.params()));
  const bool have_gpu = tridiag::gpu_available();
  if (params.device == TridiagDevice::kGpu && !have_gpu) {
    return Status::failed_precondition(
        "device 'gpu' was requested but the daemon has no usable GPU (no CUDA device, or built "
        "without CUDA); use device 'cpu' or 'auto'");
  }
  std::vector<NamedHeader> named;
  for (std::size_t k = 0; k < kArrayNames.size(); ++k)
    named.push_back({kArrayNames[k], in.arrays[k].header});
  STRIPESOLVE_ASSIGN_OR_RETURN(
      TridiagPlan plan, check_tridiag_batch(named, params.layout, in.sizes, config.max_bytes));
  // The solution goes into the client's file when it passed one ("out"), else it is kept for
  // `result` to stream. The output is checked before the inputs are read.
  int out_fd = -1;
  if (names_file(ctx.params(), "out")) {
    STRIPESOLVE_ASSIGN_OR_RETURN(out_fd, job_output_file(ctx, "out"));
  }
  bool use_gpu =
      params.device == TridiagDevice::kGpu || (params.device == TridiagDevice::kAuto && have_gpu);
  ctx.log(fmt::format(
      "tridiagonal batch: {}, {} unknowns, {}; algorithm {}{}{}, device {}", plan.describe(),
      plan.unknowns, protocol::npy_dtype_name(plan.dtype),
      tridiag::algorithm_name(params.algorithm), params.unstable_ok ? " (unstable ok)" : "",
      params.fallback ? " (fallback to gepp)" : "", tridiag_device_name(params.device)));
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

  const auto threads = static_cast<unsigned>(config.threads);
  // Load: a passed float64 file is mapped where it lies (no copy), other files are read and
  // converted (float32 widens); an upload is converted and dropped before the next, so the
  // peak holds one array twice at most.
  const auto load_start = Clock::now();
  progress("load", 0.0);
  std::array<Array, 4> a;
  for (std::size_t k = 0; k < kArrayNames.size(); ++k) {
    auto values = load_array(in.arrays[k], plan.unknowns);
    if (!values.is_ok()) return values.status().with_context(kArrayNames[k]);
    a[k] = std::move(values).value();
    STRIPESOLVE_RETURN_IF_ERROR(check_finite(kArrayNames[k], a[k].span(), plan, threads));
    progress("load", 0.1 * static_cast<double>(k + 1) / 4);
  }
  STRIPESOLVE_ASSIGN_OR_RETURN(Solution solution, solution_array(out_fd, plan));
  Array& x = solution.x;
  span("load", load_start);
  STRIPESOLVE_RETURN_IF_ERROR(check_not_truncated(a, x));
  if (ctx.cancelled()) return Status::cancelled("cancelled before the solve");

  const tridiag::BatchShape shape = plan.shape();
  const tridiag::BatchArrays arrays{a[0].data(), a[1].data(), a[2].data(), a[3].data(), x.data()};
  tridiag::SolveOptions options;
  options.algorithm = params.algorithm;
  options.require_stable = !params.unstable_ok;
  options.fallback = params.fallback;
  options.threads = threads;
  std::vector<std::string> notes;
  if (params.device == TridiagDevice::kAuto) {
    notes.push_back(have_gpu ? "device auto chose the GPU"
                             : "device auto chose the CPU (no GPU available)");
  }
  progress("solve", 0.1);
  const auto solve_start = Clock::now();
  Result<tridiag::SolveReport> report = Status::internal("the batch was not solved");
  if (use_gpu) {
    report = solve_on_gpus(shape, arrays, options, plan, config);
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
  const ResidualSummary residual = max_relative_residual(
      plan, a[0].data(), a[1].data(), a[2].data(), a[3].data(), x.data(), threads);
  span("check", check_start);
  STRIPESOLVE_RETURN_IF_ERROR(check_not_truncated(a, x));
  for (auto& a_k : a) a_k = Array{};
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
  const std::string warning = quality_warning(*report, residual, algorithm, device);
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
      {"backward_error", residual.max_backward_error},
      {"worst_backward_system", residual.worst_backward_system},
      {"tolerance", residual.tolerance},
      {"fell_back", report->fell_back.size()},
      {"fell_back_systems", first_fallbacks(report->fell_back)},
      {"notes", notes}};
  // The job manager ends a result with a warning COMPLETED_WITH_WARNING.
  if (!warning.empty()) result["warning"] = warning;
  if (solution.out) {
    if (x.mapping.data() == nullptr) {  // not mapped: write what the solver produced
      progress("write", 0.95);
      const auto write_start = Clock::now();
      Status st = solution.out->write(0, x.data(), x.size);
      if (!st.is_ok()) return st.with_context("writing the solution into the client's file (out)");
      span("write", write_start);
    }
    result["output"] = {{"bytes", solution.out->file_bytes()},
                        {"mapped", x.mapping.data() != nullptr}};
  } else {
    STRIPESOLVE_RETURN_IF_ERROR(
        job.set_solution(plan.array_shape, std::vector<double>(x.data(), x.data() + x.size)));
  }
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
