#include <cooperative_groups.h>

#include <algorithm>
#include <cfloat>

#include <climits>

#include "cooperative_panel.h"

namespace {

namespace cg = cooperative_groups;

constexpr int kLeafMax = 32;  // columns of the widest leaf
constexpr int kThreads = 512;
constexpr int kWarps = kThreads / 32;
constexpr int kMinRowsPerBlock = 64;  // fewer rows than this per SM: fewer blocks
constexpr int kStaticShared = 4096;   // bytes of the kernel's own shared arrays, rounded up

// Where the blocks of a leaf publish their candidates, one set per column parity (a block may
// write column j + 1's while another still reads column j's; one grid barrier per column keeps
// them two columns apart at most).
struct Slots {
  double* rows;   // [2][blocks + 1][kLeafMax]: each block's candidate row, then the leaf's row j
  double* value;  // [2][blocks]: its magnitude
  int* row;       // [2][blocks]: its row (INT_MAX: none)
};

Slots slots_in(void* scratch, int sms) {
  auto* p = static_cast<char*>(scratch);
  Slots s;
  s.rows = reinterpret_cast<double*>(p);
  p += sizeof(double) * 2 * (sms + 1) * kLeafMax;
  s.value = reinterpret_cast<double*>(p);
  p += sizeof(double) * 2 * sms;
  s.row = reinterpret_cast<int*>(p);
  return s;
}

__device__ inline bool better(double v, int r, double best, int best_row) {
  return v > best || (v == best && r < best_row);  // LAPACK's idamax: the first largest
}

// The warp's largest (value, row), in lane 0.
__device__ void warp_argmax(double& v, int& r) {
  for (int off = 16; off > 0; off >>= 1) {
    const double ov = __shfl_down_sync(~0u, v, off);
    const int orow = __shfl_down_sync(~0u, r, off);
    if (better(ov, orow, v, r)) {
      v = ov;
      r = orow;
    }
  }
}

// The block's largest (value, row), in every thread. sv / sr: kWarps entries of shared memory.
__device__ void block_argmax(double& v, int& r, double* sv, int* sr) {
  warp_argmax(v, r);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) {
    sv[warp] = v;
    sr[warp] = r;
  }
  __syncthreads();
  if (warp == 0) {
    v = lane < kWarps ? sv[lane] : -1.0;
    r = lane < kWarps ? sr[lane] : INT_MAX;
    warp_argmax(v, r);
    if (lane == 0) {
      sv[0] = v;
      sr[0] = r;
    }
  }
  __syncthreads();
  v = sv[0];
  r = sr[0];
  __syncthreads();  // sv / sr are reused by the next call
}

// dgetf2 on the leaf: rows [base, m) and columns [base, base + cols) of the panel (lda), row r
// of the leaf being panel row base + r. Block b holds leaf rows [b R, (b + 1) R) in shared memory
// (column-major, ld R; R >= cols, so block 0 holds the leaf's top rows). Afterwards the leaf's
// row swaps are applied to the panel's other columns, [0, base) and [base + cols, width): the
// recursion above then needs no swaps of its own.
__global__ void __launch_bounds__(kThreads)
    leaf_getf2(double* panel, int64_t lda, int64_t width, int m, int base, int cols, int R,
               int32_t* ipiv, int32_t* info, Slots slots) {
  cg::grid_group grid = cg::this_grid();
  extern __shared__ double tile[];
  __shared__ double u[kLeafMax];     // the pivot row
  __shared__ int pivot[kLeafMax];    // leaf row swapped with leaf row j
  __shared__ int dst[2 * kLeafMax];  // the swaps as one permutation: row dst[i] gets row src[i]
  __shared__ int src[2 * kLeafMax];
  __shared__ int moved;
  __shared__ double sv[kWarps];
  __shared__ int sr[kWarps];
  const int b = blockIdx.x, blocks = gridDim.x;
  const int rows_m = m - base;
  const int r0 = b * R;
  const int rows = max(0, min(R, rows_m - r0));
  double* leaf = panel + static_cast<int64_t>(base) * lda + base;
  for (int c = 0; c < cols; ++c) {
    for (int r = threadIdx.x; r < rows; r += kThreads) tile[c * R + r] = leaf[c * lda + r0 + r];
  }
  __syncthreads();
  for (int j = 0; j < cols; ++j) {
    const int par = j & 1;
    double* cand = slots.rows + static_cast<int64_t>(par) * (blocks + 1) * kLeafMax;
    double v = -1.0;
    int row = INT_MAX;
    for (int r = threadIdx.x; r < rows; r += kThreads) {
      const int lr = r0 + r;
      if (lr < j) continue;
      const double x = fabs(tile[j * R + r]);
      if (better(x, lr, v, row)) {
        v = x;
        row = lr;
      }
    }
    block_argmax(v, row, sv, sr);
    if (threadIdx.x == 0) {
      slots.value[par * blocks + b] = v;
      slots.row[par * blocks + b] = row;
    }
    if (row != INT_MAX && threadIdx.x < cols) {
      cand[b * kLeafMax + threadIdx.x] = tile[threadIdx.x * R + (row - r0)];
    }
    if (b == 0 && threadIdx.x < cols)
      cand[blocks * kLeafMax + threadIdx.x] = tile[threadIdx.x * R + j];
    grid.sync();
    v = -1.0;
    row = INT_MAX;
    for (int t = threadIdx.x; t < blocks; t += kThreads) {
      const double x = __ldcg(&slots.value[par * blocks + t]);
      const int lr = __ldcg(&slots.row[par * blocks + t]);
      if (better(x, lr, v, row)) {
        v = x;
        row = lr;
      }
    }
    block_argmax(v, row, sv, sr);
    const int p = row == INT_MAX ? j : row;  // no candidate (all NaN): no swap
    const int from = row == INT_MAX ? blocks : p / R;
    if (threadIdx.x < cols) u[threadIdx.x] = __ldcg(&cand[from * kLeafMax + threadIdx.x]);
    if (threadIdx.x == 0) pivot[j] = p;
    __syncthreads();
    const double piv = u[j];
    if (b == 0 && threadIdx.x == 0) {
      ipiv[base + j] = base + p + 1;
      if (piv == 0.0) atomicCAS(info, 0, base + j + 1);
    }
    if (p != j && threadIdx.x < cols) {
      if (p >= r0 && p < r0 + rows) {
        tile[threadIdx.x * R + (p - r0)] = __ldcg(&cand[blocks * kLeafMax + threadIdx.x]);
      }
      if (b == 0) tile[threadIdx.x * R + j] = u[threadIdx.x];
    }
    __syncthreads();
    if (piv != 0.0) {
      const bool reciprocal = fabs(piv) >= DBL_MIN;  // as dgetf2 (sfmin)
      const double inv = 1.0 / piv;
      for (int r = threadIdx.x; r < rows; r += kThreads) {
        if (r0 + r <= j) continue;
        const double l = reciprocal ? tile[j * R + r] * inv : tile[j * R + r] / piv;
        tile[j * R + r] = l;
        for (int c = j + 1; c < cols; ++c) tile[c * R + r] -= l * u[c];
      }
    }
    __syncthreads();
  }
  for (int c = 0; c < cols; ++c) {
    for (int r = threadIdx.x; r < rows; r += kThreads) leaf[c * lda + r0 + r] = tile[c * R + r];
  }
  // The swaps j <-> pivot[j], in order, as one permutation of at most 2 cols leaf rows.
  if (threadIdx.x == 0) {
    int n = cols;
    for (int j = 0; j < cols; ++j) {
      dst[j] = j;
      src[j] = j;
    }
    for (int j = 0; j < cols; ++j) {
      const int p = pivot[j];
      if (p == j) continue;
      int at = p < cols ? p : -1;
      for (int i = cols; i < n && at < 0; ++i) at = dst[i] == p ? i : -1;
      if (at < 0) {
        at = n++;
        dst[at] = p;
        src[at] = p;
      }
      const int s = src[j];
      src[j] = src[at];
      src[at] = s;
    }
    moved = n;
  }
  __syncthreads();
  // Every other column of the panel: read the moved rows, then write them (kThreads / 64
  // columns per pass, one moved row per thread).
  const int per_pass = kThreads / (2 * kLeafMax);
  const int i = threadIdx.x % (2 * kLeafMax);
  const int64_t others = width - cols;
  for (int64_t c0 = static_cast<int64_t>(b) * per_pass; c0 < others;
       c0 += static_cast<int64_t>(blocks) * per_pass) {
    const int64_t k = c0 + threadIdx.x / (2 * kLeafMax);
    const int64_t col = k < base ? k : k + cols;
    const bool mine = k < others && i < moved && dst[i] != src[i];
    double x = 0.0;
    if (mine) x = panel[col * lda + base + src[i]];
    __syncthreads();
    if (mine) panel[col * lda + base + dst[i]] = x;
  }
}

}  // namespace

int CooperativePanel::leaf_columns(int64_t m, int device) {
  int sms = 0, shared = 0, cooperative = 0;
  if (cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess ||
      cudaDeviceGetAttribute(&shared, cudaDevAttrMaxSharedMemoryPerBlockOptin, device) !=
          cudaSuccess ||
      cudaDeviceGetAttribute(&cooperative, cudaDevAttrCooperativeLaunch, device) != cudaSuccess) {
    return 0;
  }
  if (cooperative == 0 || m > INT_MAX / 2) return 0;
  const int64_t blocks = std::clamp<int64_t>((m + kMinRowsPerBlock - 1) / kMinRowsPerBlock, 1, sms);
  for (int w = kLeafMax; w >= 8; w /= 2) {
    const int64_t rows = std::max<int64_t>(w, (m + blocks - 1) / blocks);
    if (rows * w * static_cast<int64_t>(sizeof(double)) + kStaticShared <= shared) return w;
  }
  return 0;
}

uint64_t CooperativePanel::scratch_bytes(int device) {
  int sms = 0;
  if (cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess) sms = 1;
  return sizeof(double) * 2 * (sms + 1) * kLeafMax + sizeof(double) * 2 * sms +
         sizeof(int) * 2 * sms;
}

CooperativePanel::CooperativePanel(int device, void* scratch) : device_(device), scratch_(scratch) {
  (void)cudaDeviceGetAttribute(&sms_, cudaDevAttrMultiProcessorCount, device);
}

cudaError_t CooperativePanel::factor(double* a, int64_t lda, int64_t m, int64_t n, int32_t* ipiv,
                                     int32_t* info, cublasHandle_t blas, cudaStream_t stream) {
  leaf_ = leaf_columns(m, device_);
  if (leaf_ == 0 || n > m || n <= 0) return cudaErrorInvalidValue;
  int shared = 0;
  cudaError_t err =
      cudaDeviceGetAttribute(&shared, cudaDevAttrMaxSharedMemoryPerBlockOptin, device_);
  if (err == cudaSuccess) {
    err = cudaFuncSetAttribute(leaf_getf2, cudaFuncAttributeMaxDynamicSharedMemorySize,
                               shared - kStaticShared);
  }
  if (err == cudaSuccess) err = cudaMemsetAsync(info, 0, sizeof(int32_t), stream);
  if (err != cudaSuccess) return err;
  return factor_part(a, lda, m, n, 0, n, ipiv, info, blas, stream);
}

// Columns [c0, c1) of the m x width panel a, rows [c0, m): dgetrf2's halving. The left part (a
// multiple of the leaf's width), then the right part's update by it (dtrsm of its top rows,
// dgemm of the rest), then the right part below the left's rows. The leaves swap rows across
// the whole panel, so no level swaps rows itself.
cudaError_t CooperativePanel::factor_part(double* a, int64_t lda, int64_t m, int64_t width,
                                          int64_t c0, int64_t c1, int32_t* ipiv, int32_t* info,
                                          cublasHandle_t blas, cudaStream_t stream) {
  const int64_t n = c1 - c0;
  if (n <= leaf_) return leaf(a, lda, m, width, c0, n, ipiv, info, stream);
  const int64_t mid = c0 + (n / 2 + leaf_ - 1) / leaf_ * leaf_;
  cudaError_t err = factor_part(a, lda, m, width, c0, mid, ipiv, info, blas, stream);
  if (err != cudaSuccess) return err;
  const double one = 1.0, minus_one = -1.0;
  const int n1 = static_cast<int>(mid - c0), n2 = static_cast<int>(c1 - mid);
  double* l11 = a + c0 * lda + c0;
  double* a12 = a + mid * lda + c0;
  if (cublasDtrsm(blas, CUBLAS_SIDE_LEFT, CUBLAS_FILL_MODE_LOWER, CUBLAS_OP_N, CUBLAS_DIAG_UNIT, n1,
                  n2, &one, l11, static_cast<int>(lda), a12,
                  static_cast<int>(lda)) != CUBLAS_STATUS_SUCCESS ||
      cublasDgemm(blas, CUBLAS_OP_N, CUBLAS_OP_N, static_cast<int>(m - mid), n2, n1, &minus_one,
                  l11 + n1, static_cast<int>(lda), a12, static_cast<int>(lda), &one, a12 + n1,
                  static_cast<int>(lda)) != CUBLAS_STATUS_SUCCESS) {
    return cudaErrorUnknown;
  }
  return factor_part(a, lda, m, width, mid, c1, ipiv, info, blas, stream);
}

cudaError_t CooperativePanel::leaf(double* a, int64_t lda, int64_t m, int64_t width, int64_t base,
                                   int64_t cols, int32_t* ipiv, int32_t* info,
                                   cudaStream_t stream) {
  const int64_t rows = m - base;
  const int blocks = static_cast<int>(
      std::clamp<int64_t>((rows + kMinRowsPerBlock - 1) / kMinRowsPerBlock, 1, sms_));
  int per_block = static_cast<int>(std::max<int64_t>(cols, (rows + blocks - 1) / blocks));
  const size_t shared = sizeof(double) * static_cast<size_t>(per_block) * static_cast<size_t>(cols);
  int im = static_cast<int>(m), ib = static_cast<int>(base), ic = static_cast<int>(cols);
  Slots slots = slots_in(scratch_, sms_);
  void* args[] = {&a, &lda, &width, &im, &ib, &ic, &per_block, &ipiv, &info, &slots};
  return cudaLaunchCooperativeKernel(reinterpret_cast<void*>(leaf_getf2), dim3(blocks),
                                     dim3(kThreads), args, shared, stream);
}
