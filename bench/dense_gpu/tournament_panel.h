// An experiment kept for the next attempt at the panel (docs/performance.md, eighteenth session),
// beside cooperative_panel.h: LU of a tall panel (the GPU tier's transposed stripe, m x h, m >> h)
// with tournament pivoting (CALU's TSLU: Grigori, Demmel and Xiang, "CALU: a communication
// optimal LU factorization algorithm", SIMAX 2011). Measured by bench_panel_sms ("tournament")
// on an H200 at 57344 x 1024: correct (max |PA - LU| / max |A| 5.1e-14 against getrf's 3.8e-14,
// max |L| 2.1, growth 44 against 30) but slower than cuSOLVER getrf, 12.9 ms alone against 9.1
// and 125 ms beside two GEMM streams against 53: its ~380 launches a panel, most of them over
// many blocks, each wait for SMs the GEMMs hold. So the engine keeps getrf.
//
// How it works: the panel is halved recursively as LAPACK dgetrf2 does (most flops in one dtrsm
// and one dgemm per level) down to leaves of kLeafColumns columns. A leaf picks its pivot rows by
// a tournament: each warp eliminates 128 of the leaf's rows with partial pivoting in registers
// and keeps the rows it pivoted on, then one warp plays the winners of eight warps against each
// other, and so on until one set is left (a launch per round: 2 rounds up to 65536 rows). The
// winners are moved to the top, their LU is the last round's, and the rows below get
// L = A U^-1. Each leaf moves its rows across the whole panel, so no level swaps rows.
//
// The pivots are not GEPP's: a winner is the largest of its column among the rows of its round,
// not of the whole panel, so |L| may exceed 1. A panel of full column rank never yields a zero
// pivot; a panel of at most 128 rows gets GEPP's pivots. Output as getrf: L unit lower and U in
// place, ipiv 1-based, *info the first zero pivot (1-based) or 0.
#pragma once

#include <cstdint>

#include <cublas_v2.h>
#include <cuda_runtime.h>

class TournamentPanel {
 public:
  static constexpr int kLeafColumns = 16;

  // Bytes of device scratch factor() needs for panels of up to m rows.
  static uint64_t scratch_bytes(int64_t m);

  // A panel factorization using `scratch` (scratch_bytes(m) for the largest m it will see).
  explicit TournamentPanel(void* scratch) : scratch_(scratch) {}

  // Factors the m x n panel a (column-major, lda >= m, m >= n >= 1, m < 2^31) in place on
  // `stream`, as getrf would (header). `blas` must be bound to `stream`. Returns the first error
  // of a launch; a cuBLAS failure as cudaErrorUnknown.
  cudaError_t factor(double* a, int64_t lda, int64_t m, int64_t n, int32_t* ipiv, int32_t* info,
                     cublasHandle_t blas, cudaStream_t stream);

 private:
  cudaError_t factor_part(int64_t c0, int64_t c1);
  cudaError_t leaf(int64_t base, int64_t cols);

  void* scratch_;
  // Of the current factor() call.
  double* a_ = nullptr;
  int64_t lda_ = 0, m_ = 0, n_ = 0;
  int32_t* ipiv_ = nullptr;
  int32_t* info_ = nullptr;
  cublasHandle_t blas_ = nullptr;
  cudaStream_t stream_ = nullptr;
};
