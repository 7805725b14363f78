// CR (001 §2.1, 003 Algorithm 5), PCR (003 Algorithm 6) and the hybrids CR-PCR, PCR-Thomas and
// CR-PCR-Thomas (003 §2.3.6, §4.2.2) for strided batches of n <= kMaxReductionSystem: one block
// per system, its rows in registers.
//
// A system of n rows is padded with identity rows to N = M T rows (a power of two, N >= 32),
// and thread t of the T in the block holds rows r = s T + t for its M slots s (M = 8 from
// N = 256 on): the loads and stores are coalesced without staging, and every level is one of
// two kinds.
//   Across threads (distance d < T): row r's partners r - d and r + d are rows of threads
//     t - d and t + d in the same slot (or the next and previous slot where that wraps around).
//     Within a warp they come by shuffle; across warps through shared memory (3 N doubles), for
//     the warp's edge lanes only where d < 32.
//   Within a thread (d >= T): the partners are slots s - d / T and s + d / T of the same thread.
// Every row is kept divided by its diagonal (a, 1, c, f), so that a level exchanges three values
// a row and takes one reciprocal, and the back-substitution and the end of PCR need none. Then:
//   cr            CR levels up to one row, back-substitution;
//   pcr           PCR steps until every row stands alone (x = f);
//   pcr_thomas    PCR steps across threads (log2 T), which leave the T residue classes mod T as
//                 independent systems, each one thread's slots: Thomas within the thread;
//   cr_pcr        CR levels down to 64 rows, PCR on those, back-substitution;
//   cr_pcr_thomas CR levels down to 64 rows, PCR steps across threads, Thomas within them,
//                 back-substitution.
// A pivot (a diagonal before the division) that is zero, tiny against its row or not finite is
// reported at its row; the solution's non-finite entries likewise. Systems of up to 256 rows
// take one warp each (kOneWarp): no shared memory and no block barriers.
// Ownership: a block owns its system and each thread its M rows, which only it writes; the
// shared copy of a level is written by the threads whose rows other warps read, then read after
// a barrier, and a second barrier ends the level before the next one writes it.
#include "tridiag/cuda/reduction_kernels.cuh"

#include <cuda_runtime.h>

#include "tridiag/cuda/device_solve.h"
#include "tridiag/cuda/small_solves.h"

namespace stripesolve::tridiag::gpu {

namespace {

constexpr unsigned kFull = 0xffffffffu;
constexpr int kLogSmallRows = 6;  // the hybrids stop CR at 64 rows
constexpr int kMaxThreads = 512;  // kMaxReductionSystem / 8
// One-warp blocks an SM holds at once: 96 registers a thread, a few spilled. At 128 registers
// (16 blocks) n = 256 ran 7-12% slower on the H100; at 24 blocks the spills grow to 0.5 KB.
constexpr int kOneWarpBlocks = 20;

struct Ctx {
  int n;                      // rows of the system (the rest of the N are identity rows)
  int log_t;                  // log2 T
  double inv_tol;             // 1 / the pivot tolerance
  unsigned long long* flag;   // [0]: pivots, [1]: non-finite solutions
  std::size_t base;           // system * n
  double* buf;                // 3 N doubles of shared memory where T > 32
};

// One thread's rows, each divided by its diagonal: row r = s T + t reads
// a[s] x[r - 1] + x[r] + c[s] x[r + 1] = f[s] at first, and the couplings move to the partners
// of each level as it goes.
template <int M>
struct Rows {
  double a[M], c[M], f[M];
};

// Divides a row (a, b, c, f) by its pivot b, reporting row `row` where b is zero, not finite or
// tiny against the row, |b| <= tol max(|a|, |c|): after the division, max(|a|, |c|) >= 1 / tol,
// or a NaN (the reciprocal of 0 or infinity is NaN). Tested after the division, the test takes
// two comparisons (the ALU pipe was the busiest, H100).
__device__ void divide(const Ctx& ctx, int row, double& a, double b, double& c, double& f) {
  const double r = reciprocal(b);
  a *= r;
  c *= r;
  f *= r;
  if (!(fabs(a) < ctx.inv_tol && fabs(c) < ctx.inv_tol && r != 0.0) && row < ctx.n) {
    atomicMin(ctx.flag, static_cast<unsigned long long>(ctx.base + row));
  }
}

// Eliminates a target row's partners lo (row r - d) and hi (row r + d), both divided by their
// diagonals: the row's new couplings reach r - 2d and r + 2d.
__device__ void eliminate(const Ctx& ctx, int row, double& a, double& c, double& f,
                          const double (&lo)[3], const double (&hi)[3]) {
  const double b = 1.0 - a * lo[1] - c * hi[0];
  double na = -a * lo[0], nc = -c * hi[1], nf = f - a * lo[2] - c * hi[2];
  divide(ctx, row, na, b, nc, nf);
  a = na;
  c = nc;
  f = nf;
}

// Row q's three values in the shared copy (zeros outside [0, N)).
__device__ void shared_row(const Ctx& ctx, int q, int n_pad, double (&v)[3]) {
  const bool in = q >= 0 && q < n_pad;
#pragma unroll
  for (int k = 0; k < 3; ++k) v[k] = in ? ctx.buf[k * n_pad + q] : 0.0;
}

// A level across threads at distance d < T: every row of a thread for which `target` holds is
// eliminated against rows r - d and r + d (PCR step, or CR level where the targets are every
// other row of the level); `source`: the thread's rows are partners at this level. All threads
// of the block call it. Within a warp, a rotation of each slot by d lanes serves both the lanes
// it reaches directly and, one slot on, the lanes that wrap around.
template <int M, bool kOneWarp>
__device__ void across(const Ctx& ctx, Rows<M>& w, int d, bool target, bool source) {
  const int T = blockDim.x, t = threadIdx.x, lane = t & 31, n_pad = M * T;
  constexpr bool warps = !kOneWarp;
  if constexpr (warps) {
    if (source && (d >= 32 || lane < d || lane >= 32 - d)) {  // what other warps will read
#pragma unroll
      for (int s = 0; s < M; ++s) {
        ctx.buf[s * T + t] = w.a[s];
        ctx.buf[n_pad + s * T + t] = w.c[s];
        ctx.buf[2 * n_pad + s * T + t] = w.f[s];
      }
    }
    __syncthreads();
  }
  if (d < 32) {
    const Rows<M> old = w;
    auto rotate = [&](int s, int by, double (&v)[3]) {
      v[0] = __shfl_sync(kFull, old.a[s], (lane + by) & 31);
      v[1] = __shfl_sync(kFull, old.c[s], (lane + by) & 31);
      v[2] = __shfl_sync(kFull, old.f[s], (lane + by) & 31);
    };
    double up_prev[3] = {0.0, 0.0, 0.0}, dn[3];  // rows < 0 contribute nothing
    rotate(0, d, dn);
#pragma unroll
    for (int s = 0; s < M; ++s) {
      double up[3], dn_next[3] = {0.0, 0.0, 0.0}, lo[3], hi[3];
      rotate(s, -d, up);
      if (s + 1 < M) rotate(s + 1, d, dn_next);
#pragma unroll
      for (int k = 0; k < 3; ++k) {
        lo[k] = lane >= d ? up[k] : warps ? 0.0 : up_prev[k];
        hi[k] = lane + d < 32 ? dn[k] : warps ? 0.0 : dn_next[k];
      }
      if (warps && lane < d) shared_row(ctx, s * T + t - d, n_pad, lo);
      if (warps && lane + d >= 32) shared_row(ctx, s * T + t + d, n_pad, hi);
      if (target) eliminate(ctx, s * T + t, w.a[s], w.c[s], w.f[s], lo, hi);
#pragma unroll
      for (int k = 0; k < 3; ++k) up_prev[k] = up[k], dn[k] = dn_next[k];
    }
  } else if (target) {
#pragma unroll
    for (int s = 0; s < M; ++s) {
      double lo[3], hi[3];
      shared_row(ctx, s * T + t - d, n_pad, lo);
      shared_row(ctx, s * T + t + d, n_pad, hi);
      eliminate(ctx, s * T + t, w.a[s], w.c[s], w.f[s], lo, hi);
    }
  }
  if constexpr (warps) __syncthreads();  // the shared copy is read before the next level writes it
}

// A level within the thread at slot distance D (row distance D T): slot s is eliminated against
// slots s - D and s + D where `target(s)` holds.
template <int M, int D, typename Target>
__device__ void within(const Ctx& ctx, Rows<M>& w, Target target) {
  const Rows<M> old = w;
  const int T = blockDim.x, t = threadIdx.x;
#pragma unroll
  for (int s = 0; s < M; ++s) {
    if (!target(s)) continue;
    double lo[3] = {0.0, 0.0, 0.0}, hi[3] = {0.0, 0.0, 0.0};
    if (s - D >= 0) lo[0] = old.a[s - D], lo[1] = old.c[s - D], lo[2] = old.f[s - D];
    if (s + D < M) hi[0] = old.a[s + D], hi[1] = old.c[s + D], hi[2] = old.f[s + D];
    eliminate(ctx, s * T + t, w.a[s], w.c[s], w.f[s], lo, hi);
  }
}

// PCR steps within the thread at slot distances 1, 2, .., M / 2: every row stands alone after.
template <int M, int D = 1>
__device__ void pcr_within(const Ctx& ctx, Rows<M>& w) {
  if constexpr (D < M) {
    within<M, D>(ctx, w, [](int) { return true; });
    pcr_within<M, 2 * D>(ctx, w);
  }
}

// CR levels within thread T - 1 (row distances T, 2T, .., N / 2), then their back-substitution:
// slot 2D - 1 mod 2D is eliminated against s +- D, and solved last from them.
template <int M, int D = 1>
__device__ void cr_within(const Ctx& ctx, Rows<M>& w) {
  if constexpr (D < M) {
    within<M, D>(ctx, w, [](int s) { return s % (2 * D) == 2 * D - 1; });
    cr_within<M, 2 * D>(ctx, w);
#pragma unroll
    for (int s = D - 1; s < M; s += 2 * D) {  // x[s] = f - a x[s - D] - c x[s + D]
      const double xl = s - D >= 0 ? w.f[s - D] : 0.0, xr = s + D < M ? w.f[s + D] : 0.0;
      w.f[s] -= w.a[s] * xl + w.c[s] * xr;
    }
  }
}

// The back-substitution of a CR level across threads at distance h: rows whose thread is
// h - 1 mod 2h take x = f - a x[r - h] - c x[r + h] from rows already solved (x kept in f).
template <int M, bool kOneWarp>
__device__ void cr_back_across(const Ctx& ctx, Rows<M>& w, int h) {
  const int T = blockDim.x, t = threadIdx.x, lane = t & 31, n_pad = M * T;
  constexpr bool warps = !kOneWarp;
  const bool solve = (t & (2 * h - 1)) == h - 1;
  if constexpr (warps) {
    if ((t & (2 * h - 1)) == 2 * h - 1) {
#pragma unroll
      for (int s = 0; s < M; ++s) ctx.buf[s * T + t] = w.f[s];
    }
    __syncthreads();
  }
  auto shared_x = [&](int q) { return q >= 0 && q < n_pad ? ctx.buf[q] : 0.0; };
  if (h < 32) {
    const Rows<M> old = w;
    double up_prev = 0.0, dn = __shfl_sync(kFull, old.f[0], (lane + h) & 31);
#pragma unroll
    for (int s = 0; s < M; ++s) {
      const double up = __shfl_sync(kFull, old.f[s], (lane - h) & 31);
      const double dn_next = s + 1 < M ? __shfl_sync(kFull, old.f[s + 1], (lane + h) & 31) : 0.0;
      const double xl = lane >= h ? up : warps ? shared_x(s * T + t - h) : up_prev;
      const double xr = lane + h < 32 ? dn : warps ? shared_x(s * T + t + h) : dn_next;
      if (solve) w.f[s] -= w.a[s] * xl + w.c[s] * xr;
      up_prev = up;
      dn = dn_next;
    }
  } else if (solve) {
#pragma unroll
    for (int s = 0; s < M; ++s) {
      w.f[s] -= w.a[s] * shared_x(s * T + t - h) + w.c[s] * shared_x(s * T + t + h);
    }
  }
  if constexpr (warps) __syncthreads();
}

// Thomas on the thread's own slots, an independent system once the couplings reach T rows away.
template <int M>
__device__ void thomas_within(const Ctx& ctx, Rows<M>& w) {
  const int T = blockDim.x, t = threadIdx.x;
  double cp[M];
  double prev_c = 0.0, prev_f = 0.0;
#pragma unroll
  for (int s = 0; s < M; ++s) {
    double a = w.a[s], c = s + 1 < M ? w.c[s] : 0.0, f = w.f[s] - a * prev_f;
    const double b = 1.0 - a * prev_c;
    divide(ctx, s * T + t, a, b, c, f);  // a: only for the pivot test's scale
    cp[s] = c;
    prev_c = c;
    prev_f = f;
    w.f[s] = f;
  }
#pragma unroll
  for (int s = M - 2; s >= 0; --s) w.f[s] -= cp[s] * w.f[s + 1];
}

template <int M, bool kOneWarp>
__global__ void __launch_bounds__(kOneWarp ? 32 : kMaxThreads, kOneWarp ? kOneWarpBlocks : 1)
    reduction_kernel(Algorithm alg, const double* dl, const double* d, const double* du,
                     const double* f, double* x, int n, double tol, unsigned long long* flags) {
  extern __shared__ double buf[];
  const int T = blockDim.x, t = threadIdx.x;
  Ctx ctx{n, 31 - __clz(T), 1.0 / tol, flags, blockIdx.x * std::size_t(n), buf};
  Rows<M> w;
#pragma unroll
  for (int s = 0; s < M; ++s) {
    const int r = s * T + t;
    double a = 0.0, b = 1.0, c = 0.0, g = 0.0;
    if (r < n) {
      a = r > 0 ? dl[ctx.base + r] : 0.0;
      b = d[ctx.base + r];
      c = r + 1 < n ? du[ctx.base + r] : 0.0;
      g = f[ctx.base + r];
    }
    divide(ctx, r, a, b, c, g);
    w.a[s] = a;
    w.c[s] = c;
    w.f[s] = g;
  }
  // CR levels: h = 2^l, l < cr_levels.
  const int log_n = ctx.log_t + (M == 8 ? 3 : M == 4 ? 2 : M == 2 ? 1 : 0);
  const bool cr = alg == Algorithm::kCr;
  const bool hybrid = alg == Algorithm::kCrPcr || alg == Algorithm::kCrPcrThomas;
  int cr_levels = cr ? log_n : hybrid ? max(log_n - kLogSmallRows, 0) : 0;
  if (!cr && cr_levels > ctx.log_t) cr_levels = ctx.log_t;
  const int across_levels = min(cr_levels, ctx.log_t);
  for (int l = 0; l < across_levels; ++l) {
    const int h = 1 << l;
    across<M, kOneWarp>(ctx, w, h, (t & (2 * h - 1)) == 2 * h - 1, (t & (2 * h - 1)) == h - 1);
  }
  const int p = 1 << across_levels;  // rows p - 1 mod p remain
  const bool kept = (t & (p - 1)) == p - 1;
  if (cr) {
    if (t == T - 1) cr_within(ctx, w);  // levels within the last thread, and back down
  } else {
    for (int dist = p; dist < T; dist *= 2) across<M, kOneWarp>(ctx, w, dist, kept, kept);
    if (alg == Algorithm::kPcrThomas || alg == Algorithm::kCrPcrThomas) {
      if (kept) thomas_within(ctx, w);
    } else if (kept) {
      pcr_within(ctx, w);
    }
  }
  for (int l = across_levels - 1; l >= 0; --l) cr_back_across<M, kOneWarp>(ctx, w, 1 << l);
#pragma unroll
  for (int s = 0; s < M; ++s) {
    const int r = s * T + t;
    if (r >= n) continue;
    const double v = w.f[s];
    if (!isfinite(v)) atomicMin(flags + 1, static_cast<unsigned long long>(ctx.base + r));
    x[ctx.base + r] = v;
  }
}

// N = M T: T = 32 and M = N / 32 up to N = 256, then M = 8 and T = N / 8.
struct Shape {
  int m, threads, n_pad;
};
Shape shape_of(std::size_t n) {
  int n_pad = 32;
  while (static_cast<std::size_t>(n_pad) < n) n_pad *= 2;
  const int m = n_pad <= 256 ? n_pad / 32 : 8;
  return {m, n_pad / m, n_pad};
}

template <int M>
void launch(Algorithm algorithm, const double* dl, const double* d, const double* du,
            const double* f, double* x, std::size_t n, std::size_t count, double tol,
            unsigned long long* flags, const Shape& sh, cudaStream_t stream) {
  const unsigned blocks = static_cast<unsigned>(count);
  if (sh.threads == 32) {  // one warp: no shared memory, no block barriers
    reduction_kernel<M, true><<<blocks, 32, 0, stream>>>(algorithm, dl, d, du, f, x,
                                                          static_cast<int>(n), tol, flags);
  } else if constexpr (M == 8) {
    const std::size_t bytes = 3 * std::size_t(sh.n_pad) * sizeof(double);
    reduction_kernel<M, false><<<blocks, sh.threads, bytes, stream>>>(
        algorithm, dl, d, du, f, x, static_cast<int>(n), tol, flags);
  }
}

}  // namespace

void launch_reduction_solver(Algorithm algorithm, const double* dl, const double* d,
                             const double* du, const double* f, double* x, std::size_t n,
                             std::size_t count, double tol, unsigned long long* flags,
                             void* stream) {
  const Shape sh = shape_of(n);
  auto s = static_cast<cudaStream_t>(stream);
  switch (sh.m) {
    case 1: return launch<1>(algorithm, dl, d, du, f, x, n, count, tol, flags, sh, s);
    case 2: return launch<2>(algorithm, dl, d, du, f, x, n, count, tol, flags, sh, s);
    case 4: return launch<4>(algorithm, dl, d, du, f, x, n, count, tol, flags, sh, s);
    default: return launch<8>(algorithm, dl, d, du, f, x, n, count, tol, flags, sh, s);
  }
}

void set_reduction_shared_limits() {
  cudaFuncSetAttribute(reduction_kernel<8, false>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                       static_cast<int>(3 * kMaxReductionSystem * sizeof(double)));
}

}  // namespace stripesolve::tridiag::gpu
