// backend/device_engine.h on CUDA (host code, built by the C++ compiler): cuBLAS (dtrsm, dgemm,
// dgeam), cuSOLVER (dgetrf) and the kernels of kernels.cuh. See the header for the contract.
#include "backend/device_engine.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <mutex>
#include <vector>

#include <climits>
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cusolverDn.h>
#include <fmt/format.h>

#include "backend/cuda/kernels.cuh"
#include "backend/cuda/sm_fence.h"
#include "gpu/cuda/check.h"
#include "gpu/devices.h"

namespace stripesolve::backend {
namespace {

using gpu::cuda_check;

Status cublas_check(cublasStatus_t st, const std::string& what) {
  if (st == CUBLAS_STATUS_SUCCESS) return Status::ok();
  const std::string msg = what + ": " + cublasGetStatusName(st) + ": " + cublasGetStatusString(st);
  if (st == CUBLAS_STATUS_ALLOC_FAILED) return Status::resource_exhausted(msg);
  return Status::internal(msg);
}

Status cusolver_check(cusolverStatus_t st, const std::string& what) {
  if (st == CUSOLVER_STATUS_SUCCESS) return Status::ok();
  const std::string msg = what + ": cuSOLVER status " + std::to_string(static_cast<int>(st));
  if (st == CUSOLVER_STATUS_ALLOC_FAILED) return Status::resource_exhausted(msg);
  return Status::internal(msg);
}

#define RETURN_CUDA(expr, what) STRIPESOLVE_RETURN_IF_ERROR(cuda_check((expr), (what)))
#define RETURN_CUBLAS(expr, what) STRIPESOLVE_RETURN_IF_ERROR(cublas_check((expr), (what)))
#define RETURN_CUSOLVER(expr, what) STRIPESOLVE_RETURN_IF_ERROR(cusolver_check((expr), (what)))

uint64_t align_up(uint64_t bytes) {
  return (bytes + 255) / 256 * 256;
}

class CudaLane final : public DeviceLane {
 public:
  CudaLane(int device, int64_t rows, int64_t cols, PivotMode mode, int64_t j_rows, int64_t k_rows)
      : device_(device), rows_(rows), cols_(cols), mode_(mode), j_rows_(j_rows), k_rows_(k_rows) {}

  ~CudaLane() override {
    (void)cudaSetDevice(device_);
    for (cudaStream_t s : {compute_, in_, out_}) {
      if (s != nullptr) (void)cudaStreamSynchronize(s);  // copies into host memory end first
    }
    for (cudaEvent_t e : events_) (void)cudaEventDestroy(e);
    for (auto& [t, e] : tickets_) {
      (void)cudaEventSynchronize(e);
      (void)cudaEventDestroy(e);
    }
    if (solver_ != nullptr) (void)cusolverDnDestroy(solver_);
    if (blas_ != nullptr) (void)cublasDestroy(blas_);
    for (cudaStream_t s : {compute_, in_, out_}) {
      if (s != nullptr) (void)cudaStreamDestroy(s);
    }
  }

  // fence: the SMs the sweep lanes may use (null: all SMs).
  Status init(bool high_priority, SmFence* fence, void* workspace, int64_t update_k) {
    RETURN_CUDA(cudaSetDevice(device_), "cudaSetDevice");
    update_k_ = update_k;
    int least = 0, greatest = 0;
    RETURN_CUDA(cudaDeviceGetStreamPriorityRange(&least, &greatest), "stream priority range");
    const int prio = high_priority ? greatest : least;
    if (fence != nullptr && !high_priority) {
      STRIPESOLVE_ASSIGN_OR_RETURN(compute_, fence->stream(prio));
    } else {
      RETURN_CUDA(cudaStreamCreateWithPriority(&compute_, cudaStreamNonBlocking, prio), "stream");
    }
    RETURN_CUDA(cudaStreamCreateWithPriority(&in_, cudaStreamNonBlocking, prio), "stream");
    RETURN_CUDA(cudaStreamCreateWithPriority(&out_, cudaStreamNonBlocking, prio), "stream");
    RETURN_CUBLAS(cublasCreate(&blas_), "cublasCreate");
    RETURN_CUBLAS(cublasSetStream(blas_, compute_), "cublasSetStream");
    RETURN_CUSOLVER(cusolverDnCreate(&solver_), "cusolverDnCreate");
    RETURN_CUSOLVER(cusolverDnSetStream(solver_, compute_), "cusolverDnSetStream");
    auto* p = static_cast<char*>(workspace);
    Layout l = layout();
    transposed_ = reinterpret_cast<double*>(p + l.transposed);
    solver_work_ = reinterpret_cast<double*>(p + l.solver);
    ipiv_ = reinterpret_cast<int32_t*>(p + l.ipiv);
    info_ = reinterpret_cast<int32_t*>(p + l.info);
    max_bits_ = reinterpret_cast<unsigned long long*>(p + l.max_bits);
    gather_ = reinterpret_cast<double*>(p + l.gather);
    gather_bytes_ = l.total - l.gather;
    solver_lwork_ = l.lwork;
    return Status::ok();
  }

  struct Layout {
    uint64_t transposed = 0, solver = 0, ipiv = 0, info = 0, max_bits = 0, gather = 0, total = 0;
    int lwork = 0;
  };

  // The workspace's parts; queries cuSOLVER for its buffer (needs a current device).
  Layout layout() const {
    Layout l;
    uint64_t at = 0;
    auto take = [&at](uint64_t bytes) {
      const uint64_t here = at;
      at += align_up(bytes);
      return here;
    };
    if (rows_ > 0) {
      cusolverDnHandle_t h = solver_;
      bool own = false;
      if (h == nullptr && cusolverDnCreate(&h) == CUSOLVER_STATUS_SUCCESS) own = true;
      int lwork = 0;
      const int64_t m = cols_;
      if (mode_ == PivotMode::kRow) {
        (void)cusolverDnDgetrf_bufferSize(h, static_cast<int>(m), static_cast<int>(rows_), nullptr,
                                          static_cast<int>(m), &lwork);
      } else {
        (void)cusolverDnDgetrf_bufferSize(h, static_cast<int>(rows_), static_cast<int>(m), nullptr,
                                          static_cast<int>(rows_), &lwork);
      }
      if (own) (void)cusolverDnDestroy(h);
      l.lwork = lwork;
      l.transposed = take(mode_ == PivotMode::kRow ? column_bytes(rows_, 0, cols_) : 0);
      l.solver = take(sizeof(double) * static_cast<uint64_t>(std::max(lwork, 1)));
    }
    l.ipiv = take(sizeof(int32_t) * static_cast<uint64_t>(std::max<int64_t>(rows_, 1)));
    l.info = take(sizeof(int32_t) * 2);
    l.max_bits = take(sizeof(unsigned long long));
    // Permutations of one stripe's swaps touch at most 2 S columns.
    l.gather = take(column_bytes(std::max(j_rows_, rows_), 0, 2 * std::max(k_rows_, rows_)));
    l.total = at;
    return l;
  }

  Status upload(const double* host, const DeviceBlock& dst, int64_t c0, int64_t c1) override {
    RETURN_CUDA(cudaSetDevice(device_), "cudaSetDevice");
    RETURN_CUDA(cudaMemcpyAsync(dst.data + c0 * dst.ld, host + c0 * dst.ld,
                                column_bytes(dst.ld, c0, c1), cudaMemcpyHostToDevice, in_),
                "copy of a stripe part to the device");
    RETURN_CUDA(cudaStreamSynchronize(in_), "copy of a stripe part to the device");
    return Status::ok();
  }

  Status copy_from_peer(double* dst, const double* src, int src_device, uint64_t bytes) override {
    RETURN_CUDA(cudaSetDevice(device_), "cudaSetDevice");
    RETURN_CUDA(cudaMemcpyPeerAsync(dst, device_, src, src_device, bytes, in_),
                "copy of a stripe part from device " + std::to_string(src_device));
    RETURN_CUDA(cudaStreamSynchronize(in_), "copy of a stripe part from another device");
    return Status::ok();
  }

  Status upload_ints(const std::vector<int32_t>& values, int32_t* device) override {
    if (values.empty()) return Status::ok();
    RETURN_CUDA(cudaSetDevice(device_), "cudaSetDevice");
    RETURN_CUDA(cudaMemcpyAsync(device, values.data(), sizeof(int32_t) * values.size(),
                                cudaMemcpyHostToDevice, in_),
                "copy of a permutation to the device");
    RETURN_CUDA(cudaStreamSynchronize(in_), "copy of a permutation to the device");
    return Status::ok();
  }

  Status download(const DeviceBlock& src, double* host, int64_t c0, int64_t c1) override {
    RETURN_CUDA(cudaSetDevice(device_), "cudaSetDevice");
    RETURN_CUDA(cudaMemcpyAsync(host + c0 * src.ld, src.data + c0 * src.ld,
                                column_bytes(src.ld, c0, c1), cudaMemcpyDeviceToHost, out_),
                "copy of a stripe part from the device");
    RETURN_CUDA(cudaStreamSynchronize(out_), "copy of a stripe part from the device");
    return Status::ok();
  }

  Result<uint64_t> download_later(const DeviceBlock& src, double* host, int64_t c0,
                                  int64_t c1) override {
    RETURN_CUDA(cudaSetDevice(device_), "cudaSetDevice");
    cudaEvent_t done = nullptr;
    RETURN_CUDA(cudaEventCreateWithFlags(&done, cudaEventDisableTiming), "event");
    // Behind the lane's compute (the elimination that produced the block), on the copy-out stream.
    cudaEvent_t computed = nullptr;
    Status st = cuda_check(cudaEventCreateWithFlags(&computed, cudaEventDisableTiming), "event");
    if (st.is_ok()) st = cuda_check(cudaEventRecord(computed, compute_), "event");
    if (st.is_ok()) st = cuda_check(cudaStreamWaitEvent(out_, computed), "event wait");
    if (st.is_ok()) {
      st = cuda_check(cudaMemcpyAsync(host + c0 * src.ld, src.data + c0 * src.ld,
                                      column_bytes(src.ld, c0, c1), cudaMemcpyDeviceToHost, out_),
                      "copy of a stripe part from the device");
    }
    if (st.is_ok()) st = cuda_check(cudaEventRecord(done, out_), "event");
    if (computed != nullptr) (void)cudaEventDestroy(computed);
    if (!st.is_ok()) {
      (void)cudaEventDestroy(done);
      return st;
    }
    std::lock_guard<std::mutex> lock(tickets_mu_);
    const uint64_t ticket = ++last_ticket_;
    tickets_.emplace(ticket, done);
    return ticket;
  }

  Status wait(uint64_t ticket) override {
    if (ticket == 0) return Status::ok();
    cudaEvent_t done = nullptr;
    {
      std::lock_guard<std::mutex> lock(tickets_mu_);
      auto it = tickets_.find(ticket);
      if (it == tickets_.end()) return Status::ok();  // waited for already
      done = it->second;
      tickets_.erase(it);
    }
    RETURN_CUDA(cudaSetDevice(device_), "cudaSetDevice");
    Status st = cuda_check(cudaEventSynchronize(done), "copy of a stripe part from the device");
    (void)cudaEventDestroy(done);
    return st;
  }

  Status synchronize() override {
    RETURN_CUDA(cudaSetDevice(device_), "cudaSetDevice");
    Status st = Status::ok();
    for (cudaStream_t s : {compute_, in_, out_}) {
      const Status one = cuda_check(cudaStreamSynchronize(s), "lane synchronize");
      if (st.is_ok()) st = one;
    }
    std::lock_guard<std::mutex> lock(tickets_mu_);
    for (auto& [t, e] : tickets_) (void)cudaEventDestroy(e);
    tickets_.clear();
    return st;
  }

  Status eliminate(const DeviceBlock& part, int64_t block_col, PivotMode mode,
                   int64_t substripe_rows, int64_t global_row, int64_t* host_swaps,
                   int32_t* device_raw, int32_t* device_perm, int64_t* perm_count) override {
    RETURN_CUDA(cudaSetDevice(device_), "cudaSetDevice");
    const int64_t h = part.rows;
    const int64_t m = part.cols - block_col;
    if (h > rows_ || m > cols_ || mode != mode_ || h > m) {
      return Status::invalid_argument(
          fmt::format("device elimination of a {} x {} stripe: the lane was made for {} x {} ({})",
                      h, m, rows_, cols_, pivot_mode_name(mode_)));
    }
    double* region = part.data + block_col * part.ld;
    std::vector<int32_t> ipiv(static_cast<size_t>(h));
    int32_t first_zero = 0;
    if (mode == PivotMode::kRow) {
      // GEPP on the transposed stripe = column interchanges (backend.h kRow).
      const double one = 1.0, zero = 0.0;
      RETURN_CUBLAS(cublasDgeam(blas_, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(m),
                                static_cast<int>(h), &one, region, static_cast<int>(part.ld), &zero,
                                transposed_, static_cast<int>(m), transposed_, static_cast<int>(m)),
                    "transpose of the stripe");
      RETURN_CUSOLVER(
          cusolverDnDgetrf(solver_, static_cast<int>(m), static_cast<int>(h), transposed_,
                           static_cast<int>(m), solver_work_, ipiv_, info_),
          "cusolverDnDgetrf of the transposed stripe");
      RETURN_CUBLAS(
          cublasDgeam(blas_, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(h), static_cast<int>(m),
                      &one, transposed_, static_cast<int>(m), &zero, region,
                      static_cast<int>(part.ld), region, static_cast<int>(part.ld)),
          "transpose back of the stripe");
      cuda::launch_doolittle(region, part.ld, h, m, compute_);
      STRIPESOLVE_RETURN_IF_ERROR(gpu::launch_check("doolittle kernel"));
      cuda::launch_pivots_from_ipiv(ipiv_, h, 0, device_raw, compute_);
      RETURN_CUDA(cudaMemcpyAsync(ipiv.data(), ipiv_, sizeof(int32_t) * h, cudaMemcpyDeviceToHost,
                                  compute_),
                  "pivots to the host");
      RETURN_CUDA(
          cudaMemcpyAsync(&first_zero, info_, sizeof(int32_t), cudaMemcpyDeviceToHost, compute_),
          "info to the host");
    } else if (mode == PivotMode::kNone) {
      RETURN_CUSOLVER(cusolverDnDgetrf(solver_, static_cast<int>(h), static_cast<int>(m), region,
                                       static_cast<int>(part.ld), solver_work_, nullptr, info_),
                      "cusolverDnDgetrf of the stripe (no pivoting)");
      RETURN_CUDA(
          cudaMemcpyAsync(&first_zero, info_, sizeof(int32_t), cudaMemcpyDeviceToHost, compute_),
          "info to the host");
    } else {
      STRIPESOLVE_RETURN_IF_ERROR(
          eliminate_local(part, block_col, substripe_rows, ipiv.data(), device_raw, &first_zero));
    }
    int32_t bad_row = INT32_MAX;
    RETURN_CUDA(
        cudaMemcpyAsync(info_ + 1, &bad_row, sizeof(int32_t), cudaMemcpyHostToDevice, compute_),
        "flag to the device");
    cuda::launch_first_non_finite(region, part.ld, h, m, info_ + 1, compute_);
    STRIPESOLVE_RETURN_IF_ERROR(gpu::launch_check("non-finite scan"));
    RETURN_CUDA(
        cudaMemcpyAsync(&bad_row, info_ + 1, sizeof(int32_t), cudaMemcpyDeviceToHost, compute_),
        "flag to the host");
    RETURN_CUDA(cudaStreamSynchronize(compute_), "device elimination");
    if (first_zero > 0) {
      return Status::numerical(fmt::format("zero pivot at row {}", global_row + first_zero - 1));
    }
    if (bad_row != INT32_MAX) {
      return Status::numerical(
          fmt::format("non-finite value in row {} after elimination", global_row + bad_row));
    }
    if (mode == PivotMode::kRow) {
      std::vector<int32_t> raw(static_cast<size_t>(h));
      for (int64_t k = 0; k < h; ++k) {
        raw[k] = ipiv[k] - 1;
        host_swaps[k] = block_col + raw[k];
      }
      const std::vector<int32_t> pairs = permutation_pairs(raw);
      *perm_count = static_cast<int64_t>(pairs.size() / 2);
      if (!pairs.empty()) {
        RETURN_CUDA(cudaMemcpyAsync(device_perm, pairs.data(), sizeof(int32_t) * pairs.size(),
                                    cudaMemcpyHostToDevice, compute_),
                    "permutation to the device");
        RETURN_CUDA(cudaStreamSynchronize(compute_), "permutation to the device");
      }
    } else if (mode == PivotMode::kLocal) {
      for (int64_t k = 0; k < h; ++k) host_swaps[k] = ipiv[k];
    }
    return Status::ok();
  }

  Result<double> max_abs_upper(const DeviceBlock& part, int64_t block_col) override {
    RETURN_CUDA(cudaSetDevice(device_), "cudaSetDevice");
    RETURN_CUDA(cudaMemsetAsync(max_bits_, 0, sizeof(unsigned long long), compute_),
                "clearing the growth's maximum");
    cuda::launch_max_abs_upper(part.data, part.ld, part.rows, part.cols, block_col, max_bits_,
                               compute_);
    STRIPESOLVE_RETURN_IF_ERROR(gpu::launch_check("max_abs_upper kernel"));
    unsigned long long bits = 0;
    RETURN_CUDA(cudaMemcpyAsync(&bits, max_bits_, sizeof bits, cudaMemcpyDeviceToHost, compute_),
                "copying the growth's maximum");
    RETURN_CUDA(cudaStreamSynchronize(compute_), "synchronizing the growth's maximum");
    double most = 0;
    std::memcpy(&most, &bits, sizeof most);
    return most;
  }

  Status update(const DeviceUpdate& op) override {
    RETURN_CUDA(cudaSetDevice(device_), "cudaSetDevice");
    const DeviceBlock& j = op.j;
    const int64_t k = op.u.rows;
    const int64_t c0 = op.j_col;
    const int64_t c_end = j.cols;
    if (op.u.cols != c_end - c0 || k > c_end - c0 || j.rows > j_rows_) {
      return Status::invalid_argument(fmt::format(
          "device update: J of {} x {} from column {} by U of {} x {} (lane for J of {} rows)",
          j.rows, j.cols, c0, op.u.rows, op.u.cols, j_rows_));
    }
    // Segments: [c0, c0 + k) for the multipliers, then GEMM segments of `seg` columns, which
    // let the copies of a streamed J overlap its arithmetic. A J that stays on the device has
    // nothing to overlap: one GEMM, so that a critical update beside the sweeps waits for SMs
    // once instead of once a segment.
    const bool copies = op.host_in != nullptr || op.host_out != nullptr;
    const int64_t seg = copies ? std::max<int64_t>(op.segment_columns, 256) : c_end;
    struct Segment {
      int64_t a, b;
    };
    std::vector<Segment> segs;
    segs.push_back(Segment{c0, c0 + k});
    for (int64_t c = c0 + k; c < c_end; c += seg)
      segs.push_back(Segment{c, std::min(c_end, c + seg)});
    STRIPESOLVE_RETURN_IF_ERROR(ensure_events(2 * segs.size() + 1));
    const bool whole_first = op.host_in != nullptr && !op.permutations.empty();
    if (op.host_in != nullptr) {
      if (whole_first) {
        RETURN_CUDA(cudaMemcpyAsync(j.data + c0 * j.ld, op.host_in + c0 * j.ld,
                                    column_bytes(j.ld, c0, c_end), cudaMemcpyHostToDevice, in_),
                    "copy of J to the device");
        RETURN_CUDA(cudaEventRecord(events_[0], in_), "event");
        RETURN_CUDA(cudaStreamWaitEvent(compute_, events_[0]), "event wait");
      }
    }
    for (const ColumnPermutation& p : op.permutations) {
      if (p.count == 0) continue;
      cuda::launch_permute_columns(j.data, j.ld, j.rows, c0 + p.first, p.pairs, p.count, gather_,
                                   compute_);
      STRIPESOLVE_RETURN_IF_ERROR(gpu::launch_check("column permutation"));
    }
    const double one = 1.0, minus_one = -1.0;
    double* multipliers = j.data + c0 * j.ld;
    for (size_t s = 0; s < segs.size(); ++s) {
      const int64_t a = segs[s].a;
      const int64_t b = segs[s].b;
      if (op.host_in != nullptr && !whole_first) {
        RETURN_CUDA(cudaMemcpyAsync(j.data + a * j.ld, op.host_in + a * j.ld,
                                    column_bytes(j.ld, a, b), cudaMemcpyHostToDevice, in_),
                    "copy of a J segment to the device");
        RETURN_CUDA(cudaEventRecord(events_[1 + 2 * s], in_), "event");
        RETURN_CUDA(cudaStreamWaitEvent(compute_, events_[1 + 2 * s]), "event wait");
      }
      if (s == 0 && op.u_inverse.data != nullptr) {
        STRIPESOLVE_RETURN_IF_ERROR(multipliers_by_inverses(op, multipliers));
      } else if (s == 0) {
        RETURN_CUBLAS(
            cublasDtrsm(blas_, CUBLAS_SIDE_RIGHT, CUBLAS_FILL_MODE_UPPER, CUBLAS_OP_N,
                        CUBLAS_DIAG_NON_UNIT, static_cast<int>(j.rows), static_cast<int>(k), &one,
                        op.u.data, static_cast<int>(op.u.ld), multipliers, static_cast<int>(j.ld)),
            "dtrsm of the J multipliers");
      } else {
        // In pieces of update_k_ along k (DeviceEngineOptions::update_k).
        const int64_t piece = update_k_ > 0 ? update_k_ : k;
        for (int64_t k0 = 0; k0 < k; k0 += piece) {
          const int64_t depth = std::min(piece, k - k0);
          RETURN_CUBLAS(cublasDgemm(blas_, CUBLAS_OP_N, CUBLAS_OP_N, static_cast<int>(j.rows),
                                    static_cast<int>(b - a), static_cast<int>(depth), &minus_one,
                                    multipliers + k0 * j.ld, static_cast<int>(j.ld),
                                    op.u.data + (a - c0) * op.u.ld + k0, static_cast<int>(op.u.ld),
                                    &one, j.data + a * j.ld, static_cast<int>(j.ld)),
                        "dgemm of the J update");
        }
      }
      if (op.host_out != nullptr) {
        RETURN_CUDA(cudaEventRecord(events_[2 + 2 * s], compute_), "event");
        RETURN_CUDA(cudaStreamWaitEvent(out_, events_[2 + 2 * s]), "event wait");
        RETURN_CUDA(cudaMemcpyAsync(op.host_out + a * j.ld, j.data + a * j.ld,
                                    column_bytes(j.ld, a, b), cudaMemcpyDeviceToHost, out_),
                    "copy of a J segment from the device");
      }
    }
    RETURN_CUDA(cudaStreamSynchronize(compute_), "device update");
    RETURN_CUDA(cudaStreamSynchronize(in_), "device update");
    RETURN_CUDA(cudaStreamSynchronize(out_), "device update");
    return Status::ok();
  }

  Status invert_diagonal_blocks(const DeviceBlock& u, const DeviceBlock& inverse) override {
    RETURN_CUDA(cudaSetDevice(device_), "cudaSetDevice");
    const int64_t k = u.rows;
    const int64_t nb = inverse.cols;
    if (inverse.rows != k || inverse.ld < k || nb < 1 || u.cols < k) {
      return Status::invalid_argument(
          fmt::format("inverses of the diagonal blocks of a {} x {} U into a {} x {} block", u.rows,
                      u.cols, inverse.rows, inverse.cols));
    }
    cuda::launch_identity_blocks(inverse.data, inverse.ld, k, nb, compute_);
    STRIPESOLVE_RETURN_IF_ERROR(gpu::launch_check("identity blocks"));
    const double one = 1.0;
    for (int64_t c = 0; c < k; c += nb) {
      const int64_t b = std::min(nb, k - c);
      RETURN_CUBLAS(cublasDtrsm(blas_, CUBLAS_SIDE_LEFT, CUBLAS_FILL_MODE_UPPER, CUBLAS_OP_N,
                                CUBLAS_DIAG_NON_UNIT, static_cast<int>(b), static_cast<int>(b),
                                &one, u.data + c + c * u.ld, static_cast<int>(u.ld),
                                inverse.data + c, static_cast<int>(inverse.ld)),
                    "dtrsm inverting a diagonal block of U");
    }
    RETURN_CUDA(cudaStreamSynchronize(compute_), "inverses of U's diagonal blocks");
    return Status::ok();
  }

  Status copy_rows(const DeviceBlock& dst, int64_t dst_row, const DeviceBlock& src) override {
    RETURN_CUDA(cudaSetDevice(device_), "cudaSetDevice");
    RETURN_CUDA(cudaMemcpy2DAsync(dst.data + dst_row, sizeof(double) * dst.ld, src.data,
                                  sizeof(double) * src.ld, sizeof(double) * src.rows, src.cols,
                                  cudaMemcpyDeviceToDevice, compute_),
                "copy of stripe rows into a meta-stripe block");
    RETURN_CUDA(cudaStreamSynchronize(compute_), "copy of stripe rows");
    return Status::ok();
  }

  // x (J's K multiplier columns) <- x triu(U)^-1 by block columns of nb: x_p -= x_<p U_<p,p,
  // then x_p <- x_p inv(U_pp) through the gather buffer (queued on the compute stream).
  Status multipliers_by_inverses(const DeviceUpdate& op, double* x) {
    const int64_t m = op.j.rows;
    const int64_t k = op.u.rows;
    const int64_t nb = op.u_inverse.cols;
    if (column_bytes(m, 0, nb) > gather_bytes_ || op.u_inverse.rows != k) {
      return Status::invalid_argument(fmt::format(
          "device update: inverses of {} x {} blocks for J of {} rows and U of {} rows (the "
          "lane's buffer holds {} bytes)",
          nb, nb, m, k, gather_bytes_));
    }
    const double one = 1.0, zero = 0.0, minus_one = -1.0;
    const int ldj = static_cast<int>(op.j.ld);
    for (int64_t c = 0; c < k; c += nb) {
      const int64_t b = std::min(nb, k - c);
      double* xp = x + c * op.j.ld;
      if (c > 0) {
        RETURN_CUBLAS(
            cublasDgemm(blas_, CUBLAS_OP_N, CUBLAS_OP_N, static_cast<int>(m), static_cast<int>(b),
                        static_cast<int>(c), &minus_one, x, ldj, op.u.data + c * op.u.ld,
                        static_cast<int>(op.u.ld), &one, xp, ldj),
            "dgemm of the J multipliers");
      }
      RETURN_CUBLAS(
          cublasDgemm(blas_, CUBLAS_OP_N, CUBLAS_OP_N, static_cast<int>(m), static_cast<int>(b),
                      static_cast<int>(b), &one, xp, ldj, op.u_inverse.data + c,
                      static_cast<int>(op.u_inverse.ld), &zero, gather_, static_cast<int>(m)),
          "dgemm by an inverted diagonal block");
      RETURN_CUDA(cudaMemcpy2DAsync(xp, sizeof(double) * op.j.ld, gather_, sizeof(double) * m,
                                    sizeof(double) * m, b, cudaMemcpyDeviceToDevice, compute_),
                  "copy of J multipliers");
    }
    return Status::ok();
  }

  Status permute_columns(const DeviceBlock& target, const ColumnPermutation& perm) override {
    RETURN_CUDA(cudaSetDevice(device_), "cudaSetDevice");
    if (perm.count == 0 || target.rows == 0) return Status::ok();
    const int64_t chunk = std::max(j_rows_, rows_);
    if (perm.count > 2 * std::max(k_rows_, rows_)) {
      return Status::invalid_argument("column permutation larger than the lane's gather buffer");
    }
    // The gather buffer holds `chunk` rows of every moved column: taller blocks (a meta-stripe's
    // earlier stripes) go through in slices of rows.
    for (int64_t r = 0; r < target.rows; r += chunk) {
      cuda::launch_permute_columns(target.data + r, target.ld, std::min(chunk, target.rows - r),
                                   perm.first, perm.pairs, perm.count, gather_, compute_);
      STRIPESOLVE_RETURN_IF_ERROR(gpu::launch_check("column permutation"));
    }
    RETURN_CUDA(cudaStreamSynchronize(compute_), "column permutation");
    return Status::ok();
  }

  Status forward(const std::vector<FactorStripe>& stripes, const DeviceBlock& rhs) override {
    RETURN_CUDA(cudaSetDevice(device_), "cudaSetDevice");
    for (const FactorStripe& s : stripes) {
      STRIPESOLVE_RETURN_IF_ERROR(queue_forward(s.part, s.row_begin, s.raw, rhs));
    }
    RETURN_CUDA(cudaStreamSynchronize(compute_), "forward substitution");
    return Status::ok();
  }

  Status backward(const std::vector<FactorStripe>& stripes, const DeviceBlock& rhs) override {
    RETURN_CUDA(cudaSetDevice(device_), "cudaSetDevice");
    for (const FactorStripe& s : stripes) {
      STRIPESOLVE_RETURN_IF_ERROR(queue_backward(s.part, s.row_begin, s.raw, rhs));
    }
    RETURN_CUDA(cudaStreamSynchronize(compute_), "backward substitution");
    return Status::ok();
  }

 private:
  // rhs[rows, rows + h) -= a (h x k) * rhs[from, from + k). With one right-hand side, dgemv and
  // dtrsv below run as fast as dgemm and dtrsm (bench_substitution_ops on the H200).
  Status subtract_product(const double* a, int64_t lda, int64_t h, int64_t k,
                          const DeviceBlock& rhs, int64_t from, int64_t rows, const char* what) {
    const double one = 1.0, minus_one = -1.0;
    RETURN_CUBLAS(cublasDgemm(blas_, CUBLAS_OP_N, CUBLAS_OP_N, static_cast<int>(h),
                              static_cast<int>(rhs.cols), static_cast<int>(k), &minus_one, a,
                              static_cast<int>(lda), rhs.data + from, static_cast<int>(rhs.ld),
                              &one, rhs.data + rows, static_cast<int>(rhs.ld)),
                  what);
    return Status::ok();
  }

  // rhs[rows, rows + h) <- triangle^-1 * itself.
  Status solve_triangle(cublasFillMode_t fill, cublasDiagType_t diag, const double* t, int64_t ldt,
                        int64_t h, const DeviceBlock& rhs, int64_t rows, const char* what) {
    const double one = 1.0;
    RETURN_CUBLAS(cublasDtrsm(blas_, CUBLAS_SIDE_LEFT, fill, CUBLAS_OP_N, diag, static_cast<int>(h),
                              static_cast<int>(rhs.cols), &one, t, static_cast<int>(ldt),
                              rhs.data + rows, static_cast<int>(rhs.ld)),
                  what);
    return Status::ok();
  }

  Status queue_forward(const DeviceBlock& part, int64_t row_begin, const int32_t* device_raw,
                       const DeviceBlock& rhs) {
    if (row_begin > 0) {
      STRIPESOLVE_RETURN_IF_ERROR(subtract_product(part.data, part.ld, part.rows, row_begin, rhs, 0,
                                                   row_begin,
                                                   "product of the forward substitution"));
    }
    if (device_raw != nullptr) {
      cuda::launch_rhs_row_swaps(rhs.data, rhs.ld, rhs.cols, row_begin, device_raw, part.rows,
                                 compute_);
      STRIPESOLVE_RETURN_IF_ERROR(gpu::launch_check("row swaps of the right-hand side"));
    }
    return solve_triangle(CUBLAS_FILL_MODE_LOWER, CUBLAS_DIAG_UNIT, part.data + row_begin * part.ld,
                          part.ld, part.rows, rhs, row_begin,
                          "triangle of the forward substitution");
  }

  Status queue_backward(const DeviceBlock& part, int64_t row_begin, const int32_t* device_raw,
                        const DeviceBlock& rhs) {
    const int64_t right = rhs.rows - row_begin - part.rows;
    const double* diag = part.data + row_begin * part.ld;
    if (right > 0) {
      STRIPESOLVE_RETURN_IF_ERROR(subtract_product(diag + part.rows * part.ld, part.ld, part.rows,
                                                   right, rhs, row_begin + part.rows, row_begin,
                                                   "product of the backward substitution"));
    }
    STRIPESOLVE_RETURN_IF_ERROR(solve_triangle(CUBLAS_FILL_MODE_UPPER, CUBLAS_DIAG_NON_UNIT, diag,
                                               part.ld, part.rows, rhs, row_begin,
                                               "triangle of the backward substitution"));
    if (device_raw != nullptr) {
      cuda::launch_solution_swaps(rhs.data, rhs.ld, rhs.cols, row_begin, device_raw, part.rows,
                                  compute_);
      STRIPESOLVE_RETURN_IF_ERROR(gpu::launch_check("solution swaps"));
    }
    return Status::ok();
  }

  // kLocal (002 §5, Fig 11): per substripe, dgetrf of its rows from its diagonal column (row
  // search inside the substripe), its swaps carried over the substripe's earlier multipliers,
  // then dtrsm + dgemm for the stripe's rows below it.
  Status eliminate_local(const DeviceBlock& part, int64_t block_col, int64_t substripe_rows,
                         int32_t* host_ipiv, int32_t* device_raw, int32_t* first_zero) {
    const int64_t h = part.rows;
    const int64_t cols = part.cols;
    const int64_t count = (h + substripe_rows - 1) / substripe_rows;
    const double one = 1.0, minus_one = -1.0;
    std::vector<int32_t> infos(static_cast<size_t>(count), 0);
    for (int64_t q = 0; q < count; ++q) {
      const int64_t pr = q * h / count;
      const int64_t ps = (q + 1) * h / count - pr;
      const int64_t dc = block_col + pr;
      double* panel = part.data + pr + dc * part.ld;
      RETURN_CUSOLVER(
          cusolverDnDgetrf(solver_, static_cast<int>(ps), static_cast<int>(cols - dc), panel,
                           static_cast<int>(part.ld), solver_work_, ipiv_ + pr, info_),
          "cusolverDnDgetrf of a substripe");
      RETURN_CUDA(
          cudaMemcpyAsync(&infos[q], info_, sizeof(int32_t), cudaMemcpyDeviceToHost, compute_),
          "info to the host");
      if (pr > 0) {
        cuda::launch_row_swaps(part.data + pr + block_col * part.ld, part.ld, pr, ipiv_ + pr, ps,
                               compute_);
        STRIPESOLVE_RETURN_IF_ERROR(gpu::launch_check("row swaps of earlier multipliers"));
      }
      cuda::launch_pivots_from_ipiv(ipiv_ + pr, ps, static_cast<int32_t>(pr), device_raw + pr,
                                    compute_);
      if (pr + ps < h) {
        double* t = part.data + (pr + ps) + dc * part.ld;
        RETURN_CUBLAS(
            cublasDtrsm(blas_, CUBLAS_SIDE_RIGHT, CUBLAS_FILL_MODE_UPPER, CUBLAS_OP_N,
                        CUBLAS_DIAG_NON_UNIT, static_cast<int>(h - pr - ps), static_cast<int>(ps),
                        &one, panel, static_cast<int>(part.ld), t, static_cast<int>(part.ld)),
            "dtrsm of a substripe's multipliers");
        if (cols - dc - ps > 0) {
          RETURN_CUBLAS(cublasDgemm(blas_, CUBLAS_OP_N, CUBLAS_OP_N, static_cast<int>(h - pr - ps),
                                    static_cast<int>(cols - dc - ps), static_cast<int>(ps),
                                    &minus_one, t, static_cast<int>(part.ld), panel + ps * part.ld,
                                    static_cast<int>(part.ld), &one, t + ps * part.ld,
                                    static_cast<int>(part.ld)),
                        "dgemm of a substripe's trailing update");
        }
      }
    }
    std::vector<int32_t> raw(static_cast<size_t>(h));
    RETURN_CUDA(cudaMemcpyAsync(raw.data(), device_raw, sizeof(int32_t) * h, cudaMemcpyDeviceToHost,
                                compute_),
                "pivots to the host");
    RETURN_CUDA(cudaStreamSynchronize(compute_), "device elimination");
    for (int64_t q = 0; q < count; ++q) {
      if (infos[q] > 0 && *first_zero == 0)
        *first_zero = static_cast<int32_t>(q * h / count) + infos[q];
    }
    std::copy(raw.begin(), raw.end(), host_ipiv);
    return Status::ok();
  }

  Status ensure_events(size_t count) {
    while (events_.size() < count) {
      cudaEvent_t e = nullptr;
      RETURN_CUDA(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreate");
      events_.push_back(e);
    }
    return Status::ok();
  }

  const int device_;
  const int64_t rows_, cols_;
  const PivotMode mode_;
  const int64_t j_rows_, k_rows_;
  cudaStream_t compute_ = nullptr, in_ = nullptr, out_ = nullptr;
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
  int64_t update_k_ = 0;  // DeviceEngineOptions::update_k
};

class CudaEngine final : public DeviceEngine {
 public:
  CudaEngine(int device, int64_t update_k) : device_(device), update_k_(update_k) {}
  // The sweep lanes' SMs: all but `panel_sms` (see DeviceEngineOptions).
  Status fence_sms(int panel_sms) {
    STRIPESOLVE_ASSIGN_OR_RETURN(fence_, SmFence::create(device_, panel_sms));
    return Status::ok();
  }

  std::string description() const override {
    std::string d = "device " + std::to_string(device_);
    for (const auto& dev : gpu::list_devices()) {
      if (dev.index == device_) d = gpu::describe(dev);
    }
    if (fence_ != nullptr) {
      d += fmt::format(", J updates on {} of {} SMs", fence_->sms(), fence_->total_sms());
    }
    return d;
  }
  int device() const override { return device_; }
  uint64_t free_memory() const override {
    size_t free_bytes = 0, total = 0;
    if (cudaSetDevice(device_) != cudaSuccess ||
        cudaMemGetInfo(&free_bytes, &total) != cudaSuccess) {
      return 0;
    }
    return free_bytes;
  }

  Result<void*> allocate(uint64_t bytes, const std::string& what) override {
    RETURN_CUDA(cudaSetDevice(device_), "cudaSetDevice");
    void* p = nullptr;
    RETURN_CUDA(cudaMalloc(&p, std::max<uint64_t>(bytes, 1)),
                "cudaMalloc of " + std::to_string(bytes) + " bytes for " + what);
    return p;
  }
  void release(void* data) override {
    if (data == nullptr) return;
    (void)cudaSetDevice(device_);
    (void)cudaFree(data);
  }
  Status enable_peer_access(int peer) override {
    int can = 0;
    RETURN_CUDA(cudaDeviceCanAccessPeer(&can, device_, peer), "cudaDeviceCanAccessPeer");
    if (!can) return Status::ok();  // copies between the two are staged by the driver
    RETURN_CUDA(cudaSetDevice(device_), "cudaSetDevice");
    const cudaError_t e = cudaDeviceEnablePeerAccess(peer, 0);
    if (e == cudaErrorPeerAccessAlreadyEnabled) {
      (void)cudaGetLastError();
      return Status::ok();
    }
    RETURN_CUDA(e, "cudaDeviceEnablePeerAccess");
    return Status::ok();
  }

  Status register_host(void* data, uint64_t bytes) override {
    if (data == nullptr || bytes == 0) return Status::ok();
    RETURN_CUDA(cudaSetDevice(device_), "cudaSetDevice");
    RETURN_CUDA(cudaHostRegister(data, bytes, cudaHostRegisterPortable),
                "cudaHostRegister of the RAM cache (" + std::to_string(bytes) + " bytes)");
    return Status::ok();
  }
  void unregister_host(void* data) override {
    if (data == nullptr) return;
    (void)cudaSetDevice(device_);
    (void)cudaHostUnregister(data);
  }

  Result<uint64_t> lane_workspace_bytes(int64_t rows, int64_t cols, PivotMode mode, int64_t j_rows,
                                        int64_t k_rows) const override {
    RETURN_CUDA(cudaSetDevice(device_), "cudaSetDevice");
    CudaLane probe(device_, rows, cols, mode, j_rows, k_rows);
    return probe.layout().total;
  }

  Result<std::unique_ptr<DeviceLane>> make_lane(bool high_priority, int64_t rows, int64_t cols,
                                                PivotMode mode, int64_t j_rows, int64_t k_rows,
                                                void* workspace) override {
    auto lane = std::make_unique<CudaLane>(device_, rows, cols, mode, j_rows, k_rows);
    STRIPESOLVE_RETURN_IF_ERROR(lane->init(high_priority, fence_.get(), workspace, update_k_));
    return std::unique_ptr<DeviceLane>(std::move(lane));
  }

 private:
  const int device_;
  const int64_t update_k_;          // DeviceEngineOptions::update_k
  std::unique_ptr<SmFence> fence_;  // null: no SMs set aside; outlives every lane
};

}  // namespace

Result<std::unique_ptr<DeviceEngine>> DeviceEngine::open(int device,
                                                         const DeviceEngineOptions& options) {
  const int count = gpu::device_count();
  if (device < 0 || device >= count) {
    return Status::unavailable(fmt::format("no CUDA device {} ({} visible)", device, count));
  }
  RETURN_CUDA(cudaSetDevice(device), "cudaSetDevice");
  if (options.update_k < 0) {
    return Status::invalid_argument(
        fmt::format("engine.gpu_update_k = {}: must be 0 or more", options.update_k));
  }
  auto engine = std::make_unique<CudaEngine>(device, options.update_k);
  if (options.panel_sms > 0) STRIPESOLVE_RETURN_IF_ERROR(engine->fence_sms(options.panel_sms));
  return std::unique_ptr<DeviceEngine>(std::move(engine));
}

}  // namespace stripesolve::backend
