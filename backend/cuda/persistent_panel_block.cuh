// The one-launch panel's kernel, one block's part of it (persistent_panel.cu, its only
// includer): what a block holds (its rows, its shared memory, the scratch every block shares)
// and one member per phase of persistent_panel.h's description.
#pragma once

#include <cfloat>
#include <cstdint>

#include <climits>

#include "backend/cuda/persistent_panel.h"
#include "backend/cuda/persistent_panel_parts.cuh"

namespace stripesolve::backend::cuda::panel {

constexpr int kRows = PersistentPanel::kRowsPerThread;
constexpr int kMaxBlocks = PersistentPanel::kMaxBlocks;
constexpr int kSub = 8;    // columns factored in registers
constexpr int kSlot = 16;  // doubles of a candidate's slot (one 128-byte line)
constexpr int kLjjLd = kOuter + 1;

// Shared memory, in the order laid out (doubles first).
constexpr int kSharedDoubles =
    kRegion + kOuter * kLjjLd + kSub * kOuter + kSub * kSub + kSub + kWarps;
constexpr int kSharedBytes = kSharedDoubles * 8 + 4 * (PersistentPanel::kMaxColumns + kWarps + 4) +
                             PersistentPanel::kMaxRowsPerBlock;

struct Scratch {
  unsigned* counter;  // the grid barrier's arrivals
  long long* phases;  // [8]: block 0's nanoseconds in each phase (PersistentPanel::kPhases)
  // [2][kMaxBlocks][kSlot]: each block's candidate: its magnitude, its row (INT_MAX: none) and
  // its 8 columns, so that one read brings all of a candidate.
  double* slots;
  int* moves;  // [2 * 2h]: destination rows, then source rows
  int* move_count;
  double* udiag;  // [h][kOuter]: U of a 64-column block right of each row's own 8 columns
  double* temp;   // [2h][h]: the moved rows
};

struct Shape {
  double* a;
  int64_t ld;
  int m, h, rows_per_block;
  int32_t* ipiv;
  int32_t* info;
};

// One block of the kernel: its rows [row0, row0 + nrows) of the panel, its shared memory, the
// barrier's epoch and the phase clock. Each phase of persistent_panel.h's header is a member.
struct Block {
  Shape s;
  Scratch x;
  double* region;         // the GEMM's stages and result; the moves' bookkeeping at the end
  double* ljj;            // [kOuter][kLjjLd]: L of the column block's pivot rows
  double* us;             // [kSub][kOuter]: U of 8 pivot rows, later columns
  double* usub;           // [kSub][kSub]: the 8 pivot rows' 8 columns
  double* u;              // [kSub]: this column's pivot row
  double* sv;             // [kWarps]
  int* piv;               // [kMaxColumns]: the pivot row of each step
  int* sr;                // [kWarps]
  int* winner;            // [4]
  unsigned char* active;  // [kMaxRowsPerBlock]: the block's rows not chosen yet
  int b, blocks, t, h;
  int64_t ld;
  double* a;
  int row0, nrows;
  unsigned epoch = 0;
  Laps laps;

  __device__ __forceinline__ Block(const Shape& shape, const Scratch& scratch, double* smem)
      : s(shape), x(scratch) {
    region = smem;
    ljj = region + kRegion;
    us = ljj + kOuter * kLjjLd;
    usub = us + kSub * kOuter;
    u = usub + kSub * kSub;
    sv = u + kSub;
    piv = reinterpret_cast<int*>(sv + kWarps);
    sr = piv + PersistentPanel::kMaxColumns;
    winner = sr + kWarps;
    active = reinterpret_cast<unsigned char*>(winner + 4);
    b = blockIdx.x;
    blocks = gridDim.x;
    t = threadIdx.x;
    h = s.h;
    ld = s.ld;
    a = s.a;
    row0 = b * s.rows_per_block;
    nrows = max(0, min(s.rows_per_block, s.m - row0));
    for (int i = t; i < PersistentPanel::kMaxRowsPerBlock; i += kThreads) active[i] = i < nrows;
    laps = Laps{x.phases, now_ns(), b == 0 && t == 0};
    __syncthreads();
  }

  // (A) The block's rows, columns [c0, c0 + nb), by every earlier pivot.
  __device__ __forceinline__ void update_columns(int c0, int nb) {
    for (int rt = 0; rt * kTileRows < nrows; ++rt) {
      const int base = rt * kTileRows;
      tile_product(
          a, ld, [&](int r) { return base + r < nrows ? row0 + base + r : -1; }, c0, nb, c0, piv,
          region);
      // All of the thread's loads first: one memory round trip a tile.
      constexpr int kApply = kTileRows * kOuter / 2 / kThreads;
      const int pairs = nb / 2;
      double2 y[kApply];
      bool on[kApply];
#pragma unroll
      for (int e = 0; e < kApply; ++e) {
        const int q = t + e * kThreads, r = q / pairs, lr = base + r;
        on[e] = r < kTileRows && lr < nrows && active[lr];
        y[e] = on[e] ? __ldcg(reinterpret_cast<const double2*>(
                           a + static_cast<int64_t>(row0 + lr) * ld + c0 + 2 * (q % pairs)))
                     : make_double2(0.0, 0.0);
      }
#pragma unroll
      for (int e = 0; e < kApply; ++e) {
        if (!on[e]) continue;
        const int q = t + e * kThreads, r = q / pairs, col = 2 * (q % pairs);
        y[e].x -= region[r * kBld + col];
        y[e].y -= region[r * kBld + col + 1];
        __stcg(
            reinterpret_cast<double2*>(a + static_cast<int64_t>(row0 + base + r) * ld + c0 + col),
            y[e]);
      }
      __syncthreads();
    }
  }

  // (B) Columns [c, c + 8): the block's live rows' 8 values in registers, one step a column,
  // then written back, the rows chosen flagged for the GEMMs, and the later columns of the
  // column block [c0, c0 + nb) updated.
  __device__ __forceinline__ void factor_eight(int c0, int nb, int s8) {
    const int c = c0 + s8;
    double v[kRows][kSub];
    unsigned live = 0;
#pragma unroll
    for (int i = 0; i < kRows; ++i) {
      const int lr = i * kThreads + t;
      const bool mine = lr < nrows && active[lr];
      const double2* p =
          reinterpret_cast<const double2*>(a + static_cast<int64_t>(row0 + lr) * ld + c);
#pragma unroll
      for (int q = 0; q < kSub / 2; ++q) {
        const double2 y = mine ? __ldcg(p + q) : make_double2(0.0, 0.0);
        v[i][2 * q] = y.x;
        v[i][2 * q + 1] = y.y;
      }
      live |= mine ? 1u << i : 0u;
    }
    const unsigned live0 = live;
#pragma unroll
    for (int j = 0; j < kSub; ++j) column_step(v, live, c, j);
#pragma unroll
    for (int i = 0; i < kRows; ++i) {
      if (!(live0 >> i & 1)) continue;
      const int lr = i * kThreads + t;
      double2* p = reinterpret_cast<double2*>(a + static_cast<int64_t>(row0 + lr) * ld + c);
#pragma unroll
      for (int q = 0; q < kSub / 2; ++q) __stcg(p + q, make_double2(v[i][2 * q], v[i][2 * q + 1]));
      if (!(live >> i & 1)) active[lr] = 0;
    }
    const int w2 = nb - s8 - kSub;
    if (w2 > 0) update_later(v, live, c, s8, w2);
    __syncthreads();
    laps.lap(4);
  }

  // Column k = c + j: the block's candidate published, the grid barrier, the winner read (its
  // row and 8 values) and the live rows' multipliers and rank-1 update in registers.
  __device__ __forceinline__ void column_step(double (&v)[kRows][kSub], unsigned& live, int c,
                                              int j) {
    const int k = c + j, par = k & 1;
    double best = -1.0;
    int best_row = INT_MAX;
#pragma unroll
    for (int i = 0; i < kRows; ++i) {
      if (!(live >> i & 1)) continue;
      double mag = fabs(v[i][j]);
      if (mag != mag) mag = -0.5;  // NaN: chosen only where nothing else is left
      const int row = row0 + i * kThreads + t;
      if (better(mag, row, best, best_row)) {
        best = mag;
        best_row = row;
      }
    }
    block_argmax(best, best_row, sv, sr);
#pragma unroll
    for (int i = 0; i < kRows; ++i) {
      if (row0 + i * kThreads + t == best_row && (live >> i & 1)) {
        double2* slot = reinterpret_cast<double2*>(x.slots + (par * kMaxBlocks + b) * kSlot);
#pragma unroll
        for (int q = 0; q < kSub / 2; ++q) {
          __stcg(slot + 1 + q, make_double2(v[i][2 * q], v[i][2 * q + 1]));
        }
      }
    }
    if (t == 0) {
      __stcg(reinterpret_cast<double2*>(x.slots + (par * kMaxBlocks + b) * kSlot),
             make_double2(best, static_cast<double>(best_row)));
    }
    laps.lap(1);
    grid_barrier(x.counter, epoch);
    laps.lap(2);
    if (t < 32) read_winner(k, j, par);
    __syncthreads();
    const int prow = winner[0];
    const double pv = u[j];
    if (b == 0 && t == 0 && pv == 0.0) atomicCAS(s.info, 0, k + 1);
    const bool reciprocal = fabs(pv) >= DBL_MIN;  // as dgetf2 (sfmin)
    const double inv = 1.0 / pv;
#pragma unroll
    for (int i = 0; i < kRows; ++i) {
      if (!(live >> i & 1)) continue;
      if (row0 + i * kThreads + t == prow) {
        live &= ~(1u << i);
        continue;
      }
      if (pv == 0.0) continue;
      const double l = reciprocal ? v[i][j] * inv : v[i][j] / pv;
      v[i][j] = l;
#pragma unroll
      for (int q = j + 1; q < kSub; ++q) v[i][q] -= l * u[q];
    }
    laps.lap(3);
  }

  // Warp 0: each lane reads whole slots (one round trip) and keeps the better; the warp's best
  // row and its 8 columns then come from the lane that holds them, into u, usub and piv.
  __device__ __forceinline__ void read_winner(int k, int j, int par) {
    double m1 = -1.0, w[kSub];
    int r1 = INT_MAX;
#pragma unroll
    for (int e = 0; e < kSub; ++e) w[e] = 0.0;
    for (int q = t; q < blocks; q += 32) {
      const double2* slot =
          reinterpret_cast<const double2*>(x.slots + (par * kMaxBlocks + q) * kSlot);
      double2 part[1 + kSub / 2];
#pragma unroll
      for (int e = 0; e <= kSub / 2; ++e) part[e] = __ldcg(slot + e);
      const int rq = static_cast<int>(part[0].y);
      if (better(part[0].x, rq, m1, r1)) {
        m1 = part[0].x;
        r1 = rq;
#pragma unroll
        for (int e = 0; e < kSub / 2; ++e) {
          w[2 * e] = part[1 + e].x;
          w[2 * e + 1] = part[1 + e].y;
        }
      }
    }
    int from = t;
    for (int off = 16; off > 0; off >>= 1) {
      const double om = __shfl_down_sync(~0u, m1, off);
      const int orow = __shfl_down_sync(~0u, r1, off);
      const int ofrom = __shfl_down_sync(~0u, from, off);
      if (better(om, orow, m1, r1)) {
        m1 = om;
        r1 = orow;
        from = ofrom;
      }
    }
    r1 = __shfl_sync(~0u, r1, 0);
    from = __shfl_sync(~0u, from, 0);
#pragma unroll
    for (int e = 0; e < kSub; ++e) {
      const double y = __shfl_sync(~0u, w[e], from);
      if (t == e) {
        u[e] = y;
        usub[j * kSub + e] = y;
      }
    }
    if (t == 0) {
      winner[0] = r1;
      piv[k] = r1;
    }
  }

  // The 8 pivot rows of columns [c, c + 8) update the column block's w2 columns right of them:
  // their U there (their values less their own L part; block 0 keeps it for the end), then each
  // live row less its 8 multipliers times it.
  __device__ __forceinline__ void update_later(const double (&v)[kRows][kSub], unsigned live, int c,
                                               int s8, int w2) {
    for (int q = t; q < kSub * w2; q += kThreads) {
      const int j = q / w2, col = q % w2;
      us[j * kOuter + col] = __ldcg(a + static_cast<int64_t>(piv[c + j]) * ld + c + kSub + col);
    }
    __syncthreads();
    if (t < w2) {
      for (int j = 1; j < kSub; ++j) {
        double y = us[j * kOuter + t];
        for (int i = 0; i < j; ++i) y -= usub[j * kSub + i] * us[i * kOuter + t];
        us[j * kOuter + t] = y;
      }
    }
    __syncthreads();
    if (b == 0) {
      for (int q = t; q < kSub * w2; q += kThreads) {
        const int j = q / w2, col = q % w2;
        x.udiag[static_cast<int64_t>(c + j) * kOuter + s8 + kSub + col] = us[j * kOuter + col];
      }
    }
    // Four columns of half the thread's live rows at once: one memory round trip each.
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      for (int col = 0; col < w2; col += 4) {
        double2 y[kRows / 2][2];
#pragma unroll
        for (int ii = 0; ii < kRows / 2; ++ii) {
          const int i = half * kRows / 2 + ii;
          const double2* p = reinterpret_cast<const double2*>(
              a + static_cast<int64_t>(row0 + i * kThreads + t) * ld + c + kSub + col);
          const bool on = live >> i & 1;
          y[ii][0] = on ? __ldcg(p) : make_double2(0.0, 0.0);
          y[ii][1] = on ? __ldcg(p + 1) : make_double2(0.0, 0.0);
        }
#pragma unroll
        for (int ii = 0; ii < kRows / 2; ++ii) {
          const int i = half * kRows / 2 + ii;
          if (!(live >> i & 1)) continue;
#pragma unroll
          for (int j = 0; j < kSub; ++j) {
            const double* uj = us + j * kOuter + col;
            y[ii][0].x -= v[i][j] * uj[0];
            y[ii][0].y -= v[i][j] * uj[1];
            y[ii][1].x -= v[i][j] * uj[2];
            y[ii][1].y -= v[i][j] * uj[3];
          }
          double2* p = reinterpret_cast<double2*>(
              a + static_cast<int64_t>(row0 + i * kThreads + t) * ld + c + kSub + col);
          __stcg(p, y[ii][0]);
          __stcg(p + 1, y[ii][1]);
        }
      }
    }
  }

  // (D) The column block's pivot rows right of it: U = L_JJ^-1 (A - L U), the columns split over
  // the blocks; a grid barrier before (their L) and after (for the next block's GEMMs).
  __device__ __forceinline__ void pivot_rows_right(int c0, int nb) {
    grid_barrier(x.counter, epoch);
    for (int q = t; q < nb * nb; q += kThreads) {
      const int r = q / nb, i = q % nb;
      if (i < r) ljj[r * kLjjLd + i] = __ldcg(a + static_cast<int64_t>(piv[c0 + r]) * ld + c0 + i);
    }
    const int first = c0 + nb, chunks = (h - first) / 8;
    const int cb = first + 8 * (b * chunks / blocks);
    const int ce = first + 8 * ((b + 1) * chunks / blocks);
    for (int col0 = cb; col0 < ce; col0 += kOuter) {
      const int ncols = min(kOuter, ce - col0);
      if (c0 > 0) {
        tile_product(
            a, ld, [&](int r) { return r < nb ? piv[c0 + r] : -1; }, col0, ncols, c0, piv, region);
      } else {
        for (int q = t; q < kTileRows * kBld; q += kThreads) region[q] = 0.0;
        __syncthreads();
      }
      for (int q = t; q < nb * ncols; q += kThreads) {
        const int r = q / ncols, col = q % ncols;
        region[r * kBld + col] = __ldcg(a + static_cast<int64_t>(piv[c0 + r]) * ld + col0 + col) -
                                 region[r * kBld + col];
      }
      __syncthreads();
      if (t < ncols) {
        for (int r = 1; r < nb; ++r) {
          double y = region[r * kBld + t];
          for (int i = 0; i < r; ++i) y -= ljj[r * kLjjLd + i] * region[i * kBld + t];
          region[r * kBld + t] = y;
        }
      }
      __syncthreads();
      for (int q = t; q < nb * ncols; q += kThreads) {
        const int r = q / ncols, col = q % ncols;
        __stcg(a + static_cast<int64_t>(piv[c0 + r]) * ld + col0 + col, region[r * kBld + col]);
      }
      __syncthreads();
    }
    grid_barrier(x.counter, epoch);
    laps.lap(5);
  }

  // The U of each column block's diagonal part into its pivot rows; getrf's swaps as moves of
  // rows (block 0 works them out, every block moves some).
  __device__ __forceinline__ void finish() {
    grid_barrier(x.counter, epoch);
    for (int k = b; k < h; k += blocks) {
      const int cj = k / kOuter * kOuter, end = min(h, cj + kOuter), from = (k / kSub + 1) * kSub;
      for (int col = from + t; col < end; col += kThreads) {
        __stcg(a + static_cast<int64_t>(piv[k]) * ld + col,
               x.udiag[static_cast<int64_t>(k) * kOuter + col - cj]);
      }
    }
    if (b == 0) plan_moves();
    grid_barrier(x.counter, epoch);
    const int moves = __ldcg(x.move_count);
    for (int mv = b; mv < moves; mv += blocks) {
      const double* src = a + static_cast<int64_t>(__ldcg(x.moves + 2 * h + mv)) * ld;
      for (int col = t; col < h; col += kThreads) {
        x.temp[static_cast<int64_t>(mv) * h + col] = __ldcg(src + col);
      }
    }
    grid_barrier(x.counter, epoch);
    for (int mv = b; mv < moves; mv += blocks) {
      double* dst = a + static_cast<int64_t>(__ldcg(x.moves + mv)) * ld;
      for (int col = t; col < h; col += kThreads) {
        __stcg(dst + col, __ldcg(x.temp + static_cast<int64_t>(mv) * h + col));
      }
    }
    laps.lap(6);
  }

  // Block 0: getrf's ipiv from the pivot rows, and the rows its swaps would move. Positions are
  // named by ids: position p < h is id p, the position of the row chosen at step k (when it is
  // >= h) is id h + k; the same ids name the rows first found there.
  __device__ __forceinline__ void plan_moves() {
    int* who = reinterpret_cast<int*>(region);  // the row id at each position id
    int* where = who + 2 * h;                   // the position id of each row id
    for (int q = t; q < 2 * h; q += kThreads) {
      who[q] = q;
      where[q] = q;
    }
    __syncthreads();
    if (t != 0) return;
    auto position = [&](int id) { return id < h ? id : piv[id - h]; };
    for (int k = 0; k < h; ++k) {
      const int p = piv[k];
      const int id = p < h ? p : h + k;
      const int q = where[id];
      s.ipiv[k] = position(q) + 1;
      if (q != k) {
        const int moved = who[k];
        who[k] = id;
        who[q] = moved;
        where[id] = k;
        where[moved] = q;
      }
    }
    int n = 0;
    for (int id = 0; id < 2 * h; ++id) {
      if (who[id] == id) continue;
      x.moves[n] = position(id);
      x.moves[2 * h + n] = position(who[id]);
      ++n;
    }
    *x.move_count = n;
  }
};

}  // namespace stripesolve::backend::cuda::panel
