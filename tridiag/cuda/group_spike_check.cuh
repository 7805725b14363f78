// The quality check's steps inside the one-pass SPIKE kernel of strided batches
// (group_spike.cu, kCheck): each lane's rows checked as their x is put together (check_rows), and
// the verdicts of the systems that span lanes or warps (check_verdicts). The check's arithmetic:
// group_check.cuh and check_terms.cuh. Device code only, included by group_spike.cu alone.
#pragma once

#include <cstddef>

#include <cuda_pipeline.h>

#include "tridiag/cuda/group_check.cuh"
#include "tridiag/cuda/group_rows.cuh"
#include "tridiag/cuda/small_solves.h"

namespace stripesolve::tridiag::gpu::group {

// What check_rows leaves for check_verdicts: the lane's segments and, on lane 31 of a group's
// warp other than its last, the lane's last row, which waits for the next warp's first x.
struct LaneCheck {
  check::LaneSegments seg;
  bool deferred = false;
  double f = 0.0, x_left = 0.0, x_mid = 0.0;
};

// The quality check of a strided batch's rows (kCheck), as their x is put together: each lane
// takes its own nine consecutive rows, x from registers (the next lane's first by shuffle, the
// next warp's through GroupShared), dl, d and du copied in again, f from the staging rows, each
// of which takes its row's x once f is read. Where a warp holds whole systems (kLone), a system
// that starts and ends in the lane gets its verdict here and the lane's other rows go into
// `seg` (check::spanning_verdicts); in a group's one system all the lane's rows go into
// seg.tail, but for a row that needs the next warp's x (deferred: check_verdicts takes it after
// a block barrier, once x has gone out). The same rows, terms and rounding as the separate
// check: the verdicts are equal.
template <bool kLone>
__device__ __forceinline__ void check_rows(const GroupArgs& g, WarpShared& ws, GroupShared& gs,
                                           int w, std::size_t group, std::size_t group_row0,
                                           int warp_row0, int group_rows, int lane,
                                           const double (&y)[kLaneRows], const double (&sl)[kLaneQ],
                                           const double (&sr)[kLaneQ], double xp, double xs,
                                           LaneCheck& out) {
  const int r0 = lane * kLaneRows;
  const double x0 = y[0] + sl[0] * xp + sr[0] * xs;
  __syncwarp();  // every lane has read its row of the warp-level system: dl, d, du may come back
  reload_matrix_rows(g, ws, group_row0 + warp_row0, warp_row0, group_rows, lane);
  __pipeline_commit();
  double x_after = __shfl_down_sync(check::kFullMask, x0, 1);  // x of the row after the lane's last
  if constexpr (!kLone) {
    if (lane == 0) gs.first_x[w] = x0;
  }
  __pipeline_wait_prior(0);
  __syncwarp();
  const int n = static_cast<int>(g.s.n);
  // The lane's first row in its system, and that system.
  int sys_row = kLone ? r0 % n : warp_row0 + r0;
  std::size_t system = kLone ? group * (g.group_capacity / g.s.n) + r0 / n : group;
  const check::RowMax zero{0, 0, 0, 0};
  check::RowMax acc = zero;
  bool starts = sys_row == 0;  // acc's system starts in this lane
  double x_left = xp, x_mid = x0;
#pragma unroll
  for (int k = 0; k < kLaneRows; ++k) {
    const int r = r0 + k;
    const double x_right = k + 1 < kLaneQ    ? y[k + 1] + sl[k + 1] * xp + sr[k + 1] * xs
                           : k + 1 == kLaneQ ? xs
                                             : x_after;
    const bool left = sys_row > 0, right = sys_row + 1 < n;
    if (!kLone && k == kLaneQ && lane == 31 && right) {
      out.deferred = true;
      out.f = ws.f[r];
      out.x_left = x_left;
      out.x_mid = x_mid;
    } else if (warp_row0 + r < group_rows) {
      acc = check::max_of(
          acc, check::row_max(left ? ws.in[0][r] : 0.0, ws.in[1][r], right ? ws.in[2][r] : 0.0,
                              left ? x_left : 0.0, x_mid, right ? x_right : 0.0, ws.f[r]));
      if (kLone && !right) {  // the system ends here
        if (starts) {
          check::classify(system, check::error_of(acc), g.s.check.tolerance, g.s.check);
        } else {
          out.seg.head = acc;
          out.seg.head_system = system;
          out.seg.has_head = true;
        }
        acc = zero;
        starts = true;
      }
    }
    ws.f[r] = x_mid;
    x_left = x_mid;
    x_mid = x_right;
    if (kLone && ++sys_row == n) {
      sys_row = 0;
      ++system;
    } else if (!kLone) {
      ++sys_row;
    }
  }
  out.seg.tail = acc;
  out.seg.tail_starts = starts;
}

// The verdicts after check_rows: of the systems that span a lone warp's lanes, or of the group's
// one system from its warps' maxima, after the deferred rows (two block barriers: for the next
// warps' first x, then for the maxima).
template <bool kLone>
__device__ __forceinline__ void check_verdicts(const GroupArgs& g, const WarpShared& ws,
                                               GroupShared& gs, int w, std::size_t group,
                                               int group_rows, LaneCheck& c, int lane) {
  if constexpr (kLone) {
    check::spanning_verdicts(c.seg, g.s.check, lane);
  } else {
    __syncthreads();  // every warp's first x is in gs.first_x, and every warp is past gs.sys
    if (c.deferred) {
      constexpr int r = kWarpRows - 1;
      c.seg.tail =
          check::max_of(c.seg.tail, check::row_max(ws.in[0][r], ws.in[1][r], ws.in[2][r], c.x_left,
                                                   c.x_mid, gs.first_x[w + 1], c.f));
    }
    const check::RowMax m = check::warp_max(c.seg.tail);
    if (lane == 0) gs.checked[w] = m;
    __syncthreads();
    if (w == 0 && group_rows > 0) {
      const check::RowMax zero{0, 0, 0, 0};
      const check::RowMax all = check::warp_max(lane < g.warps ? gs.checked[lane] : zero);
      if (lane == 0) check::classify(group, check::error_of(all), g.s.check.tolerance, g.s.check);
    }
  }
}

}  // namespace stripesolve::tridiag::gpu::group
