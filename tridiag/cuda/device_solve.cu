// Orchestration of the device solvers: recursive SPIKE levels, the one-pass and shared-memory
// paths (interleaved batches through the one-pass kernels), workspace layout and breakdown
// flags (device_solve.h).
#include <algorithm>
#include <map>
#include <mutex>
#include <string>

#include <climits>
#include <cuda_runtime.h>

#include "tridiag/cuda/cuda_check.h"
#include "tridiag/cuda/device_solve.h"
#include "tridiag/cuda/group_spike.cuh"
#include "tridiag/cuda/interleaved_gepp.cuh"
#include "tridiag/cuda/kernel_choice.h"
#include "tridiag/cuda/reduction_kernels.cuh"
#include "tridiag/cuda/spike_kernels.cuh"

namespace stripesolve::tridiag::gpu {

namespace {

constexpr std::size_t kFlagBytes = 256;

std::size_t round_up(std::size_t v) {
  return (v + 255) / 256 * 256;
}

std::size_t parts_of(std::size_t rows) {
  return (rows + kPartitionRows - 1) / kPartitionRows;
}

// Bytes the two passes over a system of `rows` rows need below it, per level 18 arrays of its
// warp separators (13 from pass 1, 5 for their system), down to a system that fits a group.
std::size_t two_pass_bytes(std::size_t rows) {
  std::size_t total = 0;
  while (rows > kMaxGroupSystem) {
    const std::size_t m = separators(rows);
    total += 18 * round_up(m * sizeof(double));
    rows = m;
  }
  return total;
}

// Bytes the SPIKE levels below a system of `rows` rows need (15 arrays of `parts` per level).
std::size_t spike_level_bytes(std::size_t rows) {
  std::size_t total = 0;
  while (rows > static_cast<std::size_t>(kPartitionRows)) {
    const std::size_t parts = parts_of(rows);
    total += 15 * round_up(parts * sizeof(double));
    rows = parts;
  }
  return total;
}

struct Bump {
  char* p;
  double* take(std::size_t count) {
    double* r = reinterpret_cast<double*>(p);
    p += round_up(count * sizeof(double));
    return r;
  }
};

// The kernels' dynamic shared memory limits, raised once per device: cudaFuncSetAttribute acts on
// the current device only, so a process that raised them on device 0 alone had every launch of
// more than the default 48 KB fail on device 1 ("invalid argument"; a batch spread over two
// GPUs). The first error on a device is every caller's there.
Status ensure_shared_limits() {
  int device = 0;
  STRIPESOLVE_RETURN_IF_ERROR(cuda_check(cudaGetDevice(&device), "cudaGetDevice"));
  static std::mutex mu;
  static std::map<int, cudaError_t> raised;  // by device; guarded by mu
  std::lock_guard<std::mutex> lock(mu);
  auto it = raised.find(device);
  if (it == raised.end()) {
    cudaError_t first = cudaSuccess;
    for (cudaError_t e : {set_shared_memory_limits(), set_reduction_shared_limits(),
                          set_group_spike_limits(), set_interleaved_gepp_limits()}) {
      if (e != cudaSuccess && first == cudaSuccess) first = e;
    }
    it = raised.emplace(device, first).first;
  }
  return cuda_check(it->second, "raising the tridiagonal kernels' shared memory limits on device " +
                                    std::to_string(device));
}

}  // namespace

// Breakdown flags in the workspace: kPivotFlag and kSolutionFlag as LevelArgs' flags[0] and [1];
// kReducedFlag, pivots of the systems of separators, reported only where level 0 found none
// (their failures are mostly another's consequence); in the reduction kernels (cr, pcr and the
// hybrids), the first system whose elimination levels failed a pivot (reduction_kernels.cuh:
// kLevelFlag, the same slot).
enum FlagSlot { kPivotFlag = 0, kSolutionFlag = 1, kReducedFlag = 2, kFlagSlots = 3 };
static_assert(kLevelFlag == kReducedFlag, "read_flags words the reduction kernels' level flag");

// Solves s with `kernel`, choose_kernel's choice for it: the one-pass kernel where its systems
// fit a group, else two passes around the system of warp separators, which is solved the same
// way (with the choice for that system).
Status solve_in_passes(KernelChoice kernel, const OnePass& s, Bump& ws,
                       unsigned long long* reduced_flag, cudaStream_t stream) {
  if (kernel.kernel != Kernel::kSpikeTwoPass) {
    launch_group_spike(s, kernel.width, stream);
    return cuda_check(cudaGetLastError(), "one-pass SPIKE kernel launch");
  }
  const std::size_t m = separators(s.rows);
  WarpEnds e{ws.take(m), ws.take(m), ws.take(m), ws.take(m), {}, {}, {}};
  for (int k = 0; k < 3; ++k) {
    e.z_last[k] = ws.take(m);
    e.e_first[k] = ws.take(m);
    e.z_first[k] = ws.take(m);
  }
  double *L = ws.take(m), *D = ws.take(m), *U = ws.take(m), *G = ws.take(m), *xs = ws.take(m);
  launch_warp_ends(s, e, stream);
  STRIPESOLVE_RETURN_IF_ERROR(cuda_check(cudaGetLastError(), "SPIKE pass 1 (warp ends) launch"));
  launch_form_separators(e, m, L, D, U, G, stream);
  STRIPESOLVE_RETURN_IF_ERROR(cuda_check(cudaGetLastError(), "warp separator system launch"));
  const OnePass reduced{s.pivoting,          L, D, U, G, xs, m, m, s.tol, reduced_flag, nullptr,
                        s.stride * kWarpRows};
  const KernelChoice next =
      choose_kernel(s.pivoting ? Algorithm::kSpike : Algorithm::kThomas, BatchLayout::kStrided, m);
  STRIPESOLVE_RETURN_IF_ERROR(solve_in_passes(next, reduced, ws, reduced_flag, stream));
  launch_warp_finish(s, xs, stream);
  return cuda_check(cudaGetLastError(), "SPIKE pass 2 (warp finish) launch");
}

// Solves one level: pass 1, the reduced system (recursively), pass 2.
Status spike_level(bool pivoting, const double* dl, const double* d, const double* du,
                   const double* f, double* x, LevelArgs args, Bump& ws, cudaStream_t stream) {
  if (args.rows <= static_cast<std::size_t>(kPartitionRows)) {
    launch_small_system(pivoting, dl, d, du, f, x, args, stream);
    return cuda_check(cudaGetLastError(), "small-system kernel launch");
  }
  const std::size_t parts = parts_of(args.rows);
  const std::size_t tiles = (parts + kPartitionsPerBlock - 1) / kPartitionsPerBlock;
  PartitionData pd{ws.take(parts), ws.take(parts), ws.take(parts), ws.take(parts), ws.take(parts),
                   ws.take(parts), ws.take(parts), ws.take(parts), ws.take(parts), ws.take(parts)};
  double *rl = ws.take(parts), *rd = ws.take(parts), *ru = ws.take(parts);
  double *rf = ws.take(parts), *rx = ws.take(parts);
  launch_partition_ends(pivoting, dl, d, du, f, 0, 0, tiles, args, pd, stream);
  STRIPESOLVE_RETURN_IF_ERROR(
      cuda_check(cudaGetLastError(), "SPIKE pass 1 (partition ends) launch"));
  launch_form_reduced(pd, parts, rl, rd, ru, rf, stream);
  STRIPESOLVE_RETURN_IF_ERROR(cuda_check(cudaGetLastError(), "SPIKE reduced-system launch"));
  LevelArgs next = args;
  next.rows = parts;
  next.system_size = 0;
  next.level_stride = args.level_stride * kPartitionRows;
  STRIPESOLVE_RETURN_IF_ERROR(spike_level(pivoting, rl, rd, ru, rf, rx, next, ws, stream));
  launch_partition_solve(pivoting, dl, d, du, f, x, 0, 0, tiles, rx, args, stream);
  return cuda_check(cudaGetLastError(), "SPIKE pass 2 (partition solve) launch");
}

std::size_t workspace_bytes(Algorithm algorithm, BatchLayout layout, std::size_t rows,
                            std::size_t n) {
  if (algorithm == Algorithm::kSpike || algorithm == Algorithm::kThomas) {
    return kFlagBytes + std::max(spike_level_bytes(rows), two_pass_bytes(rows));
  }
  if (algorithm == Algorithm::kGepp && layout == BatchLayout::kInterleaved && n > 0) {
    return kFlagBytes + interleaved_gepp_workspace_bytes(n, rows / n);
  }
  return kFlagBytes;
}

// The first breakdown the flags hold as a kNumerical status naming the system (where the batch
// has several) and the row; `level_words`, where given, word kReducedFlag's failure without a
// row (the reduction kernels' levels: reduction_kernels.cuh, kLevelFlag).
constexpr const char* kPivotWords = " (GPU): zero, tiny or non-finite pivot at row ";
Status read_flags(const char* name, const unsigned long long* dev_flags, std::size_t n_per_system,
                  std::size_t rows, cudaStream_t stream, const char* pivot_words = kPivotWords,
                  const char* level_words = nullptr) {
  unsigned long long flags[kFlagSlots];
  STRIPESOLVE_RETURN_IF_ERROR(
      cuda_check(cudaMemcpyAsync(flags, dev_flags, sizeof flags, cudaMemcpyDeviceToHost, stream),
                 "reading the breakdown flags"));
  STRIPESOLVE_RETURN_IF_ERROR(
      cuda_check(cudaStreamSynchronize(stream), "tridiagonal solve on the GPU"));
  for (int k : {kPivotFlag, kReducedFlag, kSolutionFlag}) {
    if (flags[k] == ULLONG_MAX) continue;
    std::string where;
    if (n_per_system != 0 && n_per_system < rows) {
      where = "system " + std::to_string(flags[k] / n_per_system) + ": ";
    }
    if (k == kReducedFlag && level_words != nullptr) {
      return Status::numerical(where + name + level_words);
    }
    const std::size_t row = n_per_system != 0 ? flags[k] % n_per_system : flags[k];
    return Status::numerical(
        where + name + (k != kSolutionFlag ? pivot_words : " (GPU): non-finite solution at row ") +
        std::to_string(row));
  }
  return Status::ok();
}

namespace {

// Before a solve: the kernels' shared-memory limits set, and the breakdown flags at the start
// of `workspace` cleared (all ones: no breakdown yet).
Result<unsigned long long*> start_flags(void* workspace, cudaStream_t stream) {
  STRIPESOLVE_RETURN_IF_ERROR(ensure_shared_limits());
  auto* flags = static_cast<unsigned long long*>(workspace);
  STRIPESOLVE_RETURN_IF_ERROR(
      cuda_check(cudaMemsetAsync(flags, 0xFF, kFlagSlots * sizeof(unsigned long long), stream),
                 "clearing the breakdown flags"));
  return flags;
}

}  // namespace

Status solve_device(Algorithm algorithm, BatchLayout layout, const DeviceBatch& b, void* workspace,
                    std::size_t workspace_size, double pivot_tolerance, void* stream_ptr,
                    CheckTarget* check) {
  cudaStream_t stream = static_cast<cudaStream_t>(stream_ptr);
  // Ragged batches, and strided ones of system_size 0 (one system), are one system of all their
  // rows to the kernels.
  const bool one_system = layout != BatchLayout::kInterleaved && b.system_size == 0;
  const std::size_t n = layout == BatchLayout::kInterleaved ? b.rows / b.count
                        : one_system                        ? b.rows
                                                            : b.system_size;
  const KernelChoice kernel =
      choose_kernel(algorithm, one_system ? BatchLayout::kRagged : layout, n);
  if (kernel.kernel == Kernel::kUnsupported) {
    return Status::unimplemented(std::string(algorithm_name(algorithm)) +
                                 " is not available on the GPU for this batch (GPU: spike and "
                                 "thomas for every layout; cr, pcr and their hybrids for strided "
                                 "batches of n <= " +
                                 std::to_string(kMaxReductionSystem) +
                                 "; gepp for interleaved batches)");
  }
  const std::size_t needed = workspace_bytes(algorithm, layout, b.rows, n);
  if (workspace_size < needed) {
    return Status::invalid_argument("GPU workspace of " + std::to_string(workspace_size) +
                                    " bytes is smaller than the " + std::to_string(needed) +
                                    " bytes needed");
  }
  STRIPESOLVE_ASSIGN_OR_RETURN(unsigned long long* const flags, start_flags(workspace, stream));
  Bump ws{static_cast<char*>(workspace) + kFlagBytes};
  const bool pivoting = algorithm == Algorithm::kSpike;
  const char* name = algorithm_name(algorithm).data();
  switch (kernel.kernel) {
    case Kernel::kSmallSystem: {
      const LevelArgs args{b.rows, b.system_size, 1, b.rows, pivot_tolerance, flags};
      launch_small_system(pivoting, b.dl, b.d, b.du, b.f, b.x, args, stream);
      STRIPESOLVE_RETURN_IF_ERROR(cuda_check(cudaGetLastError(), "small-system kernel launch"));
      return read_flags(name, flags, b.system_size, b.rows, stream);
    }
    case Kernel::kGroupSpikeSystemsPerWarp:
    case Kernel::kGroupSpikeWarpsPerSystem:
    case Kernel::kSpikeTwoPass: {
      // Ragged batches have their couplings zeroed, so that they are one system to the kernels.
      OnePass s{pivoting,
                b.dl,
                b.d,
                b.du,
                b.f,
                b.x,
                b.rows,
                n,
                pivot_tolerance,
                flags + kPivotFlag,
                flags + kSolutionFlag,
                1,
                layout == BatchLayout::kInterleaved ? b.count : 0};
      // The one-pass kernels check the systems of a strided batch as they go. Interleaved
      // batches (but gepp's, below) are checked apart: the separate pass, in runs of rows where the
      // systems are few, costs less than the rows read again in the kernel (H200, n = 64: +48% of
      // the solve against +96%; docs/performance.md).
      const bool fused = layout == BatchLayout::kStrided && kernel.kernel != Kernel::kSpikeTwoPass;
      if (check != nullptr && fused && !one_system && layout != BatchLayout::kRagged) {
        s.check = *check;
        check->rows_checked = true;
      }
      STRIPESOLVE_RETURN_IF_ERROR(solve_in_passes(kernel, s, ws, flags + kReducedFlag, stream));
      return read_flags(name, flags, layout == BatchLayout::kInterleaved ? n : b.system_size,
                        b.rows, stream);
    }
    case Kernel::kInterleavedGepp: {
      const std::size_t saved = interleaved_gepp_workspace_bytes(n, b.count) / sizeof(double);
      double* const pivot_rows = saved > 0 ? ws.take(saved) : nullptr;
      InterleavedGepp a{
          b.dl,      b.d, b.du, b.f, b.x, n, b.count, flags + kPivotFlag, flags + kSolutionFlag,
          pivot_rows};
      // Large batches are checked as their substitution goes (interleaved_gepp.cu:
      // recomputed_chunks), the rest apart.
      if (check != nullptr) a.check = *check;
      if (launch_interleaved_gepp(a, GeppKernel::kChoose, stream) && check != nullptr) {
        check->rows_checked = true;
      }
      STRIPESOLVE_RETURN_IF_ERROR(cuda_check(cudaGetLastError(), "interleaved gepp launch"));
      return read_flags(name, flags, n, b.rows, stream,
                        " (GPU): matrix is singular: zero pivot at row ");
    }
    default:
      launch_reduction_solver(kernel, algorithm, b.dl, b.d, b.du, b.f, b.x, n, b.rows / n,
                              pivot_tolerance, flags, stream);
      STRIPESOLVE_RETURN_IF_ERROR(
          cuda_check(cudaGetLastError(), std::string(name) + " kernel launch"));
      return read_flags(name, flags, n, b.rows, stream, kPivotWords,
                        " (GPU): zero, tiny or non-finite pivot in an elimination level");
  }
}

std::size_t chunked_workspace_bytes(std::size_t rows) {
  const std::size_t parts = parts_of(rows);
  return kFlagBytes + 15 * round_up(parts * sizeof(double)) + spike_level_bytes(parts);
}

Status solve_host_chunked(bool pivoting, const double* dl, const double* d, const double* du,
                          const double* f, double* x, std::size_t rows, std::size_t system_size,
                          std::size_t chunk_rows, double* const chunk[5], void* workspace,
                          std::size_t workspace_size, double pivot_tolerance, void* stream_ptr) {
  cudaStream_t stream = static_cast<cudaStream_t>(stream_ptr);
  if (workspace_size < chunked_workspace_bytes(rows) || chunk_rows % kChunkGranularity != 0 ||
      chunk_rows == 0) {
    return Status::invalid_argument("chunked GPU solve: workspace or chunk size too small");
  }
  STRIPESOLVE_ASSIGN_OR_RETURN(unsigned long long* const flags, start_flags(workspace, stream));
  Bump ws{static_cast<char*>(workspace) + kFlagBytes};
  const std::size_t parts = parts_of(rows);
  PartitionData pd{ws.take(parts), ws.take(parts), ws.take(parts), ws.take(parts), ws.take(parts),
                   ws.take(parts), ws.take(parts), ws.take(parts), ws.take(parts), ws.take(parts)};
  double *rl = ws.take(parts), *rd = ws.take(parts), *ru = ws.take(parts);
  double *rf = ws.take(parts), *rx = ws.take(parts);
  LevelArgs args{rows, system_size, 1, rows, pivot_tolerance, flags};
  const double* host_in[4] = {dl, d, du, f};
  auto upload = [&](std::size_t row0, std::size_t count) -> Status {
    for (int k = 0; k < 4; ++k) {
      STRIPESOLVE_RETURN_IF_ERROR(
          cuda_check(cudaMemcpyAsync(chunk[k], host_in[k] + row0, count * sizeof(double),
                                     cudaMemcpyHostToDevice, stream),
                     "uploading chunk at row " + std::to_string(row0)));
    }
    return Status::ok();
  };
  for (std::size_t row0 = 0; row0 < rows; row0 += chunk_rows) {
    const std::size_t count = std::min(chunk_rows, rows - row0);
    STRIPESOLVE_RETURN_IF_ERROR(upload(row0, count));
    const std::size_t tiles = (count + kTileRows - 1) / kTileRows;
    launch_partition_ends(pivoting, chunk[0], chunk[1], chunk[2], chunk[3], row0, row0 / kTileRows,
                          tiles, args, pd, stream);
    STRIPESOLVE_RETURN_IF_ERROR(cuda_check(
        cudaGetLastError(), "SPIKE pass 1 launch (chunk at row " + std::to_string(row0) + ")"));
  }
  launch_form_reduced(pd, parts, rl, rd, ru, rf, stream);
  STRIPESOLVE_RETURN_IF_ERROR(cuda_check(cudaGetLastError(), "SPIKE reduced-system launch"));
  LevelArgs next{parts, 0, kPartitionRows, rows, pivot_tolerance, flags};
  STRIPESOLVE_RETURN_IF_ERROR(spike_level(pivoting, rl, rd, ru, rf, rx, next, ws, stream));
  for (std::size_t row0 = 0; row0 < rows; row0 += chunk_rows) {
    const std::size_t count = std::min(chunk_rows, rows - row0);
    STRIPESOLVE_RETURN_IF_ERROR(upload(row0, count));
    const std::size_t tiles = (count + kTileRows - 1) / kTileRows;
    launch_partition_solve(pivoting, chunk[0], chunk[1], chunk[2], chunk[3], chunk[4], row0,
                           row0 / kTileRows, tiles, rx, args, stream);
    STRIPESOLVE_RETURN_IF_ERROR(cuda_check(
        cudaGetLastError(), "SPIKE pass 2 launch (chunk at row " + std::to_string(row0) + ")"));
    STRIPESOLVE_RETURN_IF_ERROR(cuda_check(
        cudaMemcpyAsync(x + row0, chunk[4], count * sizeof(double), cudaMemcpyDeviceToHost, stream),
        "downloading chunk at row " + std::to_string(row0)));
  }
  return read_flags(pivoting ? "spike" : "thomas", flags, system_size, rows, stream);
}

namespace {
__global__ void zero_couplings_kernel(double* dl, double* du, const std::size_t* offsets,
                                      std::size_t count) {
  const std::size_t j = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x;
  if (j >= count) return;
  dl[offsets[j]] = 0.0;
  du[offsets[j + 1] - 1] = 0.0;
}
}  // namespace

Status zero_ragged_couplings(double* dl, double* du, const std::size_t* offsets, std::size_t count,
                             void* stream) {
  const unsigned blocks = static_cast<unsigned>((count + 255) / 256);
  zero_couplings_kernel<<<blocks, 256, 0, static_cast<cudaStream_t>(stream)>>>(dl, du, offsets,
                                                                               count);
  return cuda_check(cudaGetLastError(), "ragged coupling kernel launch");
}

Result<int> device_count() {
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    return Status::unavailable(std::string("cudaGetDeviceCount: ") + cudaGetErrorString(err));
  }
  return count;
}

}  // namespace stripesolve::tridiag::gpu
