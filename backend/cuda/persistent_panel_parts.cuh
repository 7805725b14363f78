// The one-launch panel's device parts (persistent_panel.cu, its only includer): the grid
// barrier and the block's candidate, the phase clock, and the left-looking GEMM of a tile of
// rows by the pivot rows (FP64 tensor cores, operands staged by cp.async).
#pragma once

#include <cstdint>

#include <cuda/atomic>

#include "backend/cuda/persistent_panel.h"

namespace stripesolve::backend::cuda::panel {

constexpr int kThreads = PersistentPanel::kThreads;
constexpr int kWarps = kThreads / 32;
constexpr int kOuter = 64;  // columns of one left-looking block
constexpr int kTileRows = 128;
constexpr int kTileK = 32;
constexpr int kAld = kTileK + 4;  // shared row strides, in doubles
constexpr int kBld = kOuter + 4;
constexpr int kStage = kTileRows * kAld + kTileK * kBld;
constexpr int kRegion = 2 * kStage;  // two stages of the GEMM's tiles; its result aliases them
static_assert(kTileRows * kBld <= kRegion, "the GEMM's result fits its stages");
static_assert(kWarps * 16 == kTileRows, "each warp computes 16 rows of a tile");

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

// The warp's largest (value, row), in every lane (ties to the lower row); `from`, where given,
// follows the lane it came from.
__device__ inline void warp_argmax(double& v, int& r, int& from) {
  for (int off = 16; off > 0; off >>= 1) {
    const double ov = __shfl_xor_sync(~0u, v, off);
    const int orow = __shfl_xor_sync(~0u, r, off);
    const int ofrom = __shfl_xor_sync(~0u, from, off);
    if (better(ov, orow, v, r)) {
      v = ov;
      r = orow;
      from = ofrom;
    }
  }
}
__device__ inline void warp_argmax(double& v, int& r) {
  for (int off = 16; off > 0; off >>= 1) {
    const double ov = __shfl_xor_sync(~0u, v, off);
    const int orow = __shfl_xor_sync(~0u, r, off);
    if (better(ov, orow, v, r)) {
      v = ov;
      r = orow;
    }
  }
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

// Where a thread's parts of each stage of a tile product come from and go, fixed for the whole
// product: of A, 16 bytes of each of the rows t / 16 + 16 e (row_of(r) < 0: zeros); of B, 16
// bytes at column 2 (t % 32) of the pivot rows t / 32 + 8 e (zeros from column ncols on).
// stage(st, kk) copies the product's columns [kk, kk + kTileK) into stage st of `region` by
// cp.async, one commit group.
struct TileStager {
  static constexpr int kAParts = kTileRows * kTileK / 2 / kThreads;
  static constexpr int kBParts = kTileK * kOuter / 2 / kThreads;
  static_assert(kThreads % (kTileK / 2) == 0 && kThreads % (kOuter / 2) == 0);
  const double* a;
  int64_t ld;
  const int* piv;
  double* region;
  int col0, a_to, b_col, b_to;
  bool b_on;
  const double* a_from[kAParts];

  template <class RowOf>
  __device__ __forceinline__ TileStager(const double* a_, int64_t ld_, RowOf row_of, int col0_,
                                        int ncols, const int* piv_, double* region_)
      : a(a_), ld(ld_), piv(piv_), region(region_), col0(col0_) {
    const int t = threadIdx.x;
#pragma unroll
    for (int e = 0; e < kAParts; ++e) {
      const int row = row_of(t / (kTileK / 2) + e * (kThreads / (kTileK / 2)));
      a_from[e] = row >= 0 ? a + static_cast<int64_t>(row) * ld + 2 * (t % (kTileK / 2)) : nullptr;
    }
    a_to = t / (kTileK / 2) * kAld + 2 * (t % (kTileK / 2));
    b_col = 2 * (t % (kOuter / 2));
    b_to = t / (kOuter / 2) * kBld + b_col;
    b_on = b_col < ncols;
  }

  __device__ __forceinline__ void operator()(int st, int kk) const {
    const int t = threadIdx.x;
    double* as = region + st * kStage + a_to;
    double* bs = region + st * kStage + kTileRows * kAld + b_to;
#pragma unroll
    for (int e = 0; e < kAParts; ++e) {
      double* dst = as + e * (kThreads / (kTileK / 2)) * kAld;
      if (a_from[e] != nullptr) {
        copy16(dst, a_from[e] + kk);
      } else {
        dst[0] = 0.0;
        dst[1] = 0.0;
      }
    }
#pragma unroll
    for (int e = 0; e < kBParts; ++e) {
      double* dst = bs + e * (kThreads / (kOuter / 2)) * kBld;
      const int kr = kk + t / (kOuter / 2) + e * (kThreads / (kOuter / 2));
      if (b_on) {
        copy16(dst, a + static_cast<int64_t>(piv[kr]) * ld + col0 + b_col);
      } else {
        dst[0] = 0.0;
        dst[1] = 0.0;
      }
    }
    copies_commit();
  }
};

// region[r * kBld + c] = sum_{k < K} a[row_of(r) * ld + k] * a[piv[k] * ld + col0 + c] for
// r < kTileRows, c < ncols (<= kOuter; a multiple of 8); row_of(r) < 0 gives a zero row. FP64
// tensor cores (mma.sync), tiles of kTileK staged by cp.async in two stages.
template <class RowOf>
__device__ void tile_product(const double* a, int64_t ld, RowOf row_of, int col0, int ncols, int K,
                             const int* piv, double* region) {
  const int t = threadIdx.x, warp = t / 32;
  const TileStager stage(a, ld, row_of, col0, ncols, piv, region);
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

}  // namespace stripesolve::backend::cuda::panel
