// The panel gate of one device (DeviceEngineOptions::panel_alone): a 32-bit flag in device
// memory that elim.I's lane sets on its stream before a panel and clears after it, and that a
// sweep lane's stream waits to see clear before each GEMM (cuStreamWriteValue32 /
// cuStreamWaitValue32: stream-ordered, done by the device's front end, so nothing spins on an
// SM). The driver calls are looked up through the runtime (driver_entry.h).
//
// Thread-safety: the flag is the device's; close/open/wait_open only enqueue work on the stream
// they are given, from the thread that owns that stream.
#pragma once

#include <cstdint>
#include <memory>

#include <cuda_runtime.h>

#include "base/status.h"

namespace stripesolve::backend {

class PanelGate {
 public:
  // The gate of the current device, open (kUnavailable when the driver lacks stream memory
  // operations).
  static Result<std::unique_ptr<PanelGate>> create();
  ~PanelGate();  // every stream that used it must be idle
  PanelGate(const PanelGate&) = delete;
  PanelGate& operator=(const PanelGate&) = delete;

  Status close(cudaStream_t stream);      // the panel begins: work after this waits
  Status open(cudaStream_t stream);       // the panel is done
  Status wait_open(cudaStream_t stream);  // work queued after this starts once open

 private:
  PanelGate() = default;

  uint32_t* flag_ = nullptr;  // device memory: 1 while a panel runs
};

}  // namespace stripesolve::backend
