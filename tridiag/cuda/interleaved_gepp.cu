// gepp for interleaved batches of systems of n <= kMaxInterleavedGeppSystem rows: a thread a
// system, dgtsv's row steps (gepp_rows.h). Consecutive threads take consecutive systems, so each
// row of a warp's systems is 256 contiguous bytes, read once (dl, d, du, f) and written once (x):
// 40 bytes an unknown, where a thread-per-system elimination that keeps its factors in device
// memory moves 88 or more. The pivot rows wait in shared memory (24 bytes a row, [row][thread],
// free of bank conflicts) for the substitution; the rows ahead are read into registers kAhead
// at a time before the elimination reaches them, since few threads fit an SM once n is large.
#include "tridiag/cuda/gepp_rows.h"
#include "tridiag/cuda/interleaved_gepp.cuh"
#include "tridiag/cuda/kernel_limits.h"

namespace stripesolve::tridiag::gpu {

namespace {

constexpr int kMaxBlock = 64;
constexpr std::size_t kSavedBytesPerRow = sizeof(GeppSaved);  // 24

// The largest dynamic shared memory a block may have on sm_90 (227 KB).
constexpr int kSharedLimit = 227 * 1024;

__device__ __forceinline__ void flag(unsigned long long* f, std::size_t row) {
  atomicMin(f, static_cast<unsigned long long>(row));
}

// Row `row` of the thread's system, or an identity row's entries beyond the end (never used:
// the loads are guarded). dl of row 0 and du of row n - 1 are ignored.
struct RowIn {
  double l, d, u, f;
};

__device__ __forceinline__ RowIn load_row(const InterleavedGepp& a, std::size_t row,
                                          std::size_t at) {
  RowIn r;
  r.l = row > 0 ? __ldcs(a.dl + at) : 0.0;
  r.d = __ldcs(a.d + at);
  r.u = row + 1 < a.n ? __ldcs(a.du + at) : 0.0;
  r.f = __ldcs(a.f + at);
  return r;
}

template <int kAhead>
__global__ void __launch_bounds__(kMaxBlock) interleaved_gepp_kernel(InterleavedGepp a) {
  extern __shared__ double shared[];
  const std::size_t j = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x;
  if (j >= a.count) return;
  const std::size_t n = a.n, m = a.count;
  const int threads = static_cast<int>(blockDim.x);
  // Row i's saved pivot row at saved[i * threads] (three doubles apart by 8 bytes * threads * n).
  double* const saved_f = shared + threadIdx.x;
  double* const saved_u1 = saved_f + n * threads;
  double* const saved_u2 = saved_u1 + n * threads;

  RowIn ahead[kAhead];  // row r waits in ahead[r % kAhead]
#pragma unroll
  for (int k = 0; k < kAhead; ++k) {
    if (static_cast<std::size_t>(k) < n) ahead[k] = load_row(a, k, k * m + j);
  }
  GeppCarry c{ahead[0].d, ahead[0].u, ahead[0].f};
  std::size_t next = kAhead;  // the next row to read
  std::size_t next_at = next * m + j;
  if (next < n) ahead[0] = load_row(a, next, next_at);
  ++next;
  next_at += m;
  bool singular = false;
  for (std::size_t base = 0; base + 1 < n; base += kAhead) {
#pragma unroll
    for (int k = 0; k < kAhead; ++k) {
      const std::size_t i = base + k;  // this step eliminates below row i
      if (i + 1 < n) {
        const int slot = (k + 1) % kAhead;  // a constant once unrolled
        const RowIn r = ahead[slot];
        if (next < n) ahead[slot] = load_row(a, next, next_at);
        ++next;
        next_at += m;
        double pivot = 0.0;
        const GeppSaved s = gepp_step(c, r.l, r.d, r.u, r.f, pivot);
        if (pivot == 0.0 && !singular) {
          singular = true;
          flag(a.pivot_flag, j * n + i);
        }
        saved_f[i * threads] = s.f;
        saved_u1[i * threads] = s.u1;
        saved_u2[i * threads] = s.u2;
      }
    }
  }
  if (c.d == 0.0 && !singular) flag(a.pivot_flag, j * n + n - 1);
  // Back substitution, x written as it is known.
  double x1 = c.f * reciprocal(c.d), x2 = 0.0;
  std::size_t at = (n - 1) * m + j;
  std::size_t first_bad = isfinite(x1) ? n : n - 1;  // the first row with a non-finite x
  __stcs(a.x + at, x1);
  for (std::size_t i = n - 1; i-- > 0;) {
    at -= m;
    const GeppSaved s{saved_f[i * threads], saved_u1[i * threads], saved_u2[i * threads]};
    const double xi = gepp_back(s, x1, x2);
    if (!isfinite(xi)) first_bad = i;
    __stcs(a.x + at, xi);
    x2 = x1;
    x1 = xi;
  }
  if (first_bad < n && a.x_flag != nullptr) flag(a.x_flag, j * n + first_bad);
}

// Threads a block: 64 where the saved rows of 64 systems fit a block's shared memory, else 32.
int block_threads(std::size_t n) {
  return 64 * kSavedBytesPerRow * n <= static_cast<std::size_t>(kSharedLimit) ? 64 : 32;
}

template <int kAhead>
void launch_with(const InterleavedGepp& a, cudaStream_t stream) {
  const int threads = block_threads(a.n);
  const std::size_t blocks = (a.count + threads - 1) / threads;
  const std::size_t bytes = kSavedBytesPerRow * a.n * threads;
  interleaved_gepp_kernel<kAhead>
      <<<static_cast<unsigned>(blocks), threads, bytes, stream>>>(a);
}

}  // namespace

void launch_interleaved_gepp(const InterleavedGepp& a, int ahead, void* stream_ptr) {
  cudaStream_t stream = static_cast<cudaStream_t>(stream_ptr);
  if (ahead == 0) ahead = 16;  // the fastest at every n measured (docs/performance.md)
  if (ahead <= 4) {
    launch_with<4>(a, stream);
  } else if (ahead <= 8) {
    launch_with<8>(a, stream);
  } else {
    launch_with<16>(a, stream);
  }
}

cudaError_t set_interleaved_gepp_limits() {
  static_assert(32 * kSavedBytesPerRow * kMaxInterleavedGeppSystem <= kSharedLimit);
  for (auto k : {interleaved_gepp_kernel<4>, interleaved_gepp_kernel<8>,
                 interleaved_gepp_kernel<16>}) {
    const cudaError_t e =
        cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, kSharedLimit);
    if (e != cudaSuccess) return e;
  }
  return cudaSuccess;
}

}  // namespace stripesolve::tridiag::gpu
