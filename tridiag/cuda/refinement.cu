#include <algorithm>

#include <cuda_runtime.h>

#include "tridiag/cuda/cuda_check.h"
#include "tridiag/cuda/refinement.h"

namespace stripesolve::tridiag::gpu {

namespace {

constexpr int kThreads = 256;

// Row g of the batch: its neighbours' positions `stride` away, present when the row is not the
// first (last) of its system. Strided: systems of n rows one after another; ragged: couplings
// across systems are zero; interleaved: row i of system j at i * count + j (stride count).
__global__ void residual_kernel(const double* __restrict__ dl, const double* __restrict__ d,
                                const double* __restrict__ du, const double* __restrict__ f,
                                const double* __restrict__ x, double* __restrict__ r,
                                std::size_t rows, std::size_t n, std::size_t stride, bool ragged) {
  for (std::size_t g = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; g < rows;
       g += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    const std::size_t i = stride == 1 ? (n == 0 ? g : g % n) : g / stride;
    const std::size_t last = stride == 1 ? (n == 0 ? rows - 1 : n - 1) : rows / stride - 1;
    double s = fma(-d[g], x[g], f[g]);
    if (i > 0 && g >= stride && !(ragged && dl[g] == 0.0)) s = fma(-dl[g], x[g - stride], s);
    if (i < last && g + stride < rows && !(ragged && du[g] == 0.0)) {
      s = fma(-du[g], x[g + stride], s);
    }
    r[g] = s;
  }
}

__global__ void add_kernel(double* __restrict__ x, const double* __restrict__ dx,
                           std::size_t rows) {
  for (std::size_t g = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; g < rows;
       g += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    x[g] += dx[g];
  }
}

unsigned blocks_for(std::size_t rows) {
  const std::size_t wanted = (rows + kThreads - 1) / kThreads;
  return static_cast<unsigned>(std::clamp<std::size_t>(wanted, 1, 65535));
}

}  // namespace

Status residual_on_device(BatchLayout layout, const DeviceBatch& batch, double* r, void* stream) {
  if (batch.rows == 0) return Status::ok();
  const bool interleaved = layout == BatchLayout::kInterleaved;
  const std::size_t stride = interleaved ? std::max<std::size_t>(batch.count, 1) : 1;
  const std::size_t n = interleaved ? 0 : batch.system_size;
  residual_kernel<<<blocks_for(batch.rows), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
      batch.dl, batch.d, batch.du, batch.f, batch.x, r, batch.rows, n, stride,
      layout == BatchLayout::kRagged);
  return cuda_check(cudaGetLastError(), "the refinement's residual kernel");
}

Status add_on_device(double* x, const double* dx, std::size_t rows, void* stream) {
  if (rows == 0) return Status::ok();
  add_kernel<<<blocks_for(rows), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(x, dx, rows);
  return cuda_check(cudaGetLastError(), "the refinement's update kernel");
}

}  // namespace stripesolve::tridiag::gpu
