// Turns a cudaError_t into a Status naming the call ("<what>: <cuda error string>"). Included
// only by .cu files of tridiag/cuda/.
#pragma once

#include <cuda_runtime.h>

#include <string>

#include "base/status.h"

namespace stripesolve::tridiag::gpu {

inline Status cuda_check(cudaError_t err, const std::string& what) {
  if (err == cudaSuccess) return Status::ok();
  const std::string msg = what + ": " + cudaGetErrorName(err) + ": " + cudaGetErrorString(err);
  if (err == cudaErrorMemoryAllocation) return Status::resource_exhausted(msg);
  return Status::internal(msg);
}

}  // namespace stripesolve::tridiag::gpu
