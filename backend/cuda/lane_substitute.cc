// CudaLane (lane.h): the forward and backward substitutions and the two passes of the transposed
// solve, stripe by stripe, on the compute stream (dgemm for the products, dtrsm for the
// triangles, kernels for the swaps), and the residual on the original matrix's copy (dgemm,
// kernels for A's sums).
#include <vector>

#include "backend/cuda/kernels.cuh"
#include "backend/cuda/lane.h"
#include "gpu/cuda/check.h"

namespace stripesolve::backend::cuda {

Status CudaLane::forward(const std::vector<FactorStripe>& stripes, const DeviceBlock& rhs) {
  return run_pass(stripes, rhs, &CudaLane::queue_forward, "forward substitution");
}

Status CudaLane::backward(const std::vector<FactorStripe>& stripes, const DeviceBlock& rhs) {
  return run_pass(stripes, rhs, &CudaLane::queue_backward, "backward substitution");
}

Status CudaLane::transposed_upper(const std::vector<FactorStripe>& stripes,
                                  const DeviceBlock& rhs) {
  return run_pass(stripes, rhs, &CudaLane::queue_transposed_upper, "transposed upper substitution");
}

Status CudaLane::transposed_lower(const std::vector<FactorStripe>& stripes,
                                  const DeviceBlock& rhs) {
  return run_pass(stripes, rhs, &CudaLane::queue_transposed_lower, "transposed lower substitution");
}

Status CudaLane::run_pass(const std::vector<FactorStripe>& stripes, const DeviceBlock& rhs,
                          QueueStep step, const char* what) {
  RETURN_CUDA(cudaSetDevice(device_), "cudaSetDevice");
  for (const FactorStripe& s : stripes) {
    STRIPESOLVE_RETURN_IF_ERROR((this->*step)(s.part, s.row_begin, s.raw, rhs));
  }
  RETURN_CUDA(cudaStreamSynchronize(compute_), what);
  return Status::ok();
}

Status CudaLane::residual(const std::vector<FactorStripe>& stripes, const DeviceBlock& x,
                          const DeviceBlock& r, double* sums, bool transposed) {
  RETURN_CUDA(cudaSetDevice(device_), "cudaSetDevice");
  const int64_t n = r.rows;
  RETURN_CUDA(cudaMemsetAsync(sums, 0, sizeof(double) * static_cast<size_t>(2 * n + 1), compute_),
              "zeroing the residual's sums");
  const double one = 1.0, minus_one = -1.0;
  for (const FactorStripe& s : stripes) {
    const DeviceBlock& a = s.part;
    if (transposed) {  // r -= part^T x[row_begin, row_begin + h)
      RETURN_CUBLAS(lib_.dgemm(blas_, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(a.cols),
                               static_cast<int>(r.cols), static_cast<int>(a.rows), &minus_one,
                               a.data, static_cast<int>(a.ld), x.data + s.row_begin,
                               static_cast<int>(x.ld), &one, r.data, static_cast<int>(r.ld)),
                    "product of the transposed residual");
    } else {
      RETURN_CUBLAS(lib_.dgemm(blas_, CUBLAS_OP_N, CUBLAS_OP_N, static_cast<int>(a.rows),
                               static_cast<int>(r.cols), static_cast<int>(a.cols), &minus_one,
                               a.data, static_cast<int>(a.ld), x.data, static_cast<int>(x.ld), &one,
                               r.data + s.row_begin, static_cast<int>(r.ld)),
                    "product of the residual");
    }
    cuda::launch_abs_sums(a.data, a.ld, a.rows, a.cols, sums + s.row_begin, sums + n,
                          reinterpret_cast<unsigned long long*>(sums + 2 * n), compute_);
    STRIPESOLVE_RETURN_IF_ERROR(gpu::launch_check("sums of |a| for the residual"));
  }
  RETURN_CUDA(cudaStreamSynchronize(compute_), "residual");
  return Status::ok();
}

Status CudaLane::queue_forward(const DeviceBlock& part, int64_t row_begin,
                               const int32_t* device_raw, const DeviceBlock& rhs) {
  if (row_begin > 0) {
    STRIPESOLVE_RETURN_IF_ERROR(subtract_product(CUBLAS_OP_N, part.data, part.ld, part.rows,
                                                 row_begin, rhs, 0, row_begin,
                                                 "product of the forward substitution"));
  }
  if (device_raw != nullptr) {
    cuda::launch_rhs_row_swaps(rhs.data, rhs.ld, rhs.cols, row_begin, device_raw, part.rows,
                               compute_);
    STRIPESOLVE_RETURN_IF_ERROR(gpu::launch_check("row swaps of the right-hand side"));
  }
  return solve_triangle(CUBLAS_FILL_MODE_LOWER, CUBLAS_OP_N, CUBLAS_DIAG_UNIT,
                        part.data + row_begin * part.ld, part.ld, part.rows, rhs, row_begin,
                        "triangle of the forward substitution");
}

Status CudaLane::queue_backward(const DeviceBlock& part, int64_t row_begin,
                                const int32_t* device_raw, const DeviceBlock& rhs) {
  const int64_t right = rhs.rows - row_begin - part.rows;
  const double* diag = part.data + row_begin * part.ld;
  if (right > 0) {
    STRIPESOLVE_RETURN_IF_ERROR(
        subtract_product(CUBLAS_OP_N, diag + part.rows * part.ld, part.ld, part.rows, right, rhs,
                         row_begin + part.rows, row_begin, "product of the backward substitution"));
  }
  STRIPESOLVE_RETURN_IF_ERROR(solve_triangle(CUBLAS_FILL_MODE_UPPER, CUBLAS_OP_N,
                                             CUBLAS_DIAG_NON_UNIT, diag, part.ld, part.rows, rhs,
                                             row_begin, "triangle of the backward substitution"));
  if (device_raw != nullptr) {
    cuda::launch_solution_swaps(rhs.data, rhs.ld, rhs.cols, row_begin, device_raw, part.rows,
                                compute_);
    STRIPESOLVE_RETURN_IF_ERROR(gpu::launch_check("solution swaps"));
  }
  return Status::ok();
}

// Q_I^T (kRow's swaps in order), then v_I <- triu(U_II)^-T v_I and v_{>I} -= U_{I,>I}^T v_I.
Status CudaLane::queue_transposed_upper(const DeviceBlock& part, int64_t row_begin,
                                        const int32_t* device_raw, const DeviceBlock& rhs) {
  if (device_raw != nullptr) {
    cuda::launch_rhs_row_swaps(rhs.data, rhs.ld, rhs.cols, row_begin, device_raw, part.rows,
                               compute_);
    STRIPESOLVE_RETURN_IF_ERROR(gpu::launch_check("column swaps of the transposed solve"));
  }
  const double* diag = part.data + row_begin * part.ld;
  STRIPESOLVE_RETURN_IF_ERROR(solve_triangle(CUBLAS_FILL_MODE_UPPER, CUBLAS_OP_T,
                                             CUBLAS_DIAG_NON_UNIT, diag, part.ld, part.rows, rhs,
                                             row_begin, "triangle of the transposed upper pass"));
  const int64_t below = rhs.rows - row_begin - part.rows;
  if (below == 0) return Status::ok();
  return subtract_product(CUBLAS_OP_T, diag + part.rows * part.ld, part.ld, below, part.rows, rhs,
                          row_begin, row_begin + part.rows, "product of the transposed upper pass");
}

// t <- tril(L_II)^-T v_I (unit), v_I = P_I^T t (kLocal's swaps undone), v_{<I} -= L_{I,<I}^T v_I.
Status CudaLane::queue_transposed_lower(const DeviceBlock& part, int64_t row_begin,
                                        const int32_t* device_raw, const DeviceBlock& rhs) {
  STRIPESOLVE_RETURN_IF_ERROR(solve_triangle(
      CUBLAS_FILL_MODE_LOWER, CUBLAS_OP_T, CUBLAS_DIAG_UNIT, part.data + row_begin * part.ld,
      part.ld, part.rows, rhs, row_begin, "triangle of the transposed lower pass"));
  if (device_raw != nullptr) {
    cuda::launch_solution_swaps(rhs.data, rhs.ld, rhs.cols, row_begin, device_raw, part.rows,
                                compute_);
    STRIPESOLVE_RETURN_IF_ERROR(gpu::launch_check("row swaps of the transposed solve"));
  }
  if (row_begin == 0) return Status::ok();
  return subtract_product(CUBLAS_OP_T, part.data, part.ld, row_begin, part.rows, rhs, row_begin, 0,
                          "product of the transposed lower pass");
}

// rhs[rows, rows + m) -= op(a) * rhs[from, from + k), op(a) m x k. With one right-hand side,
// dgemv and dtrsv below run as fast as dgemm and dtrsm (bench_substitution_ops on the H200).
Status CudaLane::subtract_product(cublasOperation_t op, const double* a, int64_t lda, int64_t m,
                                  int64_t k, const DeviceBlock& rhs, int64_t from, int64_t rows,
                                  const char* what) {
  const double one = 1.0, minus_one = -1.0;
  RETURN_CUBLAS(
      lib_.dgemm(blas_, op, CUBLAS_OP_N, static_cast<int>(m), static_cast<int>(rhs.cols),
                 static_cast<int>(k), &minus_one, a, static_cast<int>(lda), rhs.data + from,
                 static_cast<int>(rhs.ld), &one, rhs.data + rows, static_cast<int>(rhs.ld)),
      what);
  return Status::ok();
}

// rhs[rows, rows + h) <- op(triangle)^-1 * itself.
Status CudaLane::solve_triangle(cublasFillMode_t fill, cublasOperation_t op, cublasDiagType_t diag,
                                const double* t, int64_t ldt, int64_t h, const DeviceBlock& rhs,
                                int64_t rows, const char* what) {
  const double one = 1.0;
  RETURN_CUBLAS(lib_.dtrsm(blas_, CUBLAS_SIDE_LEFT, fill, op, diag, static_cast<int>(h),
                           static_cast<int>(rhs.cols), &one, t, static_cast<int>(ldt),
                           rhs.data + rows, static_cast<int>(rhs.ld)),
                what);
  return Status::ok();
}

}  // namespace stripesolve::backend::cuda
