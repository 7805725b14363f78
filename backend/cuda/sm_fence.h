// A green context of all of a device's SMs but those set aside (engine.gpu_panel_sms): streams
// made here run their kernels on the fence's SMs only; copies and events work as on any stream
// of the device's primary context. The driver calls are looked up through the runtime
// (cudaGetDriverEntryPointByVersion) instead of linking libcuda, so the binaries still load on
// hosts without a driver (CI), where no fence is ever made.
#pragma once

#include <memory>

#include <cuda_runtime.h>

#include "base/status.h"

namespace stripesolve::backend {

class SmFence {
 public:
  // The fence of device `device` without `set_aside` SMs (kInvalidArgument naming
  // engine.gpu_panel_sms when none would be left; kUnavailable when the driver lacks green
  // contexts).
  static Result<std::unique_ptr<SmFence>> create(int device, int set_aside);
  ~SmFence();  // every stream made here must be gone
  SmFence(const SmFence&) = delete;
  SmFence& operator=(const SmFence&) = delete;

  // A non-blocking stream of the fence with `priority`; the caller destroys it.
  Result<cudaStream_t> stream(int priority);
  int sms() const { return sms_; }
  int total_sms() const { return total_sms_; }

 private:
  SmFence() = default;

  void* context_ = nullptr;  // CUgreenCtx
  int sms_ = 0;
  int total_sms_ = 0;
};

}  // namespace stripesolve::backend
