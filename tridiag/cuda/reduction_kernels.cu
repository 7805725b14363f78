// CR, PCR and the hybrids (001 §2.1, 003 §2.3.6, §4.2.2) for strided batches: systems of up to
// 256 rows take a warp each (warp_reduction.cu); larger ones, n <= kMaxReductionSystem, a block
// of W warps each (N = 256 W rows, padded with identity rows), here.
//
// The levels below W split a block's system into its W residue classes mod W, each a
// tridiagonal system of 256 rows that one warp then solves in its registers (warp_rows.cuh):
//   pcr, pcr_thomas  PCR steps at distances 1 .. W / 2 over the whole system, then warp c
//                    solves class c (rows W q + c) by the warp's pcr or pcr_thomas (here for
//                    W <= 4; at W = 8, pcr_shuffle_steps.cu, whose steps below W use
//                    shuffles; above 2048 rows, pcr_level_groups.cu, 16 rows a thread);
//   cr, cr_pcr, cr_pcr_thomas
//                    CR levels 1 .. W / 2 leave the class W - 1, which warp W - 1 solves by the
//                    warp's cr, cr_pcr or cr_pcr_thomas (CR down to 64 rows holds for the
//                    whole system), then the back-substitution of the levels below W.
// Warp c holds rows W (8 t + s) + c in lane t (the class's consecutive layout) from the start.
// The levels below W take their partners from a shared copy of the rows (a, c, f, each divided
// by its diagonal), with two block barriers a PCR step and one a CR level; the solution goes
// back through the same memory, so that loads and stores are coalesced.
// Ownership: a block owns its system, each warp its class's rows in registers (only its lanes
// write them, and their copies in shared memory); shared memory is written between barriers by
// the threads whose rows it holds, or by the warp that uses a part as its transpose array.
#include <string>

#include <cuda_runtime.h>

#include "base/internal_error.h"
#include "tridiag/cuda/device_solve.h"
#include "tridiag/cuda/reduction_kernels.cuh"
#include "tridiag/cuda/warp_reduction.cuh"
#include "tridiag/cuda/warp_rows.cuh"

namespace stripesolve::tridiag::gpu {

namespace {

using namespace warp;

constexpr int kRowsPerLane = 8;

template <int W>
struct Block {
  static constexpr int kLogW = W == 2 ? 1 : W == 4 ? 2 : W == 8 ? 3 : 4;
  static constexpr int N = 256 * W;
  static constexpr int P = N + 32;         // doubles an array takes: one of padding every 8 W rows
  static_assert(W * kWarpArray <= 2 * P);  // the warps' transpose arrays fit two arrays
  // Row r's place in an array: lanes of a warp, 8 W rows apart, hit distinct banks.
  static __device__ int at(int r) { return r + (r >> (3 + kLogW)); }
  // From W = 8 on (only the CR family: pcr and pcr_thomas take pcr_shuffle_steps.cu and
  // pcr_level_groups.cu), a block copies its next system while it solves one: 4 N doubles more
  // of shared memory, so a block an SM at W = 16 and two at W = 8. H100, 2^26 unknowns, cr /
  // cr_pcr / cr_pcr_thomas: at W = 16 48 / 49 / 50% of the roofline without, 65 / 58 / 59%
  // with; at W = 8 57 / 69 / 69% without, 78 / 72 / 72% with; at W <= 4 (4 blocks an SM
  // without) slower.
  static constexpr bool kPrefetch = W >= 8;
  static constexpr int kBlocksPerSm = 16 / W;
  static constexpr std::size_t kBytes = (3 * P + (kPrefetch ? 4 * N : 0)) * sizeof(double);
};

constexpr bool is_cr(Algorithm a) {
  return a == Algorithm::kCr || a == Algorithm::kCrPcr || a == Algorithm::kCrPcrThomas;
}

// Row r's values in the shared copy; rows outside [0, N) read a row at the edge, finite, whose
// coefficient in the caller is zero.
template <int W>
__device__ Row shared_row(const double* s, int r) {
  using B = Block<W>;
  r = r < 0 ? 0 : r >= B::N ? B::N - 1 : r;
  const int p = B::at(r);
  return {s[p], s[B::P + p], s[2 * B::P + p]};
}

template <int W>
__device__ void store_row(double* s, int r, double a, double c, double f) {
  using B = Block<W>;
  const int p = B::at(r);
  s[p] = a;
  s[B::P + p] = c;
  s[2 * B::P + p] = f;
}

// Every row of the system at `base` from global memory into the shared input copy (rows < n),
// asynchronously.
template <int W>
__device__ void prefetch(double* in, const double* dl, const double* d, const double* du,
                         const double* f, std::size_t base, int n) {
  constexpr int N = Block<W>::N;
#pragma unroll
  for (int k = 0; k < kRowsPerLane; ++k) {
    const int r = threadIdx.x + k * 32 * W;
    if (r < n) {
      copy_async(in + r, dl + base + r);
      copy_async(in + N + r, d + base + r);
      copy_async(in + 2 * N + r, du + base + r);
      copy_async(in + 3 * N + r, f + base + r);
    }
  }
  commit_copies();
}

// A block a system, or with Block::kPrefetch system after system (a grid of kBlocksPerSm an
// SM), copying the next one into shared memory (4 N doubles after the 3 P of the rows) while it
// solves the current one.
template <Algorithm A, int W>
__global__ void __launch_bounds__(32 * W, 16 / W)
    block_reduction_kernel(const double* __restrict__ dl, const double* __restrict__ d,
                           const double* __restrict__ du, const double* __restrict__ f,
                           double* __restrict__ x, int n, std::size_t count, double inv_tol,
                           unsigned long long* flags) {
  using B = Block<W>;
  constexpr int T = 32 * W, M = kRowsPerLane;
  constexpr bool kCr = is_cr(A), kPrefetch = B::kPrefetch;
  extern __shared__ double sm[];
  double* in = sm + 3 * B::P;  // kPrefetch: the next system's dl, d, du, f
  const int tid = threadIdx.x, c = tid >> 5, t = tid & 31;
  std::size_t sys = blockIdx.x;
  if constexpr (kPrefetch) prefetch<W>(in, dl, d, du, f, sys * n, n);
  for (; sys < count; sys += gridDim.x) {
    const std::size_t base = sys * n;
    Ctx<kCr && W == 16> ctx{n, inv_tol, W, c};
    if constexpr (kPrefetch) {
      wait_copies();
      __syncthreads();
    }
    // Every row divided by its diagonal into the shared copy, coalesced; the test deferred.
#pragma unroll
    for (int k = 0; k < M; ++k) {
      const int r = tid + k * T;
      double a = 0.0, b = 1.0, cc = 0.0, g = 0.0;
      if (r < n) {
        if constexpr (kPrefetch) {
          a = r > 0 ? in[r] : 0.0;
          b = in[B::N + r];
          cc = r + 1 < n ? in[2 * B::N + r] : 0.0;
          g = in[3 * B::N + r];
        } else {
          a = r > 0 ? dl[base + r] : 0.0;
          b = d[base + r];
          cc = r + 1 < n ? du[base + r] : 0.0;
          g = f[base + r];
        }
      }
      divide_input(ctx, a, b, cc, g);
      store_row<W>(sm, r, a, cc, g);
    }
    if (inputs_failed(ctx)) {
#pragma unroll
      for (int k = 0; k < M; ++k) {
        const int r = tid + k * T;
        if (r >= n) continue;
        Row v = shared_row<W>(sm, r);
        recheck_input(ctx, r, v.a, v.c, v.f);
        store_row<W>(sm, r, v.a, v.c, v.f);
      }
    }
    report_inputs(ctx, flags, base);
    __syncthreads();
    if constexpr (kPrefetch) {
      if (sys + gridDim.x < count) prefetch<W>(in, dl, d, du, f, (sys + gridDim.x) * n, n);
    }
    Rows<M> w;  // row ctx.row(8 t + s) in slot s
#pragma unroll
    for (int s = 0; s < M; ++s) {
      const Row v = shared_row<W>(sm, ctx.row(8 * t + s));
      w.a[s] = v.a;
      w.c[s] = v.c;
      w.f[s] = v.f;
    }
    // The levels below W: PCR steps (every class), or CR levels (classes 2h - 1 mod 2h). A CR
    // level writes rows that no one reads at that level (its targets), so one barrier, after
    // the writes, serves; the last one needs none (only warp W - 1 goes on with the copy).
#pragma unroll
    for (int l = 0; l < B::kLogW; ++l) {
      const int h = 1 << l;
      const bool target = !kCr || (c & (2 * h - 1)) == 2 * h - 1;
      if (target) {
#pragma unroll
        for (int s = 0; s < M; ++s) {
          const int r = ctx.row(8 * t + s);
          eliminate(ctx, w, s, shared_row<W>(sm, r - h), shared_row<W>(sm, r + h));
        }
      }
      if (!kCr) __syncthreads();  // the level's partners are read
      if (l + 1 < B::kLogW) {
        if (target) {
#pragma unroll
          for (int s = 0; s < M; ++s) {
            store_row<W>(sm, ctx.row(8 * t + s), w.a[s], w.c[s], w.f[s]);
          }
        }
        __syncthreads();
      }
    }
    // The classes: warp c's system in its registers; its transpose array in the shared
    // copy's first two arrays, free now.
    double* tmp = sm + c * kWarpArray;
    double* xs = sm + 2 * B::P;  // the solution, over the copy's third array
    if constexpr (!kCr) {
      solve_system<A, M>(ctx, w, tmp);  // x in the class layout: rows row(t + 32 k)
#pragma unroll
      for (int k = 0; k < M; ++k) xs[B::at(ctx.row(t + 32 * k))] = w.f[k];
      __syncthreads();
    } else {
      if (c == W - 1) {
        solve_system<A, M>(ctx, w, tmp);  // x in the consecutive layout
#pragma unroll
        for (int s = 0; s < M; ++s) xs[B::at(ctx.row(8 * t + s))] = w.f[s];
      }
      __syncthreads();
      // Back-substitution of the levels below W: classes h - 1 mod 2h.
#pragma unroll
      for (int l = B::kLogW - 1; l >= 0; --l) {
        const int h = 1 << l;
        if ((c & (2 * h - 1)) == h - 1) {
#pragma unroll
          for (int s = 0; s < M; ++s) {
            const int r = ctx.row(8 * t + s);
            const double xl = xs[B::at(r - h < 0 ? 0 : r - h)];
            const double xr = xs[B::at(r + h >= B::N ? B::N - 1 : r + h)];
            xs[B::at(r)] = w.f[s] - w.a[s] * xl - w.c[s] * xr;
          }
        }
        __syncthreads();
      }
    }
#pragma unroll
    for (int k = 0; k < M; ++k) {
      const int r = tid + k * T;
      if (r >= n) continue;
      store_x(ctx, x, base, r, xs[B::at(r)]);
    }
    report(ctx, flags, base);
    if constexpr (!kPrefetch) break;  // a block a system
    __syncthreads();  // the solution is read before the next system's rows overwrite it
  }
}

template <Algorithm A, int W>
void launch(const double* dl, const double* d, const double* du, const double* f, double* x, int n,
            std::size_t count, double tol, unsigned long long* flags, cudaStream_t s) {
  using P = Block<W>;
  const std::size_t most = P::kPrefetch ? std::size_t(multiprocessors()) * P::kBlocksPerSm : count;
  const unsigned blocks = static_cast<unsigned>(count < most ? count : most);
  block_reduction_kernel<A, W>
      <<<blocks, 32 * W, P::kBytes, s>>>(dl, d, du, f, x, n, count, 1.0 / tol, flags);
}

template <int W>
cudaError_t set_limits() {
  cudaError_t first = cudaSuccess;
  for (Algorithm alg : {Algorithm::kCr, Algorithm::kPcr, Algorithm::kCrPcr, Algorithm::kPcrThomas,
                        Algorithm::kCrPcrThomas}) {
    with_algorithm(alg, [&]<Algorithm A>() {
      if constexpr (is_cr(A) || W <= 4) {
        const cudaError_t e = cudaFuncSetAttribute(block_reduction_kernel<A, W>,
                                                   cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                   static_cast<int>(Block<W>::kBytes));
        if (first == cudaSuccess) first = e;
      }
    });
  }
  return first;
}

}  // namespace

cudaError_t set_pcr_shuffle_limits();       // pcr_shuffle_steps.cu
cudaError_t set_pcr_level_groups_limits();  // pcr_level_groups.cu

void launch_reduction_solver(KernelChoice kernel, Algorithm algorithm, const double* dl,
                             const double* d, const double* du, const double* f, double* x,
                             std::size_t n, std::size_t count, double tol,
                             unsigned long long* flags, void* stream) {
  switch (kernel.kernel) {
    case Kernel::kWarpReduction:
      return launch_warp_reduction(algorithm, kernel.width, dl, d, du, f, x, n, count, tol, flags,
                                   stream);
    case Kernel::kPcrShuffleSteps:
      return launch_pcr_shuffle(algorithm, dl, d, du, f, x, n, count, tol, flags, stream);
    case Kernel::kPcrLevelGroups:
      return launch_pcr_level_groups(algorithm, dl, d, du, f, x, n, count, tol, flags, stream);
    case Kernel::kBlockReduction:
      break;
    default:
      internal_error("launch_reduction_solver: " + std::string(kernel_name(kernel.kernel)) +
                     " is not a reduction kernel");
  }
  auto s = static_cast<cudaStream_t>(stream);
  const int ni = static_cast<int>(n);
  with_algorithm(algorithm, [&]<Algorithm A>() {
    if (kernel.width == 2) return launch<A, 2>(dl, d, du, f, x, ni, count, tol, flags, s);
    if (kernel.width == 4) return launch<A, 4>(dl, d, du, f, x, ni, count, tol, flags, s);
    if constexpr (is_cr(A)) {  // pcr and pcr_thomas have no block_reduction_kernel above W = 4
      if (kernel.width == 8) return launch<A, 8>(dl, d, du, f, x, ni, count, tol, flags, s);
      if (kernel.width == 16) return launch<A, 16>(dl, d, du, f, x, ni, count, tol, flags, s);
    }
    internal_error("block_reduction_kernel for " + std::string(algorithm_name(A)) + " with " +
                   std::to_string(kernel.width) + " warps");
  });
}

cudaError_t set_reduction_shared_limits() {
  for (cudaError_t e : {set_limits<2>(), set_limits<4>(), set_limits<8>(), set_limits<16>(),
                        set_pcr_shuffle_limits(), set_pcr_level_groups_limits()}) {
    if (e != cudaSuccess) return e;
  }
  return cudaSuccess;
}

}  // namespace stripesolve::tridiag::gpu
