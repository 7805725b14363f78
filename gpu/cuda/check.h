// Turns CUDA runtime, cuBLAS and cuSOLVER return codes into Status values that name the call
// ("<what>: <error name>: <error string>"). Out-of-memory becomes kResourceExhausted, anything
// else kInternal. Included only by CUDA-enabled sources (gpu/cuda, backend/cuda, tridiag/cuda).
#pragma once

#include <string>

#include <cuda_runtime.h>

#include "base/status.h"

namespace stripesolve::gpu {

inline Status cuda_check(cudaError_t err, const std::string& what) {
  if (err == cudaSuccess) return Status::ok();
  const std::string msg = what + ": " + cudaGetErrorName(err) + ": " + cudaGetErrorString(err);
  if (err == cudaErrorMemoryAllocation) return Status::resource_exhausted(msg);
  return Status::internal(msg);
}

// The last launch's error (kernel launches return nothing).
inline Status launch_check(const std::string& what) {
  return cuda_check(cudaGetLastError(), what + " launch");
}

}  // namespace stripesolve::gpu

#define STRIPESOLVE_CUDA_RETURN(expr, what) \
  STRIPESOLVE_RETURN_IF_ERROR(::stripesolve::gpu::cuda_check((expr), (what)))
