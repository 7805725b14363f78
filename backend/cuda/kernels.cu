#include <climits>

#include "backend/cuda/kernels.cuh"

namespace stripesolve::backend::cuda {
namespace {

constexpr int kThreads = 256;

unsigned blocks_for(int64_t n) {
  return static_cast<unsigned>((n + kThreads - 1) / kThreads);
}

__global__ void gather_columns(const double* a, int64_t ld, int64_t rows, int64_t first,
                               const int32_t* pairs, double* tmp) {
  const int64_t r = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  const int64_t p = blockIdx.y;
  if (r < rows) tmp[r + p * rows] = a[r + (first + pairs[2 * p + 1]) * ld];
}

__global__ void scatter_columns(double* a, int64_t ld, int64_t rows, int64_t first,
                                const int32_t* pairs, const double* tmp) {
  const int64_t r = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  const int64_t p = blockIdx.y;
  if (r < rows) a[r + (first + pairs[2 * p]) * ld] = tmp[r + p * rows];
}

__global__ void doolittle(double* a, int64_t ld, int64_t h, int64_t m) {
  const int64_t r = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (r >= h) return;
  for (int64_t c = blockIdx.y; c < m; c += gridDim.y) {
    if (c == r) continue;
    double& v = a[r + c * ld];
    if (c < r) {
      v /= a[c + c * ld];  // diagonal elements are never written: race-free
    } else {
      v *= a[r + r * ld];
    }
  }
}

// Rows r of the trapezoid from column block_col + r on; NaNs skipped (as std::max does on the
// CPU); the maximum as the bits of a non-negative double (their order is the numbers').
__global__ void max_abs_upper(const double* a, int64_t ld, int64_t rows, int64_t width,
                              int64_t block_col, unsigned long long* out) {
  unsigned long long best = 0;
  const int64_t total = rows * width;
  for (int64_t idx = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; idx < total;
       idx += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = idx % rows, c = idx / rows;
    if (c < r) continue;
    const double v = fabs(a[r + (block_col + c) * ld]);
    if (v == v) best = max(best, static_cast<unsigned long long>(__double_as_longlong(v)));
  }
  for (int offset = 16; offset > 0; offset /= 2) {
    best = max(best, __shfl_down_sync(0xffffffffu, best, offset));
  }
  if ((threadIdx.x & 31) == 0) atomicMax(out, best);
}

// A's sums for the residual (launch_abs_sums): a thread a row over a chunk of columns
// (blockIdx.y), its sum of |a| added to row_abs[r], the warp's largest |a| to *max_bits.
__global__ void row_abs_sums(const double* a, int64_t ld, int64_t rows, int64_t cols, int64_t chunk,
                             double* row_abs, unsigned long long* max_bits) {
  const int64_t r = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  const int64_t c0 = blockIdx.y * chunk;
  const int64_t c1 = min(cols, c0 + chunk);
  double sum = 0;
  unsigned long long best = 0;
  if (r < rows) {
    for (int64_t c = c0; c < c1; ++c) {
      const double v = fabs(a[r + c * ld]);
      sum += v;
      if (v == v) best = max(best, static_cast<unsigned long long>(__double_as_longlong(v)));
    }
    atomicAdd(row_abs + r, sum);
  }
  for (int offset = 16; offset > 0; offset /= 2) {
    best = max(best, __shfl_down_sync(0xffffffffu, best, offset));
  }
  if ((threadIdx.x & 31) == 0) atomicMax(max_bits, best);
}

// A warp a column: its sum of |a| added to col_abs[c] (the launches of one stream, one a stripe,
// follow one another, so no two add to a column at once).
__global__ void column_abs_sums(const double* a, int64_t ld, int64_t rows, int64_t cols,
                                double* col_abs) {
  const int64_t c = blockIdx.x * static_cast<int64_t>(blockDim.x / 32) + threadIdx.x / 32;
  if (c >= cols) return;
  const int lane = threadIdx.x & 31;
  double sum = 0;
  for (int64_t r = lane; r < rows; r += 32) sum += fabs(a[r + c * ld]);
  for (int offset = 16; offset > 0; offset /= 2) sum += __shfl_down_sync(0xffffffffu, sum, offset);
  if (lane == 0) col_abs[c] += sum;
}

__global__ void first_non_finite(const double* a, int64_t ld, int64_t rows, int64_t cols,
                                 int32_t* result) {
  const int64_t r = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (r >= rows) return;
  for (int64_t c = blockIdx.y; c < cols; c += gridDim.y) {
    if (!isfinite(a[r + c * ld])) {
      atomicMin(result, static_cast<int32_t>(r));
      return;
    }
  }
}

__global__ void row_swaps(double* a, int64_t ld, int64_t cols, const int32_t* ipiv, int64_t count) {
  const int64_t c = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (c >= cols) return;
  double* col = a + c * ld;
  for (int64_t k = 0; k < count; ++k) {
    const int64_t other = ipiv[k] - 1;
    if (other != k) {
      const double t = col[k];
      col[k] = col[other];
      col[other] = t;
    }
  }
}

__global__ void pivots_from_ipiv(const int32_t* ipiv, int64_t count, int32_t offset, int32_t* raw) {
  const int64_t k = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (k < count) raw[k] = ipiv[k] - 1 + offset;
}

__global__ void identity_blocks(double* a, int64_t ld, int64_t rows, int64_t nb) {
  const int64_t r = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  const int64_t c = blockIdx.y;
  if (r < rows) a[r + c * ld] = (r % nb == c) ? 1.0 : 0.0;
}

__global__ void rhs_swaps(double* rhs, int64_t ld, int64_t nrhs, int64_t row0, const int32_t* raw,
                          int64_t count, bool reverse) {
  const int64_t j = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (j >= nrhs) return;
  double* col = rhs + j * ld + row0;
  for (int64_t s = 0; s < count; ++s) {
    const int64_t k = reverse ? count - 1 - s : s;
    const int64_t other = raw[k];
    if (other != k) {
      const double t = col[k];
      col[k] = col[other];
      col[other] = t;
    }
  }
}

}  // namespace

void launch_permute_columns(double* a, int64_t ld, int64_t rows, int64_t first,
                            const int32_t* pairs, int64_t count, double* tmp, cudaStream_t stream) {
  // gridDim.y is at most 65535: the permutations here have at most 4 S pairs.
  for (int64_t p0 = 0; p0 < count; p0 += 65535) {
    const int64_t chunk = count - p0 < 65535 ? count - p0 : 65535;
    const dim3 grid(blocks_for(rows), static_cast<unsigned>(chunk));
    gather_columns<<<grid, kThreads, 0, stream>>>(a, ld, rows, first, pairs + 2 * p0,
                                                  tmp + p0 * rows);
  }
  for (int64_t p0 = 0; p0 < count; p0 += 65535) {
    const int64_t chunk = count - p0 < 65535 ? count - p0 : 65535;
    const dim3 grid(blocks_for(rows), static_cast<unsigned>(chunk));
    scatter_columns<<<grid, kThreads, 0, stream>>>(a, ld, rows, first, pairs + 2 * p0,
                                                   tmp + p0 * rows);
  }
}

void launch_doolittle(double* region, int64_t ld, int64_t h, int64_t m, cudaStream_t stream) {
  const dim3 grid(blocks_for(h), static_cast<unsigned>(m < 4096 ? m : 4096));
  doolittle<<<grid, kThreads, 0, stream>>>(region, ld, h, m);
}

void launch_max_abs_upper(const double* a, int64_t ld, int64_t rows, int64_t cols,
                          int64_t block_col, unsigned long long* out, cudaStream_t stream) {
  const int64_t width = cols - block_col;
  if (rows <= 0 || width <= 0) return;
  const int64_t blocks = (rows * width + kThreads - 1) / kThreads;
  max_abs_upper<<<static_cast<unsigned>(blocks < 2048 ? blocks : 2048), kThreads, 0, stream>>>(
      a, ld, rows, width, block_col, out);
}

void launch_abs_sums(const double* a, int64_t ld, int64_t rows, int64_t cols, double* row_abs,
                     double* col_abs, unsigned long long* max_bits, cudaStream_t stream) {
  if (rows <= 0 || cols <= 0) return;
  constexpr int64_t kChunk = 512;
  const dim3 grid(blocks_for(rows), static_cast<unsigned>((cols + kChunk - 1) / kChunk));
  row_abs_sums<<<grid, kThreads, 0, stream>>>(a, ld, rows, cols, kChunk, row_abs, max_bits);
  constexpr int64_t kColumnsPerBlock = kThreads / 32;
  column_abs_sums<<<static_cast<unsigned>((cols + kColumnsPerBlock - 1) / kColumnsPerBlock),
                    kThreads, 0, stream>>>(a, ld, rows, cols, col_abs);
}

void launch_first_non_finite(const double* a, int64_t ld, int64_t rows, int64_t cols,
                             int32_t* result, cudaStream_t stream) {
  if (rows == 0 || cols == 0) return;
  const dim3 grid(blocks_for(rows), static_cast<unsigned>(cols < 4096 ? cols : 4096));
  first_non_finite<<<grid, kThreads, 0, stream>>>(a, ld, rows, cols, result);
}

void launch_row_swaps(double* a, int64_t ld, int64_t cols, const int32_t* ipiv, int64_t count,
                      cudaStream_t stream) {
  if (cols == 0) return;
  row_swaps<<<blocks_for(cols), kThreads, 0, stream>>>(a, ld, cols, ipiv, count);
}

void launch_pivots_from_ipiv(const int32_t* ipiv, int64_t count, int32_t offset, int32_t* raw,
                             cudaStream_t stream) {
  pivots_from_ipiv<<<blocks_for(count), kThreads, 0, stream>>>(ipiv, count, offset, raw);
}

void launch_identity_blocks(double* a, int64_t ld, int64_t rows, int64_t nb, cudaStream_t stream) {
  identity_blocks<<<dim3(blocks_for(rows), static_cast<unsigned>(nb)), kThreads, 0, stream>>>(
      a, ld, rows, nb);
}

void launch_solution_swaps(double* rhs, int64_t ld, int64_t nrhs, int64_t row0, const int32_t* raw,
                           int64_t count, cudaStream_t stream) {
  rhs_swaps<<<blocks_for(nrhs), kThreads, 0, stream>>>(rhs, ld, nrhs, row0, raw, count, true);
}

void launch_rhs_row_swaps(double* rhs, int64_t ld, int64_t nrhs, int64_t row0, const int32_t* raw,
                          int64_t count, cudaStream_t stream) {
  rhs_swaps<<<blocks_for(nrhs), kThreads, 0, stream>>>(rhs, ld, nrhs, row0, raw, count, false);
}

}  // namespace stripesolve::backend::cuda
