// One-pass SPIKE for strided batches (000 §II-III), three levels deep, every system read once
// and written once (40 bytes per unknown).
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
//   Group level: one thread per group solves its W warp separators. Where a group is one warp,
//     only warp barriers separate the levels.
// Then every level's solution is put together from the one above it, from registers and shared
// memory, and x goes out coalesced through a shared staging buffer. Loads are coalesced too:
// 8-byte cp.async into shared memory, read back by each lane at a stride of 9 doubles (free of
// bank conflicts).
//
// This replaces the two passes over global memory and the reduced systems in global memory of
// spike_kernels.cu (72 bytes per unknown plus about a third for the levels) where a system fits
// in a group; larger systems and ragged batches still go there.
#include "tridiag/cuda/group_spike.cuh"
#include "tridiag/cuda/small_solves.h"
#include "tridiag/cuda/warp_solves.h"

#include <cuda_pipeline.h>
#include <cuda_runtime.h>


namespace stripesolve::tridiag::gpu {

namespace {

constexpr int Q = kLaneQ;  // interior rows of a lane
constexpr unsigned kFullMask = 0xffffffffu;
constexpr int kBlockWarps = 4;  // warps per block when groups are smaller

// dl, d and du are dead once the lane level has its rows, so the warp-level system takes their
// place: 9.3 KB per warp, which lets 4 blocks of 4 warps share an SM (228 KB).
struct WarpShared {
  union {
    double in[3][kWarpRows];  // dl, d, du of the warp's rows, until the lane level has them
    WarpSystem sys;           // then the warp-level system (one row per lane's separator)
  };
  double f[kWarpRows];  // f of the warp's rows; then x on its way out
  double ends[4];       // lane 0's interior row 0 for f and the two spikes
};
static_assert(sizeof(WarpSystem) <= sizeof(double) * 3 * kWarpRows);

struct GroupShared {
  double L[kMaxGroupWarps], D[kMaxGroupWarps], U[kMaxGroupWarps], G[kMaxGroupWarps];
  double piv[kMaxGroupWarps], rinv[kMaxGroupWarps];
};

struct GroupArgs {
  const double *dl, *d, *du, *f;
  double* x;
  std::size_t rows;
  int n;
  int systems_per_group;
  int warps;             // per group
  int groups_per_block;
  double tol;
  unsigned long long* flags;
};

std::size_t shared_bytes(int warps, int groups_per_block) {
  return std::size_t(warps) * groups_per_block * sizeof(WarpShared) +
         std::size_t(groups_per_block) * sizeof(GroupShared);
}

__device__ void flag(unsigned long long* f, std::size_t row) {
  atomicMin(f, static_cast<unsigned long long>(row));
}

// First row (in the batch) and number of real rows of group gi of this block.
__device__ std::size_t group_start(const GroupArgs& g, int gi, int& rows) {
  const std::size_t group = std::size_t{blockIdx.x} * g.groups_per_block + gi;
  const std::size_t row0 = group * g.systems_per_group * std::size_t(g.n);
  rows = 0;  // the rest of the group's 288 W rows are identity rows
  if (row0 < g.rows) {
    const std::size_t left = g.rows - row0, full = std::size_t(g.systems_per_group) * g.n;
    rows = static_cast<int>(left < full ? left : full);
  }
  return row0;
}

// Solves group gi's system of warp separators (one thread). Holding its solution in registers
// (pivot_solve<16>) was measured slower: spike at n = 4096 fell from 34.1 to 32.3 G unknowns/s
// (H100), the registers being crowded; at n <= 1152 (pivot_solve<4>) it made no difference.
template <bool kPivot>
__device__ void solve_group(const GroupArgs& g, GroupShared& gs, int gi) {
  const int bad =
      kPivot ? pivot_solve(gs.L, gs.D, gs.U, gs.G, gs.piv, gs.rinv, g.warps)
             : thomas_solve(gs.L, gs.D, gs.U, gs.G, gs.piv, g.warps, g.tol);
  if (bad >= 0) {
    int rows = 0;
    const std::size_t row0 = group_start(g, gi, rows);
    const int row = bad * kWarpRows + kWarpRows - 1;
    if (row < rows) flag(&g.flags[0], row0 + row);
  }
}

// The barrier between levels: the block's, or only the warp's where every group is one warp
// (n <= 288), so that a warp held up (by the warp level's fallback) holds up no other.
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
template <bool kPivot>
__global__ void __launch_bounds__(32 * kMaxGroupWarps)
    group_spike_kernel(GroupArgs g) {
  extern __shared__ double smem[];
  const int wb = threadIdx.x >> 5, lane = threadIdx.x & 31;
  WarpShared* const warps = reinterpret_cast<WarpShared*>(smem);
  GroupShared* const groups =
      reinterpret_cast<GroupShared*>(warps + g.warps * g.groups_per_block);
  WarpShared& ws = warps[wb];
  const int gi = wb / g.warps, w = wb % g.warps;
  int group_rows = 0;
  const std::size_t group_row0 = group_start(g, gi, group_rows);
  const int warp_row0 = w * kWarpRows;
  const bool lone = g.warps == 1;
  for (int i = lane; i < kWarpRows; i += 32) {
    const int r = warp_row0 + i;
    if (r < group_rows) {
      const std::size_t row = group_row0 + r;
      __pipeline_memcpy_async(&ws.in[0][i], &g.dl[row], sizeof(double));
      __pipeline_memcpy_async(&ws.in[1][i], &g.d[row], sizeof(double));
      __pipeline_memcpy_async(&ws.in[2][i], &g.du[row], sizeof(double));
      __pipeline_memcpy_async(&ws.f[i], &g.f[row], sizeof(double));
    } else {
      ws.in[0][i] = 0.0;
      ws.in[1][i] = 1.0;
      ws.in[2][i] = 0.0;
      ws.f[i] = 0.0;
    }
  }
  __pipeline_commit();
  __pipeline_wait_prior(0);
  __syncwarp();
  // Lane level. Couplings across system boundaries are zeroed in shared memory first.
  const int r0 = lane * kLaneRows;
  double* const a = &ws.in[0][r0];
  double* const c = &ws.in[2][r0];
  double b[kLaneRows], y[kLaneRows], sl[Q], sr[Q];
  int sys_row = (warp_row0 + r0) % g.n;
#pragma unroll
  for (int k = 0; k < kLaneRows; ++k) {
    if (sys_row == 0) a[k] = 0.0;
    if (sys_row + 1 == g.n) c[k] = 0.0;
    if (++sys_row == g.n) sys_row = 0;
    b[k] = ws.in[1][r0 + k];
    y[k] = ws.f[r0 + k];
  }
  const int bad_lane = lane_solve<kPivot>(a, b, c, y, sl, sr, g.tol);
  if (bad_lane >= 0 && warp_row0 + r0 + bad_lane < group_rows) {
    flag(&g.flags[0], group_row0 + warp_row0 + r0 + bad_lane);
  }
  if (lane == 0) {
    ws.ends[0] = y[0];
    ws.ends[1] = sl[0];
    ws.ends[2] = sr[0];
  }
  level_barrier(lone);

  // Warp level: the lane's separator row with its interior ends substituted.
  double ny = __shfl_down_sync(kFullMask, y[0], 1);
  double nl = __shfl_down_sync(kFullMask, sl[0], 1);
  double nr = __shfl_down_sync(kFullMask, sr[0], 1);
  if (lane == 31) {
    const bool last = w + 1 == g.warps;
    ny = last ? 0.0 : warps[wb + 1].ends[0];
    nl = last ? 0.0 : warps[wb + 1].ends[1];
    nr = last ? 0.0 : warps[wb + 1].ends[2];
  }
  const double as = a[Q], cs = c[Q];
  const double RL = as * sl[Q - 1];
  const double RD = b[Q] + as * sr[Q - 1] + cs * nl;
  const double RU = cs * nr;
  const double RG = y[Q] - as * y[Q - 1] - cs * ny;
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
    const int bad = warp_level_solve<kPivot>(ws.sys, lane, g.tol, warp);
    const int row = warp_row0 + bad * kLaneRows + Q;
    if (bad >= 0 && row < group_rows) flag(&g.flags[0], group_row0 + row);
  }
  level_barrier(lone);
  // Group level: warp separators (lane 31's row) with the warps' interiors substituted.
  if (lane == 31) {
    const bool last = w + 1 == g.warps;
    const WarpShared& next = warps[last ? wb : wb + 1];
    const double n0 = last ? 0.0 : next.sys.Z[0][0], n1 = last ? 0.0 : next.sys.Z[1][0];
    const double n2 = last ? 0.0 : next.sys.Z[2][0];
    GroupShared& gs = groups[gi];
    gs.L[w] = RL * ws.sys.Z[1][30];
    gs.D[w] = RD + RL * ws.sys.Z[2][30] + RU * n1;
    gs.U[w] = RU * n2;
    gs.G[w] = RG - RL * ws.sys.Z[0][30] - RU * n0;
    if (lone) solve_group<kPivot>(g, gs, gi);
  }
  if (!lone) {
    __syncthreads();
    if (static_cast<int>(threadIdx.x) < g.groups_per_block) {
      solve_group<kPivot>(g, groups[threadIdx.x], threadIdx.x);
    }
  }
  level_barrier(lone);
  // Back down: warp separators, lane separators, interiors.
  const GroupShared& gs = groups[gi];
  const double xr = gs.G[w], xl = w > 0 ? gs.G[w - 1] : 0.0;
  const double xs =
      lane < 31 ? ws.sys.Z[0][lane] + ws.sys.Z[1][lane] * xl + ws.sys.Z[2][lane] * xr : xr;
  double xp = __shfl_up_sync(kFullMask, xs, 1);
  if (lane == 0) xp = xl;
  double* const out = ws.f;
#pragma unroll
  for (int k = 0; k < Q; ++k) out[r0 + k] = y[k] + sl[k] * xp + sr[k] * xs;
  out[r0 + Q] = xs;
  __syncwarp();
  for (int i = lane; i < kWarpRows; i += 32) {
    const int r = warp_row0 + i;
    if (r >= group_rows) break;
    const double v = out[i];
    if (!isfinite(v)) flag(&g.flags[1], group_row0 + r);
    g.x[group_row0 + r] = v;
  }
}

}  // namespace

void launch_group_spike(bool pivoting, const double* dl, const double* d, const double* du,
                        const double* f, double* x, std::size_t rows, std::size_t n, double tol,
                        unsigned long long* flags, void* stream) {
  static const bool limits_set = [] {
    const int most = static_cast<int>(shared_bytes(kMaxGroupWarps, 1));
    const auto attribute = cudaFuncAttributeMaxDynamicSharedMemorySize;
    cudaFuncSetAttribute(group_spike_kernel<true>, attribute, most);
    cudaFuncSetAttribute(group_spike_kernel<false>, attribute, most);
    return true;
  }();
  (void)limits_set;
  GroupArgs g{dl, d, du, f, x, rows, static_cast<int>(n), 1, 1, 1, tol, flags};
  if (n <= std::size_t{kWarpRows}) {
    g.systems_per_group = static_cast<int>(kWarpRows / n);
  } else {
    g.warps = static_cast<int>((n + kWarpRows - 1) / kWarpRows);
  }
  g.groups_per_block = g.warps >= kBlockWarps ? 1 : kBlockWarps / g.warps;
  const std::size_t systems = rows / n;
  const std::size_t groups = (systems + g.systems_per_group - 1) / g.systems_per_group;
  const std::size_t blocks = (groups + g.groups_per_block - 1) / g.groups_per_block;
  const unsigned threads = 32u * g.warps * g.groups_per_block;
  const std::size_t bytes = shared_bytes(g.warps, g.groups_per_block);
  auto st = static_cast<cudaStream_t>(stream);
  const unsigned grid = static_cast<unsigned>(blocks);
  if (pivoting) {
    group_spike_kernel<true><<<grid, threads, bytes, st>>>(g);
  } else {
    group_spike_kernel<false><<<grid, threads, bytes, st>>>(g);
  }
}

}  // namespace stripesolve::tridiag::gpu
