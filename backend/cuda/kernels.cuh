// Small kernels of the dense GPU tier (device_engine.cu); the arithmetic is cuBLAS / cuSOLVER.
#pragma once

#include <cstdint>

#include <cuda_runtime.h>

namespace stripesolve::backend::cuda {

// tmp[r, p] = a[r, first + pairs[2p+1]], then a[r, first + pairs[2p]] = tmp[r, p], for r < rows,
// p < count (tmp has ld = rows and room for count columns). Two launches on `stream`.
void launch_permute_columns(double* a, int64_t ld, int64_t rows, int64_t first,
                            const int32_t* pairs, int64_t count, double* tmp, cudaStream_t stream);

// kRow after dgetrf on the transposed stripe: the h x m region holds U_W^T (lower, with the
// diagonal D) and L_W^T (unit upper). Rescales it to unit lower L = U_W^T D^-1 and U = D L_W^T.
void launch_doolittle(double* region, int64_t ld, int64_t h, int64_t m, cudaStream_t stream);

// The largest |a(r, c)| over rows r < rows and columns block_col + r <= c < cols (an eliminated
// stripe's U; NaNs skipped) into *out as the bits of the double (device, zeroed by the caller).
void launch_max_abs_upper(const double* a, int64_t ld, int64_t rows, int64_t cols,
                          int64_t block_col, unsigned long long* out, cudaStream_t stream);

// For the residual on the device: for the rows x cols block a, row r's sum of |a| added to
// row_abs[r], column c's to col_abs[c], and the largest |a| (NaNs skipped) into *max_bits as the
// bits of the double (atomicMax; zeroed by the caller). Two launches on `stream`; launches for
// several blocks must share the stream (the column sums are added without atomics).
void launch_abs_sums(const double* a, int64_t ld, int64_t rows, int64_t cols, double* row_abs,
                     double* col_abs, unsigned long long* max_bits, cudaStream_t stream);

// The smallest row r < rows holding a non-finite value in columns [0, cols), or INT32_MAX, into
// *result (device int32, set to INT32_MAX by the caller).
void launch_first_non_finite(const double* a, int64_t ld, int64_t rows, int64_t cols,
                             int32_t* result, cudaStream_t stream);

// For each column c < cols of the rows-tall block a: for k < count, swaps rows k and ipiv[k] - 1
// (dgetrf's 1-based pivots), in order (LAPACK dlaswp on a block).
void launch_row_swaps(double* a, int64_t ld, int64_t cols, const int32_t* ipiv, int64_t count,
                      cudaStream_t stream);

// The rows x nb block a (ld) as a stack of nb x nb identities: a[r, c] = (r mod nb == c).
void launch_identity_blocks(double* a, int64_t ld, int64_t rows, int64_t nb, cudaStream_t stream);

// raw[k] = ipiv[k] - 1 + offset.
void launch_pivots_from_ipiv(const int32_t* ipiv, int64_t count, int32_t offset, int32_t* raw,
                             cudaStream_t stream);

// Solution swaps of kRow (stripe::apply_solution_swaps): for each rhs column, for k = count-1
// .. 0 swap rows row0 + k and row0 + raw[k].
void launch_solution_swaps(double* rhs, int64_t ld, int64_t nrhs, int64_t row0, const int32_t* raw,
                           int64_t count, cudaStream_t stream);

// kLocal forward substitution: for each rhs column, for k = 0 .. count-1 swap rows row0 + k and
// row0 + raw[k].
void launch_rhs_row_swaps(double* rhs, int64_t ld, int64_t nrhs, int64_t row0, const int32_t* raw,
                          int64_t count, cudaStream_t stream);

}  // namespace stripesolve::backend::cuda
