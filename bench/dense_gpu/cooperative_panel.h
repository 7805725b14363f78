// An experiment kept for the next attempt at the panel (docs/performance.md, thirteenth
// session): LU with partial pivoting of a tall panel (the GPU tier's transposed stripe, m x h,
// m >> h) without cuSOLVER. Measured beside cuSOLVER's getrf by bench_panel_sms ("fused"):
// equal pivots, 1.19x faster alone at m = 57344, but 1.5-2x slower beside the sweeps' GEMMs,
// because each cooperative leaf waits until every one of its blocks finds a free SM. So the
// engine keeps getrf.
//
// Why it was tried: getrf spends 8-10 us a column on such a panel whatever its width
// (docs/performance.md), its unblocked part launching kernels per column. Here the panel is halved
// recursively as LAPACK dgetrf2 does (most flops in one dtrsm and one dgemm per level), and each
// leaf of at most 32 columns is one cooperative kernel: the leaf's rows are spread over the SMs and
// held in shared memory for its whole factorization, and each column costs one grid barrier. Pivots
// are LAPACK's (the first largest magnitude); the factors match getrf's to rounding. Measured: a
// column still costs about 5.5 us (the barrier and two dependent reads of the blocks' candidates
// from L2), even at m = 4096.
#pragma once

#include <cstdint>

#include <cublas_v2.h>
#include <cuda_runtime.h>

class CooperativePanel {
 public:
  // The widest leaf (columns per cooperative kernel) for m rows on `device`, or 0 when no leaf
  // fits the device's shared memory (the caller keeps getrf).
  static int leaf_columns(int64_t m, int device);

  // Bytes of device scratch factor() needs on `device`.
  static uint64_t scratch_bytes(int device);

  // CooperativePanel on `device` with `scratch` of scratch_bytes(device).
  CooperativePanel(int device, void* scratch);

  // Factors the m x n panel a (column-major, lda >= m, m >= n) in place on `stream`: L unit
  // lower and U, ipiv[k] (1-based) the row swapped with k, *info the first zero pivot (1-based)
  // or 0. `blas` must be bound to `stream`. Needs leaf_columns(m) > 0. Returns the first error
  // of a launch or of cuBLAS (as cudaErrorUnknown).
  cudaError_t factor(double* a, int64_t lda, int64_t m, int64_t n, int32_t* ipiv, int32_t* info,
                     cublasHandle_t blas, cudaStream_t stream);

 private:
  cudaError_t factor_part(double* a, int64_t lda, int64_t m, int64_t width, int64_t c0, int64_t c1,
                          int32_t* ipiv, int32_t* info, cublasHandle_t blas, cudaStream_t stream);
  cudaError_t leaf(double* a, int64_t lda, int64_t m, int64_t width, int64_t base, int64_t cols,
                   int32_t* ipiv, int32_t* info, cudaStream_t stream);

  int device_;
  int sms_ = 0;
  int leaf_ = 0;  // of the current factor() call
  void* scratch_;
};
