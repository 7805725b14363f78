// PersistentPanel (persistent_panel.h): the kernel and its launch.
#include <algorithm>
#include <cfloat>

#include <climits>
#include <cuda/atomic>

#include "backend/cuda/persistent_panel.h"

namespace stripesolve::backend::cuda {
namespace {

constexpr int kThreads = PersistentPanel::kThreads;
constexpr int kRows = PersistentPanel::kRowsPerThread;
constexpr int kWarps = kThreads / 32;
constexpr int kMaxBlocks = PersistentPanel::kMaxBlocks;
constexpr int kSub = 8;     // columns factored in registers
constexpr int kOuter = 64;  // columns of one left-looking block
constexpr int kSlot = 16;   // doubles of a candidate's slot (one 128-byte line)
constexpr int kTileRows = 128;
constexpr int kTileK = 32;
constexpr int kAld = kTileK + 4;  // shared row strides, in doubles
constexpr int kBld = kOuter + 4;
constexpr int kLjjLd = kOuter + 1;
constexpr int kStage = kTileRows * kAld + kTileK * kBld;
constexpr int kRegion = 2 * kStage;  // two stages of the GEMM's tiles; its result aliases them
static_assert(kTileRows * kBld <= kRegion, "the GEMM's result fits its stages");
static_assert(kWarps * 16 == kTileRows, "each warp computes 16 rows of a tile");

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

__device__ inline bool better(double v, int r, double best, int best_row) {
  return v > best || (v == best && r < best_row);
}

__device__ inline long long now_ns() {
  long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// Block 0's thread 0 adds the time since the last lap to phase `p`.
struct Laps {
  long long* phases;
  long long mark;
  bool on;
  __device__ void lap(int p) {
    if (!on) return;
    const long long t = now_ns();
    phases[p] += t - mark;
    mark = t;
  }
};

__device__ void grid_barrier(unsigned* counter, unsigned& epoch) {
  epoch += gridDim.x;
  __syncthreads();
  if (threadIdx.x == 0) {
    ::cuda::atomic_ref<unsigned, ::cuda::thread_scope_device> arrivals(*counter);
    __threadfence();
    arrivals.fetch_add(1, ::cuda::memory_order_release);
    while (arrivals.load(::cuda::memory_order_acquire) < epoch) {
    }
    __threadfence();
  }
  __syncthreads();
}

// The block's largest (value, row), in every thread. sv / sr: kWarps entries of shared memory.
__device__ void block_argmax(double& v, int& r, double* sv, int* sr) {
  for (int off = 16; off > 0; off >>= 1) {
    const double ov = __shfl_down_sync(~0u, v, off);
    const int orow = __shfl_down_sync(~0u, r, off);
    if (better(ov, orow, v, r)) {
      v = ov;
      r = orow;
    }
  }
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) {
    sv[warp] = v;
    sr[warp] = r;
  }
  __syncthreads();
  v = sv[0];
  r = sr[0];
  for (int w = 1; w < kWarps; ++w) {
    if (better(sv[w], sr[w], v, r)) {
      v = sv[w];
      r = sr[w];
    }
  }
  __syncthreads();  // sv / sr are reused by the next call
}

__device__ inline void copy16(void* shared, const void* global) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(shared));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(s), "l"(global));
}
__device__ inline void copies_commit() {
  asm volatile("cp.async.commit_group;\n" ::);
}
template <int N>
__device__ inline void copies_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

// region[r * kBld + c] = sum_{k < K} a[row_of(r) * ld + k] * a[piv[k] * ld + col0 + c] for
// r < kTileRows, c < ncols (<= kOuter; a multiple of 8); row_of(r) < 0 gives a zero row. FP64
// tensor cores (mma.sync), tiles of kTileK staged by cp.async in two stages.
template <class RowOf>
__device__ void tile_product(const double* a, int64_t ld, RowOf row_of, int col0, int ncols, int K,
                             const int* piv, double* region) {
  const int t = threadIdx.x, warp = t / 32;
  auto stage = [&](int st, int kk) {
    double* as = region + st * kStage;
    double* bs = as + kTileRows * kAld;
    for (int q = t; q < kTileRows * kTileK / 2; q += kThreads) {
      const int r = q / (kTileK / 2), part = q % (kTileK / 2);
      const int row = row_of(r);
      double* dst = as + r * kAld + 2 * part;
      if (row >= 0) {
        copy16(dst, a + static_cast<int64_t>(row) * ld + kk + 2 * part);
      } else {
        dst[0] = 0.0;
        dst[1] = 0.0;
      }
    }
    for (int q = t; q < kTileK * kOuter / 2; q += kThreads) {
      const int kr = q / (kOuter / 2), col = 2 * (q % (kOuter / 2));
      double* dst = bs + kr * kBld + col;
      if (col < ncols) {
        copy16(dst, a + static_cast<int64_t>(piv[kk + kr]) * ld + col0 + col);
      } else {
        dst[0] = 0.0;
        dst[1] = 0.0;
      }
    }
    copies_commit();
  };
  // mma.m16n8k4 (f64): a warp's 16 rows by 8 columns per instruction, each of the warp's 8
  // column groups. Fragments (PTX ISA, "Matrix Fragments for mma.m16n8k4", .f64): A's rows g and
  // g + 8, column q; B's row q, column g; C's rows g and g + 8, columns 2q and 2q + 1 (g the
  // lane / 4, q the lane % 4).
  const int lane = t % 32, g = lane / 4, q4 = lane % 4;
  double acc[kOuter / 8][4];
#pragma unroll
  for (int f = 0; f < kOuter / 8; ++f) {
#pragma unroll
    for (int e = 0; e < 4; ++e) acc[f][e] = 0.0;
  }
  stage(0, 0);
  for (int kk = 0; kk < K; kk += kTileK) {
    const int st = (kk / kTileK) & 1;
    if (kk + kTileK < K) {
      stage(st ^ 1, kk + kTileK);
      copies_wait<1>();
    } else {
      copies_wait<0>();
    }
    __syncthreads();
    const double* as = region + st * kStage + (warp * 16 + g) * kAld + q4;
    const double* bs = region + st * kStage + kTileRows * kAld + q4 * kBld + g;
#pragma unroll
    for (int k4 = 0; k4 < kTileK; k4 += 4) {
      const double a0 = as[k4], a1 = as[8 * kAld + k4];
#pragma unroll
      for (int f = 0; f < kOuter / 8; ++f) {
        if (f * 8 < ncols) {
          const double b0 = bs[k4 * kBld + f * 8];
          asm volatile(
              "mma.sync.aligned.m16n8k4.row.col.f64.f64.f64.f64 {%0, %1, %2, %3}, {%4, %5}, "
              "{%6}, {%0, %1, %2, %3};\n"
              : "+d"(acc[f][0]), "+d"(acc[f][1]), "+d"(acc[f][2]), "+d"(acc[f][3])
              : "d"(a0), "d"(a1), "d"(b0));
        }
      }
    }
    __syncthreads();
  }
#pragma unroll
  for (int f = 0; f < kOuter / 8; ++f) {
    double* c = region + (warp * 16 + g) * kBld + f * 8 + 2 * q4;
    c[0] = acc[f][0];
    c[1] = acc[f][1];
    c[8 * kBld] = acc[f][2];
    c[8 * kBld + 1] = acc[f][3];
  }
  __syncthreads();
}

__global__ void __launch_bounds__(kThreads, 1) panel_kernel(Shape s, Scratch x) {
  extern __shared__ __align__(16) double smem[];
  double* region = smem;
  double* ljj = region + kRegion;      // [kOuter][kLjjLd]: L of the block's pivot rows
  double* us = ljj + kOuter * kLjjLd;  // [kSub][kOuter]: U of 8 pivot rows, later columns
  double* usub = us + kSub * kOuter;   // [kSub][kSub]: the 8 pivot rows' 8 columns
  double* u = usub + kSub * kSub;      // [kSub]: this column's pivot row
  double* sv = u + kSub;               // [kWarps]
  int* piv = reinterpret_cast<int*>(sv + kWarps);  // [kMaxColumns]: the pivot row of each step
  int* sr = piv + PersistentPanel::kMaxColumns;    // [kWarps]
  int* winner = sr + kWarps;                       // [4]
  unsigned char* active = reinterpret_cast<unsigned char*>(winner + 4);

  const int b = blockIdx.x, blocks = gridDim.x, t = threadIdx.x;
  const int h = s.h;
  const int64_t ld = s.ld;
  double* a = s.a;
  const int row0 = b * s.rows_per_block;
  const int nrows = max(0, min(s.rows_per_block, s.m - row0));
  for (int i = t; i < PersistentPanel::kMaxRowsPerBlock; i += kThreads) active[i] = i < nrows;
  unsigned epoch = 0;
  Laps laps{x.phases, now_ns(), b == 0 && t == 0};
  __syncthreads();

  for (int c0 = 0; c0 < h; c0 += kOuter) {
    const int nb = min(kOuter, h - c0);
    // (A) The block's rows, columns [c0, c0 + nb), by every earlier pivot.
    if (c0 > 0) {
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
    laps.lap(0);
    // (B) The columns 8 at a time.
    for (int s8 = 0; s8 < nb; s8 += kSub) {
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
      for (int j = 0; j < kSub; ++j) {
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
        if (t < 32) {
          // Each lane reads whole slots (one round trip), keeps the better; the warp's best
          // row and its 8 columns then come from the lane that holds them.
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
      // The 8 columns back, and the rows chosen flagged for the GEMMs.
#pragma unroll
      for (int i = 0; i < kRows; ++i) {
        if (!(live0 >> i & 1)) continue;
        const int lr = i * kThreads + t;
        double2* p = reinterpret_cast<double2*>(a + static_cast<int64_t>(row0 + lr) * ld + c);
#pragma unroll
        for (int q = 0; q < kSub / 2; ++q)
          __stcg(p + q, make_double2(v[i][2 * q], v[i][2 * q + 1]));
        if (!(live >> i & 1)) active[lr] = 0;
      }
      // Their update of the block's later columns [c + 8, c0 + nb): U of the 8 pivot rows there
      // (their values less their own L part), then each live row less its 8 multipliers times it.
      const int w2 = nb - s8 - kSub;
      if (w2 > 0) {
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
      __syncthreads();
      laps.lap(4);
    }
    // (D) The block's pivot rows right of it: U = L_JJ^-1 (A - L U), columns split over blocks.
    if (c0 + nb < h) {
      grid_barrier(x.counter, epoch);
      for (int q = t; q < nb * nb; q += kThreads) {
        const int r = q / nb, i = q % nb;
        if (i < r)
          ljj[r * kLjjLd + i] = __ldcg(a + static_cast<int64_t>(piv[c0 + r]) * ld + c0 + i);
      }
      const int first = c0 + nb, chunks = (h - first) / 8;
      const int cb = first + 8 * (b * chunks / blocks);
      const int ce = first + 8 * ((b + 1) * chunks / blocks);
      for (int col0 = cb; col0 < ce; col0 += kOuter) {
        const int ncols = min(kOuter, ce - col0);
        if (c0 > 0) {
          tile_product(
              a, ld, [&](int r) { return r < nb ? piv[c0 + r] : -1; }, col0, ncols, c0, piv,
              region);
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
  }

  // The U of each block's diagonal part into its pivot rows; getrf's swaps as moves of rows.
  grid_barrier(x.counter, epoch);
  for (int k = b; k < h; k += blocks) {
    const int cj = k / kOuter * kOuter, end = min(h, cj + kOuter), from = (k / kSub + 1) * kSub;
    for (int col = from + t; col < end; col += kThreads) {
      __stcg(a + static_cast<int64_t>(piv[k]) * ld + col,
             x.udiag[static_cast<int64_t>(k) * kOuter + col - cj]);
    }
  }
  if (b == 0) {
    // Positions are named by ids: position p < h is id p, the position of the row chosen at
    // step k (when it is >= h) is id h + k; the same ids name the rows first found there.
    int* who = reinterpret_cast<int*>(region);  // the row id at each position id
    int* where = who + 2 * h;                   // the position id of each row id
    for (int q = t; q < 2 * h; q += kThreads) {
      who[q] = q;
      where[q] = q;
    }
    __syncthreads();
    if (t == 0) {
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
  }
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

Scratch scratch_in(void* p, int64_t h) {
  auto* bytes = static_cast<char*>(p);
  Scratch x;
  x.counter = reinterpret_cast<unsigned*>(bytes);
  x.phases = reinterpret_cast<long long*>(bytes + 64);
  bytes += 256;
  x.slots = reinterpret_cast<double*>(bytes);
  bytes += sizeof(double) * 2 * kMaxBlocks * kSlot;
  x.move_count = reinterpret_cast<int*>(bytes);
  bytes += 256;
  x.moves = reinterpret_cast<int*>(bytes);
  bytes += sizeof(int) * 4 * h;
  bytes = reinterpret_cast<char*>((reinterpret_cast<uintptr_t>(bytes) + 255) / 256 * 256);
  x.udiag = reinterpret_cast<double*>(bytes);
  bytes += sizeof(double) * h * kOuter;
  x.temp = reinterpret_cast<double*>(bytes);
  return x;
}

}  // namespace

int PersistentPanel::blocks_for(int64_t m, int wanted) {
  const int64_t least = (m + kMaxRowsPerBlock - 1) / kMaxRowsPerBlock;
  return static_cast<int>(
      std::clamp<int64_t>(std::max<int64_t>(wanted, least), 1, std::max<int64_t>(1, m)));
}

uint64_t PersistentPanel::scratch_bytes(int64_t h, int /*blocks*/) {
  return 1024 + sizeof(double) * 2 * kMaxBlocks * kSlot + sizeof(int) * 4 * h +
         sizeof(double) * h * kOuter + sizeof(double) * 2 * h * h + 256;
}

cudaError_t PersistentPanel::factor(double* a, int64_t ld, int64_t m, int64_t h, int32_t* ipiv,
                                    int32_t* info, int blocks, void* scratch, cudaStream_t stream) {
  const int g = blocks_for(m, blocks);
  if (h <= 0 || h % kSub != 0 || h > kMaxColumns || m < h || m >= INT_MAX || ld < h ||
      ld % 2 != 0 || reinterpret_cast<uintptr_t>(a) % 16 != 0 || g > kMaxBlocks) {
    return cudaErrorInvalidValue;
  }
  cudaError_t err =
      cudaFuncSetAttribute(panel_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSharedBytes);
  Scratch x = scratch_in(scratch, h);
  if (err == cudaSuccess) err = cudaMemsetAsync(x.counter, 0, 256, stream);
  if (err == cudaSuccess) err = cudaMemsetAsync(info, 0, sizeof(int32_t), stream);
  if (err != cudaSuccess) return err;
  Shape s{a,    ld,  static_cast<int>(m), static_cast<int>(h), static_cast<int>((m + g - 1) / g),
          ipiv, info};
  void* args[] = {&s, &x};
  return cudaLaunchCooperativeKernel(reinterpret_cast<void*>(panel_kernel), dim3(g), dim3(kThreads),
                                     args, kSharedBytes, stream);
}

const long long* PersistentPanel::phase_nanoseconds(const void* scratch) {
  return reinterpret_cast<const long long*>(static_cast<const char*>(scratch) + 64);
}

}  // namespace stripesolve::backend::cuda
