// pcr and pcr_thomas for strided batches of kMaxPcrShuffleSystem < n <= kMaxReductionSystem
// (2048 < n <= 4096) rows, their 12 PCR levels in three groups of four in each thread's 16
// registers: a block of 8 warps a system (N = 4096 rows, the rows from n on identity rows),
// blocks looping over systems and copying the next one into shared memory by cp.async while
// they solve the current one.
//
// The 12 PCR levels go in three groups of four. A group's levels are distances 2^j .. 2^(j+3)
// with bits j .. j + 3 of the row in the thread's 16 slots, so that they are register
// arithmetic plus the rows at the ends of the thread's run, from the neighbouring lanes:
//   1. consecutive: thread i holds rows 16 i + s (lanes 0 and 31 take the neighbouring warps'
//      rows from a small shared array, one barrier a level);
//   2. bits 4 .. 7 in the slots, bits 8 .. 11 in lanes 0 .. 15 (bit 0 picks the half-warp,
//      bits 1 .. 3 the warp): the neighbours are lanes t -+ 1, and the ends of a half-warp
//      are the ends of the system (zero couplings), so no barrier;
//   3. bits 8 .. 11 in the slots (thread i holds rows i + 256 s, the residue class i mod 256):
//      no neighbours at all; pcr_thomas solves the class by Thomas instead.
// Two transposes through shared memory change the layouts. Against pcr_shuffle_steps.cu (8 rows a
// thread, 16 warps), shared memory and shuffles carry about 250 bytes a row instead of 400,
// the pipe that limited it. The solution is in the class layout, whose stores coalesce.
// The rows hold their couplings negated: x[r] = f + A x[r - d] + C x[r + d], A = -a and C = -c,
// so that an elimination negates each of A and C once, which FP64 instructions take as an operand
// modifier. (With a and c, nvcc computed -a and -c once for their three uses each, by DADD on
// the FP64 pipe: 232 of pcr's 3150 FP64 instructions a thread.)
// Ownership: a block owns its system; threads own their rows in registers; shared memory is the
// next system's copy (cp.async by every thread, read after a barrier, refilled after the first
// level's barrier), the edge rows (written by lanes 0 and 31 of each warp, one array a level's
// parity) and two transpose arrays, written and read between barriers.
#include <cstdint>

#include <cuda_runtime.h>

#include "tridiag/cuda/kernel_limits.h"
#include "tridiag/cuda/reduction_kernels.cuh"
#include "tridiag/cuda/warp_rows.cuh"

namespace stripesolve::tridiag::gpu {

namespace {

using namespace warp;

constexpr int N = static_cast<int>(kMaxReductionSystem), M = 16, kWarps = 8, T = 32 * kWarps;
// Row r in the copy's arrays: two doubles of padding every 16 rows, so that a thread's 16
// consecutive rows are read by 16-byte loads without bank conflicts (and copied 16 bytes at a
// time).
__device__ __forceinline__ int in_at(int r) {
  return r + 2 * (r >> 4);
}
constexpr int kIn = N + 2 * (N / 16);
// Row r in a transpose array: all three layouts read and write it without bank conflicts.
__device__ __forceinline__ int at(int r) {
  return r + (r >> 4) + (r >> 8);
}
constexpr int kOne = N + N / 16 + N / 256 + 2;
constexpr int kEdge = 3 * 2 * kWarps * 8;  // a level's edge rows: a, c, f
constexpr std::size_t kBytes = (4 * kIn + 2 * kOne + 2 * kEdge) * sizeof(double);
static_assert(kBytes <= 227 * 1024);

// The row a slot holds in the three layouts.
struct ConsecutiveRow {
  __device__ int operator()(int s) const { return M * static_cast<int>(threadIdx.x) + s; }
};
struct MiddleRow {
  __device__ int operator()(int s) const {
    const int t = threadIdx.x & 31, c = threadIdx.x >> 5;
    return (t >> 4) | (c << 1) | (s << 4) | ((t & 15) << 8);
  }
};
struct ClassRow {
  __device__ int operator()(int s) const { return static_cast<int>(threadIdx.x) + 256 * s; }
};

__device__ __forceinline__ void copy16_async(double* dst, const double* src) {
  const unsigned d = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(d), "l"(src) : "memory");
}

// Copies rows i of dl, d, du and f (B = 8 bytes: one row; 16: two) to place p of the copy.
template <int B>
__device__ __forceinline__ void copy_rows(double* in, int p, const double* dl, const double* d,
                                          const double* du, const double* f, std::size_t i) {
  const double* src[4] = {dl, d, du, f};
#pragma unroll
  for (int a = 0; a < 4; ++a) {
    if constexpr (B == 16) {
      copy16_async(in + a * kIn + p, src[a] + i);
    } else {
      copy_async(in + a * kIn + p, src[a] + i);
    }
  }
}

// Copies the system at `base` (n rows) into `in` (dl, d, du, f): 16 bytes at a time where the
// rows pair up on 16-byte boundaries (`wide`), else 8 (pcr).
__device__ void prefetch(double* in, const double* dl, const double* d, const double* du,
                         const double* f, std::size_t base, int n, bool wide) {
  if (wide) {
    for (int r = 2 * threadIdx.x; r < n; r += 2 * T) {
      const int p = in_at(r);
      copy_rows<16>(in, p, dl, d, du, f, base + r);
    }
  } else {
    for (int r = threadIdx.x; r < n; r += T) {
      const int p = in_at(r);
      copy_rows<8>(in, p, dl, d, du, f, base + r);
    }
  }
  commit_copies();
}

// The same in parts (pcr_thomas): parts P0 .. P1 - 1 of 4, committed with the last, each
// thread's copies unrolled from one base address at constant offsets.
template <int P0, int P1>
__device__ void prefetch(double* in, const double* dl, const double* d, const double* du,
                         const double* f, std::size_t base, int n, bool wide) {
  const int t = threadIdx.x;
  if (wide) {
    constexpr int K = N / (2 * T) / 4;  // pairs of rows a thread a part
#pragma unroll
    for (int k = P0 * K; k < P1 * K; ++k) {
      const int r = 2 * t + 2 * T * k, p = in_at(2 * t) + in_at(2 * T) * k;
      if (r >= n) break;
      copy_rows<16>(in, p, dl, d, du, f, base + r);
    }
  } else {
    constexpr int K = N / T / 4;
#pragma unroll
    for (int k = P0 * K; k < P1 * K; ++k) {
      const int r = t + T * k, p = in_at(r);
      if (r >= n) break;
      copy_rows<8>(in, p, dl, d, du, f, base + r);
    }
  }
  if constexpr (P1 == 4) commit_copies();
}

// Loads the thread's 16 consecutive rows from the copy, each divided by its diagonal, couplings
// negated; rows from n on are identity rows.
__device__ void load_rows(auto& ctx, const double* in, Rows<M>& w) {
  const int n = ctx.n;
#pragma unroll
  for (int j = 0; j < M / 2; ++j) {
    const int r0 = ConsecutiveRow{}(2 * j), p = in_at(r0);
    const double2 a2 = *reinterpret_cast<const double2*>(in + p);
    const double2 b2 = *reinterpret_cast<const double2*>(in + kIn + p);
    const double2 c2 = *reinterpret_cast<const double2*>(in + 2 * kIn + p);
    const double2 f2 = *reinterpret_cast<const double2*>(in + 3 * kIn + p);
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int r = r0 + h, s = 2 * j + h;
      double a = 0.0, b = 1.0, c = 0.0, g = 0.0;
      if (r < n) {
        a = r > 0 ? (h ? a2.y : a2.x) : 0.0;
        b = h ? b2.y : b2.x;
        c = r + 1 < n ? (h ? c2.y : c2.x) : 0.0;
        g = h ? f2.y : f2.x;
      }
      a = -a;
      c = -c;
      divide_input(ctx, a, b, c, g);
      w.a[s] = a;
      w.c[s] = c;
      w.f[s] = g;
    }
  }
}

// Eliminates slot s's partners lo (row r - d) and hi (row r + d), negated couplings: its
// couplings then reach r - 2d and r + 2d. kLo, kHi: whether the partner is in the system (else
// the slot's coupling to it is zero, and so is its part). kLast: the last level, whose couplings
// are zero and not formed nor tested (as warp_rows.cuh's eliminate()).
template <bool kLo = true, bool kHi = true, bool kLast = false>
__device__ __forceinline__ void eliminate_negated(auto& ctx, Rows<M>& w, int s, const Row& lo,
                                                  const Row& hi) {
  const double A = w.a[s], C = w.c[s];
  double b = 1.0, na = 0.0, nc = 0.0, nf = w.f[s];
  if constexpr (kHi) {
    b = fma(-C, hi.a, b);
    if constexpr (!kLast) nc = C * hi.c;
    nf = fma(C, hi.f, nf);
  }
  if constexpr (kLo) {
    b = fma(-A, lo.c, b);
    if constexpr (!kLast) na = A * lo.a;
    nf = fma(A, lo.f, nf);
  }
  const double r = reciprocal(b);
  if constexpr (kLast) {
    w.a[s] = w.c[s] = 0.0;
    w.f[s] = nf * r;
    return;
  }
  na = kLo ? na * r : 0.0;
  nc = kHi ? nc * r : 0.0;
  nf *= r;
  note_level(ctx, na, nc);  // divide_level()'s test: a zero pivot leaves nc or na NaN
  w.a[s] = na;
  w.c[s] = nc;
  w.f[s] = nf;
}

// PCR levels at slot distances 1 .. 8 on the class layout (slots 256 rows apart): partners
// beyond the slots are outside the system. Each row alone after them. A level runs its D chains
// of slots D apart in turn, each slot after its lower partner, so that only that partner's old
// row is kept (a copy of all M slots spilled pcr's kernel at the register limit).
template <int D = 1>
__device__ void pcr_in_class(auto& ctx, Rows<M>& w) {
  if constexpr (D < M) {
#pragma unroll
    for (int k = 0; k < D; ++k) {
      Row lo{};
#pragma unroll
      for (int s = k; s < M; s += D) {
        const Row own = row_of(w, s);
        const Row hi = s + D < M ? row_of(w, s + D) : Row{};
        constexpr bool kLast = 2 * D == M;
        if (s < D) {
          eliminate_negated<false, true, kLast>(ctx, w, s, lo, hi);
        } else if (s + D >= M) {
          eliminate_negated<true, false, kLast>(ctx, w, s, lo, hi);
        } else {
          eliminate_negated(ctx, w, s, lo, hi);
        }
        lo = own;
      }
    }
    pcr_in_class<2 * D>(ctx, w);
  }
}

// Thomas on the class (its slots an independent system after 8 levels), negated couplings:
// x[s] = f + A x[s - 1] + C x[s + 1]. x in f.
__device__ void thomas_in_class(auto& ctx, Rows<M>& w) {
  double cp[M];  // C / the pivot
  double prev_c = 0.0, prev_f = 0.0;
#pragma unroll
  for (int s = 0; s < M; ++s) {
    const double A = w.a[s];
    double a = A, c = s + 1 < M ? w.c[s] : 0.0, f = fma(A, prev_f, w.f[s]);
    divide_level(ctx, a, fma(-A, prev_c, 1.0), c, f);  // a: only for the test's scale
    cp[s] = c;
    prev_c = c;
    prev_f = f;
    w.f[s] = f;
  }
#pragma unroll
  for (int s = M - 2; s >= 0; --s) w.f[s] = fma(cp[s], w.f[s + 1], w.f[s]);
}

// A PCR level at a distance of D slots, the slots holding rows at unit distance in the level's
// terms: slot s's partners are slots s -+ D, or the slots s -+ D mod 16 of the previous and
// next lanes. With kEdges (the consecutive layout), lanes 0 and 31 take the previous and next
// warps' rows from `edge` instead (warp c's lane 0 slot k at (2 c) 8 + k, its lane 31 slot
// 16 - D + k at (2 c + 1) 8 + k). The rows go in chains s = k mod D, so that only the
// partners in flight are live besides the slots.
template <int D, bool kEdges>
__device__ void pcr_level(auto& ctx, Rows<M>& w, double* edge) {
  constexpr int E = 2 * kWarps * 8;
  const int c = threadIdx.x >> 5, t = threadIdx.x & 31;
  if constexpr (kEdges) {
    if (t == 0 || t == 31) {
      const bool last = t == 31;
      const int e = (2 * c + last) * 8;
#pragma unroll
      for (int k = 0; k < D; ++k) {  // slots by constants: the rows stay in registers
        edge[e + k] = last ? w.a[M - D + k] : w.a[k];
        edge[E + e + k] = last ? w.c[M - D + k] : w.c[k];
        edge[2 * E + e + k] = last ? w.f[M - D + k] : w.f[k];
      }
    }
    __syncthreads();
  }
#pragma unroll
  for (int k = 0; k < D; ++k) {
    const int up = M - D + k;
    Row lo = shfl_up(w.a[up], w.c[up], w.f[up], 1);
    Row next = shfl_down(w.a[k], w.c[k], w.f[k], 1);
    if constexpr (kEdges) {
      if (t == 0 && c > 0) {
        const int e = (2 * (c - 1) + 1) * 8 + k;
        lo = Row{edge[e], edge[E + e], edge[2 * E + e]};
      }
      if (t == 31 && c < kWarps - 1) {
        const int e = 2 * (c + 1) * 8 + k;
        next = Row{edge[e], edge[E + e], edge[2 * E + e]};
      }
    }
#pragma unroll
    for (int s = k; s < M; s += D) {
      const Row own = row_of(w, s);
      const Row hi = s + D < M ? row_of(w, s + D) : next;
      eliminate_negated(ctx, w, s, lo, hi);
      lo = own;
    }
  }
}

// Levels D .. 8 slots apart, one layout.
template <bool kEdges, int D = 1>
__device__ void pcr_levels(auto& ctx, Rows<M>& w, double* edges) {
  if constexpr (D < M) {
    pcr_level<D, kEdges>(ctx, w, edges + (D == 1 || D == 4 ? 0 : kEdge));
    pcr_levels<kEdges, 2 * D>(ctx, w, edges);
  }
}

// Moves the rows from layout `from` to layout `to` through the transpose arrays x and y (a and
// c, then f through x), between barriers; the first one waits for the arrays' last readers.
__device__ void transpose(Rows<M>& w, double* x, double* y, auto from, auto to) {
  __syncthreads();
#pragma unroll
  for (int s = 0; s < M; ++s) {
    const int p = at(from(s));
    x[p] = w.a[s];
    y[p] = w.c[s];
  }
  __syncthreads();
#pragma unroll
  for (int s = 0; s < M; ++s) {
    const int p = at(to(s));
    w.a[s] = x[p];
    w.c[s] = y[p];
  }
  __syncthreads();
#pragma unroll
  for (int s = 0; s < M; ++s) x[at(from(s))] = w.f[s];
  __syncthreads();
#pragma unroll
  for (int s = 0; s < M; ++s) w.f[s] = x[at(to(s))];
}

template <Algorithm A>
__global__ void __launch_bounds__(T, 1)
    pcr_level_groups_kernel(const double* __restrict__ dl, const double* __restrict__ d,
                            const double* __restrict__ du, const double* __restrict__ f,
                            double* __restrict__ x, int n, std::size_t count, double inv_tol,
                            unsigned long long* flags) {
  extern __shared__ double sm[];
  double* in = sm;                 // the next system: dl, d, du, f
  double* one = in + 4 * kIn;      // two transpose arrays
  double* edges = one + 2 * kOne;  // two levels' edge rows
  auto aligned = [](const double* p) { return (reinterpret_cast<std::uintptr_t>(p) & 15) == 0; };
  const bool wide = n % 2 == 0 && aligned(dl) && aligned(d) && aligned(du) && aligned(f);
  std::size_t sys = blockIdx.x;
  if constexpr (A == Algorithm::kPcrThomas) {
    prefetch<0, 4>(in, dl, d, du, f, sys * n, n, wide);
  } else {
    prefetch(in, dl, d, du, f, sys * n, n, wide);
  }
  for (; sys < count; sys += gridDim.x) {
    const std::size_t base = sys * n;
    Ctx<> ctx{n, inv_tol, 1, 0};
    wait_copies();
    __syncthreads();
    Rows<M> w;
    load_rows(ctx, in, w);
    if (inputs_failed(ctx)) {
#pragma unroll
      for (int s = 0; s < M; ++s) recheck_input(ctx, ConsecutiveRow{}(s), w.a[s], w.c[s], w.f[s]);
    }
    report_inputs(ctx, flags, base);
    // The first level's barrier ends the copy's reads. The next system's copy goes out after
    // it; for pcr_thomas in four parts after the first four levels, so that the copies' issue
    // (8,192 an SM a system, whose operands the load/store unit takes in turn) overlaps
    // arithmetic. H100, n = 4096, same runs: pcr_thomas 63-65% of the roofline -> 67-69%;
    // pcr 62-63% -> 61-62%, so it keeps one copy loop. (Which copy code a kernel takes also
    // moves its registers: pcr_thomas with the loop for its first system spilled and ran at
    // 59%.)
    const bool more = sys + gridDim.x < count;
    const std::size_t next = (sys + gridDim.x) * n;
    constexpr bool kParts = A == Algorithm::kPcrThomas;
    pcr_level<1, true>(ctx, w, edges);
    if (more) {
      if constexpr (kParts) {
        prefetch<0, 1>(in, dl, d, du, f, next, n, wide);
      } else {
        prefetch(in, dl, d, du, f, next, n, wide);
      }
    }
    pcr_level<2, true>(ctx, w, edges + kEdge);
    if (kParts && more) prefetch<1, 2>(in, dl, d, du, f, next, n, wide);
    pcr_level<4, true>(ctx, w, edges);
    if (kParts && more) prefetch<2, 3>(in, dl, d, du, f, next, n, wide);
    pcr_level<8, true>(ctx, w, edges + kEdge);
    if (kParts && more) prefetch<3, 4>(in, dl, d, du, f, next, n, wide);
    transpose(w, one, one + kOne, ConsecutiveRow{}, MiddleRow{});
    pcr_levels<false>(ctx, w, edges);
    transpose(w, one, one + kOne, MiddleRow{}, ClassRow{});
    if constexpr (A == Algorithm::kPcr) {
      pcr_in_class(ctx, w);
    } else {
      thomas_in_class(ctx, w);
    }
#pragma unroll
    for (int s = 0; s < M; ++s) {
      const int r = ClassRow{}(s);
      if (r < n) store_x(ctx, x, base, r, w.f[s]);
    }
    report(ctx, flags, base);
  }
}

}  // namespace

void launch_pcr_level_groups(Algorithm algorithm, const double* dl, const double* d,
                             const double* du, const double* f, double* x, std::size_t n,
                             std::size_t count, double tol, unsigned long long* flags,
                             void* stream) {
  auto s = static_cast<cudaStream_t>(stream);
  const std::size_t most = multiprocessors();
  const unsigned blocks = static_cast<unsigned>(count < most ? count : most);
  const int ni = static_cast<int>(n);
  if (algorithm == Algorithm::kPcr) {
    pcr_level_groups_kernel<Algorithm::kPcr>
        <<<blocks, T, kBytes, s>>>(dl, d, du, f, x, ni, count, 1.0 / tol, flags);
  } else {
    pcr_level_groups_kernel<Algorithm::kPcrThomas>
        <<<blocks, T, kBytes, s>>>(dl, d, du, f, x, ni, count, 1.0 / tol, flags);
  }
}

cudaError_t set_pcr_level_groups_limits() {
  const int bytes = static_cast<int>(kBytes);
  const auto attr = cudaFuncAttributeMaxDynamicSharedMemorySize;
  const cudaError_t e = cudaFuncSetAttribute(pcr_level_groups_kernel<Algorithm::kPcr>, attr, bytes);
  if (e != cudaSuccess) return e;
  return cudaFuncSetAttribute(pcr_level_groups_kernel<Algorithm::kPcrThomas>, attr, bytes);
}

}  // namespace stripesolve::tridiag::gpu
