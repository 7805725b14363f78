// The one-launch panel's kernel, one block's part of it (persistent_panel.cu and
// persistent_panel_finish.cuh its includers): what a block holds (its rows, its shared memory,
// the scratch every block shares) and one member per phase of persistent_panel.h's description
// up to (D); the last phase, the rows moved, is persistent_panel_finish.cuh.
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
constexpr int kTag = 10;   // the slot's double that holds its step's tag
constexpr int kLjjLd = kOuter + 1;
constexpr int kStaged = 10;  // doubles of a row's 8 multipliers and flag staged (16-byte rows)
// Accesses (a row, or a group of short rows) a warp has in flight in update_rows.
constexpr int kBatch = 4;
static_assert(kWarps * 32 * kStaged <= kRegion, "update_rows' staging fits the GEMM's region");

// Shared memory, in the order laid out (doubles first).
constexpr int kSharedDoubles =
    kRegion + kOuter * kLjjLd + kSub * kOuter + kSub * kSub + kSub + kWarps + kWarps * kSub;
constexpr int kSharedBytes = kSharedDoubles * 8 + 4 * (PersistentPanel::kMaxColumns + kWarps + 4) +
                             PersistentPanel::kMaxRowsPerBlock;

struct Scratch {
  unsigned* counter;  // the grid barrier's arrivals
  long long* phases;  // [8]: block 0's nanoseconds in each phase (PersistentPanel::kPhases)
  // [2][kMaxBlocks][kSlot]: each block's candidate: its magnitude, its row (INT_MAX: none), its
  // 8 columns and (at kTag) the step's tag, k + 1, stored after them; zero at the launch.
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
  double* sv;             // [kWarps]: each warp's candidate
  double* wv;             // [kWarps][kSub]: its 8 values
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
    wv = sv + kWarps;
    piv = reinterpret_cast<int*>(wv + kWarps * kSub);
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
      if ((live0 & ~live) >> i & 1) active[i * kThreads + t] = 0;
    }
    const int w2 = nb - s8 - kSub;
    if (w2 > 0) pivot_rows_u(c, s8, w2);
    update_rows(v, live0, live, c, w2);
    __syncthreads();
    laps.lap(4);
  }

  // Column k = c + j: the block's candidate (its largest live magnitude, the lowest row on ties)
  // published in its slot; warp 0 waits for every block's slot of the step, and the live rows
  // apply the winner in registers: multipliers and a rank-1 update.
  __device__ __forceinline__ void column_step(double (&v)[kRows][kSub], unsigned& live, int c,
                                              int j) {
    const int k = c + j, warp = t / 32;
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
    warp_argmax(best, best_row);
#pragma unroll
    for (int i = 0; i < kRows; ++i) {
      if ((live >> i & 1) && row0 + i * kThreads + t == best_row) {
#pragma unroll
        for (int q = 0; q < kSub; ++q) wv[warp * kSub + q] = v[i][q];
      }
    }
    if (t % 32 == 0) {
      sv[warp] = best;
      sr[warp] = best_row;
    }
    __syncthreads();
    if (warp == 0) publish_and_read(k, j);
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

  // Warp 0 for step k: the block's candidate (the best of its warps') into its slot, the tag
  // k + 1 after it; then each lane waits for whole slots of the step (the tag, then one round
  // trip) and keeps the better; the warp's best row and its 8 columns then come from the lane
  // that holds them, into u, usub and piv. Two sets of slots (by k's parity): a block writes
  // step k + 2's only after every block has written k + 1's, so after all read k's.
  __device__ __forceinline__ void publish_and_read(int k, int j) {
    const int lane = t, par = k & 1;
    double m1 = lane < kWarps ? sv[lane] : -1.0;
    int r1 = lane < kWarps ? sr[lane] : INT_MAX;
    int from = lane;
    warp_argmax(m1, r1, from);
    if (lane == 0) {
      double* slot = x.slots + (par * kMaxBlocks + b) * kSlot;
      auto* out = reinterpret_cast<double2*>(slot);
      const auto* values = reinterpret_cast<const double2*>(wv + from * kSub);
      __stcg(out, make_double2(m1, static_cast<double>(r1)));
#pragma unroll
      for (int q = 0; q < kSub / 2; ++q) __stcg(out + 1 + q, values[q]);
      __threadfence();
      slot_tag(slot).store(k + 1, ::cuda::memory_order_release);
    }
    laps.lap(1);
    double w[kSub];
    m1 = -1.0;
    r1 = INT_MAX;
#pragma unroll
    for (int e = 0; e < kSub; ++e) w[e] = 0.0;
    for (int q = lane; q < blocks; q += 32) {
      const double* slot = x.slots + (par * kMaxBlocks + q) * kSlot;
      // Relaxed loads while waiting (an acquire load also empties the SM's L1 each time),
      // then one acquire for the slot's values.
      const auto tag = slot_tag(slot);
      const auto step = static_cast<unsigned long long>(k + 1);
      while (tag.load(::cuda::memory_order_relaxed) != step) {
      }
      (void)tag.load(::cuda::memory_order_acquire);
      const auto* in = reinterpret_cast<const double2*>(slot);
      double2 part[1 + kSub / 2];
#pragma unroll
      for (int e = 0; e <= kSub / 2; ++e) part[e] = __ldcg(in + e);
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
    __syncwarp();  // the lanes left their waits at different times: the shuffles want them all
    laps.lap(2);
    from = lane;
    warp_argmax(m1, r1, from);
#pragma unroll
    for (int e = 0; e < kSub; ++e) {
      const double y = __shfl_sync(~0u, w[e], from);
      if (lane == e) {
        u[e] = y;
        usub[j * kSub + e] = y;
      }
    }
    if (lane == 0) {
      winner[0] = r1;
      piv[k] = r1;
    }
  }

  static __device__
      __forceinline__ ::cuda::atomic_ref<unsigned long long, ::cuda::thread_scope_device>
      slot_tag(const double* slot) {
    return ::cuda::atomic_ref<unsigned long long, ::cuda::thread_scope_device>(
        *reinterpret_cast<unsigned long long*>(const_cast<double*>(slot) + kTag));
  }

  // The 8 pivot rows of columns [c, c + 8), their U in the column block's w2 columns right of
  // them (their values less their own L part) into us; block 0 keeps it for the end.
  __device__ __forceinline__ void pivot_rows_u(int c, int s8, int w2) {
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
  }

  // The 8 columns [c, c + 8) written back for the rows live at the 8-step's start and, for the
  // rows still live, the w2 columns right of them less their 8 multipliers times us. A warp goes
  // through its 32 rows of each i one row at a time, its lanes along the row (lane l: columns
  // c + 2l and c + 2l + 1), so that one access of the warp is one row's contiguous segment (up
  // to 512 bytes) rather than 16 bytes of each of 32 rows: a line, not a row, per wavefront.
  // The rows' multipliers and flags pass through the warp's part of `region` (free in (B)).
  __device__ __forceinline__ void update_rows(const double (&v)[kRows][kSub], unsigned live0,
                                              unsigned live, int c, int w2) {
    const int lane = t % 32, warp = t / 32;
    // A row's kSub + w2 columns take `pairs` lanes; a warp access covers 32 / span rows.
    const int pairs = (kSub + w2) / 2;
    const int span = pairs > 16 ? 32 : pairs > 8 ? 16 : pairs > 4 ? 8 : 4;
    const int per_access = 32 / span, sub = lane / span, pair = lane % span;
    const int col = 2 * pair - kSub;  // of the w2 columns; < 0: of the 8 written back
    const bool updates = col >= 0 && col < w2;
    double2 uj[kSub];
#pragma unroll
    for (int j = 0; j < kSub; ++j) {
      uj[j] = updates ? make_double2(us[j * kOuter + col], us[j * kOuter + col + 1])
                      : make_double2(0.0, 0.0);
    }
    double* staged = region + warp * 32 * kStaged;
#pragma unroll
    for (int i = 0; i < kRows; ++i) {
      const int warp_row = i * kThreads + warp * 32;  // the block's row of the warp's lane 0
      if (warp_row >= nrows) break;
      auto* mine = reinterpret_cast<double2*>(staged + lane * kStaged);
#pragma unroll
      for (int q = 0; q < kSub / 2; ++q) mine[q] = make_double2(v[i][2 * q], v[i][2 * q + 1]);
      // 0: not live at the start (or no row); 1: chosen in this 8-step (its 8 columns only);
      // 2: still live.
      mine[kSub / 2].x = (live0 >> i & 1) ? ((live >> i & 1) ? 2.0 : 1.0) : 0.0;
      __syncwarp();
      double* first = a + static_cast<int64_t>(row0 + warp_row) * ld + c;
      // kBatch accesses at a time, without branches: the loads, then the update of all of
      // them (chains of FMAs side by side), then the stores.
      for (int r0 = 0; r0 < 32 && warp_row + r0 < nrows; r0 += kBatch * per_access) {
        double2 y[kBatch];
        double flag[kBatch];
        int r[kBatch];
#pragma unroll
        for (int e = 0; e < kBatch; ++e) {
          r[e] = r0 + e * per_access + sub;
          flag[e] = staged[r[e] * kStaged + kSub];
          y[e] = updates && flag[e] == 2.0
                     ? __ldcg(reinterpret_cast<const double2*>(first + r[e] * ld + kSub + col))
                     : make_double2(0.0, 0.0);
        }
#pragma unroll
        for (int q = 0; q < kSub / 2; ++q) {
#pragma unroll
          for (int e = 0; e < kBatch; ++e) {
            const double2 l = reinterpret_cast<const double2*>(staged + r[e] * kStaged)[q];
            y[e].x -= l.x * uj[2 * q].x;
            y[e].y -= l.x * uj[2 * q].y;
            y[e].x -= l.y * uj[2 * q + 1].x;
            y[e].y -= l.y * uj[2 * q + 1].y;
          }
        }
#pragma unroll
        for (int e = 0; e < kBatch; ++e) {
          double* p = first + r[e] * ld;
          if (col < 0 && flag[e] != 0.0) {
            __stcg(reinterpret_cast<double2*>(p) + pair,
                   reinterpret_cast<const double2*>(staged + r[e] * kStaged)[pair]);
          }
          if (updates && flag[e] == 2.0) __stcg(reinterpret_cast<double2*>(p + kSub + col), y[e]);
        }
      }
      __syncwarp();
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
};

}  // namespace stripesolve::backend::cuda::panel
