// The device check of a solution (quality_check.h): per-row terms of backward_error() reduced per
// system and classified against the shared tolerance (the arithmetic: check_terms.cuh), by
// kernels of its own, or after a solve whose kernels checked the rows (CheckTarget).
#include <algorithm>
#include <cstring>
#include <string>

#include <climits>
#include <cuda_runtime.h>

#include "tridiag/cuda/check_terms.cuh"
#include "tridiag/cuda/cuda_check.h"
#include "tridiag/cuda/quality_check.h"
#include "tridiag/tolerance.h"

namespace stripesolve::tridiag::gpu {

namespace {

using check::classify;
using check::error_of;
using check::kFullMask;
using check::kInfBits;
using check::kNoSystem;
using check::max_bits;
using check::row_bits;
using check::RowBits;
using check::shfl_down;

constexpr int kWarpSize = 32;
constexpr int kStepsPerWarp = 16;
constexpr std::size_t kRowsPerCheckWarp = kWarpSize * kStepsPerWarp;  // rows a warp checks
constexpr int kBlockThreads = 256;

std::size_t round_up(std::size_t bytes) {
  return (bytes + 255) / 256 * 256;
}

// The verdicts' target and, for the row kernels (strided and ragged batches, interleaved ones
// checked in runs of rows), per system the maxima of |r|, |A| row, |x| and |f|.
struct CheckSpace {
  CheckTarget target;
  unsigned long long* maxima;
};

CheckSpace carve(void* workspace, std::size_t systems) {
  char* p = static_cast<char*>(workspace);
  CheckSpace s{};
  s.target.header = reinterpret_cast<unsigned long long*>(p);
  p += round_up(check::kHeaderSlots * sizeof(unsigned long long));
  s.target.errors = reinterpret_cast<double*>(p);
  p += round_up(systems * sizeof(double));
  s.maxima = reinterpret_cast<unsigned long long*>(p);
  p += round_up(4 * systems * sizeof(unsigned long long));
  s.target.suspect_system = reinterpret_cast<unsigned long long*>(p);
  p += round_up(systems * sizeof(unsigned long long));
  s.target.suspect_error = reinterpret_cast<double*>(p);
  return s;
}

// Where the systems of a strided (offsets null) or ragged batch start.
struct Systems {
  const std::size_t* offsets;
  std::size_t n;
  std::size_t count;

  __device__ std::size_t begin(std::size_t s) const {
    return offsets != nullptr ? offsets[s] : s * n;
  }
  __device__ std::size_t of(std::size_t row) const {
    if (offsets == nullptr) return row / n;
    std::size_t lo = 0, hi = count;  // offsets[lo] <= row < offsets[hi]
    while (hi - lo > 1) {
      const std::size_t mid = lo + (hi - lo) / 2;
      if (offsets[mid] <= row) {
        lo = mid;
      } else {
        hi = mid;
      }
    }
    return lo;
  }
};

__device__ void add_to_system(unsigned long long* maxima, unsigned long long system,
                              const RowBits& v) {
  unsigned long long* m = maxima + 4 * system;
  if (v.r != 0) atomicMax(m + 0, v.r);
  if (v.a != 0) atomicMax(m + 1, v.a);
  if (v.x != 0) atomicMax(m + 2, v.x);
  if (v.f != 0) atomicMax(m + 3, v.f);
}

// The warp's running maxima of one system (warp-uniform), added by lane 0.
__device__ void flush_warp(RowBits run, unsigned long long system, unsigned long long* maxima,
                           int lane) {
  if (system == kNoSystem) return;
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2)
    run = max_bits(run, shfl_down(run, offset));
  if (lane == 0) add_to_system(maxima, system, run);
}

// A warp a run of kRowsPerCheckWarp rows (coalesced: lane k reads row k of each step). The maxima
// stay in registers while a step's rows all belong to the system of the last; a step that crosses
// systems is reduced per system (a segmented max over the lanes) and added by atomics.
__global__ void contiguous_maxima_kernel(const double* dl, const double* d, const double* du,
                                         const double* f, const double* x, std::size_t rows,
                                         Systems systems, unsigned long long* maxima) {
  const std::size_t thread = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x;
  const int lane = static_cast<int>(threadIdx.x % kWarpSize);
  const std::size_t start = thread / kWarpSize * kRowsPerCheckWarp;
  if (start >= rows) return;  // the whole warp
  const std::size_t stop = min(start + kRowsPerCheckWarp, rows);
  unsigned long long current = systems.of(start);
  RowBits run{0, 0, 0, 0};
  std::size_t s = systems.of(min(start + lane, stop - 1));
  for (int step = 0; step < kStepsPerWarp; ++step) {
    const std::size_t i = start + step * std::size_t{kWarpSize} + lane;
    const bool valid = i < stop;
    RowBits v{0, 0, 0, 0};
    if (valid) {
      // A lane's rows only move forward, by 32 a step: a system of 32 rows or more is left at
      // most once a step; smaller strided ones are found by a division.
      if (systems.offsets == nullptr && systems.n < kWarpSize) {
        s = i / systems.n;
      } else {
        while (systems.begin(s + 1) <= i) ++s;
      }
      const std::size_t b = systems.begin(s), e = systems.begin(s + 1);
      const bool has_left = i > b, has_right = i + 1 < e;
      v = row_bits(has_left ? dl[i] : 0.0, d[i], has_right ? du[i] : 0.0, has_left ? x[i - 1] : 0.0,
                   x[i], has_right ? x[i + 1] : 0.0, f[i]);
    }
    const unsigned long long key = valid ? s : kNoSystem;
    if (__all_sync(kFullMask, key == current || key == kNoSystem)) {
      run = max_bits(run, v);
      continue;
    }
    flush_warp(run, current, maxima, lane);
    run = RowBits{0, 0, 0, 0};
    for (int offset = 1; offset < kWarpSize; offset *= 2) {
      const RowBits other = shfl_down(v, offset);
      const unsigned long long other_key = __shfl_down_sync(kFullMask, key, offset);
      if (lane + offset < kWarpSize && other_key == key) v = max_bits(v, other);
    }
    const unsigned long long previous_key = __shfl_up_sync(kFullMask, key, 1);
    if (key != kNoSystem && (lane == 0 || previous_key != key)) add_to_system(maxima, key, v);
    current = __shfl_sync(kFullMask, key, kWarpSize - 1);
  }
  flush_warp(run, current, maxima, lane);
}

__global__ void contiguous_errors_kernel(const unsigned long long* maxima, Systems systems,
                                         CheckTarget target) {
  const std::size_t s = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x;
  if (s >= systems.count) return;
  const unsigned long long* m = maxima + 4 * s;
  classify(s, error_of({m[0], m[1], m[2], m[3]}),
           backward_error_tolerance_of(systems.begin(s + 1) - systems.begin(s)), target);
}

// The maxima of rows [first, stop) of interleaved system j (element i at i * count + j: a warp
// of consecutive j reads 32 consecutive doubles of each array at each i).
__device__ __forceinline__ RowBits interleaved_rows_max(const double* dl, const double* d,
                                                        const double* du, const double* f,
                                                        const double* x, std::size_t n,
                                                        std::size_t count, std::size_t j,
                                                        std::size_t first, std::size_t stop) {
  RowBits m{0, 0, 0, 0};
  double x_left = first > 0 ? x[(first - 1) * count + j] : 0.0, x_mid = x[first * count + j];
#pragma unroll 4
  for (std::size_t i = first; i < stop; ++i) {
    const std::size_t at = i * count + j;
    const bool has_right = i + 1 < n;
    const double x_right = has_right ? x[at + count] : 0.0;
    m = max_bits(m, row_bits(i > 0 ? dl[at] : 0.0, d[at], has_right ? du[at] : 0.0, x_left, x_mid,
                             x_right, f[at]));
    x_left = x_mid;
    x_mid = x_right;
  }
  return m;
}

// A thread a system.
__global__ void interleaved_errors_kernel(const double* dl, const double* d, const double* du,
                                          const double* f, const double* x, std::size_t n,
                                          std::size_t count, double tolerance, CheckTarget target) {
  const std::size_t j = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x;
  if (j >= count) return;
  classify(j, error_of(interleaved_rows_max(dl, d, du, f, x, n, count, j, 0, n)), tolerance,
           target);
}

// Interleaved systems too few to fill the device a thread each: thread t checks the rows
// [c * run, (c + 1) * run) of system j = t % count (c = t / count; a warp still reads consecutive
// systems of a row) and adds its maxima to the system's by atomics; contiguous_errors_kernel
// then gives the verdicts.
__global__ void interleaved_maxima_kernel(const double* dl, const double* d, const double* du,
                                          const double* f, const double* x, std::size_t n,
                                          std::size_t count, std::size_t run,
                                          unsigned long long* maxima) {
  const std::size_t t = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x;
  const std::size_t j = t % count, first = t / count * run;
  if (first >= n) return;
  add_to_system(maxima, j,
                interleaved_rows_max(dl, d, du, f, x, n, count, j, first, min(first + run, n)));
}

// Threads that fill the current device about twice (an H200: 132 SMs of 2048 threads, 540672):
// an interleaved batch of fewer systems is checked in runs of at least 32 rows.
std::size_t fill_threads() {
  int device = 0, sms = 0, threads = 0;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess ||
      cudaDeviceGetAttribute(&threads, cudaDevAttrMaxThreadsPerMultiProcessor, device) !=
          cudaSuccess) {
    (void)cudaGetLastError();  // not left for the next launch check of this thread
    return std::size_t{2} * 132 * 2048;
  }
  return std::size_t{2} * static_cast<std::size_t>(sms) * static_cast<std::size_t>(threads);
}

// The worst error within the tolerance (suspects are -1): a block's maximum, one atomic a block.
__global__ void worst_kernel(std::size_t systems, CheckTarget target) {
  __shared__ unsigned long long block_worst;
  if (threadIdx.x == 0) block_worst = 0;
  __syncthreads();
  unsigned long long worst = 0;
  for (std::size_t s = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; s < systems;
       s += std::size_t{gridDim.x} * blockDim.x) {
    const double e = target.errors[s];
    if (e > 0.0) worst = max(worst, check::bits_of(e));
  }
  for (int offset = 16; offset > 0; offset /= 2) {
    worst = max(worst, __shfl_xor_sync(kFullMask, worst, offset));
  }
  if ((threadIdx.x & 31) == 0 && worst != 0) atomicMax(&block_worst, worst);
  __syncthreads();
  if (threadIdx.x == 0 && block_worst != 0) {
    atomicMax(&target.header[check::kWorstBits], block_worst);
  }
}

// The first system whose error is the worst one within the tolerance.
__global__ void first_worst_kernel(std::size_t systems, CheckTarget target) {
  const std::size_t s = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x;
  if (s >= systems) return;
  if (check::bits_of(target.errors[s]) == target.header[check::kWorstBits]) {
    atomicMin(&target.header[check::kWorstSystem], static_cast<unsigned long long>(s));
  }
}

unsigned blocks_for(std::size_t threads) {
  return static_cast<unsigned>((threads + kBlockThreads - 1) / kBlockThreads);
}

// Two CUDA events around the check, destroyed with it.
class EventPair {
 public:
  EventPair() = default;
  EventPair(const EventPair&) = delete;
  EventPair& operator=(const EventPair&) = delete;
  ~EventPair() {
    if (start != nullptr) cudaEventDestroy(start);
    if (stop != nullptr) cudaEventDestroy(stop);
  }
  Status create() {
    STRIPESOLVE_RETURN_IF_ERROR(cuda_check(cudaEventCreate(&start), "creating the check's timer"));
    return cuda_check(cudaEventCreate(&stop), "creating the check's timer");
  }
  cudaEvent_t start = nullptr, stop = nullptr;
};

}  // namespace

std::size_t check_workspace_bytes(BatchLayout layout, std::size_t systems) {
  std::size_t bytes = round_up(check::kHeaderSlots * sizeof(unsigned long long)) +
                      round_up(systems * sizeof(double)) +
                      round_up(systems * sizeof(unsigned long long)) +
                      round_up(systems * sizeof(double));
  (void)layout;  // every layout's rows may be checked in runs (maxima per system)
  return bytes + round_up(4 * systems * sizeof(unsigned long long));
}

Result<CheckTarget> prepare_check(BatchLayout layout, std::size_t systems, std::size_t n,
                                  void* workspace, std::size_t workspace_size, void* stream_ptr) {
  if (systems == 0 || workspace_size < check_workspace_bytes(layout, systems)) {
    return Status::invalid_argument("prepare_check: a batch of " + std::to_string(systems) +
                                    " systems, " + std::to_string(workspace_size) +
                                    " bytes of workspace");
  }
  cudaStream_t stream = static_cast<cudaStream_t>(stream_ptr);
  CheckTarget target = carve(workspace, systems).target;
  target.tolerance = backward_error_tolerance_of(n);
  constexpr std::size_t kSlot = sizeof(unsigned long long);
  STRIPESOLVE_RETURN_IF_ERROR(
      cuda_check(cudaMemsetAsync(target.header, 0, check::kHeaderSlots * kSlot, stream),
                 "clearing the check's state"));
  STRIPESOLVE_RETURN_IF_ERROR(
      cuda_check(cudaMemsetAsync(target.header + check::kWorstSystem, 0xFF, kSlot, stream),
                 "clearing the check's state"));
  return target;
}

Status check_on_device(BatchLayout layout, const DeviceBatch& b, std::size_t systems,
                       const std::size_t* offsets, void* workspace, std::size_t workspace_size,
                       void* stream_ptr, DeviceCheck& out, const CheckTarget* solved) {
  cudaStream_t stream = static_cast<cudaStream_t>(stream_ptr);
  if (systems == 0 || workspace_size < check_workspace_bytes(layout, systems) ||
      (layout == BatchLayout::kRagged && offsets == nullptr) ||
      (layout == BatchLayout::kStrided && b.system_size == 0)) {
    return Status::invalid_argument("check_on_device: a batch of " + std::to_string(systems) +
                                    " systems, " + std::to_string(workspace_size) +
                                    " bytes of workspace, offsets or system size missing");
  }
  const CheckSpace space = carve(workspace, systems);
  const CheckTarget& target = space.target;
  const bool rows_checked = solved != nullptr && solved->rows_checked;
  EventPair timer;
  STRIPESOLVE_RETURN_IF_ERROR(timer.create());
  STRIPESOLVE_RETURN_IF_ERROR(cuda_check(cudaEventRecord(timer.start, stream), "timing the check"));
  if (rows_checked) {
    // The solve's kernels gave every system its verdict.
  } else if (layout == BatchLayout::kInterleaved) {
    const std::size_t n = b.rows / systems;
    STRIPESOLVE_RETURN_IF_ERROR(
        prepare_check(layout, systems, n, workspace, workspace_size, stream).status());
    const std::size_t runs = std::clamp<std::size_t>(fill_threads() / systems, 1, (n + 31) / 32);
    if (runs == 1) {
      interleaved_errors_kernel<<<blocks_for(systems), kBlockThreads, 0, stream>>>(
          b.dl, b.d, b.du, b.f, b.x, n, systems, backward_error_tolerance_of(n), target);
      STRIPESOLVE_RETURN_IF_ERROR(
          cuda_check(cudaGetLastError(), "interleaved check kernel launch"));
    } else {
      const std::size_t run = (n + runs - 1) / runs;
      STRIPESOLVE_RETURN_IF_ERROR(cuda_check(
          cudaMemsetAsync(space.maxima, 0, 4 * systems * sizeof(unsigned long long), stream),
          "clearing the check's maxima"));
      interleaved_maxima_kernel<<<blocks_for(systems * ((n + run - 1) / run)), kBlockThreads, 0,
                                  stream>>>(b.dl, b.d, b.du, b.f, b.x, n, systems, run,
                                            space.maxima);
      STRIPESOLVE_RETURN_IF_ERROR(
          cuda_check(cudaGetLastError(), "interleaved check maxima kernel launch"));
      contiguous_errors_kernel<<<blocks_for(systems), kBlockThreads, 0, stream>>>(
          space.maxima, Systems{nullptr, n, systems}, target);
      STRIPESOLVE_RETURN_IF_ERROR(cuda_check(cudaGetLastError(), "check errors kernel launch"));
    }
  } else {
    STRIPESOLVE_RETURN_IF_ERROR(
        prepare_check(layout, systems, b.system_size, workspace, workspace_size, stream).status());
    const Systems sys{layout == BatchLayout::kRagged ? offsets : nullptr,
                      layout == BatchLayout::kRagged ? 0 : b.system_size, systems};
    STRIPESOLVE_RETURN_IF_ERROR(cuda_check(
        cudaMemsetAsync(space.maxima, 0, 4 * systems * sizeof(unsigned long long), stream),
        "clearing the check's maxima"));
    const std::size_t warps = (b.rows + kRowsPerCheckWarp - 1) / kRowsPerCheckWarp;
    contiguous_maxima_kernel<<<blocks_for(warps * kWarpSize), kBlockThreads, 0, stream>>>(
        b.dl, b.d, b.du, b.f, b.x, b.rows, sys, space.maxima);
    STRIPESOLVE_RETURN_IF_ERROR(cuda_check(cudaGetLastError(), "check maxima kernel launch"));
    contiguous_errors_kernel<<<blocks_for(systems), kBlockThreads, 0, stream>>>(space.maxima, sys,
                                                                                target);
    STRIPESOLVE_RETURN_IF_ERROR(cuda_check(cudaGetLastError(), "check errors kernel launch"));
  }
  worst_kernel<<<std::min(blocks_for(systems), 1024u), kBlockThreads, 0, stream>>>(systems, target);
  STRIPESOLVE_RETURN_IF_ERROR(cuda_check(cudaGetLastError(), "check worst-error kernel launch"));
  first_worst_kernel<<<blocks_for(systems), kBlockThreads, 0, stream>>>(systems, target);
  STRIPESOLVE_RETURN_IF_ERROR(cuda_check(cudaGetLastError(), "check worst-system kernel launch"));
  unsigned long long h[check::kHeaderSlots] = {};
  STRIPESOLVE_RETURN_IF_ERROR(
      cuda_check(cudaMemcpyAsync(h, target.header, sizeof h, cudaMemcpyDeviceToHost, stream),
                 "copying the check's result from the device"));
  STRIPESOLVE_RETURN_IF_ERROR(cuda_check(cudaEventRecord(timer.stop, stream), "timing the check"));
  STRIPESOLVE_RETURN_IF_ERROR(cuda_check(cudaStreamSynchronize(stream), "the check on the GPU"));
  float ms = 0.0f;
  STRIPESOLVE_RETURN_IF_ERROR(
      cuda_check(cudaEventElapsedTime(&ms, timer.start, timer.stop), "timing the check"));
  out.seconds = ms / 1e3;
  std::memcpy(&out.worst_clean_error, &h[check::kWorstBits], sizeof(double));
  const unsigned long long worst_system = h[check::kWorstSystem];
  out.worst_clean_system = worst_system == kNoSystem || out.worst_clean_error == 0.0
                               ? 0
                               : static_cast<std::size_t>(worst_system);
  out.suspects.clear();
  const unsigned long long suspects = h[check::kSuspects];
  if (suspects == 0) return Status::ok();
  std::vector<unsigned long long> system(suspects);
  std::vector<double> error(suspects);
  STRIPESOLVE_RETURN_IF_ERROR(
      cuda_check(cudaMemcpy(system.data(), target.suspect_system,
                            suspects * sizeof(unsigned long long), cudaMemcpyDeviceToHost),
                 "copying the check's suspects from the device"));
  STRIPESOLVE_RETURN_IF_ERROR(
      cuda_check(cudaMemcpy(error.data(), target.suspect_error, suspects * sizeof(double),
                            cudaMemcpyDeviceToHost),
                 "copying the check's suspects from the device"));
  out.suspects.reserve(suspects);
  for (std::size_t k = 0; k < suspects; ++k) {
    out.suspects.push_back({static_cast<std::size_t>(system[k]), error[k]});
  }
  std::sort(out.suspects.begin(), out.suspects.end(),
            [](const Suspect& p, const Suspect& q) { return p.system < q.system; });
  return Status::ok();
}

}  // namespace stripesolve::tridiag::gpu
