// SPIKE on the GPU (000 §II-III) in the separator form of tridiag/partitioned.cc.
//
// Each thread owns one partition of 9 rows (8 interior + separator); a block owns 128
// consecutive partitions, a contiguous tile of 1152 rows. The block loads its tile with
// coalesced reads into shared memory transposed, element k of partition t at k * 129 + t: this
// is the data layout transformation of 000 §III-A done on the fly per block (the "local
// transpose on the data assigned to one thread block"), so the per-thread sequential solves
// read conflict-free shared memory and the global traffic stays coalesced. Because every
// thread's whole partition sits in shared memory, the 1x1/2x2 divergence of diagonal pivoting
// can no longer scatter global accesses (the problem dynamic tiling solves in 000 §III-B).
//
// Pass 1 factors each interior in shared memory and solves for f and the two spikes, keeping
// only the ends (the left spike needs a fifth shared array; the right one lives in registers,
// its forward-eliminated values being zero but in the last row). Pass 2 re-solves each interior
// with the separators known (f - a_first x_left e_1 - c_last x_right e_q), so the only global
// traffic is two reads of the input and one write of x (72 bytes per unknown) plus about 1/9 for
// the reduced systems.
#include <climits>
#include <cuda_pipeline.h>
#include <cuda_runtime.h>

#include "tridiag/cuda/small_solves.h"
#include "tridiag/cuda/spike_kernels.cuh"

namespace stripesolve::tridiag::gpu {

namespace {

constexpr int M = kPartitionRows;
constexpr int T = kPartitionsPerBlock;
constexpr int LD = kSharedPitch;
constexpr double kKappa = 0.6180339887498949;  // 000 §III: (sqrt(5) - 1) / 2

__device__ void flag_row(unsigned long long* flag, std::size_t row, const LevelArgs& a) {
  std::size_t o = (row + 1) * a.level_stride - 1;
  if (o >= a.original_rows) o = a.original_rows - 1;
  atomicMin(flag, static_cast<unsigned long long>(o));
}

struct Tile {
  double *dl, *d, *du, *f;
  unsigned char* kind;
};

__device__ Tile shared_tile() {
  extern __shared__ double smem[];
  Tile t;
  t.dl = smem;
  t.d = smem + M * LD;
  t.du = smem + 2 * M * LD;
  t.f = smem + 3 * M * LD;
  t.kind = reinterpret_cast<unsigned char*>(smem + 4 * M * LD);
  return t;
}

// Load of tile `tile` into shared memory, transposed, with asynchronous 8-byte copies
// (cp.async: every copy is in flight at once, no registers held); rows past the end become
// identity rows. Coalesced: consecutive threads copy consecutive rows.
__device__ void load_tile(const Tile& s, const double* dl, const double* d, const double* du,
                          const double* f, std::size_t chunk_row0, std::size_t tile,
                          const LevelArgs& a) {
  const std::size_t row0 = tile * kTileRows;
  for (int g = threadIdx.x; g < kTileRows; g += blockDim.x) {
    const std::size_t row = row0 + g;
    const int idx = (g % M) * LD + g / M;
    if (row < a.rows) {
      const std::size_t i = row - chunk_row0;
      __pipeline_memcpy_async(&s.dl[idx], &dl[i], sizeof(double));
      __pipeline_memcpy_async(&s.d[idx], &d[i], sizeof(double));
      __pipeline_memcpy_async(&s.du[idx], &du[i], sizeof(double));
      __pipeline_memcpy_async(&s.f[idx], &f[i], sizeof(double));
    } else {
      s.dl[idx] = 0.0;
      s.d[idx] = 1.0;
      s.du[idx] = 0.0;
      s.f[idx] = 0.0;
    }
  }
  __pipeline_commit();
  __pipeline_wait_prior(0);
  __syncthreads();
}

// Zeroes, in the calling thread's own partition (rows start..start+q), the couplings at the
// ends of the system and across strided-batch system boundaries. One modulo per thread.
__device__ void fix_couplings(const Tile& s, int t, std::size_t start, int q, const LevelArgs& a) {
  if (start == 0) s.dl[t] = 0.0;
  if (start + q + 1 == a.rows) s.du[q * LD + t] = 0.0;
  if (a.system_size == 0) return;
  std::size_t r = start % a.system_size;
  for (int k = 0; k <= q; ++k, ++r) {
    if (r == a.system_size) r = 0;
    if (r == 0) s.dl[k * LD + t] = 0.0;
    if (r + 1 == a.system_size) s.du[k * LD + t] = 0.0;
  }
}

// Factors the interior of partition t (q rows) in place (pivots over d, block kinds in kind;
// Thomas: c' over du) and solves for the right-hand side in f, in place, and optionally for
// the left spike (its right-hand side in `spike`, solved in place) and the right spike
// -c_last e_q, whose forward-eliminated values are zero but in the last row, so it is carried in
// registers; its two ends go to r_ends. Diagonal pivoting follows 000 §III (Eq 11-12, Fig 5);
// without kPivot it is Thomas with the tiny-pivot test. Every right-hand side sees the same
// factorisation in both passes, so the separators and the interiors agree to rounding.
template <bool kPivot>
__device__ bool solve_interior(const Tile& s, int t, int q, std::size_t start, const LevelArgs& a,
                               double* spike, double c_last, double r_ends[2]) {
  auto at = [&](int k) { return k * LD + t; };
  auto A = [&](int k) { return k > 0 ? s.dl[at(k)] : 0.0; };
  auto C = [&](int k) { return k < q - 1 ? s.du[at(k)] : 0.0; };
  const double r_rhs = -c_last;
  auto rv = [&](int k) { return k == q - 1 ? r_rhs : 0.0; };  // right spike, forward values
  double rn = 0.0, r_first = 0.0, r_last = 0.0;
  if (kPivot) {
    double cur = s.d[at(0)];
    for (int k = 0; k < q;) {
      const int row = k;
      bool ok = true;
      if (k == q - 1) {
        s.d[at(k)] = cur;
        s.kind[at(k)] = 1;
        ok = cur != 0.0 && isfinite(cur);
        if (!ok) {
          flag_row(&a.flags[0], start + row, a);
          return false;
        }
        break;
      }
      const double a2 = A(k + 1), c1 = C(k), b2 = s.d[at(k + 1)];
      const double a3 = k + 2 < q ? A(k + 2) : 0.0, c2 = k + 2 < q ? C(k + 1) : 0.0;
      const double sigma = largest_magnitude(a2, a3, b2, c1, c2);
      s.d[at(k)] = cur;
      if (fabs(cur) * sigma >= kKappa * fabs(a2 * c1)) {
        s.kind[at(k)] = 1;
        ok = cur != 0.0 && isfinite(cur);
        const double m = a2 / cur;
        s.f[at(k + 1)] -= m * s.f[at(k)];
        if (spike) spike[at(k + 1)] -= m * spike[at(k)];
        cur = b2 - m * c1;
        k += 1;
      } else {
        s.kind[at(k)] = 2;
        s.kind[at(k + 1)] = 0;
        const double delta = cur * b2 - a2 * c1;
        ok = delta != 0.0 && isfinite(delta);
        if (k + 2 < q) {
          const double ratio = a3 / delta;
          s.f[at(k + 2)] -= ratio * (cur * s.f[at(k + 1)] - a2 * s.f[at(k)]);
          if (spike) spike[at(k + 2)] -= ratio * (cur * spike[at(k + 1)] - a2 * spike[at(k)]);
          cur = s.d[at(k + 2)] - a3 * cur * c2 / delta;
        }
        k += 2;
      }
      if (!ok) {
        flag_row(&a.flags[0], start + row, a);
        return false;
      }
    }
    for (int k = q; k > 0;) {
      const int j = k - 1;
      const bool has_next = j + 1 < q;
      const double next = has_next ? s.f[at(j + 1)] : 0.0;
      const double snext = spike && has_next ? spike[at(j + 1)] : 0.0;
      if (s.kind[at(j)] == 0) {
        const int i = j - 1;
        const double c2 = C(j), pi = s.d[at(i)], pj = s.d[at(j)];
        const double inv = 1.0 / (pi * pj - A(j) * C(i));
        const double fi = s.f[at(i)], fj = s.f[at(j)];
        s.f[at(j)] = (pi * fj - A(j) * fi - pi * c2 * next) * inv;
        s.f[at(i)] = (pj * fi - C(i) * fj + C(i) * c2 * next) * inv;
        if (spike) {
          const double gi = spike[at(i)], gj = spike[at(j)];
          spike[at(j)] = (pi * gj - A(j) * gi - pi * c2 * snext) * inv;
          spike[at(i)] = (pj * gi - C(i) * gj + C(i) * c2 * snext) * inv;
        }
        const double ri = rv(i), rj = rv(j);
        const double xj = (pi * rj - A(j) * ri - pi * c2 * rn) * inv;
        const double xi = (pj * ri - C(i) * rj + C(i) * c2 * rn) * inv;
        if (j == q - 1) r_last = xj;
        rn = xi;
        k -= 2;
      } else {
        const double inv = 1.0 / s.d[at(j)];
        s.f[at(j)] = (s.f[at(j)] - C(j) * next) * inv;
        if (spike) spike[at(j)] = (spike[at(j)] - C(j) * snext) * inv;
        rn = (rv(j) - C(j) * rn) * inv;
        if (j == q - 1) r_last = rn;
        k -= 1;
      }
    }
    r_first = rn;
  } else {
    double pc = 0.0, py = 0.0, ps = 0.0, pr = 0.0;
    for (int k = 0; k < q; ++k) {
      const double lo = A(k), up = C(k);
      const double piv = s.d[at(k)] - lo * pc;
      const double scale = largest_magnitude(lo, s.d[at(k)], up);
      if (!pivot_passes(piv, a.tol, scale)) {
        flag_row(&a.flags[0], start + k, a);
        return false;
      }
      const double inv = 1.0 / piv;
      pc = up * inv;
      py = (s.f[at(k)] - lo * py) * inv;
      s.du[at(k)] = pc;
      s.f[at(k)] = py;
      if (spike) {
        ps = (spike[at(k)] - lo * ps) * inv;
        spike[at(k)] = ps;
      }
      pr = (rv(k) - lo * pr) * inv;
    }
    r_last = pr;
    rn = pr;
    for (int k = q - 1; k-- > 0;) {
      s.f[at(k)] -= s.du[at(k)] * s.f[at(k + 1)];
      if (spike) spike[at(k)] -= s.du[at(k)] * spike[at(k + 1)];
      rn = -s.du[at(k)] * rn;  // forward value 0 above the last row
    }
    r_first = rn;
  }
  if (r_ends) {
    r_ends[0] = r_first;
    r_ends[1] = r_last;
  }
  return true;
}

template <bool kPivot>
__global__ void partition_ends_kernel(const double* dl, const double* d, const double* du,
                                      const double* f, std::size_t chunk_row0, std::size_t tile0,
                                      LevelArgs a, PartitionData out) {
  const Tile s = shared_tile();
  const std::size_t tile = tile0 + blockIdx.x;
  load_tile(s, dl, d, du, f, chunk_row0, tile, a);
  const int t = threadIdx.x;
  const std::size_t p = tile * T + t, start = p * M;
  if (start >= a.rows) return;
  const int q = static_cast<int>((a.rows - start < std::size_t{M} ? a.rows - start : M) - 1);
  fix_couplings(s, t, start, q, a);
  out.sa[p] = s.dl[q * LD + t];
  out.sb[p] = s.d[q * LD + t];
  out.sc[p] = s.du[q * LD + t];
  out.sf[p] = s.f[q * LD + t];
  if (q == 0) {  // empty interior: "last" is the left separator, "first" the right one
    out.yf[p] = 0.0;
    out.r[p] = 0.0;
    out.s[p] = 1.0;
    out.yl[p] = 0.0;
    out.p[p] = p > 0 ? 1.0 : 0.0;
    out.q[p] = 0.0;
    return;
  }
  const double a_first = s.dl[t], c_last = s.du[(q - 1) * LD + t];
  extern __shared__ double smem[];
  double* spike = smem + 4 * M * LD + (M * LD + 7) / 8;  // after the kind bytes
  for (int k = 0; k < q; ++k) spike[k * LD + t] = k == 0 ? -a_first : 0.0;
  double r_ends[2] = {NAN, NAN};
  if (!solve_interior<kPivot>(s, t, q, start, a, spike, c_last, r_ends)) {
    out.yf[p] = out.r[p] = out.s[p] = out.yl[p] = out.p[p] = out.q[p] = NAN;
    return;
  }
  out.yf[p] = s.f[t];
  out.r[p] = spike[t];
  out.s[p] = r_ends[0];
  out.yl[p] = s.f[(q - 1) * LD + t];
  out.p[p] = spike[(q - 1) * LD + t];
  out.q[p] = r_ends[1];
}

__global__ void form_reduced_kernel(PartitionData in, std::size_t parts, double* rl, double* rd,
                                    double* ru, double* rf) {
  const std::size_t j = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x;
  if (j >= parts) return;
  const double a = in.sa[j];
  const bool has_next = j + 1 < parts;
  const double c = has_next ? in.sc[j] : 0.0;
  const double nr = has_next ? in.r[j + 1] : 0.0, ns = has_next ? in.s[j + 1] : 0.0;
  const double nyf = has_next ? in.yf[j + 1] : 0.0;
  rl[j] = a * in.p[j];
  rd[j] = in.sb[j] + a * in.q[j] + c * nr;
  ru[j] = c * ns;
  rf[j] = in.sf[j] - a * in.yl[j] - c * nyf;
}

template <bool kPivot>
__global__ void partition_solve_kernel(const double* dl, const double* d, const double* du,
                                       const double* f, double* x, std::size_t chunk_row0,
                                       std::size_t tile0, const double* rx, LevelArgs a) {
  const Tile s = shared_tile();
  const std::size_t tile = tile0 + blockIdx.x;
  load_tile(s, dl, d, du, f, chunk_row0, tile, a);
  const int t = threadIdx.x;
  const std::size_t p = tile * T + t, start = p * M;
  if (start < a.rows) {
    const int q = static_cast<int>((a.rows - start < std::size_t{M} ? a.rows - start : M) - 1);
    fix_couplings(s, t, start, q, a);
    const double xl = p > 0 ? rx[p - 1] : 0.0, xr = rx[p];
    if (q > 0) {
      s.f[t] -= s.dl[t] * xl;
      s.f[(q - 1) * LD + t] -= s.du[(q - 1) * LD + t] * xr;
      solve_interior<kPivot>(s, t, q, start, a, nullptr, 0.0, nullptr);
    }
    s.f[q * LD + t] = xr;
  }
  __syncthreads();
  const std::size_t row0 = tile * kTileRows;
  for (int g = threadIdx.x; g < kTileRows; g += blockDim.x) {
    const std::size_t row = row0 + g;
    if (row >= a.rows) break;
    const double v = s.f[(g % M) * LD + g / M];
    if (!isfinite(v)) flag_row(&a.flags[1], row, a);
    x[row - chunk_row0] = v;
  }
}

// A system of at most kPartitionRows rows in one thread, without partitioning (as the CPU
// solve_spike does): the separator form needs nonsingular interiors, which a small system such
// as [[0, 1], [1, 0]] or an odd-sized zero-diagonal one does not have.
template <bool kPivot>
__global__ void small_system_kernel(const double* dl, const double* d, const double* du,
                                    const double* f, double* x, LevelArgs a) {
  const int n = static_cast<int>(a.rows);
  double lo[M], di[M], up[M], y[M];
  unsigned char kind[M];
  for (int k = 0; k < n; ++k) {
    lo[k] = k > 0 ? dl[k] : 0.0;
    up[k] = k + 1 < n ? du[k] : 0.0;
    if (a.system_size != 0) {
      const std::size_t r = static_cast<std::size_t>(k) % a.system_size;
      if (r == 0) lo[k] = 0.0;
      if (r + 1 == a.system_size) up[k] = 0.0;
    }
    di[k] = d[k];
    y[k] = f[k];
  }
  bool ok = true;
  double cur = di[0];
  for (int k = 0; k < n && ok;) {
    const double scale = largest_magnitude(lo[k], di[k], up[k]);
    const bool bad = kPivot ? (cur == 0.0 || !isfinite(cur)) : !pivot_passes(cur, a.tol, scale);
    bool one = true;
    if (kPivot && k + 1 < n) {
      const double a3 = k + 2 < n ? lo[k + 2] : 0.0, c2 = k + 2 < n ? up[k + 1] : 0.0;
      const double sigma = largest_magnitude(lo[k + 1], a3, di[k + 1], up[k], c2);
      one = fabs(cur) * sigma >= kKappa * fabs(lo[k + 1] * up[k]);
    }
    if (one) {
      if (bad) {
        ok = false;
        flag_row(&a.flags[0], k, a);
        break;
      }
      kind[k] = 1;
      if (k + 1 < n) {
        const double m = lo[k + 1] / cur;
        y[k + 1] -= m * y[k];
        const double nb = di[k + 1] - m * up[k];
        di[k] = cur;
        cur = nb;
      } else {
        di[k] = cur;
      }
      k += 1;
    } else {
      const double b2 = di[k + 1], delta = cur * b2 - lo[k + 1] * up[k];
      if (delta == 0.0 || !isfinite(delta)) {
        ok = false;
        flag_row(&a.flags[0], k, a);
        break;
      }
      kind[k] = 2;
      kind[k + 1] = 0;
      di[k] = cur;
      if (k + 2 < n) {
        y[k + 2] -= lo[k + 2] * (cur * y[k + 1] - lo[k + 1] * y[k]) / delta;
        cur = di[k + 2] - lo[k + 2] * cur * up[k + 1] / delta;
      }
      k += 2;
    }
  }
  for (int k = n; ok && k > 0;) {
    const int j = k - 1;
    const double next = j + 1 < n ? y[j + 1] : 0.0;
    if (kind[j] == 0) {
      const int i = j - 1;
      const double c2 = up[j], delta = di[i] * di[j] - lo[j] * up[i];
      const double fi = y[i], fj = y[j];
      y[j] = (di[i] * fj - lo[j] * fi - di[i] * c2 * next) / delta;
      y[i] = (di[j] * fi - up[i] * fj + up[i] * c2 * next) / delta;
      k -= 2;
    } else {
      y[j] = (y[j] - up[j] * next) / di[j];
      k -= 1;
    }
  }
  for (int k = 0; k < n; ++k) {
    if (!isfinite(y[k])) flag_row(&a.flags[1], k, a);
    x[k] = y[k];
  }
}

}  // namespace

void launch_partition_ends(bool pivoting, const double* dl, const double* d, const double* du,
                           const double* f, std::size_t chunk_row0, std::size_t tile0,
                           std::size_t tiles, const LevelArgs& args, PartitionData out,
                           void* stream) {
  auto st = static_cast<cudaStream_t>(stream);
  if (pivoting) {
    partition_ends_kernel<true>
        <<<tiles, T, kSharedBytesPass1, st>>>(dl, d, du, f, chunk_row0, tile0, args, out);
  } else {
    partition_ends_kernel<false>
        <<<tiles, T, kSharedBytesPass1, st>>>(dl, d, du, f, chunk_row0, tile0, args, out);
  }
}

void launch_form_reduced(const PartitionData& in, std::size_t parts, double* rl, double* rd,
                         double* ru, double* rf, void* stream) {
  const unsigned blocks = static_cast<unsigned>((parts + 255) / 256);
  form_reduced_kernel<<<blocks, 256, 0, static_cast<cudaStream_t>(stream)>>>(in, parts, rl, rd, ru,
                                                                             rf);
}

void launch_partition_solve(bool pivoting, const double* dl, const double* d, const double* du,
                            const double* f, double* x, std::size_t chunk_row0, std::size_t tile0,
                            std::size_t tiles, const double* rx, const LevelArgs& args,
                            void* stream) {
  auto st = static_cast<cudaStream_t>(stream);
  if (pivoting) {
    partition_solve_kernel<true>
        <<<tiles, T, kSharedBytes, st>>>(dl, d, du, f, x, chunk_row0, tile0, rx, args);
  } else {
    partition_solve_kernel<false>
        <<<tiles, T, kSharedBytes, st>>>(dl, d, du, f, x, chunk_row0, tile0, rx, args);
  }
}

void launch_small_system(bool pivoting, const double* dl, const double* d, const double* du,
                         const double* f, double* x, const LevelArgs& args, void* stream) {
  auto st = static_cast<cudaStream_t>(stream);
  if (pivoting) {
    small_system_kernel<true><<<1, 1, 0, st>>>(dl, d, du, f, x, args);
  } else {
    small_system_kernel<false><<<1, 1, 0, st>>>(dl, d, du, f, x, args);
  }
}

cudaError_t set_shared_memory_limits() {
  const auto attr = cudaFuncAttributeMaxDynamicSharedMemorySize;
  for (cudaError_t e : {cudaFuncSetAttribute(partition_ends_kernel<true>, attr, kSharedBytesPass1),
                        cudaFuncSetAttribute(partition_ends_kernel<false>, attr, kSharedBytesPass1),
                        cudaFuncSetAttribute(partition_solve_kernel<true>, attr, kSharedBytes),
                        cudaFuncSetAttribute(partition_solve_kernel<false>, attr, kSharedBytes)}) {
    if (e != cudaSuccess) return e;
  }
  return cudaSuccess;
}

}  // namespace stripesolve::tridiag::gpu
