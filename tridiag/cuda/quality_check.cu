// The device check of a solution (quality_check.h): per-row terms of backward_error() with its
// rounding (no fused multiply-add: the CPU build does not contract), reduced per system as the
// bit patterns of non-negative doubles (their order as unsigned integers is their order as
// numbers, and a NaN lands above +inf), then classified against the shared tolerance.
#include <algorithm>
#include <cstring>
#include <string>

#include <climits>
#include <cuda_runtime.h>

#include "tridiag/cuda/cuda_check.h"
#include "tridiag/cuda/quality_check.h"
#include "tridiag/tolerance.h"

namespace stripesolve::tridiag::gpu {

namespace {

constexpr int kWarpSize = 32;
constexpr int kStepsPerWarp = 16;
constexpr std::size_t kRowsPerCheckWarp = kWarpSize * kStepsPerWarp;  // rows a warp checks
constexpr int kBlockThreads = 256;
constexpr unsigned kFullMask = 0xffffffffu;
constexpr unsigned long long kNoSystem = ULLONG_MAX;
constexpr unsigned long long kInfBits = 0x7ff0000000000000ULL;

std::size_t round_up(std::size_t bytes) {
  return (bytes + 255) / 256 * 256;
}

// The reductions' results, the first bytes of the workspace.
struct CheckHeader {
  unsigned long long worst_bits;    // the worst backward error within its tolerance, as bits
  unsigned long long worst_system;  // the first system with it (kNoSystem: none)
  unsigned long long suspects;      // entries in the suspect list
  unsigned long long unused;
};

struct CheckSpace {
  CheckHeader* header;
  double* errors;                      // per system: its backward error; -1 for a suspect
  unsigned long long* maxima;          // strided and ragged: per system |r|, |A| row, |x|, |f|
  unsigned long long* suspect_system;  // the suspects, in no order
  double* suspect_error;
};

CheckSpace carve(void* workspace, BatchLayout layout, std::size_t systems) {
  char* p = static_cast<char*>(workspace);
  CheckSpace s{};
  s.header = reinterpret_cast<CheckHeader*>(p);
  p += round_up(sizeof(CheckHeader));
  s.errors = reinterpret_cast<double*>(p);
  p += round_up(systems * sizeof(double));
  if (layout != BatchLayout::kInterleaved) {
    s.maxima = reinterpret_cast<unsigned long long*>(p);
    p += round_up(4 * systems * sizeof(unsigned long long));
  }
  s.suspect_system = reinterpret_cast<unsigned long long*>(p);
  p += round_up(systems * sizeof(unsigned long long));
  s.suspect_error = reinterpret_cast<double*>(p);
  return s;
}

// A row's (or a system's) maxima of |residual|, |A| row sum, |x| and |f|, as bits.
struct RowBits {
  unsigned long long r, a, x, f;
};

__device__ __forceinline__ unsigned long long bits_of(double v) {
  return static_cast<unsigned long long>(__double_as_longlong(v));
}
__device__ __forceinline__ double double_of(unsigned long long v) {
  return __longlong_as_double(static_cast<long long>(v));
}

__device__ __forceinline__ RowBits max_bits(const RowBits& p, const RowBits& q) {
  return {max(p.r, q.r), max(p.a, q.a), max(p.x, q.x), max(p.f, q.f)};
}

__device__ __forceinline__ RowBits shfl_down(const RowBits& v, int offset) {
  return {__shfl_down_sync(kFullMask, v.r, offset), __shfl_down_sync(kFullMask, v.a, offset),
          __shfl_down_sync(kFullMask, v.x, offset), __shfl_down_sync(kFullMask, v.f, offset)};
}

// One row of backward_error() (backward_error.cc: Maxima::add), in its order of operations.
__device__ __forceinline__ RowBits row_bits(double left, double diag, double right, double x_left,
                                            double x_mid, double x_right, double rhs) {
  const double ax = __dadd_rn(__dadd_rn(__dmul_rn(left, x_left), __dmul_rn(diag, x_mid)),
                              __dmul_rn(right, x_right));
  const double a = __dadd_rn(__dadd_rn(fabs(left), fabs(diag)), fabs(right));
  return {bits_of(fabs(__dsub_rn(rhs, ax))), bits_of(fabs(a)), bits_of(fabs(x_mid)),
          bits_of(fabs(rhs))};
}

// backward_error()'s result from a system's maxima: +inf for a non-finite residual or x.
__device__ double error_of(const RowBits& m) {
  const double inf = double_of(kInfBits);
  if (m.r >= kInfBits || m.x >= kInfBits) return inf;
  const double r = double_of(m.r);
  const double den = __dadd_rn(__dmul_rn(double_of(m.a), double_of(m.x)), double_of(m.f));
  if (den == 0.0) return r == 0.0 ? 0.0 : inf;
  return __ddiv_rn(r, den);
}

// Within the tolerance: a candidate for the worst; else onto the suspect list.
__device__ void classify(std::size_t system, double error, double tolerance,
                         const CheckSpace& space) {
  if (error <= tolerance) {
    space.errors[system] = error;
    atomicMax(&space.header->worst_bits, bits_of(error));
    return;
  }
  space.errors[system] = -1.0;
  const unsigned long long k = atomicAdd(&space.header->suspects, 1ULL);
  space.suspect_system[k] = system;
  space.suspect_error[k] = error;
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
                                         CheckSpace space) {
  const std::size_t s = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x;
  if (s >= systems.count) return;
  const unsigned long long* m = maxima + 4 * s;
  classify(s, error_of({m[0], m[1], m[2], m[3]}),
           backward_error_tolerance_of(systems.begin(s + 1) - systems.begin(s)), space);
}

// A thread a system: element i of system j at i * count + j, so a warp reads 32 consecutive
// doubles of each array at each i.
__global__ void interleaved_errors_kernel(const double* dl, const double* d, const double* du,
                                          const double* f, const double* x, std::size_t n,
                                          std::size_t count, double tolerance, CheckSpace space) {
  const std::size_t j = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x;
  if (j >= count) return;
  RowBits m{0, 0, 0, 0};
  double x_left = 0.0, x_mid = x[j];
  for (std::size_t i = 0; i < n; ++i) {
    const std::size_t at = i * count + j;
    const bool has_right = i + 1 < n;
    const double x_right = has_right ? x[at + count] : 0.0;
    m = max_bits(m, row_bits(i > 0 ? dl[at] : 0.0, d[at], has_right ? du[at] : 0.0, x_left, x_mid,
                             x_right, f[at]));
    x_left = x_mid;
    x_mid = x_right;
  }
  classify(j, error_of(m), tolerance, space);
}

// The first system whose error is the worst one within the tolerance.
__global__ void first_worst_kernel(std::size_t systems, CheckSpace space) {
  const std::size_t s = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x;
  if (s >= systems) return;
  if (bits_of(space.errors[s]) == space.header->worst_bits) {
    atomicMin(&space.header->worst_system, static_cast<unsigned long long>(s));
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
  std::size_t bytes = round_up(sizeof(CheckHeader)) + round_up(systems * sizeof(double)) +
                      round_up(systems * sizeof(unsigned long long)) +
                      round_up(systems * sizeof(double));
  if (layout != BatchLayout::kInterleaved) {
    bytes += round_up(4 * systems * sizeof(unsigned long long));
  }
  return bytes;
}

Status check_on_device(BatchLayout layout, const DeviceBatch& b, std::size_t systems,
                       const std::size_t* offsets, void* workspace, std::size_t workspace_size,
                       void* stream_ptr, DeviceCheck& out) {
  cudaStream_t stream = static_cast<cudaStream_t>(stream_ptr);
  if (systems == 0 || workspace_size < check_workspace_bytes(layout, systems) ||
      (layout == BatchLayout::kRagged && offsets == nullptr) ||
      (layout == BatchLayout::kStrided && b.system_size == 0)) {
    return Status::invalid_argument("check_on_device: a batch of " + std::to_string(systems) +
                                    " systems, " + std::to_string(workspace_size) +
                                    " bytes of workspace, offsets or system size missing");
  }
  const CheckSpace space = carve(workspace, layout, systems);
  EventPair timer;
  STRIPESOLVE_RETURN_IF_ERROR(timer.create());
  STRIPESOLVE_RETURN_IF_ERROR(cuda_check(cudaEventRecord(timer.start, stream), "timing the check"));
  STRIPESOLVE_RETURN_IF_ERROR(cuda_check(
      cudaMemsetAsync(space.header, 0, sizeof(CheckHeader), stream), "clearing the check's state"));
  STRIPESOLVE_RETURN_IF_ERROR(cuda_check(
      cudaMemsetAsync(&space.header->worst_system, 0xFF, sizeof(unsigned long long), stream),
      "clearing the check's state"));
  if (layout == BatchLayout::kInterleaved) {
    interleaved_errors_kernel<<<blocks_for(systems), kBlockThreads, 0, stream>>>(
        b.dl, b.d, b.du, b.f, b.x, b.rows / systems, systems,
        backward_error_tolerance_of(b.rows / systems), space);
    STRIPESOLVE_RETURN_IF_ERROR(cuda_check(cudaGetLastError(), "interleaved check kernel launch"));
  } else {
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
                                                                                space);
    STRIPESOLVE_RETURN_IF_ERROR(cuda_check(cudaGetLastError(), "check errors kernel launch"));
  }
  first_worst_kernel<<<blocks_for(systems), kBlockThreads, 0, stream>>>(systems, space);
  STRIPESOLVE_RETURN_IF_ERROR(cuda_check(cudaGetLastError(), "check worst-system kernel launch"));
  CheckHeader h{};
  STRIPESOLVE_RETURN_IF_ERROR(
      cuda_check(cudaMemcpyAsync(&h, space.header, sizeof h, cudaMemcpyDeviceToHost, stream),
                 "copying the check's result from the device"));
  STRIPESOLVE_RETURN_IF_ERROR(cuda_check(cudaEventRecord(timer.stop, stream), "timing the check"));
  STRIPESOLVE_RETURN_IF_ERROR(cuda_check(cudaStreamSynchronize(stream), "the check on the GPU"));
  float ms = 0.0f;
  STRIPESOLVE_RETURN_IF_ERROR(
      cuda_check(cudaEventElapsedTime(&ms, timer.start, timer.stop), "timing the check"));
  out.seconds = ms / 1e3;
  std::memcpy(&out.worst_clean_error, &h.worst_bits, sizeof(double));
  out.worst_clean_system = h.worst_system == kNoSystem || out.worst_clean_error == 0.0
                               ? 0
                               : static_cast<std::size_t>(h.worst_system);
  out.suspects.clear();
  if (h.suspects == 0) return Status::ok();
  std::vector<unsigned long long> system(h.suspects);
  std::vector<double> error(h.suspects);
  STRIPESOLVE_RETURN_IF_ERROR(
      cuda_check(cudaMemcpy(system.data(), space.suspect_system,
                            h.suspects * sizeof(unsigned long long), cudaMemcpyDeviceToHost),
                 "copying the check's suspects from the device"));
  STRIPESOLVE_RETURN_IF_ERROR(
      cuda_check(cudaMemcpy(error.data(), space.suspect_error, h.suspects * sizeof(double),
                            cudaMemcpyDeviceToHost),
                 "copying the check's suspects from the device"));
  out.suspects.reserve(h.suspects);
  for (std::size_t k = 0; k < h.suspects; ++k) {
    out.suspects.push_back({static_cast<std::size_t>(system[k]), error[k]});
  }
  std::sort(out.suspects.begin(), out.suspects.end(),
            [](const Suspect& p, const Suspect& q) { return p.system < q.system; });
  return Status::ok();
}

}  // namespace stripesolve::tridiag::gpu
