// Turns CUDA runtime, cuBLAS and cuSOLVER return codes into Status values that name the call
// ("<what>: <error name>: <error string>"). Out-of-memory becomes kResourceExhausted, anything
// else kInternal. Included only by CUDA-enabled sources (gpu/cuda, backend/cuda, tridiag/cuda).
#pragma once

#include <string>

#include <cuda_runtime.h>

#include "base/status.h"
#include "gpu/devices.h"

namespace stripesolve::gpu {

// The errors CUDA documents (driver_types.h) as leaving the process unable to use the device
// until it is restarted: every later call on the device's context returns them again.
inline bool sticky_error(cudaError_t err) {
  switch (err) {
    case cudaErrorIllegalAddress:
    case cudaErrorLaunchTimeout:
    case cudaErrorAssert:
    case cudaErrorHardwareStackError:
    case cudaErrorIllegalInstruction:
    case cudaErrorMisalignedAddress:
    case cudaErrorInvalidAddressSpace:
    case cudaErrorInvalidPc:
    case cudaErrorLaunchFailure:
    case cudaErrorMpsClientTerminated:
    case cudaErrorExternalDevice:
#if CUDART_VERSION >= 13000
    case cudaErrorContained:
    case cudaErrorTensorMemoryLeak:
#endif
      return true;
    default:
      return false;
  }
}

// A sticky error also marks the calling thread's current device failed (gpu/devices.h), so that
// later jobs leave it out. Any other error is taken off the thread's last error once it is a
// Status: CUDA keeps a failed call's error for the thread's next cudaGetLastError, and the next
// launch_check would otherwise blame an unrelated kernel for an error its caller has handled
// (a refused copy that falls back to staging, say).
inline Status cuda_check(cudaError_t err, const std::string& what) {
  if (err == cudaSuccess) return Status::ok();
  std::string msg = what + ": " + cudaGetErrorName(err) + ": " + cudaGetErrorString(err);
  if (!sticky_error(err)) (void)cudaGetLastError();
  if (err == cudaErrorMemoryAllocation) return Status::resource_exhausted(msg);
  if (sticky_error(err)) {
    int device = -1;
    if (cudaGetDevice(&device) == cudaSuccess && device >= 0) {
      note_device_failure(device, msg);
      msg += " (device " + std::to_string(device) + " is unusable until the daemon restarts)";
    }
  }
  return Status::internal(msg);
}

// The last launch's error (kernel launches return nothing).
inline Status launch_check(const std::string& what) {
  return cuda_check(cudaGetLastError(), what + " launch");
}

}  // namespace stripesolve::gpu

#define STRIPESOLVE_CUDA_RETURN(expr, what) \
  STRIPESOLVE_RETURN_IF_ERROR(::stripesolve::gpu::cuda_check((expr), (what)))
