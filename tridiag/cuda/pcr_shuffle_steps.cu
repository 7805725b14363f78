// pcr and pcr_thomas for strided batches of kMaxPcrSharedCopySystem < n <= kMaxPcrShuffleSystem
// (1024 < n <= 2048) rows, their PCR steps across the block by shuffles: a block of
// W = kPcrShuffleWarps = 8 warps a system, blocks looping over systems and copying the next one
// into shared memory by cp.async while they solve the current one (pcr_level_groups.cu takes
// n > 2048).
//
// The PCR steps at distances 1 .. W / 2 run with lane t of the block's warp c holding the 8
// consecutive rows 8 (32 c + t) + s, as in a warp's system (warp_rows.cuh): a step takes its
// partners from the lane's own rows and, by one shuffle, from the neighbouring lanes; lanes 0
// and 31 take those of the neighbouring warps from a small shared array of the warps' edge
// rows instead (one block barrier a step). The steps leave the W residue classes mod W
// independent; a transpose through shared memory (the space of the input's copy, whose next
// copy starts after it) gives warp c the class c (rows W q + c, its lane t rows q = 8 t + s),
// which it solves by the warp's pcr or pcr_thomas. Against reduction_kernels.cu, whose steps
// below W read both partners of every row from a shared copy and write the row back (72 bytes
// a row a step), shared memory here carries 48 bytes a row for the transpose and the edges.
// Ownership: a block owns its system; lanes own their rows in registers; shared memory is the
// next system's copy (cp.async by every thread, read after a barrier; between its reads and
// the next copy, the transpose to the classes), the edge rows (written by lanes 0 and 31 of
// each warp, one array a step's parity), and one array holding each warp's transpose array
// for its class's solve, then the solution, written and read between barriers.
#include <cuda_runtime.h>

#include "tridiag/cuda/kernel_limits.h"
#include "tridiag/cuda/reduction_kernels.cuh"
#include "tridiag/cuda/warp_rows.cuh"

namespace stripesolve::tridiag::gpu {

namespace {

using namespace warp;

constexpr int W = kPcrShuffleWarps;

struct Layout {
  static constexpr int kLogW = 3;
  static_assert(1 << kLogW == W);
  static constexpr int N = static_cast<int>(kClassRows) * W;
  static constexpr int kIn = N + N / 8;                     // an input array (pad(r))
  static constexpr int kOne = N + N / 8 + N / (8 * W) + 8;  // the transpose array (at(r))
  static constexpr int kEdge = 3 * 2 * W * 8;               // a step's edge rows: a, c, f
  static constexpr std::size_t kBytes = (4 * kIn + kOne + 2 * kEdge) * sizeof(double);
  // Row r in the transpose array: lanes reading 8 consecutive rows each, or rows 8 W apart
  // (a class's consecutive layout), hit distinct banks.
  static __device__ int at(int r) { return r + (r >> 3) + (r >> (3 + kLogW)); }
  static_assert(W * kWarpArray <= kOne);  // the warps' own transpose arrays fit in it
  static_assert(3 * kOne <= 4 * kIn);     // the transpose to the classes fits the copy's space
};

__device__ void prefetch(double* in, const double* dl, const double* d, const double* du,
                         const double* f, std::size_t base, int n) {
  copy_system_async<Layout::kIn, 32 * W>(in, dl, d, du, f, base, n, threadIdx.x);
}

// A PCR step at distance D (1, 2, 4) on the block's consecutive layout; `edge`: this step's
// array of the warps' edge rows (slot s of warp c's lane 0 at (2 c) 8 + s, lane 31 at
// (2 c + 1) 8 + s).
template <int D>
__device__ void pcr_step(auto& ctx, Rows<8>& w, double* edge) {
  constexpr int E = 2 * W * 8;
  const int tid = threadIdx.x, c = tid >> 5, t = tid & 31;
  if (t == 0 || t == 31) {
    const int side = t == 31;
#pragma unroll
    for (int s = 0; s < 8; ++s) {
      if (side ? s >= 8 - D : s < D) {
        const int e = (2 * c + side) * 8 + s;
        edge[e] = w.a[s];
        edge[E + e] = w.c[s];
        edge[2 * E + e] = w.f[s];
      }
    }
  }
  __syncthreads();
  auto edge_row = [&](int warp, int side, int s) {
    const int e = (2 * warp + side) * 8 + s;
    return Row{edge[e], edge[E + e], edge[2 * E + e]};
  };
  const Rows<8> old = w;
#pragma unroll
  for (int s = 0; s < 8; ++s) {
    Row lo, hi;
    if (s - D >= 0) {
      lo = row_of(old, s - D);
    } else {  // the previous lane's slot u
      const int u = s - D + 8;
      lo = shfl_up(old.a[u], old.c[u], old.f[u], 1);
      if (t == 0 && c > 0) lo = edge_row(c - 1, 1, u);
    }
    if (s + D < 8) {
      hi = row_of(old, s + D);
    } else {  // the next lane's slot u
      const int u = s + D - 8;
      hi = shfl_down(old.a[u], old.c[u], old.f[u], 1);
      if (t == 31 && c < W - 1) hi = edge_row(c + 1, 0, u);
    }
    eliminate(ctx, w, s, lo, hi);
  }
}

template <int D = 1>
__device__ void pcr_steps(auto& ctx, Rows<8>& w, double* edges) {
  if constexpr (D < W) {
    constexpr int kEdge = Layout::kEdge;
    pcr_step<D>(ctx, w, edges + (D == 1 || D == 4 ? 0 : kEdge));
    pcr_steps<2 * D>(ctx, w, edges);
  }
}

template <Algorithm A>
__global__ void __launch_bounds__(32 * W, 16 / W)
    pcr_shuffle_kernel(const double* __restrict__ dl, const double* __restrict__ d,
                       const double* __restrict__ du, const double* __restrict__ f,
                       double* __restrict__ x, int n, std::size_t count, double inv_tol,
                       unsigned long long* flags) {
  using L = Layout;
  constexpr int T = 32 * W;
  extern __shared__ double sm[];
  double* in = sm;                // the next system: dl, d, du, f
  double* one = in + 4 * L::kIn;  // the warps' transpose arrays, then the solution
  double* edges = one + L::kOne;  // two steps' edge rows
  const int tid = threadIdx.x, c = tid >> 5, t = tid & 31;
  std::size_t sys = blockIdx.x;
  prefetch(in, dl, d, du, f, sys * n, n);
  for (; sys < count; sys += gridDim.x) {
    const std::size_t base = sys * n;
    Ctx<> ctx{n, inv_tol, W, c};
    wait_copies();
    __syncthreads();
    Rows<8> w;  // row 8 tid + s in slot s, divided by its diagonal
#pragma unroll
    for (int s = 0; s < 8; ++s) {
      const int r = 8 * tid + s, p = pad(r);
      double a = 0.0, b = 1.0, cc = 0.0, g = 0.0;
      if (r < n) {
        a = r > 0 ? in[p] : 0.0;
        b = in[L::kIn + p];
        cc = r + 1 < n ? in[2 * L::kIn + p] : 0.0;
        g = in[3 * L::kIn + p];
      }
      divide_input(ctx, a, b, cc, g);
      w.a[s] = a;
      w.c[s] = cc;
      w.f[s] = g;
    }
    if (inputs_failed(ctx)) {
#pragma unroll
      for (int s = 0; s < 8; ++s) recheck_input(ctx, 8 * tid + s, w.a[s], w.c[s], w.f[s]);
    }
    report_inputs(ctx, flags, base);
    pcr_steps(ctx, w, edges);  // its barriers also end the reads of the copy
    // To the classes through the copy's space: warp c gets rows W (8 t + s) + c.
#pragma unroll
    for (int s = 0; s < 8; ++s) {
      const int p = L::at(8 * tid + s);
      in[p] = w.a[s];
      in[L::kOne + p] = w.c[s];
      in[2 * L::kOne + p] = w.f[s];
    }
    __syncthreads();
#pragma unroll
    for (int s = 0; s < 8; ++s) {
      const int p = L::at(W * (8 * t + s) + c);
      w.a[s] = in[p];
      w.c[s] = in[L::kOne + p];
      w.f[s] = in[2 * L::kOne + p];
    }
    __syncthreads();  // read before the next system's copy overwrites it
    if (sys + gridDim.x < count) prefetch(in, dl, d, du, f, (sys + gridDim.x) * n, n);
    solve_system<A, 8>(ctx, w, one + c * kWarpArray);  // x in the class layout
    __syncthreads();                                   // the warps' transpose arrays are free
#pragma unroll
    for (int k = 0; k < 8; ++k) one[L::at(W * (t + 32 * k) + c)] = w.f[k];
    __syncthreads();
#pragma unroll
    for (int k = 0; k < 8; ++k) {
      const int r = tid + k * T;
      if (r >= n) continue;
      store_x(ctx, x, base, r, one[L::at(r)]);
    }
    report(ctx, flags, base);
    // The next system's barriers come before anyone writes `one` again.
  }
}

template <Algorithm A>
void launch(const double* dl, const double* d, const double* du, const double* f, double* x, int n,
            std::size_t count, double tol, unsigned long long* flags, cudaStream_t s) {
  const std::size_t most = std::size_t(multiprocessors()) * (16 / W);
  const unsigned blocks = static_cast<unsigned>(count < most ? count : most);
  pcr_shuffle_kernel<A>
      <<<blocks, 32 * W, Layout::kBytes, s>>>(dl, d, du, f, x, n, count, 1.0 / tol, flags);
}

}  // namespace

void launch_pcr_shuffle(Algorithm algorithm, const double* dl, const double* d, const double* du,
                        const double* f, double* x, std::size_t n, std::size_t count, double tol,
                        unsigned long long* flags, void* stream) {
  auto s = static_cast<cudaStream_t>(stream);
  const int ni = static_cast<int>(n);
  if (algorithm == Algorithm::kPcr) {
    return launch<Algorithm::kPcr>(dl, d, du, f, x, ni, count, tol, flags, s);
  }
  launch<Algorithm::kPcrThomas>(dl, d, du, f, x, ni, count, tol, flags, s);
}

cudaError_t set_pcr_shuffle_limits() {
  const int bytes = static_cast<int>(Layout::kBytes);
  const auto attr = cudaFuncAttributeMaxDynamicSharedMemorySize;
  const cudaError_t e = cudaFuncSetAttribute(pcr_shuffle_kernel<Algorithm::kPcr>, attr, bytes);
  if (e != cudaSuccess) return e;
  return cudaFuncSetAttribute(pcr_shuffle_kernel<Algorithm::kPcrThomas>, attr, bytes);
}

}  // namespace stripesolve::tridiag::gpu
