// One thread per system on an interleaved batch (element k of system j at k * count + j), so
// that the threads of a warp read consecutive addresses at equal k. Diagonal pivoting makes
// threads advance by 1 or 2 rows per step; dynamic tiling (000 §III-B, Fig 9) splits the loop
// into tiles of kTileSteps rows with a barrier after each, so fast threads wait and the warp's
// footprint stays within a few rows (cache lines stay live until every thread consumed them).
#include <cuda_runtime.h>

#include "tridiag/cuda/small_solves.h"
#include "tridiag/cuda/spike_kernels.cuh"

namespace stripesolve::tridiag::gpu {

namespace {

constexpr int kTileSteps = 8;
constexpr double kKappa = 0.6180339887498949;

template <bool kPivot>
__global__ void interleaved_kernel(const double* dl, const double* d, const double* du,
                                   const double* f, double* x, std::size_t n, std::size_t count,
                                   double* piv, unsigned char* kinds, double tol,
                                   unsigned long long* flags) {
  const std::size_t j = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x;
  bool active = j < count;
  auto at = [&](std::size_t k) { return k * count + j; };
  auto A = [&](std::size_t k) { return k > 0 ? dl[at(k)] : 0.0; };
  auto C = [&](std::size_t k) { return k + 1 < n ? du[at(k)] : 0.0; };
  std::size_t k = 0;
  double cur = active ? d[at(0)] : 1.0, g = active ? f[at(0)] : 0.0;
  // Forward: factor and forward substitution (y into x), tiled.
  for (std::size_t end = kTileSteps;; end += kTileSteps) {
    while (active && k < n && k < end) {
      const std::size_t row = k;
      bool ok = true;
      const double scale = largest_magnitude(A(k), d[at(k)], C(k));
      const bool bad1 =
          kPivot ? (cur == 0.0 || !isfinite(cur)) : !(fabs(cur) > tol * scale && isfinite(cur));
      if (k + 1 == n) {
        piv[at(k)] = cur;
        kinds[at(k)] = 1;
        x[at(k)] = g;
        ok = !bad1;
        k += 1;
      } else {
        const double a2 = A(k + 1), c1 = C(k), b2 = d[at(k + 1)];
        const double a3 = k + 2 < n ? A(k + 2) : 0.0, c2 = k + 2 < n ? C(k + 1) : 0.0;
        bool one = true;
        if (kPivot) {
          const double sigma = largest_magnitude(a2, a3, b2, c1, c2);
          one = fabs(cur) * sigma >= kKappa * fabs(a2 * c1);
        }
        if (one) {
          piv[at(k)] = cur;
          kinds[at(k)] = 1;
          x[at(k)] = g;
          ok = !bad1;
          const double m = a2 / cur;
          g = f[at(k + 1)] - m * g;
          cur = b2 - m * c1;
          k += 1;
        } else {
          const double delta = cur * b2 - a2 * c1;
          ok = delta != 0.0 && isfinite(delta);
          const double f1 = f[at(k + 1)];
          piv[at(k)] = cur;
          piv[at(k + 1)] = b2;
          kinds[at(k)] = 2;
          kinds[at(k + 1)] = 0;
          x[at(k)] = g;
          x[at(k + 1)] = f1;
          if (k + 2 < n) {
            const double z = (cur * f1 - a2 * g) / delta;
            g = f[at(k + 2)] - a3 * z;
            cur = d[at(k + 2)] - a3 * cur * c2 / delta;
          }
          k += 2;
        }
      }
      if (!ok) {
        atomicMin(&flags[0], static_cast<unsigned long long>(j * n + row));
        active = false;
      }
    }
    __syncthreads();
    if (end >= n) break;
  }
  // Backward (M^T x = y), tiled from the end.
  std::size_t r = n;  // rows r.. are solved
  double next = 0.0;  // x[r]
  for (std::size_t done = 0;; done += kTileSteps) {
    const std::size_t stop = n > done + kTileSteps ? n - done - kTileSteps : 0;
    while (active && r > stop) {
      const std::size_t jj = r - 1;
      if (kinds[at(jj)] == 0) {
        const std::size_t i = jj - 1;
        const double c2 = C(jj), pi = piv[at(i)], pj = piv[at(jj)];
        const double delta = pi * pj - A(jj) * C(i);
        const double fi = x[at(i)], fj = x[at(jj)];
        const double xj = (pi * fj - A(jj) * fi - pi * c2 * next) / delta;
        const double xi = (pj * fi - C(i) * fj + C(i) * c2 * next) / delta;
        x[at(jj)] = xj;
        x[at(i)] = xi;
        next = xi;
        r -= 2;
      } else {
        const double v = (x[at(jj)] - C(jj) * next) / piv[at(jj)];
        x[at(jj)] = v;
        next = v;
        r -= 1;
      }
      if (!isfinite(next)) {
        atomicMin(&flags[1], static_cast<unsigned long long>(j * n + r));
        active = false;
      }
    }
    __syncthreads();
    if (stop == 0) break;
  }
}

}  // namespace

void launch_interleaved(bool pivoting, const double* dl, const double* d, const double* du,
                        const double* f, double* x, std::size_t n, std::size_t count, double* piv,
                        unsigned char* kinds, double tol, unsigned long long* flags, void* stream) {
  const unsigned blocks = static_cast<unsigned>((count + 127) / 128);
  auto st = static_cast<cudaStream_t>(stream);
  if (pivoting) {
    interleaved_kernel<true>
        <<<blocks, 128, 0, st>>>(dl, d, du, f, x, n, count, piv, kinds, tol, flags);
  } else {
    interleaved_kernel<false>
        <<<blocks, 128, 0, st>>>(dl, d, du, f, x, n, count, piv, kinds, tol, flags);
  }
}

}  // namespace stripesolve::tridiag::gpu
