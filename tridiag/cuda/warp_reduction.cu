// CR, PCR and the hybrids for strided batches of systems of n <= kMaxWarpSystem = 256 rows:
// each warp solves system after system, held in the registers of its lanes (warp_rows.cuh).
// Loads: the warp's next system is copied into its shared buffer by cp.async while it solves
// the current one (row r at pad(r), so that lanes reading consecutive rows hit distinct banks).
// Ownership: a warp owns its systems and its shared buffers (input, and one array for the
// transposes), each lane its registers; the lanes meet only at __syncwarp.
#include <cuda_runtime.h>

#include "tridiag/cuda/warp_reduction.cuh"
#include "tridiag/cuda/warp_rows.cuh"

namespace stripesolve::tridiag::gpu {

namespace {

using namespace warp;

constexpr int kWarps = 4;        // warps a block, each on its own systems
constexpr int kBlocksPerSm = 4;  // 16 warps an SM: 4 blocks of 46 KB of shared memory
constexpr int kArrays = 5;       // dl, d, du, f, and one for the transposes

// ---- Loads and stores.

// Starts copying the system at `base` into the warp's buffer (rows < n).
__device__ void prefetch(double* buf, const double* dl, const double* d, const double* du,
                         const double* f, std::size_t base, int n) {
  copy_system_async<kWarpArray, 32>(buf, dl, d, du, f, base, n, threadIdx.x & 31);
}

template <int M>
__device__ void load_rows(auto& ctx, const double* buf, Rows<M>& w) {
  const int t = threadIdx.x & 31;
#pragma unroll
  for (int s = 0; s < M; ++s) {
    const int r = t * M + s, p = pad(r);
    double a = 0.0, b = 1.0, c = 0.0, g = 0.0;
    if (r < ctx.n) {
      a = r > 0 ? buf[p] : 0.0;
      b = buf[kWarpArray + p];
      c = r + 1 < ctx.n ? buf[2 * kWarpArray + p] : 0.0;
      g = buf[3 * kWarpArray + p];
    }
    divide_input(ctx, a, b, c, g);
    w.a[s] = a;
    w.c[s] = c;
    w.f[s] = g;
  }
  if (inputs_failed(ctx)) {  // a failed row takes no part (recheck_input() zeroes it)
    const int t = threadIdx.x & 31;
#pragma unroll
    for (int s = 0; s < M; ++s) recheck_input(ctx, t * M + s, w.a[s], w.c[s], w.f[s]);
  }
}

template <Algorithm A, int M>
__global__ void __launch_bounds__(32 * kWarps, kBlocksPerSm)
    warp_reduction_kernel(const double* __restrict__ dl, const double* __restrict__ d,
                          const double* __restrict__ du, const double* __restrict__ f,
                          double* __restrict__ x, int n, std::size_t count, double inv_tol,
                          unsigned long long* flags) {
  extern __shared__ double smem[];
  const int warp = threadIdx.x >> 5, t = threadIdx.x & 31;
  double* buf = smem + warp * kArrays * kWarpArray;
  double* tmp = buf + 4 * kWarpArray;
  const std::size_t stride = std::size_t(gridDim.x) * kWarps;
  std::size_t sys = std::size_t(blockIdx.x) * kWarps + warp;
  if (sys < count) prefetch(buf, dl, d, du, f, sys * n, n);
  for (; sys < count; sys += stride) {
    Ctx<> ctx{n, inv_tol, 1, 0};
    wait_copies();
    __syncwarp();
    Rows<M> w;
    load_rows(ctx, buf, w);
    __syncwarp();
    if (sys + stride < count) prefetch(buf, dl, d, du, f, (sys + stride) * n, n);
    const std::size_t base = sys * n;
    report_inputs(ctx, flags, base);
    const bool in_classes = solve_system<A, M>(ctx, w, tmp);
    if constexpr (M > 1) {
      if (!in_classes) transpose<M, true>(tmp, w.f);
    }
#pragma unroll
    for (int s = 0; s < M; ++s) {
      const int r = t + 32 * s;
      if (r >= n) continue;
      store_x(ctx, x, base, r, w.f[s]);
    }
    report(ctx, flags, base);
  }
}

template <Algorithm A, int M>
void launch(const double* dl, const double* d, const double* du, const double* f, double* x, int n,
            std::size_t count, double tol, unsigned long long* flags, cudaStream_t stream) {
  const int sms = multiprocessors();
  const std::size_t want = (count + kWarps - 1) / kWarps;
  const unsigned blocks =
      static_cast<unsigned>(want < std::size_t(sms) * kBlocksPerSm ? want : sms * kBlocksPerSm);
  const std::size_t bytes = std::size_t(kWarps) * kArrays * kWarpArray * sizeof(double);
  warp_reduction_kernel<A, M>
      <<<blocks, 32 * kWarps, bytes, stream>>>(dl, d, du, f, x, n, count, 1.0 / tol, flags);
}

}  // namespace

void launch_warp_reduction(Algorithm algorithm, int rows_per_lane, const double* dl,
                           const double* d, const double* du, const double* f, double* x,
                           std::size_t n, std::size_t count, double tol, unsigned long long* flags,
                           void* stream) {
  auto s = static_cast<cudaStream_t>(stream);
  const int ni = static_cast<int>(n);
  with_algorithm(algorithm, [&]<Algorithm A>() {
    switch (rows_per_lane) {
      case 1:
        return launch<A, 1>(dl, d, du, f, x, ni, count, tol, flags, s);
      case 2:
        return launch<A, 2>(dl, d, du, f, x, ni, count, tol, flags, s);
      case 4:
        return launch<A, 4>(dl, d, du, f, x, ni, count, tol, flags, s);
      default:
        return launch<A, 8>(dl, d, du, f, x, ni, count, tol, flags, s);
    }
  });
}

}  // namespace stripesolve::tridiag::gpu
