// backend/device_engine.h in a build without CUDA.
#include "backend/device_engine.h"

namespace stripesolve::backend {

Result<std::unique_ptr<DeviceEngine>> DeviceEngine::open(int, const DeviceEngineOptions&) {
  return Status::unavailable("this build has no CUDA support (STRIPESOLVE_HAVE_CUDA off)");
}

Status DeviceEngine::libraries_ready() {
  return Status::unavailable("this build has no CUDA support (STRIPESOLVE_HAVE_CUDA off)");
}

}  // namespace stripesolve::backend
