// One-pass SPIKE for strided batches (000 §II-III), three levels deep, every system read once
// and written once (40 bytes per unknown); and the same kernel as the first level of two passes
// for larger systems. Interleaved batches (row i of system j at i * count + j) go through the
// same kernels: a block copies its systems' rows in and out together, consecutive threads taking
// consecutive systems (load_block_interleaved), and the two passes read through RowPlace.
//
// A group of W warps owns whole systems: one system of up to 288 W rows, or 288 / n systems of
// n <= 288 rows (decoupled by zeroing dl and du at their boundaries); a block holds about 4
// warps' worth of groups. Each lane owns a partition of 9 consecutive rows in registers: 8
// interior rows and a separator, as in spike_kernels.cu.
//   Lane level: the lane factors its interior (diagonal pivoting, or Thomas) and solves it for
//     f and for the two spikes (the couplings to the separators left and right), fully
//     unrolled so that every array stays in registers.
//   Warp level: the 32 separators of a warp form a tridiagonal system whose first 31 rows are
//     the warp's "interior" and whose last row separates it from the next warp. That interior
//     is solved for its three right-hand sides (its own, and the couplings to the previous and
//     to its own warp separator) by SPIKE once more, 4 partitions of 7 rows on 12 lanes, with
//     a backward-error check that redoes it whole where a partition was ill-conditioned
//     (warp_solves.h). (Packing all the block's warp-level solves onto the lanes of one warp
//     saves issue slots but lengthens the block's serial phase; measured slower.)
//   Group level: the group's first warp solves its W warp separators, by PCR first and
//     serially with pivoting where that is not backward stable (pcr_first_solve,
//     group_solve.h). Where a group is one warp, only warp barriers separate the levels.
// Then every level's solution is put together from the one above it, from registers and shared
// memory, and x goes out coalesced through a shared staging buffer. Loads are coalesced too:
// cp.async into shared memory (load_rows), read back by each lane at a stride of 9 doubles (free
// of bank conflicts).
//
// A system larger than a group is solved in two passes of lone warps (Pass::kEnds, then
// Pass::kFinish after the caller has solved the system of warp separators): 72 bytes per
// unknown, against the 72 plus about a third of spike_kernels.cu's 9-row levels, whose
// reduced systems go through global memory level by level.
//
// The shared memory, the arguments and the copies of rows in and out: group_rows.cuh; the
// quality check's steps: group_spike_check.cuh.
#include <algorithm>
#include <cstdint>

#include <cuda_pipeline.h>
#include <cuda_runtime.h>

#include "tridiag/cuda/group_check.cuh"
#include "tridiag/cuda/group_rows.cuh"
#include "tridiag/cuda/group_solve.h"
#include "tridiag/cuda/group_spike.cuh"
#include "tridiag/cuda/group_spike_check.cuh"
#include "tridiag/cuda/small_solves.h"
#include "tridiag/cuda/warp_solves.h"

namespace stripesolve::tridiag::gpu {

namespace {

using group::BlockSystems;
using group::check_rows;
using group::check_verdicts;
using group::flag;
using group::for_block_rows;
using group::group_start;
using group::GroupArgs;
using group::GroupShared;
using group::LaneCheck;
using group::load_block_interleaved;
using group::load_rows;
using group::reload_matrix_rows;
using group::RowPlace;
using group::shared_bytes;
using group::store_block_interleaved;
using group::WarpShared;

constexpr int Q = kLaneQ;  // interior rows of a lane
constexpr unsigned kFullMask = 0xffffffffu;
constexpr int kBlockWarps = 4;  // warps per block when groups are smaller
// Systems of an interleaved batch a block takes where it can hold them (up to kMaxGroupWarps
// warps), so that one row of them is 128 contiguous bytes (docs/performance.md).
constexpr int kInterleavedBlockSystems = 16;

// What a launch does: a whole solve, or pass 1 or 2 of a system larger than a group.
enum class Pass { kWhole, kEnds, kFinish };

// Reports a breakdown of group gi's system of warp separators at its row `bad` (none: -1),
// only where no warp of the group failed beneath: a warp's failure makes the separators next to
// it non-finite, and the report names the row that caused it.
__device__ void report_group(const GroupArgs& g, const GroupShared& gs, int gi, int bad) {
  bool beneath = false;
  for (int k = 0; k < g.warps; ++k) beneath |= gs.failed[k];
  if (bad >= 0 && !beneath) {
    int rows = 0;
    std::size_t group = 0;
    const std::size_t row0 = group_start(g, gi, rows, group);
    const int row = bad * kWarpRows + kWarpRows - 1;
    if (row < rows) flag(g, g.s.pivot_flag, row0 + row);
  }
}

// Row k of the system of warp separators: warp k's separator row with its own interior
// substituted (its part rl, rd, cs, rg and its warp level's last row z, from Pass::kEnds or
// lane 31) and the next warp's (that warp's lane 0's first interior row e and its warp level's
// first row n, for f and the two spikes; zeros after the last warp).
struct SeparatorRow {
  double l, d, u, g;
};
__device__ SeparatorRow separator_row(double rl, double rd, double cs, double rg,
                                      const double (&z)[3], const double (&e)[3],
                                      const double (&n)[3]) {
  const double ru = cs * e[2];
  rd += cs * e[1];
  rg -= cs * e[0];
  return {rl * z[1], rd + rl * z[2] + ru * n[1], ru * n[2], rg - rl * z[0] - ru * n[0]};
}

// Group gi's system of warp separators (W > 1 rows), solved by its first warp: lane k puts row k
// together from shared memory; with pivoting, PCR first and diagonal pivoting where that is not
// backward stable (pcr_first_solve), without, Thomas with the tiny-pivot test by lane 0. Before
// the warp, one thread solved it serially (Thomas first, then pivoting where needed) with the
// rest of the block waiting: see docs/performance.md.
template <bool kPivot>
__device__ void solve_group(const GroupArgs& g, GroupShared& gs, const WarpShared* group_warps,
                            int gi, int lane) {
  const int q = g.warps;
  SeparatorRow row{0.0, 1.0, 0.0, 0.0};
  if (lane < q) {
    const bool last = lane + 1 == q;
    const WarpShared& own = group_warps[lane];
    const WarpShared& next = group_warps[last ? lane : lane + 1];
    double z[3], e[3], n[3];
#pragma unroll
    for (int k = 0; k < 3; ++k) {
      z[k] = own.sys.Z[k][30];
      e[k] = last ? 0.0 : next.ends[k];
      n[k] = last ? 0.0 : next.sys.Z[k][0];
    }
    row = separator_row(gs.RL[lane], gs.RD[lane], gs.CS[lane], gs.RG[lane], z, e, n);
  }
  int bad = -1;
  GroupSystem& s = gs.sys;
  if constexpr (kPivot) {
    DeviceWarp warp;
    bad = pcr_first_solve(s, q, lane, row.l, row.d, row.u, row.g, warp);
  } else {
    if (lane < q) {
      s.L[lane] = row.l;
      s.D[lane] = row.d;
      s.U[lane] = row.u;
      s.G[lane] = row.g;
    }
    __syncwarp();
    if (lane == 0) bad = thomas_solve(s.L, s.D, s.U, s.G, s.piv, q, g.s.tol);
  }
  if (lane == 0) report_group(g, gs, gi, bad);
}

// The system of a group of one warp: one row, which lane 31 holds (rl, rd, cs, rg).
template <bool kPivot>
__device__ void solve_lone_group(const GroupArgs& g, GroupShared& gs, int gi, double rl, double rd,
                                 double cs, double rg, const WarpShared& ws) {
  const double z[3] = {ws.sys.Z[0][30], ws.sys.Z[1][30], ws.sys.Z[2][30]}, none[3] = {};
  const SeparatorRow r = separator_row(rl, rd, cs, rg, z, none, none);
  GroupSystem& s = gs.sys;
  s.L[0] = r.l;
  s.D[0] = r.d;
  s.U[0] = r.u;
  s.G[0] = r.g;
  const int bad = kPivot ? pivot_solve(s.L, s.D, s.U, s.G, s.piv, s.rinv, 1)
                         : thomas_solve(s.L, s.D, s.U, s.G, s.piv, 1, g.s.tol);
  report_group(g, gs, gi, bad);
}

// The barrier between levels: the block's, or only the warp's where every group is one warp
// (n <= 288, and both passes of larger systems), so that a warp held up (by the warp level's
// fallback) holds up no other.
__device__ void level_barrier(bool lone) {
  if (lone) {
    __syncwarp();
  } else {
    __syncthreads();
  }
}

// kPivot: diagonal pivoting at every level, else Thomas with the tiny-pivot test. Up to 128
// registers a thread: 4 blocks of 4 warps per SM. Forcing 5 or 6 (96 and 80 registers,
// spilling) was measured slower: spike at n = 256 fell from 42 to 30 and 24 G unknowns/s (H100).
// kLone: every group is one warp (g.warps == 1).
// kCheck (whole solves of strided batches only): the quality check as x goes out
// (group_check.cuh).
template <bool kPivot, Pass kPass, bool kLone, bool kInterleaved, bool kCheck = false>
__global__ void __launch_bounds__(32 * kMaxGroupWarps) group_spike_kernel(GroupArgs g) {
  static_assert(!(kCheck && kInterleaved), "interleaved batches are checked apart");
  constexpr bool kFlagPivots = kPass != Pass::kFinish;  // pass 2 meets what pass 1 reported
  extern __shared__ double smem[];
  const int wb = threadIdx.x >> 5, lane = threadIdx.x & 31;
  WarpShared* const warps = reinterpret_cast<WarpShared*>(smem);
  GroupShared* const groups = reinterpret_cast<GroupShared*>(warps + g.warps * g.groups_per_block);
  WarpShared& ws = warps[wb];
  const int gi = wb / g.warps, w = wb % g.warps;
  int group_rows = 0;
  std::size_t group = 0;
  const std::size_t group_row0 = group_start(g, gi, group_rows, group);
  const int warp_row0 = w * kWarpRows;
  constexpr bool lone = kLone;
  double x_left = 0.0, x_right = 0.0;  // Pass::kFinish: the warp's separators, loaded early
  if constexpr (kPass == Pass::kFinish) {
    if (group_rows > 0) {
      x_right = g.x_sep[group];
      x_left = group > 0 ? g.x_sep[group - 1] : 0.0;
    }
  }
  // Interleaved batches: the block reads (and writes) its systems together.
  constexpr bool block_io = kInterleaved && kPass == Pass::kWhole;
  if constexpr (block_io) {
    load_block_interleaved(g, warps, group_rows, warp_row0, lane);
  } else {
    load_rows<kInterleaved>(g, ws, group_row0, warp_row0, group_rows, lane);
  }
  __pipeline_commit();
  __pipeline_wait_prior(0);
  if constexpr (block_io) {
    __syncthreads();
  } else {
    __syncwarp();
  }
  // Lane level. Couplings across system boundaries are zeroed in shared memory first.
  const int r0 = lane * kLaneRows;
  double* const a = &ws.in[0][r0];
  double* const c = &ws.in[2][r0];
  double b[kLaneRows], y[kLaneRows], sl[Q], sr[Q];
  std::size_t sys_row = (group_row0 + warp_row0 + r0) % g.s.n;
#pragma unroll
  for (int k = 0; k < kLaneRows; ++k) {
    if (sys_row == 0) a[k] = 0.0;
    if (sys_row + 1 == g.s.n) c[k] = 0.0;
    if (++sys_row == g.s.n) sys_row = 0;
    b[k] = ws.in[1][r0 + k];
    y[k] = ws.f[r0 + k];
  }
  const int bad_lane = lane_solve<kPivot>(a, b, c, y, sl, sr, g.s.tol);
  const bool lane_failed = bad_lane >= 0 && warp_row0 + r0 + bad_lane < group_rows;
  if (kFlagPivots && lane_failed) {
    flag(g, g.s.pivot_flag, group_row0 + warp_row0 + r0 + bad_lane);
  }
  bool failed = __any_sync(kFullMask, lane_failed);  // a row of this warp, so far
  if (lane == 0) {
    ws.ends[0] = y[0];
    ws.ends[1] = sl[0];
    ws.ends[2] = sr[0];
  }

  // Warp level: the lane's separator row with its interior ends substituted, the right
  // neighbour's by shuffle. Lane 31's row, the warp separator, belongs to the group level: it
  // takes the next warp's ends there, after the barrier, so that no barrier is needed here.
  const double ny = __shfl_down_sync(kFullMask, y[0], 1);
  const double nl = __shfl_down_sync(kFullMask, sl[0], 1);
  const double nr = __shfl_down_sync(kFullMask, sr[0], 1);
  const double as = a[Q], cs = c[Q];
  const double RL = as * sl[Q - 1];
  double RD = b[Q] + as * sr[Q - 1], RU = 0.0, RG = y[Q] - as * y[Q - 1];
  if (lane < 31) {  // the right neighbour's interior ends
    RD += cs * nl;
    RU = cs * nr;
    RG -= cs * ny;
  }
  __syncwarp();  // every lane has read its a and c: the warp-level system may overwrite them
  ws.sys.L[lane] = RL;
  ws.sys.D[lane] = RD;
  ws.sys.U[lane] = RU;
  ws.sys.Z[0][lane] = RG;
  ws.sys.Z[1][lane] = lane == 0 ? -RL : 0.0;
  ws.sys.Z[2][lane] = lane == 30 ? -RU : 0.0;
  __syncwarp();
  {
    DeviceWarp warp;
    const int bad = warp_level_solve<kPivot>(ws.sys, lane, g.s.tol, warp);
    const int row = warp_row0 + bad * kLaneRows + Q;
    const bool separator_failed = bad >= 0 && row < group_rows;
    // A lane's failure makes the separators beside it non-finite: it is the cause to report.
    if (kFlagPivots && separator_failed && !failed) flag(g, g.s.pivot_flag, group_row0 + row);
    failed = __any_sync(kFullMask, failed || separator_failed);
  }
  if constexpr (kPass == Pass::kEnds) {
    // The warp's parts of the separator rows of the reduced system: its own (lane 31's row,
    // whose next-warp terms launch_form_separators adds) and its first rows', which the
    // previous warp's separator row takes.
    if (group_rows == 0) return;
    const WarpEnds& e = g.ends;
    if (lane == 31) {
      e.rl[group] = RL;
      e.rd[group] = RD;
      e.cs[group] = cs;
      e.rg[group] = RG;
      for (int k = 0; k < 3; ++k) e.z_last[k][group] = ws.sys.Z[k][30];
    } else if (lane == 0) {
      e.e_first[0][group] = y[0];
      e.e_first[1][group] = sl[0];
      e.e_first[2][group] = sr[0];
      for (int k = 0; k < 3; ++k) e.z_first[k][group] = ws.sys.Z[k][0];
    }
    return;
  }
  double xl = x_left, xr = x_right;
  if constexpr (kPass == Pass::kWhole) {
    GroupShared& gs = groups[gi];
    if (lane == 31) {
      gs.failed[w] = failed;
      if constexpr (lone) {
        solve_lone_group<kPivot>(g, gs, gi, RL, RD, cs, RG, ws);
      } else {  // the warp's part of its separator's row; the group's first warp adds the rest
        gs.RL[w] = RL;
        gs.RD[w] = RD;
        gs.CS[w] = cs;
        gs.RG[w] = RG;
      }
    }
    level_barrier(lone);  // every warp's ends and warp-level solution are in shared memory
    if constexpr (!lone) {
      if (w == 0) solve_group<kPivot>(g, gs, warps + gi * g.warps, gi, lane);
      __syncthreads();
    }
    xr = gs.sys.G[w];
    xl = w > 0 ? gs.sys.G[w - 1] : 0.0;
  }
  // Back down: warp separators, lane separators, interiors.
  const double xs =
      lane < 31 ? ws.sys.Z[0][lane] + ws.sys.Z[1][lane] * xl + ws.sys.Z[2][lane] * xr : xr;
  double xp = __shfl_up_sync(kFullMask, xs, 1);
  if (lane == 0) xp = xl;
  double* const out = ws.f;
  [[maybe_unused]] LaneCheck checked;
  if constexpr (kCheck) {
    check_rows<lone>(g, ws, groups[gi], w, group, group_row0, warp_row0, group_rows, lane, y, sl,
                     sr, xp, xs, checked);
  } else {
#pragma unroll
    for (int k = 0; k < Q; ++k) out[r0 + k] = y[k] + sl[k] * xp + sr[k] * xs;
    out[r0 + Q] = xs;
  }
  // An interleaved block's x goes out together (its check is the separate pass).
  if constexpr (block_io) {
    __syncthreads();
    store_block_interleaved(g, warps);
    return;
  }
  __syncwarp();
  RowPlace<kInterleaved> place(g.s, group_row0 + warp_row0 + lane);
  for (int i = lane; i < kWarpRows; i += 32, place.advance(g.s, 32)) {
    const int r = warp_row0 + i;
    if (r >= group_rows) break;
    const double v = out[i];
    if (!isfinite(v) && g.s.x_flag != nullptr) flag(g, g.s.x_flag, group_row0 + r);
    g.s.x[place.at(g.s)] = v;
  }
  // kCheck: the verdicts, while x goes out.
  if constexpr (kCheck) {
    check_verdicts<lone>(g, ws, groups[gi], w, group, group_rows, checked, lane);
  }
}

// Row i of the system of warp separators from the parts pass 1 left: warp i's own and the
// first rows of warp i + 1.
__global__ void form_separators_kernel(WarpEnds e, std::size_t count, double* L, double* D,
                                       double* U, double* G) {
  const std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x;
  if (i >= count) return;
  const bool last = i + 1 == count;
  double z[3], first[3], n[3];
#pragma unroll
  for (int k = 0; k < 3; ++k) {
    z[k] = e.z_last[k][i];
    first[k] = last ? 0.0 : e.e_first[k][i + 1];
    n[k] = last ? 0.0 : e.z_first[k][i + 1];
  }
  const SeparatorRow r = separator_row(e.rl[i], e.rd[i], e.cs[i], e.rg[i], z, first, n);
  L[i] = r.l;
  D[i] = r.d;
  U[i] = r.u;
  G[i] = r.g;
}

// Interleaved batches are never checked in the kernel: the separate pass costs less
// (quality_check.cu; docs/performance.md, twenty-third session).
template <Pass kPass, bool kLone, bool kCheck>
void launch_checked(const GroupArgs& g, std::size_t blocks, int threads, std::size_t bytes,
                    void* stream) {
  const bool il = g.s.count != 0;
  auto kernel = g.s.pivoting ? (il ? group_spike_kernel<true, kPass, kLone, true>
                                   : group_spike_kernel<true, kPass, kLone, false, kCheck>)
                             : (il ? group_spike_kernel<false, kPass, kLone, true>
                                   : group_spike_kernel<false, kPass, kLone, false, kCheck>);
  kernel<<<static_cast<unsigned>(blocks), threads, bytes, static_cast<cudaStream_t>(stream)>>>(g);
}

// Whole solves check where the caller gave a target; the two passes never do.
template <Pass kPass, bool kLone>
void launch(const GroupArgs& g, std::size_t blocks, int threads, std::size_t bytes, void* stream) {
  if (kPass == Pass::kWhole && g.s.check.errors != nullptr) {
    launch_checked<kPass, kLone, kPass == Pass::kWhole>(g, blocks, threads, bytes, stream);
  } else {
    launch_checked<kPass, kLone, false>(g, blocks, threads, bytes, stream);
  }
}

// The shared memory a launch of launch<kPass, kLone> may ask for, both pivoting variants, with
// and without the check.
template <Pass kPass, bool kLone, bool kCheck>
cudaError_t set_limits() {
  std::size_t bytes = 0;  // the largest block: W warps a group, up to kMaxGroupWarps / W groups
  for (int w = 1; w <= kMaxGroupWarps; ++w) {
    bytes = std::max(bytes, shared_bytes(w, std::max(1, kMaxGroupWarps / w)));
  }
  const int most = static_cast<int>(bytes);
  for (auto k : {group_spike_kernel<true, kPass, kLone, false, kCheck>,
                 group_spike_kernel<false, kPass, kLone, false, kCheck>,
                 group_spike_kernel<true, kPass, kLone, true>,
                 group_spike_kernel<false, kPass, kLone, true>}) {
    const cudaError_t e =
        cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, most);
    if (e != cudaSuccess) return e;
  }
  return cudaSuccess;
}

// Both passes: groups of one warp, 288 rows each, kBlockWarps to a block.
template <Pass kPass>
void launch_lone_warps(const OnePass& s, const WarpEnds& ends, const double* x_sep, void* stream) {
  const GroupArgs g{s, kWarpRows, 1, kBlockWarps, ends, x_sep};
  const std::size_t blocks = (separators(s.rows) + kBlockWarps - 1) / kBlockWarps;
  launch<kPass, true>(g, blocks, 32 * kBlockWarps, shared_bytes(1, kBlockWarps), stream);
}

}  // namespace

void launch_group_spike(const OnePass& s, int warps, void* stream) {
  GroupArgs g{s, 0, warps, 1, {}, nullptr};
  const int systems_per_group = warps == 1 ? static_cast<int>(kWarpRows / s.n) : 1;
  g.group_capacity = systems_per_group * s.n;
  g.groups_per_block = g.warps >= kBlockWarps ? 1 : kBlockWarps / g.warps;
  if (s.count != 0) {  // interleaved: enough systems a block for contiguous bytes in each row
    const int wanted = (kInterleavedBlockSystems + systems_per_group - 1) / systems_per_group;
    g.groups_per_block = std::max(g.groups_per_block, std::min(wanted, kMaxGroupWarps / g.warps));
  }
  const std::size_t systems = s.rows / s.n;
  const std::size_t groups = (systems + systems_per_group - 1) / systems_per_group;
  const std::size_t blocks = (groups + g.groups_per_block - 1) / g.groups_per_block;
  const int threads = 32 * g.warps * g.groups_per_block;
  const std::size_t bytes = shared_bytes(g.warps, g.groups_per_block);
  if (g.warps == 1) {
    launch<Pass::kWhole, true>(g, blocks, threads, bytes, stream);
  } else {
    launch<Pass::kWhole, false>(g, blocks, threads, bytes, stream);
  }
}

void launch_warp_ends(const OnePass& s, const WarpEnds& ends, void* stream) {
  launch_lone_warps<Pass::kEnds>(s, ends, nullptr, stream);
}

void launch_form_separators(const WarpEnds& ends, std::size_t count, double* rl, double* rd,
                            double* ru, double* rf, void* stream) {
  const unsigned blocks = static_cast<unsigned>((count + 255) / 256);
  form_separators_kernel<<<blocks, 256, 0, static_cast<cudaStream_t>(stream)>>>(ends, count, rl, rd,
                                                                                ru, rf);
}

void launch_warp_finish(const OnePass& s, const double* x_sep, void* stream) {
  launch_lone_warps<Pass::kFinish>(s, {}, x_sep, stream);
}

cudaError_t set_group_spike_limits() {
  for (cudaError_t e :
       {set_limits<Pass::kWhole, true, false>(), set_limits<Pass::kWhole, false, false>(),
        set_limits<Pass::kWhole, true, true>(), set_limits<Pass::kWhole, false, true>(),
        set_limits<Pass::kEnds, true, false>(), set_limits<Pass::kFinish, true, false>()}) {
    if (e != cudaSuccess) return e;
  }
  return cudaSuccess;
}

}  // namespace stripesolve::tridiag::gpu
