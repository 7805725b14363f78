// CR (001 §2.1, 003 Algorithm 5), PCR (003 Algorithm 6) and the hybrids CR-PCR, PCR-Thomas and
// CR-PCR-Thomas (003 §2.3.6, §4.2.2) for strided batches: block j solves system j in shared
// memory with the index scheme of tridiag/reduction.cc (active rows of level l are
// 2^l - 1 + k 2^l; neighbours outside [0, n) contribute nothing), so any n works.
#include "tridiag/cuda/reduction_kernels.cuh"

#include <cuda_runtime.h>

#include "tridiag/cuda/device_solve.h"
#include "tridiag/cuda/small_solves.h"

namespace stripesolve::tridiag::gpu {

namespace {

constexpr int kThreads = 256;
constexpr int kSmall = 64;  // CR reduces to at most this many rows (kCrPcrSize)
constexpr int kPcrThomasSteps = 3;

struct Rows {
  double *a, *b, *c, *f;
};

struct Ctx {
  double tol;
  unsigned long long* flag;
  std::size_t base;  // system * n
};

__device__ void check(const Ctx& ctx, double p, double scale, int row) {
  if (!(fabs(p) > ctx.tol * scale && isfinite(p))) {
    atomicMin(ctx.flag, static_cast<unsigned long long>(ctx.base + row));
  }
}

__device__ double scale_of(const Rows& t, int i) {
  return largest_magnitude(t.a[i], t.b[i], t.c[i]);
}

__device__ int cr_reduce(Rows t, int n, int limit, const Ctx& ctx) {
  int l = 0;
  while ((n >> l) > limit && (n >> (l + 1)) >= 1) {
    const int h = 1 << l;
    for (int i = 2 * h - 1 + threadIdx.x * 2 * h; i < n; i += 2 * h * blockDim.x) {
      const int left = i - h, right = i + h;
      check(ctx, t.b[left], scale_of(t, left), left);
      const double alpha = -t.a[i] / t.b[left];
      double beta = 0.0, nb = t.b[i] + alpha * t.c[left], nf = t.f[i] + alpha * t.f[left];
      if (right < n) {
        check(ctx, t.b[right], scale_of(t, right), right);
        beta = -t.c[i] / t.b[right];
        nb += beta * t.a[right];
        nf += beta * t.f[right];
      }
      t.b[i] = nb;
      t.f[i] = nf;
      t.a[i] = alpha * t.a[left];
      t.c[i] = right < n ? beta * t.c[right] : 0.0;
    }
    __syncthreads();
    ++l;
  }
  return l;
}

__device__ void cr_back(Rows t, double* x, int n, int level, const Ctx& ctx) {
  for (int l = level - 1; l >= 0; --l) {
    const int h = 1 << l;
    for (int i = h - 1 + threadIdx.x * 2 * h; i < n; i += 2 * h * blockDim.x) {
      check(ctx, t.b[i], scale_of(t, i), i);
      double r = t.f[i] - (i >= h ? t.a[i] * x[i - h] : 0.0);
      if (i + h < n) r -= t.c[i] * x[i + h];
      x[i] = r / t.b[i];
    }
    __syncthreads();
  }
}

// PCR steps on t (m rows) with u as the second buffer; returns the distance reached and leaves
// the result in *t. rows_of maps a row of t to the row named in errors.
__device__ int pcr_steps(Rows* t, Rows* u, int m, int steps, const Ctx& ctx, int row_mul,
                         int row_add) {
  int delta = 1;
  for (int s = 0; s < steps && delta < m; ++s, delta *= 2) {
    for (int i = threadIdx.x; i < m; i += blockDim.x) {
      double nb = t->b[i], nf = t->f[i], na = 0.0, nc = 0.0;
      if (i >= delta) {
        const int left = i - delta;
        check(ctx, t->b[left], scale_of(*t, left), left * row_mul + row_add);
        const double alpha = -t->a[i] / t->b[left];
        nb += alpha * t->c[left];
        nf += alpha * t->f[left];
        na = alpha * t->a[left];
      }
      if (i + delta < m) {
        const int right = i + delta;
        check(ctx, t->b[right], scale_of(*t, right), right * row_mul + row_add);
        const double beta = -t->c[i] / t->b[right];
        nb += beta * t->a[right];
        nf += beta * t->f[right];
        nc = beta * t->c[right];
      }
      u->a[i] = na;
      u->b[i] = nb;
      u->c[i] = nc;
      u->f[i] = nf;
    }
    __syncthreads();
    Rows tmp = *t;
    *t = *u;
    *u = tmp;
  }
  return delta;
}

// Solves t (m rows) into x: full PCR, or PCR steps and Thomas per residue class (cp: scratch).
__device__ void solve_small(Rows t, Rows u, double* x, double* cp, int m, bool pcr_only,
                            const Ctx& ctx, int row_mul, int row_add) {
  const int delta = pcr_steps(&t, &u, m, pcr_only ? 31 : kPcrThomasSteps, ctx, row_mul, row_add);
  if (delta >= m) {
    for (int i = threadIdx.x; i < m; i += blockDim.x) {
      check(ctx, t.b[i], fabs(t.b[i]), i * row_mul + row_add);
      x[i] = t.f[i] / t.b[i];
    }
  } else if (threadIdx.x < delta) {
    const int r = threadIdx.x;
    double pc = 0.0, py = 0.0;
    int last = r;
    for (int i = r; i < m; i += delta) {
      const double a = i >= delta ? t.a[i] : 0.0;
      const double c = i + delta < m ? t.c[i] : 0.0;
      const double p = t.b[i] - a * pc;
      check(ctx, p, scale_of(t, i), i * row_mul + row_add);
      pc = c / p;
      py = (t.f[i] - a * py) / p;
      cp[i] = pc;
      x[i] = py;
      last = i;
    }
    for (int i = last - delta; i >= 0; i -= delta) x[i] -= cp[i] * x[i + delta];
  }
  __syncthreads();
}

__global__ void shared_system_kernel(Algorithm alg, const double* dl, const double* d,
                                     const double* du, const double* f, double* x, int n,
                                     double tol, unsigned long long* flag) {
  extern __shared__ double smem[];
  __shared__ double small[9 * kSmall];
  const std::size_t base = blockIdx.x * std::size_t(n);
  const Ctx ctx{tol, flag, base};
  Rows t{smem, smem + n, smem + 2 * n, smem + 3 * n};
  double* xs = smem + 4 * n;
  Rows u{smem + 5 * n, smem + 6 * n, smem + 7 * n, smem + 8 * n};
  for (int i = threadIdx.x; i < n; i += blockDim.x) {
    t.a[i] = i > 0 ? dl[base + i] : 0.0;
    t.b[i] = d[base + i];
    t.c[i] = i + 1 < n ? du[base + i] : 0.0;
    t.f[i] = f[base + i];
  }
  __syncthreads();
  if (alg == Algorithm::kPcr || alg == Algorithm::kPcrThomas) {
    solve_small(t, u, xs, smem + 9 * n, n, alg == Algorithm::kPcr, ctx, 1, 0);
  } else {
    const int limit = alg == Algorithm::kCr ? 1 : kSmall;
    const int level = cr_reduce(t, n, limit, ctx);
    const int h = 1 << level, m = n >> level;
    if (alg == Algorithm::kCr) {
      if (threadIdx.x == 0) {
        const int top = h - 1;
        check(ctx, t.b[top], scale_of(t, top), top);
        xs[top] = t.f[top] / t.b[top];
      }
      __syncthreads();
    } else {
      Rows r{small, small + kSmall, small + 2 * kSmall, small + 3 * kSmall};
      Rows v{small + 4 * kSmall, small + 5 * kSmall, small + 6 * kSmall, small + 7 * kSmall};
      double* rx = small + 8 * kSmall;
      for (int k = threadIdx.x; k < m; k += blockDim.x) {
        const int i = h - 1 + k * h;
        r.a[k] = t.a[i];
        r.b[k] = t.b[i];
        r.c[k] = t.c[i];
        r.f[k] = t.f[i];
      }
      __syncthreads();
      solve_small(r, v, rx, smem + 9 * n, m, alg == Algorithm::kCrPcr, ctx, h, h - 1);
      for (int k = threadIdx.x; k < m; k += blockDim.x) xs[h - 1 + k * h] = rx[k];
      __syncthreads();
    }
    cr_back(t, xs, n, level, ctx);
  }
  for (int i = threadIdx.x; i < n; i += blockDim.x) {
    const double v = xs[i];
    if (!isfinite(v)) atomicMin(flag + 1, static_cast<unsigned long long>(base + i));
    x[base + i] = v;
  }
}

}  // namespace

void launch_shared_system_solver(Algorithm algorithm, const double* dl, const double* d,
                                 const double* du, const double* f, double* x, std::size_t n,
                                 std::size_t count, double tol, unsigned long long* flags,
                                 void* stream) {
  const std::size_t bytes = 10 * n * sizeof(double);
  shared_system_kernel<<<static_cast<unsigned>(count), kThreads, bytes,
                         static_cast<cudaStream_t>(stream)>>>(
      algorithm, dl, d, du, f, x, static_cast<int>(n), tol, flags);
}

void set_reduction_shared_limits() {
  cudaFuncSetAttribute(shared_system_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                       static_cast<int>(10 * kMaxSharedSystem * sizeof(double)));
}

}  // namespace stripesolve::tridiag::gpu
