// Driver API calls looked up through the runtime (cudaGetDriverEntryPointByVersion) instead of
// linking libcuda: the binaries then load on hosts without a driver (CI), where no CUDA engine
// is ever opened.
#pragma once

#include <cuda.h>
#include <cuda_runtime.h>
#include <fmt/format.h>

#include "base/status.h"

namespace stripesolve::backend {

// Points `fn` at the driver's `symbol` (kUnavailable naming `needed_by` when the driver lacks it).
template <class F>
Status driver_entry(const char* symbol, const char* needed_by, F& fn) {
  void* p = nullptr;
  cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
  const cudaError_t e =
      cudaGetDriverEntryPointByVersion(symbol, &p, CUDA_VERSION, cudaEnableDefault, &found);
  if (e != cudaSuccess || found != cudaDriverEntryPointSuccess || p == nullptr) {
    return Status::unavailable(fmt::format("the CUDA driver lacks {} ({})", symbol, needed_by));
  }
  fn = reinterpret_cast<F>(p);
  return Status::ok();
}

}  // namespace stripesolve::backend
