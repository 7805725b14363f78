// The CUDA lane (backend/device_engine.h's DeviceLane): one worker thread's streams (compute, copy
// in, copy out), cuBLAS and cuSOLVER handles, events and workspace. Internal to backend/cuda/:
// lane.cc has its workspace and copies, lane_factor.cc the elimination and the updates,
// lane_substitute.cc the substitutions; device_engine.cc makes lanes.
//
// Threading: a lane belongs to the thread that made it, but for wait() on download_later's
// tickets, which other threads may call (tickets_mu_ guards the table).
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cusolverDn.h>

#include "backend/cuda/libraries.h"
#include "backend/cuda/sm_fence.h"
#include "backend/device_engine.h"
#include "base/status.h"
#include "gpu/cuda/check.h"

namespace stripesolve::backend::cuda {

Status cublas_check(cublasStatus_t st, const std::string& what);
Status cusolver_check(cusolverStatus_t st, const std::string& what);

#define RETURN_CUDA(expr, what) \
  STRIPESOLVE_RETURN_IF_ERROR(::stripesolve::gpu::cuda_check((expr), (what)))
#define RETURN_CUBLAS(expr, what) \
  STRIPESOLVE_RETURN_IF_ERROR(::stripesolve::backend::cuda::cublas_check((expr), (what)))
#define RETURN_CUSOLVER(expr, what) \
  STRIPESOLVE_RETURN_IF_ERROR(::stripesolve::backend::cuda::cusolver_check((expr), (what)))

class CudaLane final : public DeviceLane {
 public:
  CudaLane(int device, int64_t rows, int64_t cols, PivotMode mode, int64_t j_rows, int64_t k_rows)
      : device_(device), rows_(rows), cols_(cols), mode_(mode), j_rows_(j_rows), k_rows_(k_rows) {}
  ~CudaLane() override;

  // fence: the SMs the sweep lanes may use (null: all SMs).
  // panel_blocks: DeviceEngineOptions::panel_blocks.
  Status init(bool high_priority, SmFence* fence, void* workspace, int64_t update_k,
              int panel_blocks);

  struct Layout {
    uint64_t transposed = 0, solver = 0, ipiv = 0, info = 0, max_bits = 0, gather = 0, total = 0;
    int lwork = 0;
  };

  // The workspace's parts; queries cuSOLVER for its buffer (needs a current device).
  Layout layout() const;

  Status upload(const double* host, const DeviceBlock& dst, int64_t c0, int64_t c1) override;
  Status copy_from_peer(double* dst, const double* src, int src_device, uint64_t bytes) override;
  Status upload_ints(const std::vector<int32_t>& values, int32_t* device) override;
  Status download(const DeviceBlock& src, double* host, int64_t c0, int64_t c1) override;
  Result<uint64_t> download_later(const DeviceBlock& src, double* host, int64_t c0,
                                  int64_t c1) override;
  Status wait(uint64_t ticket) override;
  Status synchronize() override;
  Status eliminate(const DeviceBlock& part, int64_t block_col, PivotMode mode,
                   int64_t substripe_rows, int64_t global_row, int64_t* host_swaps,
                   int32_t* device_raw, int32_t* device_perm, int64_t* perm_count) override;
  Result<double> max_abs_upper(const DeviceBlock& part, int64_t block_col) override;
  Status update(const DeviceUpdate& op) override;
  Status invert_diagonal_blocks(const DeviceBlock& u, const DeviceBlock& inverse) override;
  Status copy_rows(const DeviceBlock& dst, int64_t dst_row, const DeviceBlock& src) override;
  Status permute_columns(const DeviceBlock& target, const ColumnPermutation& perm) override;
  Status forward(const std::vector<FactorStripe>& stripes, const DeviceBlock& rhs) override;
  Status backward(const std::vector<FactorStripe>& stripes, const DeviceBlock& rhs) override;
  Status transposed_upper(const std::vector<FactorStripe>& stripes,
                          const DeviceBlock& rhs) override;
  Status transposed_lower(const std::vector<FactorStripe>& stripes,
                          const DeviceBlock& rhs) override;
  Status residual(const std::vector<FactorStripe>& stripes, const DeviceBlock& x,
                  const DeviceBlock& r, double* sums, bool transposed) override;

 private:
  // x (J's K multiplier columns) <- x triu(U)^-1 by block columns of nb: x_p -= x_<p U_<p,p,
  // then x_p <- x_p inv(U_pp) through the gather buffer (queued on the compute stream).
  Status multipliers_by_inverses(const DeviceUpdate& op, double* x);
  // rhs[rows, rows + m) -= op(a) * rhs[from, from + k), op(a) m x k: the substitution's products
  // (CUBLAS_OP_N) and the transposed passes' (CUBLAS_OP_T, a stored k x m).
  Status subtract_product(cublasOperation_t op, const double* a, int64_t lda, int64_t m, int64_t k,
                          const DeviceBlock& rhs, int64_t from, int64_t rows, const char* what);
  // rhs[rows, rows + h) <- op(triangle)^-1 * itself.
  Status solve_triangle(cublasFillMode_t fill, cublasOperation_t op, cublasDiagType_t diag,
                        const double* t, int64_t ldt, int64_t h, const DeviceBlock& rhs,
                        int64_t rows, const char* what);
  // One stripe's step of a substitution pass, queued on the compute stream.
  using QueueStep = Status (CudaLane::*)(const DeviceBlock& part, int64_t row_begin,
                                         const int32_t* device_raw, const DeviceBlock& rhs);
  // `step` for each stripe in order, then one wait for the stream (`what` names it in errors).
  Status run_pass(const std::vector<FactorStripe>& stripes, const DeviceBlock& rhs, QueueStep step,
                  const char* what);
  Status queue_forward(const DeviceBlock& part, int64_t row_begin, const int32_t* device_raw,
                       const DeviceBlock& rhs);
  Status queue_backward(const DeviceBlock& part, int64_t row_begin, const int32_t* device_raw,
                        const DeviceBlock& rhs);
  Status queue_transposed_upper(const DeviceBlock& part, int64_t row_begin,
                                const int32_t* device_raw, const DeviceBlock& rhs);
  Status queue_transposed_lower(const DeviceBlock& part, int64_t row_begin,
                                const int32_t* device_raw, const DeviceBlock& rhs);
  // kLocal (002 §5, Fig 11): per substripe, dgetrf of its rows from its diagonal column (row
  // search inside the substripe), its swaps carried over the substripe's earlier multipliers,
  // then dtrsm + dgemm for the stripe's rows below it.
  Status eliminate_local(const DeviceBlock& part, int64_t block_col, int64_t substripe_rows,
                         int32_t* host_ipiv, int32_t* device_raw, int32_t* first_zero);
  Status ensure_events(size_t count);
  bool persistent_panel_takes(const DeviceBlock& part, int64_t h, int64_t m) const;
  Status factor_transposed(double* region, int64_t ld, int64_t h, int64_t m);
  Status factor_in_one_launch(double* region, int64_t ld, int64_t h, int64_t m);

  const int device_;
  const int64_t rows_, cols_;
  const PivotMode mode_;
  const int64_t j_rows_, k_rows_;
  cudaStream_t compute_ = nullptr, in_ = nullptr, out_ = nullptr;
  const CudaLibraries& lib_ = cuda_libraries();  // loaded by DeviceEngine::open
  cublasHandle_t blas_ = nullptr;
  cusolverDnHandle_t solver_ = nullptr;
  std::vector<cudaEvent_t> events_;
  // download_later's copies not yet waited for, by ticket (waited for from other threads).
  std::mutex tickets_mu_;
  std::map<uint64_t, cudaEvent_t> tickets_;
  uint64_t last_ticket_ = 0;
  double* transposed_ = nullptr;
  double* solver_work_ = nullptr;
  int32_t* ipiv_ = nullptr;
  int32_t* info_ = nullptr;
  unsigned long long* max_bits_ = nullptr;  // max_abs_upper's result
  double* gather_ = nullptr;
  uint64_t gather_bytes_ = 0;
  int solver_lwork_ = 0;
  int64_t update_k_ = 0;           // DeviceEngineOptions::update_k
  int panel_blocks_ = 0;           // DeviceEngineOptions::panel_blocks
  int panel_resident_blocks_ = 0;  // PersistentPanel::resident_blocks(device_) when used
};

}  // namespace stripesolve::backend::cuda
