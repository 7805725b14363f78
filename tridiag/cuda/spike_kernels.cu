// SPIKE on the GPU (000 §II-III) in the separator form of tridiag/partitioned.cc.
//
// Each thread owns one partition of 33 rows (32 interior + separator); a block owns 64
// consecutive partitions, a contiguous tile of 2112 rows. The block loads its tile with
// coalesced reads into shared memory transposed, element k of partition t at k * 65 + t: this
// is the data layout transformation of 000 §III-A done on the fly per block (the "local
// transpose on the data assigned to one thread block"), so the per-thread sequential solves
// read conflict-free shared memory and the global traffic stays coalesced. Because every
// thread's whole partition sits in shared memory, the 1x1/2x2 divergence of diagonal pivoting
// can no longer scatter global accesses (the problem dynamic tiling solves in 000 §III-B);
// the interleaved path, which reads global memory directly, uses dynamic tiling.
//
// Pass 1 computes only the ends of each interior solution (Y, and the two spikes), without
// storing a factorisation: a forward sweep yields the last entries and a sweep over the
// reversed partition the first ones. Pass 2 re-solves each interior with the separators known
// (f - a_first x_left e_1 - c_last x_right e_q), so the only global traffic is two reads of the
// input and one write of x (72 bytes per unknown) plus 1/33 for the reduced systems.
#include "tridiag/cuda/spike_kernels.cuh"

#include <cuda_runtime.h>

#include <climits>

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

// Coalesced load of tile `tile` into shared memory, transposed; rows past the end become
// identity rows. Couplings across system boundaries (strided batches) and at the ends are 0.
__device__ void load_tile(const Tile& s, const double* dl, const double* d, const double* du,
                          const double* f, std::size_t chunk_row0, std::size_t tile,
                          const LevelArgs& a) {
  const std::size_t row0 = tile * kTileRows;
  for (int g = threadIdx.x; g < kTileRows; g += blockDim.x) {
    const std::size_t row = row0 + g;
    const int idx = (g % M) * LD + g / M;
    if (row < a.rows) {
      const std::size_t i = row - chunk_row0;
      double lo = dl[i], up = du[i];
      if (a.system_size != 0) {
        const std::size_t r = row % a.system_size;
        if (r == 0) lo = 0.0;
        if (r + 1 == a.system_size) up = 0.0;
      }
      if (row == 0) lo = 0.0;
      if (row + 1 == a.rows) up = 0.0;
      s.dl[idx] = lo;
      s.d[idx] = d[i];
      s.du[idx] = up;
      s.f[idx] = f[i];
    } else {
      s.dl[idx] = 0.0;
      s.d[idx] = 1.0;
      s.du[idx] = 0.0;
      s.f[idx] = 0.0;
    }
  }
}

// Interior of partition t (q rows) seen forwards or reversed.
template <bool kReverse>
struct Interior {
  const Tile& s;
  int t, q;
  double a_first, c_last;
  __device__ int orig(int k) const { return kReverse ? q - 1 - k : k; }
  __device__ double A(int k) const {
    const int o = orig(k);
    if (kReverse) return o < q - 1 ? s.du[o * LD + t] : 0.0;
    return o > 0 ? s.dl[o * LD + t] : 0.0;
  }
  __device__ double C(int k) const {
    const int o = orig(k);
    if (kReverse) return o > 0 ? s.dl[o * LD + t] : 0.0;
    return o < q - 1 ? s.du[o * LD + t] : 0.0;
  }
  __device__ double B(int k) const { return s.d[orig(k) * LD + t]; }
  // Right-hand sides: f, the left spike (-a_first e_1) and the right spike (-c_last e_q).
  __device__ void R(int k, double g[3]) const {
    const int o = orig(k);
    g[0] = s.f[o * LD + t];
    g[1] = o == 0 ? -a_first : 0.0;
    g[2] = o == q - 1 ? -c_last : 0.0;
  }
};

// Streams the elimination over the interior and returns the last unknown for the three
// right-hand sides; no factor is stored. Diagonal pivoting (000 §III, Eq 11-12) or, without
// kPivot, Thomas with the tiny-pivot test. Returns false (and flags the row) on breakdown.
template <bool kPivot, bool kReverse>
__device__ bool sweep_last(const Interior<kReverse>& in, std::size_t start, const LevelArgs& a,
                           double out[3]) {
  const int q = in.q;
  double cb = in.B(0), g[3];
  in.R(0, g);
  int k = 0;
  while (true) {
    const double scale = fmax(fabs(in.A(k)), fmax(fabs(in.B(k)), fabs(in.C(k))));
    const bool bad = kPivot ? (cb == 0.0 || !isfinite(cb)) : !(fabs(cb) > a.tol * scale && isfinite(cb));
    if (k == q - 1) {
      if (bad) { flag_row(&a.flags[0], start + in.orig(k), a); return false; }
      for (int r = 0; r < 3; ++r) out[r] = g[r] / cb;
      return true;
    }
    const double a2 = in.A(k + 1), c1 = in.C(k), b2 = in.B(k + 1);
    bool one = true;
    if (kPivot) {
      const double a3 = k + 2 < q ? in.A(k + 2) : 0.0, c2 = k + 2 < q ? in.C(k + 1) : 0.0;
      const double sigma = fmax(fmax(fabs(a2), fabs(a3)), fmax(fabs(b2), fmax(fabs(c1), fabs(c2))));
      one = fabs(cb) * sigma >= kKappa * fabs(a2 * c1);
    }
    double next[3];
    if (one) {
      if (bad) { flag_row(&a.flags[0], start + in.orig(k), a); return false; }
      const double m = a2 / cb;
      in.R(k + 1, next);
      for (int r = 0; r < 3; ++r) g[r] = next[r] - m * g[r];
      cb = b2 - m * c1;
      k += 1;
    } else {
      const double delta = cb * b2 - a2 * c1;
      if (delta == 0.0 || !isfinite(delta)) { flag_row(&a.flags[0], start + in.orig(k), a); return false; }
      double z[3];
      in.R(k + 1, next);
      for (int r = 0; r < 3; ++r) z[r] = (cb * next[r] - a2 * g[r]) / delta;
      if (k + 2 == q) {
        for (int r = 0; r < 3; ++r) out[r] = z[r];
        return true;
      }
      const double a3 = in.A(k + 2), c2 = in.C(k + 1);
      in.R(k + 2, next);
      for (int r = 0; r < 3; ++r) g[r] = next[r] - a3 * z[r];
      cb = in.B(k + 2) - a3 * cb * c2 / delta;
      k += 2;
    }
  }
}

template <bool kPivot>
__global__ void partition_ends_kernel(const double* dl, const double* d, const double* du,
                                      const double* f, std::size_t chunk_row0, std::size_t tile0,
                                      LevelArgs a, PartitionData out) {
  const Tile s = shared_tile();
  const std::size_t tile = tile0 + blockIdx.x;
  load_tile(s, dl, d, du, f, chunk_row0, tile, a);
  __syncthreads();
  const int t = threadIdx.x;
  const std::size_t p = tile * T + t, start = p * M;
  if (start >= a.rows) return;
  const int q = static_cast<int>((a.rows - start < std::size_t{M} ? a.rows - start : M) - 1);
  out.sa[p] = s.dl[q * LD + t];
  out.sb[p] = s.d[q * LD + t];
  out.sc[p] = s.du[q * LD + t];
  out.sf[p] = s.f[q * LD + t];
  if (q == 0) {  // empty interior: "last" is the left separator, "first" the right one
    out.yf[p] = 0.0; out.r[p] = 0.0; out.s[p] = 1.0;
    out.yl[p] = 0.0; out.p[p] = p > 0 ? 1.0 : 0.0; out.q[p] = 0.0;
    return;
  }
  const double a_first = s.dl[t], c_last = s.du[(q - 1) * LD + t];
  double last[3] = {NAN, NAN, NAN}, first[3] = {NAN, NAN, NAN};
  if (sweep_last<kPivot, false>(Interior<false>{s, t, q, a_first, c_last}, start, a, last)) {
    sweep_last<kPivot, true>(Interior<true>{s, t, q, a_first, c_last}, start, a, first);
  }
  out.yf[p] = first[0]; out.r[p] = first[1]; out.s[p] = first[2];
  out.yl[p] = last[0]; out.p[p] = last[1]; out.q[p] = last[2];
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
  __syncthreads();
  const int t = threadIdx.x;
  const std::size_t p = tile * T + t, start = p * M;
  if (start < a.rows) {
    const int q = static_cast<int>((a.rows - start < std::size_t{M} ? a.rows - start : M) - 1);
    const double xl = p > 0 ? rx[p - 1] : 0.0, xr = rx[p];
    if (q > 0) {
      auto at = [&](int k) { return k * LD + t; };
      s.f[at(0)] -= s.dl[at(0)] * xl;
      s.f[at(q - 1)] -= s.du[at(q - 1)] * xr;
      auto A = [&](int k) { return k > 0 ? s.dl[at(k)] : 0.0; };
      auto C = [&](int k) { return k < q - 1 ? s.du[at(k)] : 0.0; };
      bool ok = true;
      if (kPivot) {  // factor in place (piv over d), forward and backward (000 Fig 5)
        double cur = s.d[at(0)];
        for (int k = 0; k < q && ok;) {
          const int row = k;
          if (k == q - 1) {
            s.d[at(k)] = cur;
            s.kind[at(k)] = 1;
            ok = cur != 0.0 && isfinite(cur);
            if (!ok) flag_row(&a.flags[0], start + row, a);
            break;
          }
          const double a2 = A(k + 1), c1 = C(k), b2 = s.d[at(k + 1)];
          const double a3 = k + 2 < q ? A(k + 2) : 0.0, c2 = k + 2 < q ? C(k + 1) : 0.0;
          const double sigma = fmax(fmax(fabs(a2), fabs(a3)), fmax(fabs(b2), fmax(fabs(c1), fabs(c2))));
          s.d[at(k)] = cur;
          if (fabs(cur) * sigma >= kKappa * fabs(a2 * c1)) {
            s.kind[at(k)] = 1;
            ok = cur != 0.0 && isfinite(cur);
            s.f[at(k + 1)] -= a2 / cur * s.f[at(k)];
            cur = b2 - a2 * c1 / cur;
            k += 1;
          } else {
            s.kind[at(k)] = 2;
            s.kind[at(k + 1)] = 0;
            const double delta = cur * b2 - a2 * c1;
            ok = delta != 0.0 && isfinite(delta);
            if (k + 2 < q) {
              s.f[at(k + 2)] -= a3 * (cur * s.f[at(k + 1)] - a2 * s.f[at(k)]) / delta;
              cur = s.d[at(k + 2)] - a3 * cur * c2 / delta;
            }
            k += 2;
          }
          if (!ok) flag_row(&a.flags[0], start + row, a);
        }
        for (int k = q; ok && k > 0;) {
          const int j = k - 1;
          const double next = j + 1 < q ? s.f[at(j + 1)] : 0.0;
          if (s.kind[at(j)] == 0) {
            const int i = j - 1;
            const double c2 = C(j), pi = s.d[at(i)], pj = s.d[at(j)];
            const double delta = pi * pj - A(j) * C(i);
            const double fi = s.f[at(i)], fj = s.f[at(j)];
            s.f[at(j)] = (pi * fj - A(j) * fi - pi * c2 * next) / delta;
            s.f[at(i)] = (pj * fi - C(i) * fj + C(i) * c2 * next) / delta;
            k -= 2;
          } else {
            s.f[at(j)] = (s.f[at(j)] - C(j) * next) / s.d[at(j)];
            k -= 1;
          }
        }
      } else {  // Thomas: c' over du, y over f
        double pc = 0.0, py = 0.0;
        for (int k = 0; k < q; ++k) {
          const double lo = A(k), up = C(k);
          const double piv = s.d[at(k)] - lo * pc;
          const double scale = fmax(fabs(lo), fmax(fabs(s.d[at(k)]), fabs(up)));
          if (!(fabs(piv) > a.tol * scale && isfinite(piv))) { ok = false; flag_row(&a.flags[0], start + k, a); break; }
          pc = up / piv;
          py = (s.f[at(k)] - lo * py) / piv;
          s.du[at(k)] = pc;
          s.f[at(k)] = py;
        }
        for (int k = q - 1; ok && k-- > 0;) s.f[at(k)] -= s.du[at(k)] * s.f[at(k + 1)];
      }
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

__global__ void single_row_kernel(const double* d, const double* f, double* x, LevelArgs a) {
  const double v = f[0] / d[0];
  if (d[0] == 0.0 || !isfinite(d[0])) flag_row(&a.flags[0], 0, a);
  if (!isfinite(v)) flag_row(&a.flags[1], 0, a);
  x[0] = v;
}

}  // namespace

void launch_partition_ends(bool pivoting, const double* dl, const double* d, const double* du,
                           const double* f, std::size_t chunk_row0, std::size_t tile0,
                           std::size_t tiles, const LevelArgs& args, PartitionData out,
                           void* stream) {
  auto st = static_cast<cudaStream_t>(stream);
  if (pivoting) {
    partition_ends_kernel<true><<<tiles, T, kSharedBytes, st>>>(dl, d, du, f, chunk_row0, tile0, args, out);
  } else {
    partition_ends_kernel<false><<<tiles, T, kSharedBytes, st>>>(dl, d, du, f, chunk_row0, tile0, args, out);
  }
}

void launch_form_reduced(const PartitionData& in, std::size_t parts, double* rl, double* rd,
                         double* ru, double* rf, void* stream) {
  const unsigned blocks = static_cast<unsigned>((parts + 255) / 256);
  form_reduced_kernel<<<blocks, 256, 0, static_cast<cudaStream_t>(stream)>>>(in, parts, rl, rd, ru, rf);
}

void launch_partition_solve(bool pivoting, const double* dl, const double* d, const double* du,
                            const double* f, double* x, std::size_t chunk_row0,
                            std::size_t tile0, std::size_t tiles, const double* rx,
                            const LevelArgs& args, void* stream) {
  auto st = static_cast<cudaStream_t>(stream);
  if (pivoting) {
    partition_solve_kernel<true><<<tiles, T, kSharedBytes, st>>>(dl, d, du, f, x, chunk_row0, tile0, rx, args);
  } else {
    partition_solve_kernel<false><<<tiles, T, kSharedBytes, st>>>(dl, d, du, f, x, chunk_row0, tile0, rx, args);
  }
}

void launch_single_row(const double* d, const double* f, double* x, const LevelArgs& args,
                       void* stream) {
  single_row_kernel<<<1, 1, 0, static_cast<cudaStream_t>(stream)>>>(d, f, x, args);
}

void set_shared_memory_limits() {
  cudaFuncSetAttribute(partition_ends_kernel<true>, cudaFuncAttributeMaxDynamicSharedMemorySize, kSharedBytes);
  cudaFuncSetAttribute(partition_ends_kernel<false>, cudaFuncAttributeMaxDynamicSharedMemorySize, kSharedBytes);
  cudaFuncSetAttribute(partition_solve_kernel<true>, cudaFuncAttributeMaxDynamicSharedMemorySize, kSharedBytes);
  cudaFuncSetAttribute(partition_solve_kernel<false>, cudaFuncAttributeMaxDynamicSharedMemorySize, kSharedBytes);
}

}  // namespace stripesolve::tridiag::gpu
