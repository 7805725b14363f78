// CudaLane (lane.h): its workspace, streams and handles, and the copies between the host, other
// devices and its blocks.
#include "backend/cuda/lane.h"

#include <algorithm>

#include "backend/cuda/kernels.cuh"
#include "backend/cuda/persistent_panel.h"
#include "gpu/cuda/check.h"

namespace stripesolve::backend::cuda {

using gpu::cuda_check;

Status cublas_check(cublasStatus_t st, const std::string& what) {
  if (st == CUBLAS_STATUS_SUCCESS) return Status::ok();
  const std::string msg = what + ": " + cuda_libraries().blas_status_name(st) + ": " +
                          cuda_libraries().blas_status_string(st);
  if (st == CUBLAS_STATUS_ALLOC_FAILED) return Status::resource_exhausted(msg);
  return Status::internal(msg);
}

Status cusolver_check(cusolverStatus_t st, const std::string& what) {
  if (st == CUSOLVER_STATUS_SUCCESS) return Status::ok();
  const std::string msg = what + ": cuSOLVER status " + std::to_string(static_cast<int>(st));
  if (st == CUSOLVER_STATUS_ALLOC_FAILED) return Status::resource_exhausted(msg);
  return Status::internal(msg);
}

namespace {

uint64_t align_up(uint64_t bytes) {
  return (bytes + 255) / 256 * 256;
}

}  // namespace

CudaLane::~CudaLane() {
  (void)cudaSetDevice(device_);
  for (cudaStream_t s : {compute_, in_, out_}) {
    if (s != nullptr) (void)cudaStreamSynchronize(s);  // copies into host memory end first
  }
  for (cudaEvent_t e : events_) (void)cudaEventDestroy(e);
  for (auto& [t, e] : tickets_) {
    (void)cudaEventSynchronize(e);
    (void)cudaEventDestroy(e);
  }
  if (solver_ != nullptr) (void)lib_.solver_destroy(solver_);
  if (blas_ != nullptr) (void)lib_.blas_destroy(blas_);
  for (cudaStream_t s : {compute_, in_, out_}) {
    if (s != nullptr) (void)cudaStreamDestroy(s);
  }
}

// fence: the SMs the sweep lanes may use (null: all SMs).
Status CudaLane::init(bool high_priority, SmFence* fence, void* workspace, int64_t update_k,
                      int panel_blocks) {
  RETURN_CUDA(cudaSetDevice(device_), "cudaSetDevice");
  update_k_ = update_k;
  panel_blocks_ = panel_blocks;
  if (panel_blocks_ > 0) panel_resident_blocks_ = PersistentPanel::resident_blocks(device_);
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
  RETURN_CUBLAS(lib_.blas_create(&blas_), "cublasCreate");
  RETURN_CUBLAS(lib_.blas_set_stream(blas_, compute_), "cublasSetStream");
  RETURN_CUSOLVER(lib_.solver_create(&solver_), "cusolverDnCreate");
  RETURN_CUSOLVER(lib_.solver_set_stream(solver_, compute_), "cusolverDnSetStream");
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

// The workspace's parts; queries cuSOLVER for its buffer (needs a current device).
CudaLane::Layout CudaLane::layout() const {
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
    if (h == nullptr && lib_.solver_create(&h) == CUSOLVER_STATUS_SUCCESS) own = true;
    int lwork = 0;
    const int64_t m = cols_;
    if (mode_ == PivotMode::kRow) {
      (void)lib_.dgetrf_buffer_size(h, static_cast<int>(m), static_cast<int>(rows_), nullptr,
                                    static_cast<int>(m), &lwork);
    } else {
      (void)lib_.dgetrf_buffer_size(h, static_cast<int>(rows_), static_cast<int>(m), nullptr,
                                    static_cast<int>(rows_), &lwork);
    }
    if (own) (void)lib_.solver_destroy(h);
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

Status CudaLane::upload(const double* host, const DeviceBlock& dst, int64_t c0, int64_t c1) {
  RETURN_CUDA(cudaSetDevice(device_), "cudaSetDevice");
  RETURN_CUDA(cudaMemcpyAsync(dst.data + c0 * dst.ld, host + c0 * dst.ld,
                              column_bytes(dst.ld, c0, c1), cudaMemcpyHostToDevice, in_),
              "copy of a stripe part to the device");
  RETURN_CUDA(cudaStreamSynchronize(in_), "copy of a stripe part to the device");
  return Status::ok();
}

Status CudaLane::copy_from_peer(double* dst, const double* src, int src_device, uint64_t bytes) {
  RETURN_CUDA(cudaSetDevice(device_), "cudaSetDevice");
  RETURN_CUDA(cudaMemcpyPeerAsync(dst, device_, src, src_device, bytes, in_),
              "copy of a stripe part from device " + std::to_string(src_device));
  RETURN_CUDA(cudaStreamSynchronize(in_), "copy of a stripe part from another device");
  return Status::ok();
}

Status CudaLane::upload_ints(const std::vector<int32_t>& values, int32_t* device) {
  if (values.empty()) return Status::ok();
  RETURN_CUDA(cudaSetDevice(device_), "cudaSetDevice");
  RETURN_CUDA(cudaMemcpyAsync(device, values.data(), sizeof(int32_t) * values.size(),
                              cudaMemcpyHostToDevice, in_),
              "copy of a permutation to the device");
  RETURN_CUDA(cudaStreamSynchronize(in_), "copy of a permutation to the device");
  return Status::ok();
}

Status CudaLane::download(const DeviceBlock& src, double* host, int64_t c0, int64_t c1) {
  RETURN_CUDA(cudaSetDevice(device_), "cudaSetDevice");
  RETURN_CUDA(cudaMemcpyAsync(host + c0 * src.ld, src.data + c0 * src.ld,
                              column_bytes(src.ld, c0, c1), cudaMemcpyDeviceToHost, out_),
              "copy of a stripe part from the device");
  RETURN_CUDA(cudaStreamSynchronize(out_), "copy of a stripe part from the device");
  return Status::ok();
}

Result<uint64_t> CudaLane::download_later(const DeviceBlock& src, double* host, int64_t c0,
                                          int64_t c1) {
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

Status CudaLane::wait(uint64_t ticket) {
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

Status CudaLane::synchronize() {
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

Status CudaLane::copy_rows(const DeviceBlock& dst, int64_t dst_row, const DeviceBlock& src) {
  RETURN_CUDA(cudaSetDevice(device_), "cudaSetDevice");
  RETURN_CUDA(cudaMemcpy2DAsync(dst.data + dst_row, sizeof(double) * dst.ld, src.data,
                                sizeof(double) * src.ld, sizeof(double) * src.rows, src.cols,
                                cudaMemcpyDeviceToDevice, compute_),
              "copy of stripe rows into a meta-stripe block");
  RETURN_CUDA(cudaStreamSynchronize(compute_), "copy of stripe rows");
  return Status::ok();
}

Status CudaLane::permute_columns(const DeviceBlock& target, const ColumnPermutation& perm) {
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

Status CudaLane::ensure_events(size_t count) {
  while (events_.size() < count) {
    cudaEvent_t e = nullptr;
    RETURN_CUDA(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreate");
    events_.push_back(e);
  }
  return Status::ok();
}

}  // namespace stripesolve::backend::cuda
