// Host entry point of the GPU path (tridiag/gpu.h): device memory, chunking, an interleaved batch
// over several devices, the choice of kAuto and its fallbacks, and the verdict of every solve's
// quality check (on the device while the batch is there; tridiag.h says what the check does). A
// batch whole on one device: resident_batch.h.
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
#include "tridiag/cuda/resident_batch.h"
#include "tridiag/gpu.h"
#include "tridiag/gpu_part.h"

namespace stripesolve::tridiag {

namespace {

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
  DeviceBuffer buf[5];
  double* chunk[5];
  for (int k = 0; k < 5; ++k) {
    STRIPESOLVE_ASSIGN_OR_RETURN(buf[k],
                                 DeviceBuffer::allocate(chunk_rows * sizeof(double), "a chunk"));
    chunk[k] = buf[k].as<double>();
  }
  STRIPESOLVE_ASSIGN_OR_RETURN(DeviceBuffer ws,
                               DeviceBuffer::allocate(ws_chunked, "the chunked solver workspace"));
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
