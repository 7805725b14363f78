// Host entry point of the GPU path (tridiag/gpu.h): device memory, copies, chunking, the
// choice of kAuto and its fallbacks, and the quality check of every solve (on the device while
// the batch is there; tridiag.h says what the check does).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <future>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include <cuda_runtime.h>

#include "tridiag/batch_check.h"
#include "tridiag/cuda/cuda_check.h"
#include "tridiag/cuda/device_solve.h"
#include "tridiag/cuda/kernel_choice.h"
#include "tridiag/cuda/quality_check.h"
#include "tridiag/cuda/refinement.h"
#include "tridiag/gpu.h"
#include "tridiag/gpu_part.h"

namespace stripesolve::tridiag {

namespace {

// Owns one cudaMalloc'd buffer.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer() {
    if (p_ != nullptr) cudaFree(p_);
  }
  Status allocate(std::size_t bytes, const char* what) {
    return gpu::cuda_check(
        cudaMalloc(&p_, std::max<std::size_t>(bytes, 1)),
        std::string("cudaMalloc of ") + std::to_string(bytes) + " bytes for " + what);
  }
  template <typename T>
  T* as() const {
    return static_cast<T*>(p_);
  }

 private:
  void* p_ = nullptr;
};

Result<std::size_t> budget_of(const GpuOptions& options) {
  if (options.device_memory_budget != 0) return options.device_memory_budget;
  std::size_t free_bytes = 0, total = 0;
  STRIPESOLVE_RETURN_IF_ERROR(
      gpu::cuda_check(cudaMemGetInfo(&free_bytes, &total), "cudaMemGetInfo"));
  return free_bytes / 10 * 9;
}

// What an attempt leaves for the check: the device check's findings while the batch was on
// the device, and f where x aliases it and the fallback may need it.
struct Attempt {
  bool checked_on_device = false;
  gpu::DeviceCheck check;
  std::vector<double> f_kept;
};

// A backward error in a note ("1.23e-16").
std::string error_text(double e) {
  char text[32];
  std::snprintf(text, sizeof text, "%.2e", e);
  return text;
}

// The device buffers and launches an attempt on the whole batch shares with its refinement.
struct OnDevice {
  Algorithm algorithm;
  BatchLayout layout;
  gpu::DeviceBatch batch;
  std::size_t systems;
  const std::size_t* offsets;  // ragged: the device prefix sums; else null
  void* workspace;
  std::size_t workspace_bytes;
  void* check_workspace;
  std::size_t check_bytes;
  double pivot_tolerance;
  cudaStream_t stream;
};

// One refinement step (cuda/refinement.h) of the solution in dev.batch.x: residual, a solve
// with the same algorithm, the update, the check again. The refined x is kept when the check
// finds no more suspects and no larger worst error within the tolerance than `check` did (then
// `check` becomes the new check); else the first x is put back. A breakdown of the second solve
// keeps the first x. `notes` says which.
Status refine_on_device(const OnDevice& dev, std::vector<std::string>& notes,
                        gpu::DeviceCheck& check) {
  const std::size_t rows = dev.batch.rows;
  DeviceBuffer r, dx, first;
  STRIPESOLVE_RETURN_IF_ERROR(r.allocate(rows * sizeof(double), "the refinement's residual"));
  STRIPESOLVE_RETURN_IF_ERROR(dx.allocate(rows * sizeof(double), "the refinement's correction"));
  STRIPESOLVE_RETURN_IF_ERROR(first.allocate(rows * sizeof(double), "the first solution"));
  STRIPESOLVE_RETURN_IF_ERROR(
      gpu::residual_on_device(dev.layout, dev.batch, r.as<double>(), dev.stream));
  gpu::DeviceBatch correction = dev.batch;
  correction.f = r.as<double>();
  correction.x = dx.as<double>();
  const Status solved = gpu::solve_device(dev.algorithm, dev.layout, correction, dev.workspace,
                                          dev.workspace_bytes, dev.pivot_tolerance, dev.stream);
  if (solved.code() == StatusCode::kNumerical) {
    notes.push_back("refinement on the device broke down (" + solved.message() +
                    "); the first solution is kept");
    return Status::ok();
  }
  STRIPESOLVE_RETURN_IF_ERROR(solved);
  STRIPESOLVE_RETURN_IF_ERROR(
      gpu::cuda_check(cudaMemcpyAsync(first.as<double>(), dev.batch.x, rows * sizeof(double),
                                      cudaMemcpyDeviceToDevice, dev.stream),
                      "keeping the first solution"));
  STRIPESOLVE_RETURN_IF_ERROR(gpu::add_on_device(dev.batch.x, dx.as<double>(), rows, dev.stream));
  gpu::DeviceCheck after;
  STRIPESOLVE_RETURN_IF_ERROR(gpu::check_on_device(dev.layout, dev.batch, dev.systems, dev.offsets,
                                                   dev.check_workspace, dev.check_bytes, dev.stream,
                                                   after));
  after.seconds += check.seconds;
  if (after.suspects.size() > check.suspects.size() ||
      after.worst_clean_error > check.worst_clean_error) {
    notes.push_back(
        "refinement on the device did not help (worst backward error within the "
        "tolerance " +
        error_text(check.worst_clean_error) + " -> " + error_text(after.worst_clean_error) + ", " +
        std::to_string(check.suspects.size()) + " -> " + std::to_string(after.suspects.size()) +
        " above it); the first solution is kept");
    check.seconds = after.seconds;
    return gpu::cuda_check(cudaMemcpyAsync(dev.batch.x, first.as<double>(), rows * sizeof(double),
                                           cudaMemcpyDeviceToDevice, dev.stream),
                           "restoring the first solution");
  }
  notes.push_back("refined once on the device: worst backward error within the tolerance " +
                  error_text(check.worst_clean_error) + " -> " +
                  error_text(after.worst_clean_error));
  check = std::move(after);
  return Status::ok();
}

// Where a batch on one device lies in the host arrays: the whole batch, one block per array; or,
// for a part of an interleaved batch spread over devices, the columns [first, first + count) of
// its n rows, `pitch` systems apart.
struct HostColumns {
  std::size_t first = 0;
  std::size_t pitch = 0;  // 0: the whole batch
};

Status copy_rows(double* dst, const double* src, const BatchShape& shape, const HostColumns& cols,
                 cudaMemcpyKind kind, const std::string& what) {
  if (cols.pitch == 0) {
    return gpu::cuda_check(cudaMemcpy(dst, src, shape.unknowns() * sizeof(double), kind), what);
  }
  const std::size_t width = shape.count * sizeof(double), pitch = cols.pitch * sizeof(double);
  if (kind == cudaMemcpyHostToDevice) {
    return gpu::cuda_check(cudaMemcpy2D(dst, width, src + cols.first, pitch, width, shape.n, kind),
                           what);
  }
  return gpu::cuda_check(cudaMemcpy2D(dst + cols.first, pitch, src, width, width, shape.n, kind),
                         what);
}

// Device bytes of a batch whole on the device: its five arrays, the solver's and the check's
// workspaces, a ragged batch's offsets.
std::size_t whole_bytes(Algorithm alg, const BatchShape& shape) {
  const std::size_t rows = shape.unknowns(), systems = shape.systems();
  return 5 * rows * sizeof(double) + gpu::workspace_bytes(alg, shape.layout, rows, shape.n) +
         gpu::check_workspace_bytes(shape.layout, systems) +
         (shape.layout == BatchLayout::kRagged ? (systems + 1) * sizeof(std::size_t) : 0);
}

// A batch whole on one device, from its copy in to the copy of x back (the buffers are freed on
// the device that is current then).
struct Resident {
  DeviceBuffer buf[5], ws, check, offsets;
  double* x() const { return buf[4].as<double>(); }
};

// Copies the batch (its columns `cols` of the host arrays) to the current device, solves it with
// `alg` and checks it there, refined once where `refine` and the check ask for it (`budget`
// bytes permitting). x stays on the device. Returns the solve's status: a breakdown (kNumerical)
// is returned at once unless `past_breakdown`, which checks past it.
Status solve_resident(Algorithm alg, const BatchShape& shape, const BatchArrays& arrays,
                      const HostColumns& cols, std::size_t budget, double pivot_tolerance,
                      bool past_breakdown, bool refine, Resident& res,
                      std::vector<std::string>& notes, Attempt& attempt) {
  const std::size_t rows = shape.unknowns();
  const std::size_t systems = shape.systems();
  const bool ragged = shape.layout == BatchLayout::kRagged;
  const std::size_t ws_bytes = gpu::workspace_bytes(alg, shape.layout, rows, shape.n);
  const std::size_t check_bytes = gpu::check_workspace_bytes(shape.layout, systems);
  cudaStream_t stream = nullptr;
  const char* names[5] = {"dl", "d", "du", "f", "x"};
  for (int k = 0; k < 5; ++k)
    STRIPESOLVE_RETURN_IF_ERROR(res.buf[k].allocate(rows * sizeof(double), names[k]));
  STRIPESOLVE_RETURN_IF_ERROR(res.ws.allocate(ws_bytes, "the solver workspace"));
  STRIPESOLVE_RETURN_IF_ERROR(res.check.allocate(check_bytes, "the quality check"));
  const double* in[4] = {arrays.dl, arrays.d, arrays.du, arrays.f};
  for (int k = 0; k < 4; ++k) {
    STRIPESOLVE_RETURN_IF_ERROR(copy_rows(res.buf[k].as<double>(), in[k], shape, cols,
                                          cudaMemcpyHostToDevice,
                                          std::string("copying ") + names[k] + " to the device"));
  }
  if (ragged) {
    std::vector<std::size_t> off(systems + 1, 0);
    for (std::size_t j = 0; j < systems; ++j) off[j + 1] = off[j] + shape.sizes[j];
    STRIPESOLVE_RETURN_IF_ERROR(
        res.offsets.allocate(off.size() * sizeof(std::size_t), "ragged offsets"));
    STRIPESOLVE_RETURN_IF_ERROR(
        gpu::cuda_check(cudaMemcpy(res.offsets.as<void>(), off.data(),
                                   off.size() * sizeof(std::size_t), cudaMemcpyHostToDevice),
                        "copying ragged offsets"));
    STRIPESOLVE_RETURN_IF_ERROR(
        gpu::zero_ragged_couplings(res.buf[0].as<double>(), res.buf[2].as<double>(),
                                   res.offsets.as<std::size_t>(), systems, stream));
  }
  gpu::DeviceBatch b{{res.buf[0].as<double>(), res.buf[1].as<double>(), res.buf[2].as<double>(),
                      res.buf[3].as<double>(), res.x()},
                     rows,
                     shape.layout == BatchLayout::kStrided ? shape.n : 0,
                     systems};
  // The one-pass kernels check the systems as they solve them: the check's state first.
  STRIPESOLVE_ASSIGN_OR_RETURN(
      gpu::CheckTarget target,
      gpu::prepare_check(shape.layout, systems, ragged ? 0 : rows / systems, res.check.as<void>(),
                         check_bytes, stream));
  const Status st = gpu::solve_device(alg, shape.layout, b, res.ws.as<void>(), ws_bytes,
                                      pivot_tolerance, stream, &target);
  if (!st.is_ok() && !(past_breakdown && st.code() == StatusCode::kNumerical)) return st;
  const OnDevice dev{alg,
                     shape.layout,
                     b,
                     systems,
                     ragged ? res.offsets.as<std::size_t>() : nullptr,
                     res.ws.as<void>(),
                     ws_bytes,
                     res.check.as<void>(),
                     check_bytes,
                     pivot_tolerance,
                     stream};
  STRIPESOLVE_RETURN_IF_ERROR(gpu::check_on_device(shape.layout, b, systems, dev.offsets,
                                                   res.check.as<void>(), check_bytes, stream,
                                                   attempt.check, &target));
  attempt.checked_on_device = true;
  constexpr double kEps = 2.220446049250313e-16;
  if (refine && st.is_ok() && attempt.check.worst_clean_error > gpu::kRefineAboveEps * kEps) {
    if (whole_bytes(alg, shape) + 3 * rows * sizeof(double) <= budget) {
      STRIPESOLVE_RETURN_IF_ERROR(refine_on_device(dev, notes, attempt.check));
    } else {
      notes.push_back("not refined: the device budget holds the batch but not the refinement");
    }
  }
  return st;
}

// An interleaved batch over `devices` (CUDA ordinals; solve_batch_gpus): its systems cut into
// runs of about count / devices, each run's columns of every row copied to its device, solved
// and checked there on a thread of its own (each device with `options`' budget). What the
// devices found merges into `attempt`, systems numbered in the batch; x comes back once every
// part is checked (f kept first where x aliases it and a system will be solved again).
Status run_interleaved_parts(Algorithm alg, const BatchShape& shape, const BatchArrays& arrays,
                             const GpuOptions& options, std::span<const int> devices,
                             bool past_breakdown, bool refine, std::vector<std::string>& notes,
                             Attempt& attempt) {
  const std::size_t parts = devices.size();
  std::vector<std::unique_ptr<Resident>> res(parts);
  std::vector<std::vector<std::string>> part_notes(parts);
  std::vector<Attempt> found(parts);
  std::vector<std::size_t> first(parts + 1);
  for (std::size_t p = 0; p <= parts; ++p) first[p] = shape.count * p / parts;
  auto part_shape = [&](std::size_t p) {
    return BatchShape{BatchLayout::kInterleaved, shape.n, first[p + 1] - first[p], {}};
  };
  auto solve_part = [&](std::size_t p) -> Status {
    STRIPESOLVE_RETURN_IF_ERROR(gpu::cuda_check(cudaSetDevice(devices[p]), "cudaSetDevice"));
    STRIPESOLVE_ASSIGN_OR_RETURN(const std::size_t budget, budget_of(options));
    const BatchShape mine = part_shape(p);
    if (whole_bytes(alg, mine) > budget) {
      return Status::resource_exhausted(
          "an interleaved batch's part of " + std::to_string(mine.unknowns()) + " unknowns needs " +
          std::to_string(whole_bytes(alg, mine)) + " device bytes, over device " +
          std::to_string(devices[p]) + "'s budget of " + std::to_string(budget) +
          "; interleaved batches are not solved in chunks");
    }
    res[p] = std::make_unique<Resident>();
    return solve_resident(alg, mine, arrays, {first[p], shape.count}, budget,
                          options.solve.pivot_tolerance, past_breakdown, refine, *res[p],
                          part_notes[p], found[p]);
  };
  std::vector<std::future<Status>> solved;
  for (std::size_t p = 0; p < parts; ++p) {
    solved.push_back(std::async(std::launch::async, solve_part, p));
  }
  std::vector<Status> status;
  for (auto& s : solved) status.push_back(s.get());
  // Frees every part's buffers on its own device, whatever happens below, and makes the
  // caller's device current again.
  struct Release {
    std::vector<std::unique_ptr<Resident>>& res;
    std::span<const int> devices;
    int caller = 0;
    ~Release() {
      for (std::size_t p = 0; p < res.size(); ++p) {
        if (res[p] == nullptr) continue;
        if (cudaSetDevice(devices[p]) == cudaSuccess) res[p].reset();
      }
      cudaSetDevice(caller);
    }
  } release{res, devices, options.device};
  std::string broke_down;
  for (std::size_t p = 0; p < parts; ++p) {
    const bool broke = past_breakdown && status[p].code() == StatusCode::kNumerical;
    if (!status[p].is_ok() && !broke) return status[p];
    if (broke && broke_down.empty()) {
      broke_down = status[p].message() + " (the part of systems " + std::to_string(first[p]) +
                   " to " + std::to_string(first[p + 1] - 1) + " on device " +
                   std::to_string(devices[p]) + ")";
    }
    for (const std::string& note : part_notes[p]) {
      notes.push_back("device " + std::to_string(devices[p]) + ": " + note);
    }
    const gpu::DeviceCheck& c = found[p].check;
    for (Suspect s : c.suspects) {
      s.system += first[p];
      attempt.check.suspects.push_back(s);
    }
    if (c.worst_clean_error > attempt.check.worst_clean_error) {
      attempt.check.worst_clean_error = c.worst_clean_error;
      attempt.check.worst_clean_system = c.worst_clean_system + first[p];
    }
    // The parts ran at once: the longest check is the one the caller waited for.
    attempt.check.seconds = std::max(attempt.check.seconds, c.seconds);
  }
  attempt.checked_on_device = true;
  if (!attempt.check.suspects.empty() && arrays.x == arrays.f) {
    attempt.f_kept.assign(arrays.f, arrays.f + shape.unknowns());
  }
  for (std::size_t p = 0; p < parts; ++p) {
    STRIPESOLVE_RETURN_IF_ERROR(gpu::cuda_check(cudaSetDevice(devices[p]), "cudaSetDevice"));
    STRIPESOLVE_RETURN_IF_ERROR(copy_rows(arrays.x, res[p]->x(), part_shape(p),
                                          {first[p], shape.count}, cudaMemcpyDeviceToHost,
                                          "copying x from device " + std::to_string(devices[p])));
  }
  notes.push_back("interleaved batch on " + std::to_string(parts) +
                  " devices, a run of systems each (its columns of every row copied)");
  return broke_down.empty() ? Status::ok() : Status::numerical(broke_down);
}

// One attempt with one algorithm, the whole batch on the device (then checked there) or (SPIKE/
// Thomas, one system or strided) streamed in chunks; an interleaved batch over `devices`
// devices when there are several (run_interleaved_parts). A breakdown (kNumerical) is returned
// at once unless `past_breakdown`: then the batch is checked and copied back all the same, and
// the breakdown is returned for a note (the check finds the systems it spoilt).
// `refine`: one refinement step where the check asks for it (GpuOptions::refine).
Status run_on_gpu(Algorithm alg, const BatchShape& shape, const BatchArrays& arrays,
                  const GpuOptions& options, std::span<const int> devices, bool past_breakdown,
                  bool refine, std::vector<std::string>& notes, Attempt& attempt) {
  if (devices.size() > 1 && shape.layout == BatchLayout::kInterleaved) {
    return run_interleaved_parts(alg, shape, arrays, options, devices, past_breakdown, refine,
                                 notes, attempt);
  }
  const std::size_t rows = shape.unknowns();
  const std::size_t systems = shape.systems();
  const std::size_t n = shape.layout == BatchLayout::kRagged ? 0 : shape.n;
  STRIPESOLVE_ASSIGN_OR_RETURN(const std::size_t budget, budget_of(options));
  const std::size_t whole = whole_bytes(alg, shape);
  cudaStream_t stream = nullptr;
  if (whole <= budget) {
    Resident res;
    const Status st = solve_resident(alg, shape, arrays, {}, budget, options.solve.pivot_tolerance,
                                     past_breakdown, refine, res, notes, attempt);
    if (!st.is_ok() && !(past_breakdown && st.code() == StatusCode::kNumerical)) return st;
    // Copying x back overwrites an f it aliases: keep f for the systems' fallback.
    if (!attempt.check.suspects.empty() && arrays.x == arrays.f) {
      attempt.f_kept.assign(arrays.f, arrays.f + rows);
    }
    STRIPESOLVE_RETURN_IF_ERROR(copy_rows(arrays.x, res.x(), shape, {}, cudaMemcpyDeviceToHost,
                                          "copying x from the device"));
    return st;
  }
  if (gpu::choose_kernel(alg, shape.layout, n, gpu::Residence::kStreamed).kernel !=
      gpu::Kernel::kChunked) {
    return Status::resource_exhausted(
        "batch of " + std::to_string(rows) + " unknowns needs " + std::to_string(whole) +
        " device bytes, over the budget of " + std::to_string(budget) +
        "; only spike and thomas on one system or a strided batch are solved in chunks");
  }
  const std::size_t ws_chunked = gpu::chunked_workspace_bytes(rows);
  const std::size_t per_row = 5 * sizeof(double);
  if (budget <= ws_chunked + per_row * gpu::kChunkGranularity) {
    return Status::resource_exhausted("device budget of " + std::to_string(budget) +
                                      " bytes cannot hold the reduced systems (" +
                                      std::to_string(ws_chunked) + " bytes) and one chunk");
  }
  std::size_t chunk_rows =
      (budget - ws_chunked) / per_row / gpu::kChunkGranularity * gpu::kChunkGranularity;
  chunk_rows = std::min(chunk_rows, (rows + gpu::kChunkGranularity - 1) / gpu::kChunkGranularity *
                                        gpu::kChunkGranularity);
  DeviceBuffer buf[5], ws;
  double* chunk[5];
  for (int k = 0; k < 5; ++k) {
    STRIPESOLVE_RETURN_IF_ERROR(buf[k].allocate(chunk_rows * sizeof(double), "a chunk"));
    chunk[k] = buf[k].as<double>();
  }
  STRIPESOLVE_RETURN_IF_ERROR(ws.allocate(ws_chunked, "the chunked solver workspace"));
  notes.push_back("solved in " + std::to_string((rows + chunk_rows - 1) / chunk_rows) +
                  " chunks of " + std::to_string(chunk_rows) + " rows (device budget " +
                  std::to_string(budget) + " bytes); checked on the CPU");
  // The batch is never whole on the device, so the check runs on the CPU afterwards, from f.
  if (arrays.x == arrays.f) attempt.f_kept.assign(arrays.f, arrays.f + rows);
  return gpu::solve_host_chunked(alg == Algorithm::kSpike, arrays.dl, arrays.d, arrays.du, arrays.f,
                                 arrays.x, rows, systems > 1 ? n : 0, chunk_rows, chunk,
                                 ws.as<void>(), ws_chunked, options.solve.pivot_tolerance, stream);
}

// The check's verdict on an attempt's solution (tridiag.h: quality check, the CPU path's rule):
// the systems above their tolerance solved again with gepp on the CPU where `may_fall_back`,
// else warned about.
Status settle_attempt(Algorithm alg, const BatchShape& shape, const BatchArrays& arrays,
                      bool may_fall_back, unsigned threads, const Attempt& attempt,
                      SolveReport& report, BatchOutcome& outcome) {
  BatchArrays from_f = arrays;
  if (!attempt.f_kept.empty()) from_f.f = attempt.f_kept.data();
  if (!attempt.checked_on_device) {
    const auto start = std::chrono::steady_clock::now();
    STRIPESOLVE_RETURN_IF_ERROR(check_batch(shape, from_f, alg, may_fall_back, threads, outcome));
    report.check_seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return Status::ok();
  }
  const gpu::DeviceCheck& check = attempt.check;
  std::size_t largest = shape.n;
  if (shape.layout == BatchLayout::kRagged) {
    largest = *std::max_element(shape.sizes.begin(), shape.sizes.end());
  }
  outcome.systems = shape.systems();
  outcome.tolerance = backward_error_tolerance(largest);
  outcome.worst_clean_error = check.worst_clean_error;
  outcome.worst_clean_system = check.worst_clean_system;
  report.check_seconds = check.seconds;
  return settle_suspects(shape, from_f, alg, may_fall_back, threads, check.suspects, outcome.noted);
}

}  // namespace

bool gpu_available() {
  auto count = gpu::device_count();
  return count.is_ok() && *count > 0;
}

Status solve_gpu_checked(const BatchShape& shape, const BatchArrays& arrays,
                         const GpuOptions& options, SolveReport& report, BatchOutcome& outcome,
                         std::span<const int> spread) {
  STRIPESOLVE_RETURN_IF_ERROR(validate_batch(shape, arrays));
  STRIPESOLVE_ASSIGN_OR_RETURN(const int devices, gpu::device_count());
  if (devices == 0) return Status::unavailable("no CUDA device present");
  if (options.device < 0 || options.device >= devices) {
    return Status::invalid_argument("tridiag: device " + std::to_string(options.device) + " of " +
                                    std::to_string(devices));
  }
  for (const int d : spread) {
    if (d < 0 || d >= devices) {
      return Status::invalid_argument("tridiag: device " + std::to_string(d) + " of " +
                                      std::to_string(devices));
    }
  }
  STRIPESOLVE_RETURN_IF_ERROR(gpu::cuda_check(cudaSetDevice(options.device), "cudaSetDevice"));
  const bool automatic = options.solve.algorithm == Algorithm::kAuto;
  report.algorithm =
      automatic ? choose_gpu_algorithm(shape, options.solve) : options.solve.algorithm;
  if (automatic) {
    std::string why;
    // gepp's larger interleaved systems keep their pivot rows in device memory (24 bytes an
    // unknown): where that alone breaks the budget, spike (whole on the device) instead.
    if (report.algorithm == Algorithm::kGepp) {
      STRIPESOLVE_ASSIGN_OR_RETURN(const std::size_t budget, budget_of(options));
      if (whole_bytes(Algorithm::kGepp, shape) > budget &&
          whole_bytes(Algorithm::kSpike, shape) <= budget) {
        report.algorithm = Algorithm::kSpike;
        why = "; gepp's pivot rows do not fit the device budget";
      }
    }
    report.notes.push_back("auto chose " + std::string(algorithm_name(report.algorithm)) + " (" +
                           (options.solve.require_stable ? "stable" : "unpivoted") +
                           " requested, GPU" + why + ")");
  }
  // The CPU path's rule (solve_batch): auto and spike promise a stable result, the others fall
  // back when asked to (gepp to the CPU's gepp, the same algorithm: only a check past a
  // breakdown gains by it).
  const bool may_fall_back =
      automatic || options.solve.fallback || report.algorithm == Algorithm::kSpike;
  const unsigned threads = options.solve.threads;
  Attempt attempt;
  // An explicit algorithm that may fall back checks past a breakdown, as the CPU path solves
  // the systems that broke down again; auto first tries spike on the GPU.
  const bool past_breakdown = !automatic && may_fall_back;
  const bool refine = options.refine && may_fall_back;
  const Status st = run_on_gpu(report.algorithm, shape, arrays, options, spread, past_breakdown,
                               refine, report.notes, attempt);
  const bool checked_past_breakdown = st.code() == StatusCode::kNumerical && past_breakdown;
  if (checked_past_breakdown) {
    report.notes.push_back(std::string(algorithm_name(report.algorithm)) +
                           " broke down on the GPU (" + st.message() +
                           "); the systems it spoilt are solved again with gepp");
  }
  if (st.is_ok() || checked_past_breakdown || !automatic || st.code() != StatusCode::kNumerical) {
    if (!st.is_ok() && !checked_past_breakdown) return st;
    const Status settled = settle_attempt(report.algorithm, shape, arrays, may_fall_back, threads,
                                          attempt, report, outcome);
    // Where gepp cannot solve a system that broke down either (a NaN in A), the GPU's breakdown,
    // which names the row, is the more useful error.
    if (checked_past_breakdown && settled.code() == StatusCode::kNumerical) return st;
    return settled;
  }
  std::string spike_failure = st.message();
  if (report.algorithm != Algorithm::kSpike) {
    report.notes.push_back(std::string(algorithm_name(report.algorithm)) + " broke down (" +
                           st.message() + "); solved again with spike");
    Attempt retry_attempt;
    const Status retry = run_on_gpu(Algorithm::kSpike, shape, arrays, options, spread, false,
                                    refine, report.notes, retry_attempt);
    if (retry.is_ok()) {
      return settle_attempt(Algorithm::kSpike, shape, arrays, may_fall_back, threads, retry_attempt,
                            report, outcome);
    }
    if (retry.code() != StatusCode::kNumerical) return retry;
    spike_failure = retry.message();
  }
  report.notes.push_back("spike broke down on the GPU (" + spike_failure +
                         "); solved again with gepp on the CPU");
  SolveOptions cpu = options.solve;
  cpu.algorithm = Algorithm::kGepp;
  SolveReport cpu_report;
  STRIPESOLVE_RETURN_IF_ERROR(solve_batch_checked(shape, arrays, cpu, cpu_report, outcome));
  report.notes.insert(report.notes.end(), cpu_report.notes.begin(), cpu_report.notes.end());
  return Status::ok();
}

Result<SolveReport> solve_batch_gpu(const BatchShape& shape, const BatchArrays& arrays,
                                    const GpuOptions& options) {
  return summarized([&](SolveReport& report, BatchOutcome& outcome) {
    return solve_gpu_checked(shape, arrays, options, report, outcome);
  });
}

}  // namespace stripesolve::tridiag
