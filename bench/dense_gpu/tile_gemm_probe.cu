// The one-launch panel's GEMM (phase (A) of backend/cuda/persistent_panel.h) alone, each way of
// tiling it for the FP64 tensor cores, to pick the next one for the kernel: on B blocks, each
// block's rows of an m-row panel (held by rows) less their product by K pivot rows, 64 columns
// wide, as `update_columns` computes it (out = a[rows, c0:c0+64] - a[rows, 0:K] a[piv, c0:c0+64]).
//
//   variant 0: the kernel's `tile_product` (warp tiles of 16 x 64, mma.m16n8k4, the result
//              through shared memory);
//   1 / 2 / 3: warp tiles of 16 x 64, mma.m16n8k4 / k8 / k16, the result applied from registers;
//   4 / 5 / 6: warp tiles of 32 x 32, the same three shapes;
//   7 / 8: 16 x 64 with k4 and 32 x 32 with k8, three stages of cp.async instead of two.
//
// Each variant is checked against a plain FP64 kernel (max |difference| relative to max |out|)
// and timed (best of the repetitions; TFLOP/s in all and an SM, against the tensor cores' peak).
//
//   build/release/bench/dense_gpu/bench_tile_gemm [m=57344] [K=960] [blocks=32] [reps=5] [ld=1024]
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include <cuda_runtime.h>

#include "backend/cuda/persistent_panel_parts.cuh"
#include "cuda_check.cuh"

namespace {

// The kernel's tile constants and staging helpers by name (not the whole namespace: this
// probe's mma / warp_tiles are its own).
using stripesolve::backend::cuda::panel::copies_commit;
using stripesolve::backend::cuda::panel::copies_wait;
using stripesolve::backend::cuda::panel::kAld;
using stripesolve::backend::cuda::panel::kBld;
using stripesolve::backend::cuda::panel::kOuter;
using stripesolve::backend::cuda::panel::kStage;
using stripesolve::backend::cuda::panel::kThreads;
using stripesolve::backend::cuda::panel::kTileK;
using stripesolve::backend::cuda::panel::kTileRows;
using stripesolve::backend::cuda::panel::kWarps;
using stripesolve::backend::cuda::panel::tile_product;
using stripesolve::backend::cuda::panel::TileStager;

constexpr int kCols = kOuter;             // the column block's width
constexpr int kProbeRegion = 3 * kStage;  // room for the 3-stage variants
constexpr int kVariants = 9;

template <int kK>
__device__ inline void mma(double (&c)[4], const double* a, const double* b);

template <>
__device__ inline void mma<4>(double (&c)[4], const double* a, const double* b) {
  asm volatile(
      "mma.sync.aligned.m16n8k4.row.col.f64.f64.f64.f64 {%0, %1, %2, %3}, {%4, %5}, {%6}, "
      "{%0, %1, %2, %3};\n"
      : "+d"(c[0]), "+d"(c[1]), "+d"(c[2]), "+d"(c[3])
      : "d"(a[0]), "d"(a[1]), "d"(b[0]));
}

template <>
__device__ inline void mma<8>(double (&c)[4], const double* a, const double* b) {
  asm volatile(
      "mma.sync.aligned.m16n8k8.row.col.f64.f64.f64.f64 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
      "{%8, %9}, {%0, %1, %2, %3};\n"
      : "+d"(c[0]), "+d"(c[1]), "+d"(c[2]), "+d"(c[3])
      : "d"(a[0]), "d"(a[1]), "d"(a[2]), "d"(a[3]), "d"(b[0]), "d"(b[1]));
}

template <>
__device__ inline void mma<16>(double (&c)[4], const double* a, const double* b) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f64.f64.f64.f64 {%0, %1, %2, %3}, {%4, %5, %6, %7, %8, "
      "%9, %10, %11}, {%12, %13, %14, %15}, {%0, %1, %2, %3};\n"
      : "+d"(c[0]), "+d"(c[1]), "+d"(c[2]), "+d"(c[3])
      : "d"(a[0]), "d"(a[1]), "d"(a[2]), "d"(a[3]), "d"(a[4]), "d"(a[5]), "d"(a[6]), "d"(a[7]),
        "d"(b[0]), "d"(b[1]), "d"(b[2]), "d"(b[3]));
}

// The product of a tile of kTileRows rows by the pivot rows, staged as tile_product stages it
// (TileStager),
// computed by warp tiles of kWarpRows x (the rest of the 64 columns) with mma.m16n8k{kK}, each
// result pair handed to apply(row of the tile, column, value). Fragments (PTX ISA, FP64 mma;
// CuTe's SM90_16x8x{4,8,16}_F64 layouts): A's value 2v / 2v + 1 at rows g / g + 8, column
// q + 4v; B's value v at row q + 4v, column g; C's rows g and g + 8, columns 2q and 2q + 1 (g the
// lane / 4, q the lane % 4).
template <int kWarpRows, int kK, int kStages, class RowOf, class Apply>
__device__ void warp_tiles(const double* a, int64_t ld, RowOf row_of, int col0, int K,
                           const int* piv, double* region, Apply apply) {
  constexpr int kAlongRows = kTileRows / kWarpRows, kAlongCols = kWarps / kAlongRows;
  constexpr int kWarpCols = kCols / kAlongCols, kMi = kWarpRows / 16, kNi = kWarpCols / 8;
  const int t = threadIdx.x, warp = t / 32, lane = t % 32, g = lane / 4, q = lane % 4;
  const int wr = warp % kAlongRows, wc = warp / kAlongRows;
  const TileStager stage(a, ld, row_of, col0, kCols, piv, region);
  double acc[kMi][kNi][4];
#pragma unroll
  for (int mi = 0; mi < kMi; ++mi) {
#pragma unroll
    for (int ni = 0; ni < kNi; ++ni) {
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[mi][ni][e] = 0.0;
    }
  }
  // kStages - 1 tiles in flight while one is computed (an empty group where none is left, so
  // that the count of groups to wait for stays the same).
#pragma unroll
  for (int st = 0; st < kStages - 1; ++st) {
    if (st * kTileK < K) {
      stage(st, st * kTileK);
    } else {
      copies_commit();
    }
  }
  for (int kk = 0; kk < K; kk += kTileK) {
    const int tile = kk / kTileK, st = tile % kStages;
    const int next = kk + (kStages - 1) * kTileK;
    if (next < K) {
      stage((tile + kStages - 1) % kStages, next);
    } else {
      copies_commit();
    }
    copies_wait<kStages - 1>();
    __syncthreads();
    const double* as = region + st * kStage + (wr * kWarpRows + g) * kAld + q;
    const double* bs = region + st * kStage + kTileRows * kAld + q * kBld + wc * kWarpCols + g;
#pragma unroll
    for (int k = 0; k < kTileK; k += kK) {
      double af[kMi][kK / 2];
#pragma unroll
      for (int mi = 0; mi < kMi; ++mi) {
#pragma unroll
        for (int v = 0; v < kK / 4; ++v) {
          af[mi][2 * v] = as[mi * 16 * kAld + k + 4 * v];
          af[mi][2 * v + 1] = as[(mi * 16 + 8) * kAld + k + 4 * v];
        }
      }
#pragma unroll
      for (int ni = 0; ni < kNi; ++ni) {
        double bf[kK / 4];
#pragma unroll
        for (int v = 0; v < kK / 4; ++v) bf[v] = bs[(k + 4 * v) * kBld + ni * 8];
#pragma unroll
        for (int mi = 0; mi < kMi; ++mi) mma<kK>(acc[mi][ni], af[mi], bf);
      }
    }
    __syncthreads();
  }
#pragma unroll
  for (int mi = 0; mi < kMi; ++mi) {
#pragma unroll
    for (int ni = 0; ni < kNi; ++ni) {
      const int r = wr * kWarpRows + mi * 16 + g, col = wc * kWarpCols + ni * 8 + 2 * q;
      apply(r, col, make_double2(acc[mi][ni][0], acc[mi][ni][1]));
      apply(r + 8, col, make_double2(acc[mi][ni][2], acc[mi][ni][3]));
    }
  }
}

struct Problem {
  const double* a;
  int64_t ld;
  int m, rows_per_block, c0, K;
  const int* piv;
  double* out;  // m x kCols
};

template <int kVariant>
__global__ void __launch_bounds__(kThreads, 1) probe_kernel(Problem p) {
  extern __shared__ __align__(16) double smem[];
  int* piv = reinterpret_cast<int*>(smem + kProbeRegion);
  for (int q = threadIdx.x; q < p.K; q += kThreads) piv[q] = p.piv[q];
  __syncthreads();
  const int row0 = blockIdx.x * p.rows_per_block;
  const int nrows = max(0, min(p.rows_per_block, p.m - row0));
  for (int base = 0; base < nrows; base += kTileRows) {
    auto row_of = [&](int r) { return base + r < nrows ? row0 + base + r : -1; };
    auto apply = [&](int r, int col, double2 product) {
      if (base + r >= nrows) return;
      const int64_t row = row0 + base + r;
      double2 y = __ldcg(reinterpret_cast<const double2*>(p.a + row * p.ld + p.c0 + col));
      y.x -= product.x;
      y.y -= product.y;
      __stcg(reinterpret_cast<double2*>(p.out + row * kCols + col), y);
    };
    if constexpr (kVariant == 0) {
      tile_product(p.a, p.ld, row_of, p.c0, kCols, p.K, piv, smem);
      for (int q = threadIdx.x; q < kTileRows * kCols / 2; q += kThreads) {
        const int r = q / (kCols / 2), col = 2 * (q % (kCols / 2));
        apply(r, col, make_double2(smem[r * kBld + col], smem[r * kBld + col + 1]));
      }
      __syncthreads();
    } else {
      constexpr int kShapes[] = {4, 8, 16};
      constexpr int kWarpRows = kVariant <= 3 || kVariant == 7 ? 16 : 32;
      constexpr int kK = kVariant <= 6 ? kShapes[(kVariant - 1) % 3] : kVariant == 7 ? 4 : 8;
      constexpr int kStages = kVariant <= 6 ? 2 : 3;
      warp_tiles<kWarpRows, kK, kStages>(p.a, p.ld, row_of, p.c0, p.K, piv, smem, apply);
    }
  }
}

// The same by one thread an element, FP64 FMAs in k order.
__global__ void reference_kernel(Problem p) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= static_cast<int64_t>(p.m) * kCols) return;
  const int64_t row = i / kCols;
  const int col = static_cast<int>(i % kCols);
  double y = 0.0;
  for (int k = 0; k < p.K; ++k) y += p.a[row * p.ld + k] * p.a[p.piv[k] * p.ld + p.c0 + col];
  p.out[i] = p.a[row * p.ld + p.c0 + col] - y;
}

using Kernel = void (*)(Problem);
constexpr Kernel kKernels[] = {probe_kernel<0>, probe_kernel<1>, probe_kernel<2>,
                               probe_kernel<3>, probe_kernel<4>, probe_kernel<5>,
                               probe_kernel<6>, probe_kernel<7>, probe_kernel<8>};
constexpr const char* kNames[] = {"tile_product (16x64, k4, via shared)",
                                  "16x64, k4, from registers",
                                  "16x64, k8, from registers",
                                  "16x64, k16, from registers",
                                  "32x32, k4, from registers",
                                  "32x32, k8, from registers",
                                  "32x32, k16, from registers",
                                  "16x64, k4, 3 stages, from registers",
                                  "32x32, k8, 3 stages, from registers"};

}  // namespace

int main(int argc, char** argv) {
  const int m = argc > 1 ? std::atoi(argv[1]) : 57344;
  const int K = argc > 2 ? std::atoi(argv[2]) : 960;
  const int blocks = argc > 3 ? std::atoi(argv[3]) : 32;
  const int reps = argc > 4 ? std::atoi(argv[4]) : 5;
  const int ld = argc > 5 ? std::atoi(argv[5]) : 1024;
  if (K % kTileK != 0 || K + kCols > ld || blocks < 1 || m < K) {
    std::fprintf(stderr, "K a multiple of %d, K + %d <= ld, m >= K\n", kTileK, kCols);
    return 2;
  }
  cudaDeviceProp prop{};
  CK(cudaGetDeviceProperties(&prop, 0));
  std::vector<double> host(static_cast<size_t>(m) * ld);
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  for (double& x : host) x = u(rng);
  std::vector<int> piv(m);
  for (int i = 0; i < m; ++i) piv[i] = i;
  std::shuffle(piv.begin(), piv.end(), rng);
  double *a, *out, *ref;
  int* dpiv;
  CK(cudaMalloc(&a, sizeof(double) * host.size()));
  CK(cudaMalloc(&out, sizeof(double) * m * kCols));
  CK(cudaMalloc(&ref, sizeof(double) * m * kCols));
  CK(cudaMalloc(&dpiv, sizeof(int) * K));
  CK(cudaMemcpy(a, host.data(), sizeof(double) * host.size(), cudaMemcpyHostToDevice));
  CK(cudaMemcpy(dpiv, piv.data(), sizeof(int) * K, cudaMemcpyHostToDevice));
  const int rows_per_block = (m + blocks - 1) / blocks;
  Problem p{a, ld, m, rows_per_block, K, K, dpiv, ref};
  reference_kernel<<<(m * kCols + 255) / 256, 256>>>(p);
  CK(cudaGetLastError());
  std::vector<double> want(static_cast<size_t>(m) * kCols), got(want.size());
  CK(cudaMemcpy(want.data(), ref, sizeof(double) * want.size(), cudaMemcpyDeviceToHost));
  double scale = 0;
  for (double x : want) scale = std::fmax(scale, std::fabs(x));
  const double flops = 2.0 * m * kCols * double(K);
  std::printf("%s, %d SMs; %d rows x %d columns by K = %d (row stride %d), %d blocks\n", prop.name,
              prop.multiProcessorCount, m, kCols, K, ld, blocks);
  const int shared = static_cast<int>(sizeof(double) * kProbeRegion + sizeof(int) * K);
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  p.out = out;
  for (int v = 0; v < kVariants; ++v) {
    CK(cudaFuncSetAttribute(kKernels[v], cudaFuncAttributeMaxDynamicSharedMemorySize, shared));
    CK(cudaMemset(out, 0, sizeof(double) * m * kCols));
    float best = 1e30f;
    for (int r = 0; r < reps; ++r) {
      CK(cudaEventRecord(e0));
      kKernels[v]<<<blocks, kThreads, shared>>>(p);
      CK(cudaEventRecord(e1));
      CK(cudaEventSynchronize(e1));
      float ms = 0;
      CK(cudaEventElapsedTime(&ms, e0, e1));
      best = std::min(best, ms);
    }
    CK(cudaGetLastError());
    CK(cudaMemcpy(got.data(), out, sizeof(double) * got.size(), cudaMemcpyDeviceToHost));
    double diff = 0;
    for (size_t i = 0; i < got.size(); ++i) diff = std::fmax(diff, std::fabs(got[i] - want[i]));
    const double rate = flops / (best * 1e-3) / 1e12;
    std::printf("%-40s %7.3f ms  %6.2f TFLOP/s  %5.3f an SM  | max |diff| / max |out| %.2e%s\n",
                kNames[v], best, rate, rate / blocks, diff / scale,
                diff / scale > 1e-12 ? "  WRONG" : "");
  }
  return 0;
}
