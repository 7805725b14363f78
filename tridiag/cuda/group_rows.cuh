// Where the one-pass SPIKE kernels' rows live (group_spike.cu): each warp's and each group's
// shared memory, the kernels' arguments, and the copies of a group's rows between the batch and
// shared memory, strided or interleaved (cp.async in; x out through the warps' staging rows).
// Device code only (and shared_bytes), included by group_spike.cu alone.
#pragma once

#include <cstdint>

#include <cuda_pipeline.h>
#include <cuda_runtime.h>

#include "tridiag/cuda/group_check.cuh"
#include "tridiag/cuda/group_solve.h"
#include "tridiag/cuda/group_spike.cuh"
#include "tridiag/cuda/warp_solves.h"

namespace stripesolve::tridiag::gpu::group {

// dl, d and du are dead once the lane level has its rows, so the warp-level system takes their
// place: 9.3 KB per warp, which lets 4 blocks of 4 warps share an SM (228 KB).
struct WarpShared {
  union {
    double in[3][kWarpRows];  // dl, d, du of the warp's rows, until the lane level has them
    WarpSystem sys;           // then the warp-level system (one row per lane's separator)
  };
  double f[kWarpRows];  // f of the warp's rows; then x on its way out
  double ends[4];       // lane 0's interior row 0 for f and the two spikes (4: 16-byte size)
};
static_assert(sizeof(WarpSystem) <= sizeof(double) * 3 * kWarpRows);

struct GroupShared {
  // Each warp's part of its separator's row (lane 31's RL, RD, cs, RG), for separator_row.
  double RL[kMaxGroupWarps], RD[kMaxGroupWarps], CS[kMaxGroupWarps], RG[kMaxGroupWarps];
  union {
    GroupSystem sys;                        // the system of warp separators, then their solution
    check::RowMax checked[kMaxGroupWarps];  // then, for the quality check, each warp's maxima
  };
  bool failed[kMaxGroupWarps];     // a row of the warp failed at the lane or warp level
  double first_x[kMaxGroupWarps];  // kCheck: x of each warp's first row
};
static_assert(kMaxGroupWarps <= kMaxGroupRows);

struct GroupArgs {
  OnePass s;
  std::size_t group_capacity;  // rows a group holds (some may be identity rows past the end)
  int warps;                   // per group
  int groups_per_block;
  WarpEnds ends;        // Pass::kEnds: where each warp's separator data goes
  const double* x_sep;  // Pass::kFinish: the separators' solution
};

inline std::size_t shared_bytes(int warps, int groups_per_block) {
  return std::size_t(warps) * groups_per_block * sizeof(WarpShared) +
         std::size_t(groups_per_block) * sizeof(GroupShared);
}

__device__ inline void flag(const GroupArgs& g, unsigned long long* f, std::size_t row) {
  atomicMin(f, static_cast<unsigned long long>((row + 1) * g.s.stride - 1));
}

// Index, first row and number of real rows of group gi of this block.
__device__ inline std::size_t group_start(const GroupArgs& g, int gi, int& rows,
                                          std::size_t& group) {
  group = std::size_t{blockIdx.x} * g.groups_per_block + gi;
  const std::size_t row0 = group * g.group_capacity;
  rows = 0;  // the rest of the group's 288 W rows are identity rows
  if (row0 < g.s.rows) {
    const std::size_t left = g.s.rows - row0;
    rows = static_cast<int>(left < g.group_capacity ? left : g.group_capacity);
  }
  return row0;
}

// Where row `row` of the solve lies in the arrays: at `row`, or in an interleaved batch at
// (row % n) * count + row / n. Walks rows in steps without dividing again. A template, so that
// the strided kernels stay as they were (a run-time test here cost them 10-15%).
template <bool kInterleaved>
struct RowPlace {
  std::size_t system = 0, i;  // interleaved: the system and the row within it; else the row
  __device__ RowPlace(const OnePass& s, std::size_t row) : i(row) {
    if constexpr (kInterleaved) {
      system = row / s.n;
      i = row % s.n;
    }
  }
  __device__ std::size_t at(const OnePass& s) const {
    if constexpr (kInterleaved) return i * s.count + system;
    return i;
  }
  __device__ void advance(const OnePass& s, int step) {
    i += step;
    if constexpr (kInterleaved) {
      while (i >= s.n) {
        i -= s.n;
        ++system;
      }
    }
  }
};

// Starts copying a warp's rows of dl, d, du and f into shared memory (identity rows past the
// group's end): 16 bytes a copy where every array's first row is 16-byte aligned, else 8.
// Against 8 bytes everywhere, the 16-byte copies made spike 3-5% faster and thomas at n = 4096
// 7% (H100).
template <bool kInterleaved>
__device__ void load_rows(const GroupArgs& g, WarpShared& ws, std::size_t group_row0, int warp_row0,
                          int group_rows, int lane) {
  const double* const src[4] = {g.s.dl, g.s.d, g.s.du, g.s.f};
  double* const dst[4] = {ws.in[0], ws.in[1], ws.in[2], ws.f};
  auto identity = [](int k) { return k == 1 ? 1.0 : 0.0; };
  const std::size_t first = group_row0 + warp_row0;
  bool wide = !kInterleaved;  // interleaved rows are 8 bytes apiece
  for (int k = 0; k < 4; ++k) wide &= (reinterpret_cast<std::uintptr_t>(src[k] + first) & 15) == 0;
  const int step = wide ? 2 : 1;
  RowPlace<kInterleaved> place(g.s, first + step * lane);
  for (int i = step * lane; i < kWarpRows; i += 32 * step, place.advance(g.s, 32 * step)) {
    const int r = warp_row0 + i;
    const std::size_t at = place.at(g.s);
    for (int k = 0; k < 4; ++k) {
      if (wide && r + 1 < group_rows) {
        __pipeline_memcpy_async(&dst[k][i], src[k] + at, 2 * sizeof(double));
        continue;
      }
      if (r < group_rows) {
        __pipeline_memcpy_async(&dst[k][i], src[k] + at, sizeof(double));
      } else {
        dst[k][i] = identity(k);
      }
      if (wide) dst[k][i + 1] = identity(k);
    }
  }
}

// The block's systems of an interleaved batch (whole systems only: kWhole). A group holds
// per_group systems (several where it is one warp, else one over its W warps); the group's rows
// are those of its systems one after another, 288 to a warp.
struct BlockSystems {
  std::size_t first;  // the block's first system
  int count;          // its systems (fewer in the last block)
  int per_group;
  __device__ explicit BlockSystems(const GroupArgs& g) {
    per_group = static_cast<int>(g.group_capacity / g.s.n);
    first = std::size_t{blockIdx.x} * g.groups_per_block * per_group;
    const std::size_t all = g.s.rows / g.s.n;
    const std::size_t most = std::size_t(g.groups_per_block) * per_group;
    count = static_cast<int>(first >= all ? 0 : (all - first < most ? all - first : most));
  }
  // Row i of the block's system j: its warp in the block and its row there.
  __device__ void place(const GroupArgs& g, int j, int i, int& warp, int& row) const {
    const int q = (j % per_group) * static_cast<int>(g.s.n) + i;
    warp = (j / per_group) * g.warps + q / kWarpRows;
    row = q % kWarpRows;
  }
};

// Calls f(j, i, warp, row) for row i of each of the block's systems j (warp and row: where it
// lies in shared memory), consecutive threads taking consecutive systems of one row. Where the
// block's systems divide its threads, each thread keeps its system and steps through rows
// without dividing (the divisions cost as much as the solve's arithmetic at n = 256).
template <typename F>
__device__ void for_block_rows(const GroupArgs& g, const BlockSystems& b, F&& f) {
  const int n = static_cast<int>(g.s.n);
  const int threads = static_cast<int>(blockDim.x), t = static_cast<int>(threadIdx.x);
  if (b.count > 0 && b.count <= threads && threads % b.count == 0) {
    const int j = t % b.count, step = threads / b.count;
    const int first_warp = (j / b.per_group) * g.warps;
    int q = (j % b.per_group) * n + t / b.count;  // the row among the group's rows
    for (int i = t / b.count; i < n; i += step, q += step) {
      f(j, i, first_warp + q / kWarpRows, q % kWarpRows);
    }
    return;
  }
  for (int e = t; e < b.count * n; e += threads) {
    const int i = e / b.count, j = e - i * b.count;
    int warp = 0, row = 0;
    b.place(g, j, i, warp, row);
    f(j, i, warp, row);
  }
}

// load_rows for a block of an interleaved batch: the whole block copies its systems' rows
// (their contiguous bytes, where a warp of its own would read 8 bytes of every 32). The caller
// waits for the copies and syncs the block.
__device__ inline void load_block_interleaved(const GroupArgs& g, WarpShared* warps, int group_rows,
                                              int warp_row0, int lane) {
  const BlockSystems b(g);
  const double* const src[4] = {g.s.dl, g.s.d, g.s.du, g.s.f};
  for_block_rows(g, b, [&](int j, int i, int warp, int r) {
    WarpShared& ws = warps[warp];
    const std::size_t at = std::size_t(i) * g.s.count + b.first + j;
    __pipeline_memcpy_async(&ws.in[0][r], src[0] + at, sizeof(double));
    __pipeline_memcpy_async(&ws.in[1][r], src[1] + at, sizeof(double));
    __pipeline_memcpy_async(&ws.in[2][r], src[2] + at, sizeof(double));
    __pipeline_memcpy_async(&ws.f[r], src[3] + at, sizeof(double));
  });
  WarpShared& own = warps[threadIdx.x >> 5];
  const int first_identity = group_rows > warp_row0 ? group_rows - warp_row0 : 0;
  for (int r = first_identity + lane; r < kWarpRows; r += 32) {
    own.in[0][r] = 0.0;
    own.in[1][r] = 1.0;
    own.in[2][r] = 0.0;
    own.f[r] = 0.0;
  }
}

// kCheck: dl, d and du of a warp's rows copied into shared memory again (the warp-level system
// took their place; the rows were read a moment before, so the copies come from L2), 16 bytes a
// copy where every array's first row is 16-byte aligned. Only the group's real rows.
__device__ inline void reload_matrix_rows(const GroupArgs& g, WarpShared& ws, std::size_t first,
                                          int warp_row0, int group_rows, int lane) {
  const double* const src[3] = {g.s.dl, g.s.d, g.s.du};
  bool wide = true;
  for (int k = 0; k < 3; ++k) wide &= (reinterpret_cast<std::uintptr_t>(src[k] + first) & 15) == 0;
  const int step = wide ? 2 : 1;
  for (int i = step * lane; i < kWarpRows && warp_row0 + i < group_rows; i += 32 * step) {
    const bool pair = wide && warp_row0 + i + 1 < group_rows;
    for (int k = 0; k < 3; ++k) {
      __pipeline_memcpy_async(&ws.in[k][i], src[k] + first + i, (pair ? 2 : 1) * sizeof(double));
    }
  }
}

// The x of such a block, from each warp's staging rows, as load_block_interleaved reads.
__device__ inline void store_block_interleaved(const GroupArgs& g, const WarpShared* warps) {
  const BlockSystems b(g);
  for_block_rows(g, b, [&](int j, int i, int warp, int r) {
    const double v = warps[warp].f[r];
    if (!isfinite(v) && g.s.x_flag != nullptr) flag(g, g.s.x_flag, (b.first + j) * g.s.n + i);
    g.s.x[std::size_t(i) * g.s.count + b.first + j] = v;
  });
}

}  // namespace stripesolve::tridiag::gpu::group
