// The one-launch panel's last phase (persistent_panel.cu, its only includer): the U of each
// column block's diagonal part into its pivot rows, getrf's ipiv, and the rows getrf's swaps
// would have moved, moved once. Free functions of the Block (persistent_panel_block.cuh).
#pragma once

#include <cstdint>

#include "backend/cuda/persistent_panel_block.cuh"

namespace stripesolve::backend::cuda::panel {

// Block 0: getrf's ipiv from the pivot rows, and the rows its swaps would move. Positions are
// named by ids: position p < h is id p, the position of the row chosen at step k (when it is
// >= h) is id h + k; the same ids name the rows first found there.
__device__ __forceinline__ void plan_moves(Block& blk) {
  int* who = reinterpret_cast<int*>(blk.region);  // the row id at each position id
  int* where = who + 2 * blk.h;                   // the position id of each row id
  for (int q = blk.t; q < 2 * blk.h; q += kThreads) {
    who[q] = q;
    where[q] = q;
  }
  __syncthreads();
  if (blk.t != 0) return;
  auto position = [&](int id) { return id < blk.h ? id : blk.piv[id - blk.h]; };
  for (int k = 0; k < blk.h; ++k) {
    const int p = blk.piv[k];
    const int id = p < blk.h ? p : blk.h + k;
    const int q = where[id];
    blk.s.ipiv[k] = position(q) + 1;
    if (q != k) {
      const int moved = who[k];
      who[k] = id;
      who[q] = moved;
      where[id] = k;
      where[moved] = q;
    }
  }
  int n = 0;
  for (int id = 0; id < 2 * blk.h; ++id) {
    if (who[id] == id) continue;
    blk.x.moves[n] = position(id);
    blk.x.moves[2 * blk.h + n] = position(who[id]);
    ++n;
  }
  *blk.x.move_count = n;
}

// The U of each column block's diagonal part into its pivot rows; getrf's swaps as moves of
// rows (block 0 works them out, every block moves some).
__device__ __forceinline__ void finish(Block& blk) {
  grid_barrier(blk.x.counter, blk.epoch);
  for (int k = blk.b; k < blk.h; k += blk.blocks) {
    const int cj = k / kOuter * kOuter, end = min(blk.h, cj + kOuter), from = (k / kSub + 1) * kSub;
    for (int col = from + blk.t; col < end; col += kThreads) {
      __stcg(blk.a + static_cast<int64_t>(blk.piv[k]) * blk.ld + col,
             blk.x.udiag[static_cast<int64_t>(k) * kOuter + col - cj]);
    }
  }
  if (blk.b == 0) plan_moves(blk);
  grid_barrier(blk.x.counter, blk.epoch);
  const int moves = __ldcg(blk.x.move_count);
  for (int mv = blk.b; mv < moves; mv += blk.blocks) {
    const double* src = blk.a + static_cast<int64_t>(__ldcg(blk.x.moves + 2 * blk.h + mv)) * blk.ld;
    for (int col = blk.t; col < blk.h; col += kThreads) {
      blk.x.temp[static_cast<int64_t>(mv) * blk.h + col] = __ldcg(src + col);
    }
  }
  grid_barrier(blk.x.counter, blk.epoch);
  for (int mv = blk.b; mv < moves; mv += blk.blocks) {
    double* dst = blk.a + static_cast<int64_t>(__ldcg(blk.x.moves + mv)) * blk.ld;
    for (int col = blk.t; col < blk.h; col += kThreads) {
      __stcg(dst + col, __ldcg(blk.x.temp + static_cast<int64_t>(mv) * blk.h + col));
    }
  }
  blk.laps.lap(6);
}

}  // namespace stripesolve::backend::cuda::panel
