// One-pass SPIKE for strided batches (000 §II-III), three levels deep, every system read once
// and written once (40 bytes per unknown).
//
// A group of W warps owns whole systems: one system of up to 288 W rows, or 288 / n systems of
// n <= 288 rows (decoupled by zeroing dl and du at their boundaries). Each lane owns a partition
// of 9 consecutive rows in registers: 8 interior rows and a separator, as in spike_kernels.cu.
//   Lane level: the lane factors its interior (diagonal pivoting, or Thomas) and solves it for
//     f and for the two spikes (the couplings to the separators left and right), fully
//     unrolled so that every array stays in registers.
//   Warp level: the 32 separators of a warp form a tridiagonal system whose first 31 rows are
//     the warp's "interior" and whose last row separates it from the next warp. Lanes 0, 1 and 2
//     solve that interior at once for its three right-hand sides (its own, and the couplings to
//     the previous and to its own warp separator): the same factorisation, one column each, so
//     three columns cost what one does.
//   Group level: thread 0 solves the W warp separators.
// Then every level's solution is put together from the one above it, from registers and shared
// memory, and x goes out coalesced through a shared staging buffer. Loads are coalesced too:
// 8-byte cp.async into shared memory, read back by each lane at a stride of 9 doubles (free of
// bank conflicts).
//
// This replaces the two passes over global memory and the reduced systems in global memory of
// spike_kernels.cu (72 bytes per unknown plus about a third for the levels) where a system fits
// in a group; larger systems and ragged batches still go there.
#include "tridiag/cuda/group_spike.cuh"

#include <cuda_pipeline.h>
#include <cuda_runtime.h>

#include <climits>

namespace stripesolve::tridiag::gpu {

namespace {

constexpr int Q = kLaneRows - 1;  // interior rows of a lane
constexpr unsigned kFullMask = 0xffffffffu;
constexpr double kKappa = 0.6180339887498949;  // 000 §III: (sqrt(5) - 1) / 2

struct WarpShared {
  double in[4][kWarpRows];  // dl, d, du, f of the warp's rows; f's row is reused to stage x
  double L[32], D[32], U[32];
  double Z[3][32];  // warp-level right-hand sides, then solutions
  double piv[3][32];
  double ends[4];   // lane 0's interior row 0 for f and the two spikes
  unsigned char kind[3][32];
};

struct GroupShared {
  double L[kMaxGroupWarps], D[kMaxGroupWarps], U[kMaxGroupWarps], G[kMaxGroupWarps];
  double piv[kMaxGroupWarps];
  unsigned char kind[kMaxGroupWarps];
};

struct GroupArgs {
  const double *dl, *d, *du, *f;
  double* x;
  std::size_t rows;
  int n;
  int systems_per_group;
  int warps;             // per group
  int groups_per_block;
  double tol;
  unsigned long long* flags;
};

std::size_t shared_bytes(int warps, int groups_per_block) {
  return std::size_t(warps) * groups_per_block * sizeof(WarpShared) +
         std::size_t(groups_per_block) * sizeof(GroupShared);
}

__device__ bool pivot_ok(double p) { return p != 0.0 && isfinite(p); }

// Factors the interior (rows 0..Q-1) of a lane's partition and solves it in place for y and
// the spikes sl (right-hand side -a_0 e_0) and sr (-c_last e_last). Returns the first interior
// row with a failed pivot test, or -1. Fully unrolled: every index is a constant. The right
// spike's forward-eliminated values are zero but in the last row, so the forward sweeps skip it.
template <bool kPivot>
__device__ __forceinline__ int lane_solve(const double (&a)[kLaneRows], double (&b)[kLaneRows],
                                          double (&c)[kLaneRows], double (&y)[kLaneRows],
                                          double (&sl)[Q], double (&sr)[Q], double tol) {
#pragma unroll
  for (int k = 0; k < Q; ++k) sl[k] = sr[k] = 0.0;
  sl[0] = -a[0];
  sr[Q - 1] = -c[Q - 1];
  int bad = -1;
  if constexpr (kPivot) {
    unsigned second = 0;  // bit k: row k is the second row of a 2x2 pivot
    double cur = b[0];
    bool skip = false;
#pragma unroll
    for (int k = 0; k < Q; ++k) {
      if (skip) {
        skip = false;
        continue;
      }
      if (k == Q - 1) {
        b[k] = cur;
        if (!pivot_ok(cur) && bad < 0) bad = k;
        continue;
      }
      const double a2 = a[k + 1], c1 = c[k], b2 = b[k + 1];
      const double a3 = k + 2 < Q ? a[k + 2] : 0.0, c2 = k + 2 < Q ? c[k + 1] : 0.0;
      const double sigma = fmax(fmax(fabs(a2), fabs(a3)), fmax(fabs(b2), fmax(fabs(c1), fabs(c2))));
      b[k] = cur;
      if (fabs(cur) * sigma >= kKappa * fabs(a2 * c1)) {
        if (!pivot_ok(cur) && bad < 0) bad = k;
        const double m = a2 / cur;
        y[k + 1] -= m * y[k];
        sl[k + 1] -= m * sl[k];
        cur = b2 - m * c1;
      } else {
        const double delta = cur * b2 - a2 * c1;
        if (!pivot_ok(delta) && bad < 0) bad = k;
        second |= 1u << (k + 1);
        if (k + 2 < Q) {
          const double ratio = a3 / delta;
          y[k + 2] -= ratio * (cur * y[k + 1] - a2 * y[k]);
          sl[k + 2] -= ratio * (cur * sl[k + 1] - a2 * sl[k]);
          cur = b[k + 2] - a3 * cur * c2 / delta;
        }
        skip = true;
      }
    }
    bool done = false;
#pragma unroll
    for (int j = Q - 1; j >= 0; --j) {
      if (done) {
        done = false;
        continue;
      }
      const double cj = j + 1 < Q ? c[j] : 0.0;
      const double yn = j + 1 < Q ? y[j + 1] : 0.0;
      const double ln = j + 1 < Q ? sl[j + 1] : 0.0;
      const double rn = j + 1 < Q ? sr[j + 1] : 0.0;
      if (j > 0 && ((second >> j) & 1u)) {
        const int i = j - 1;
        const double pi = b[i], pj = b[j], aj = a[j], ci = c[i];
        const double inv = 1.0 / (pi * pj - aj * ci);
        const double yi = y[i], yj = y[j], li = sl[i], lj = sl[j], ri = sr[i], rj = sr[j];
        y[j] = (pi * yj - aj * yi - pi * cj * yn) * inv;
        y[i] = (pj * yi - ci * yj + ci * cj * yn) * inv;
        sl[j] = (pi * lj - aj * li - pi * cj * ln) * inv;
        sl[i] = (pj * li - ci * lj + ci * cj * ln) * inv;
        sr[j] = (pi * rj - aj * ri - pi * cj * rn) * inv;
        sr[i] = (pj * ri - ci * rj + ci * cj * rn) * inv;
        done = true;
      } else {
        const double inv = 1.0 / b[j];
        y[j] = (y[j] - cj * yn) * inv;
        sl[j] = (sl[j] - cj * ln) * inv;
        sr[j] = (sr[j] - cj * rn) * inv;
      }
    }
  } else {
    double pc = 0.0;
#pragma unroll
    for (int k = 0; k < Q; ++k) {
      const double lo = k > 0 ? a[k] : 0.0, up = k < Q - 1 ? c[k] : 0.0;
      const double piv = b[k] - lo * pc;
      const double scale = fmax(fabs(lo), fmax(fabs(b[k]), fabs(up)));
      if (!(fabs(piv) > tol * scale && isfinite(piv)) && bad < 0) bad = k;
      const double inv = 1.0 / piv;
      pc = up * inv;
      c[k] = pc;
      if (k > 0) {
        y[k] = (y[k] - lo * y[k - 1]) * inv;
        sl[k] = (sl[k] - lo * sl[k - 1]) * inv;
      } else {
        y[k] *= inv;
        sl[k] *= inv;
      }
      if (k == Q - 1) sr[k] *= inv;
    }
#pragma unroll
    for (int k = Q - 2; k >= 0; --k) {
      y[k] -= c[k] * y[k + 1];
      sl[k] -= c[k] * sl[k + 1];
      sr[k] -= c[k] * sr[k + 1];
    }
  }
  return bad;
}

// Solves the tridiagonal system (L, D, U) of q rows (L[0] and U[q-1] ignored) for the
// right-hand side z, in place, with the calling thread's own scratch piv and kind. Returns the
// first row with a failed pivot test, or -1.
template <bool kPivot>
__device__ int serial_solve(const double* L, const double* D, const double* U, double* z,
                            double* piv, unsigned char* kind, int q, double tol) {
  auto A = [&](int k) { return k > 0 ? L[k] : 0.0; };
  auto C = [&](int k) { return k < q - 1 ? U[k] : 0.0; };
  int bad = -1;
  if constexpr (kPivot) {
    double cur = D[0];
    for (int k = 0; k < q;) {
      if (k == q - 1) {
        piv[k] = cur;
        kind[k] = 1;
        if (!pivot_ok(cur) && bad < 0) bad = k;
        break;
      }
      const double a2 = A(k + 1), c1 = C(k), b2 = D[k + 1];
      const double a3 = k + 2 < q ? A(k + 2) : 0.0, c2 = k + 2 < q ? C(k + 1) : 0.0;
      const double sigma = fmax(fmax(fabs(a2), fabs(a3)), fmax(fabs(b2), fmax(fabs(c1), fabs(c2))));
      piv[k] = cur;
      if (fabs(cur) * sigma >= kKappa * fabs(a2 * c1)) {
        kind[k] = 1;
        if (!pivot_ok(cur) && bad < 0) bad = k;
        const double m = a2 / cur;
        z[k + 1] -= m * z[k];
        cur = b2 - m * c1;
        k += 1;
      } else {
        kind[k] = 2;
        kind[k + 1] = 0;
        piv[k + 1] = b2;
        const double delta = cur * b2 - a2 * c1;
        if (!pivot_ok(delta) && bad < 0) bad = k;
        if (k + 2 < q) {
          z[k + 2] -= a3 / delta * (cur * z[k + 1] - a2 * z[k]);
          cur = D[k + 2] - a3 * cur * c2 / delta;
        }
        k += 2;
      }
    }
    for (int k = q; k > 0;) {
      const int j = k - 1;
      const double zn = j + 1 < q ? z[j + 1] : 0.0;
      if (kind[j] == 0) {
        const int i = j - 1;
        const double cj = C(j), pi = piv[i], pj = piv[j], aj = A(j), ci = C(i);
        const double inv = 1.0 / (pi * pj - aj * ci);
        const double zi = z[i], zj = z[j];
        z[j] = (pi * zj - aj * zi - pi * cj * zn) * inv;
        z[i] = (pj * zi - ci * zj + ci * cj * zn) * inv;
        k -= 2;
      } else {
        z[j] = (z[j] - C(j) * zn) / piv[j];
        k -= 1;
      }
    }
  } else {
    double pc = 0.0;
    for (int k = 0; k < q; ++k) {
      const double lo = A(k), up = C(k);
      const double pv = D[k] - lo * pc;
      const double scale = fmax(fabs(lo), fmax(fabs(D[k]), fabs(up)));
      if (!(fabs(pv) > tol * scale && isfinite(pv)) && bad < 0) bad = k;
      const double inv = 1.0 / pv;
      pc = up * inv;
      piv[k] = pc;
      z[k] = (z[k] - (k > 0 ? lo * z[k - 1] : 0.0)) * inv;
    }
    for (int k = q - 2; k >= 0; --k) z[k] -= piv[k] * z[k + 1];
  }
  return bad;
}

__device__ void flag(unsigned long long* f, std::size_t row) {
  atomicMin(f, static_cast<unsigned long long>(row));
}

template <bool kPivot>
__global__ void __launch_bounds__(32 * kMaxGroupWarps) group_spike_kernel(GroupArgs g) {
  extern __shared__ double smem[];
  const int warp_in_block = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int group_in_block = warp_in_block / g.warps, w = warp_in_block % g.warps;
  WarpShared* const warps = reinterpret_cast<WarpShared*>(smem);
  WarpShared& ws = warps[warp_in_block];
  WarpShared* const group_warps = warps + group_in_block * g.warps;
  GroupShared& gs = reinterpret_cast<GroupShared*>(warps + g.warps * g.groups_per_block)[group_in_block];
  const std::size_t group = std::size_t{blockIdx.x} * g.groups_per_block + group_in_block;
  const std::size_t group_row0 = group * g.systems_per_group * std::size_t(g.n);
  int group_rows = 0;  // real rows; the rest of the group's 288 W rows are identity rows
  if (group_row0 < g.rows) {
    const std::size_t left = g.rows - group_row0, full = std::size_t(g.systems_per_group) * g.n;
    group_rows = static_cast<int>(left < full ? left : full);
  }
  const int warp_row0 = w * kWarpRows;

  for (int i = lane; i < kWarpRows; i += 32) {
    const int r = warp_row0 + i;
    if (r < group_rows) {
      const std::size_t row = group_row0 + r;
      __pipeline_memcpy_async(&ws.in[0][i], &g.dl[row], sizeof(double));
      __pipeline_memcpy_async(&ws.in[1][i], &g.d[row], sizeof(double));
      __pipeline_memcpy_async(&ws.in[2][i], &g.du[row], sizeof(double));
      __pipeline_memcpy_async(&ws.in[3][i], &g.f[row], sizeof(double));
    } else {
      ws.in[0][i] = 0.0;
      ws.in[1][i] = 1.0;
      ws.in[2][i] = 0.0;
      ws.in[3][i] = 0.0;
    }
  }
  __pipeline_commit();
  __pipeline_wait_prior(0);
  __syncwarp();

  // Lane level.
  const int r0 = lane * kLaneRows;
  double a[kLaneRows], b[kLaneRows], c[kLaneRows], y[kLaneRows], sl[Q], sr[Q];
  int sys_row = (warp_row0 + r0) % g.n;
#pragma unroll
  for (int k = 0; k < kLaneRows; ++k) {
    a[k] = ws.in[0][r0 + k];
    b[k] = ws.in[1][r0 + k];
    c[k] = ws.in[2][r0 + k];
    y[k] = ws.in[3][r0 + k];
    if (sys_row == 0) a[k] = 0.0;
    if (sys_row + 1 == g.n) c[k] = 0.0;
    if (++sys_row == g.n) sys_row = 0;
  }
  const int bad_lane = lane_solve<kPivot>(a, b, c, y, sl, sr, g.tol);
  if (bad_lane >= 0 && warp_row0 + r0 + bad_lane < group_rows) {
    flag(&g.flags[0], group_row0 + warp_row0 + r0 + bad_lane);
  }
  if (lane == 0) {
    ws.ends[0] = y[0];
    ws.ends[1] = sl[0];
    ws.ends[2] = sr[0];
  }
  __syncthreads();

  // Warp level: the lane's separator row with its interior ends substituted.
  double ny = __shfl_down_sync(kFullMask, y[0], 1);
  double nl = __shfl_down_sync(kFullMask, sl[0], 1);
  double nr = __shfl_down_sync(kFullMask, sr[0], 1);
  if (lane == 31) {
    const bool last = w + 1 == g.warps;
    ny = last ? 0.0 : group_warps[w + 1].ends[0];
    nl = last ? 0.0 : group_warps[w + 1].ends[1];
    nr = last ? 0.0 : group_warps[w + 1].ends[2];
  }
  const double as = a[Q], cs = c[Q];
  const double RL = as * sl[Q - 1];
  const double RD = b[Q] + as * sr[Q - 1] + cs * nl;
  const double RU = cs * nr;
  const double RG = y[Q] - as * y[Q - 1] - cs * ny;
  ws.L[lane] = RL;
  ws.D[lane] = RD;
  ws.U[lane] = RU;
  ws.Z[0][lane] = RG;
  ws.Z[1][lane] = lane == 0 ? -RL : 0.0;
  ws.Z[2][lane] = lane == 30 ? -RU : 0.0;
  __syncwarp();
  if (lane < 3) {
    const int bad = serial_solve<kPivot>(ws.L, ws.D, ws.U, ws.Z[lane], ws.piv[lane], ws.kind[lane], 31, g.tol);
    const int row = warp_row0 + bad * kLaneRows + Q;
    if (lane == 0 && bad >= 0 && row < group_rows) flag(&g.flags[0], group_row0 + row);
  }
  __syncthreads();

  // Group level: warp separators (lane 31's row) with the warps' interiors substituted.
  if (lane == 31) {
    const bool last = w + 1 == g.warps;
    const double n0 = last ? 0.0 : group_warps[w + 1].Z[0][0];
    const double n1 = last ? 0.0 : group_warps[w + 1].Z[1][0];
    const double n2 = last ? 0.0 : group_warps[w + 1].Z[2][0];
    gs.L[w] = RL * ws.Z[1][30];
    gs.D[w] = RD + RL * ws.Z[2][30] + RU * n1;
    gs.U[w] = RU * n2;
    gs.G[w] = RG - RL * ws.Z[0][30] - RU * n0;
  }
  __syncthreads();
  if (w == 0 && lane == 0) {
    const int bad = serial_solve<kPivot>(gs.L, gs.D, gs.U, gs.G, gs.piv, gs.kind, g.warps, g.tol);
    const int row = bad * kWarpRows + kWarpRows - 1;
    if (bad >= 0 && row < group_rows) flag(&g.flags[0], group_row0 + row);
  }
  __syncthreads();

  // Back down: warp separators, lane separators, interiors.
  const double xr = gs.G[w], xl = w > 0 ? gs.G[w - 1] : 0.0;
  const double xs = lane < 31 ? ws.Z[0][lane] + ws.Z[1][lane] * xl + ws.Z[2][lane] * xr : xr;
  double xp = __shfl_up_sync(kFullMask, xs, 1);
  if (lane == 0) xp = xl;
  double* const out = ws.in[3];
#pragma unroll
  for (int k = 0; k < Q; ++k) out[r0 + k] = y[k] + sl[k] * xp + sr[k] * xs;
  out[r0 + Q] = xs;
  __syncwarp();
  for (int i = lane; i < kWarpRows; i += 32) {
    const int r = warp_row0 + i;
    if (r >= group_rows) break;
    const double v = out[i];
    if (!isfinite(v)) flag(&g.flags[1], group_row0 + r);
    g.x[group_row0 + r] = v;
  }
}

}  // namespace

void launch_group_spike(bool pivoting, const double* dl, const double* d, const double* du,
                        const double* f, double* x, std::size_t rows, std::size_t n, double tol,
                        unsigned long long* flags, void* stream) {
  static const bool limits_set = [] {
    const int most = static_cast<int>(shared_bytes(kMaxGroupWarps, 1));
    cudaFuncSetAttribute(group_spike_kernel<true>, cudaFuncAttributeMaxDynamicSharedMemorySize, most);
    cudaFuncSetAttribute(group_spike_kernel<false>, cudaFuncAttributeMaxDynamicSharedMemorySize, most);
    return true;
  }();
  (void)limits_set;
  GroupArgs g{dl, d, du, f, x, rows, static_cast<int>(n), 1, 1, 1, tol, flags};
  if (n <= std::size_t{kWarpRows}) {
    g.systems_per_group = static_cast<int>(kWarpRows / n);
    g.groups_per_block = 4;
  } else {
    g.warps = static_cast<int>((n + kWarpRows - 1) / kWarpRows);
    g.groups_per_block = g.warps >= 4 ? 1 : 4 / g.warps;
  }
  const std::size_t systems = rows / n;
  const std::size_t groups = (systems + g.systems_per_group - 1) / g.systems_per_group;
  const std::size_t blocks = (groups + g.groups_per_block - 1) / g.groups_per_block;
  const unsigned threads = 32u * g.warps * g.groups_per_block;
  const std::size_t bytes = shared_bytes(g.warps, g.groups_per_block);
  auto st = static_cast<cudaStream_t>(stream);
  if (pivoting) {
    group_spike_kernel<true><<<static_cast<unsigned>(blocks), threads, bytes, st>>>(g);
  } else {
    group_spike_kernel<false><<<static_cast<unsigned>(blocks), threads, bytes, st>>>(g);
  }
}

}  // namespace stripesolve::tridiag::gpu
