// backend/device_engine.h on CUDA (host code, built by the C++ compiler): the engine, which owns
// the device's memory, pinned host ranges and the SM fence, and makes lanes (lane.h: cuBLAS
// dtrsm, dgemm, dgeam, cuSOLVER dgetrf and the kernels of kernels.cuh). See the header for the
// contract.
#include "backend/device_engine.h"

#include <algorithm>
#include <memory>

#include <cuda_runtime.h>
#include <fmt/format.h>

#include "backend/cuda/lane.h"
#include "backend/cuda/libraries.h"
#include "backend/cuda/persistent_panel.h"
#include "backend/cuda/sm_fence.h"
#include "gpu/cuda/check.h"
#include "gpu/devices.h"

namespace stripesolve::backend {
namespace {

using cuda::CudaLane;

class CudaEngine final : public DeviceEngine {
 public:
  CudaEngine(int device, int64_t update_k, int panel_blocks)
      : device_(device), update_k_(update_k), panel_blocks_(panel_blocks) {}
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
      (void)cudaGetLastError();  // not left for the next launch check of this thread
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
    STRIPESOLVE_RETURN_IF_ERROR(
        lane->init(high_priority, fence_.get(), workspace, update_k_, panel_blocks_));
    return std::unique_ptr<DeviceLane>(std::move(lane));
  }

 private:
  const int device_;
  const int64_t update_k_;          // DeviceEngineOptions::update_k
  const int panel_blocks_;          // DeviceEngineOptions::panel_blocks
  std::unique_ptr<SmFence> fence_;  // null: no SMs set aside; outlives every lane
};

}  // namespace

Status DeviceEngine::libraries_ready() {
  return cuda::load_cuda_libraries().status();
}

Result<std::unique_ptr<DeviceEngine>> DeviceEngine::open(int device,
                                                         const DeviceEngineOptions& options) {
  const int count = gpu::device_count();
  if (device < 0 || device >= count) {
    return Status::unavailable(fmt::format("no CUDA device {} ({} visible)", device, count));
  }
  RETURN_CUDA(cudaSetDevice(device), "cudaSetDevice");
  STRIPESOLVE_RETURN_IF_ERROR(libraries_ready());
  if (options.update_k < 0) {
    return Status::invalid_argument(
        fmt::format("engine.gpu_update_k = {}: must be 0 or more", options.update_k));
  }
  if (options.panel_blocks < 0 || options.panel_blocks > cuda::PersistentPanel::kMaxBlocks) {
    return Status::invalid_argument(fmt::format("engine.gpu_panel_blocks = {}: must be 0 to {}",
                                                options.panel_blocks,
                                                cuda::PersistentPanel::kMaxBlocks));
  }
  if (options.panel_blocks > 0) {
    const int resident = cuda::PersistentPanel::resident_blocks(device);
    if (options.panel_blocks > resident) {
      return Status::invalid_argument(fmt::format(
          "engine.gpu_panel_blocks = {}: device {} holds {} blocks of the one-launch panel at once",
          options.panel_blocks, device, resident));
    }
  }
  auto engine = std::make_unique<CudaEngine>(device, options.update_k, options.panel_blocks);
  if (options.panel_sms > 0) STRIPESOLVE_RETURN_IF_ERROR(engine->fence_sms(options.panel_sms));
  return std::unique_ptr<DeviceEngine>(std::move(engine));
}

}  // namespace stripesolve::backend
