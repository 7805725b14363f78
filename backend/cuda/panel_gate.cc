#include "backend/cuda/panel_gate.h"

#include <string>

#include <cuda.h>

#include "backend/cuda/driver_entry.h"
#include "gpu/cuda/check.h"

namespace stripesolve::backend {
namespace {

struct StreamMemoryOps {
  decltype(&cuGetErrorName) get_error_name = nullptr;
  decltype(&cuStreamWriteValue32) write_value = nullptr;
  decltype(&cuStreamWaitValue32) wait_value = nullptr;
};

Result<const StreamMemoryOps*> stream_memory_ops() {
  static const Result<StreamMemoryOps> loaded = []() -> Result<StreamMemoryOps> {
    constexpr const char* kWhy = "stream memory operations, needed by engine.gpu_panel_alone";
    StreamMemoryOps d;
    STRIPESOLVE_RETURN_IF_ERROR(driver_entry("cuGetErrorName", kWhy, d.get_error_name));
    STRIPESOLVE_RETURN_IF_ERROR(driver_entry("cuStreamWriteValue32", kWhy, d.write_value));
    STRIPESOLVE_RETURN_IF_ERROR(driver_entry("cuStreamWaitValue32", kWhy, d.wait_value));
    return d;
  }();
  if (!loaded.is_ok()) return loaded.status();
  return &*loaded;
}

Status checked(const StreamMemoryOps& d, CUresult r, const char* what) {
  if (r == CUDA_SUCCESS) return Status::ok();
  const char* name = nullptr;
  (void)d.get_error_name(r, &name);
  return Status::internal(std::string("panel gate: ") + what + ": " +
                          (name != nullptr ? name : std::to_string(static_cast<int>(r))));
}

CUdeviceptr address(const uint32_t* flag) {
  return reinterpret_cast<CUdeviceptr>(flag);
}

}  // namespace

Result<std::unique_ptr<PanelGate>> PanelGate::create() {
  STRIPESOLVE_RETURN_IF_ERROR(stream_memory_ops().status());
  std::unique_ptr<PanelGate> gate(new PanelGate());
  void* p = nullptr;
  STRIPESOLVE_RETURN_IF_ERROR(gpu::cuda_check(cudaMalloc(&p, sizeof(uint32_t)), "panel gate"));
  gate->flag_ = static_cast<uint32_t*>(p);
  STRIPESOLVE_RETURN_IF_ERROR(
      gpu::cuda_check(cudaMemset(gate->flag_, 0, sizeof(uint32_t)), "panel gate"));
  return gate;
}

PanelGate::~PanelGate() {
  if (flag_ != nullptr) (void)cudaFree(flag_);
}

Status PanelGate::close(cudaStream_t stream) {
  STRIPESOLVE_ASSIGN_OR_RETURN(const StreamMemoryOps* d, stream_memory_ops());
  return checked(*d, d->write_value(stream, address(flag_), 1, CU_STREAM_WRITE_VALUE_DEFAULT),
                 "close");
}

Status PanelGate::open(cudaStream_t stream) {
  STRIPESOLVE_ASSIGN_OR_RETURN(const StreamMemoryOps* d, stream_memory_ops());
  return checked(*d, d->write_value(stream, address(flag_), 0, CU_STREAM_WRITE_VALUE_DEFAULT),
                 "open");
}

Status PanelGate::wait_open(cudaStream_t stream) {
  STRIPESOLVE_ASSIGN_OR_RETURN(const StreamMemoryOps* d, stream_memory_ops());
  return checked(*d, d->wait_value(stream, address(flag_), 0, CU_STREAM_WAIT_VALUE_EQ), "wait");
}

}  // namespace stripesolve::backend
