// gpu/devices.h with the CUDA runtime.
#include "gpu/devices.h"

#include <cuda_runtime.h>
#include <fmt/format.h>

#include "base/units.h"

namespace stripesolve::gpu {

bool built_with_cuda() {
  return true;
}

int device_count() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    (void)cudaGetLastError();  // no driver or no device: not an error for the caller
    return 0;
  }
  return count;
}

std::vector<DeviceInfo> list_devices() {
  std::vector<DeviceInfo> out;
  const int count = device_count();
  for (int d = 0; d < count; ++d) {
    cudaDeviceProp prop{};
    if (cudaGetDeviceProperties(&prop, d) != cudaSuccess) continue;
    DeviceInfo info;
    info.index = d;
    info.name = prop.name;
    info.total_memory = prop.totalGlobalMem;
    info.multiprocessors = prop.multiProcessorCount;
    info.compute_major = prop.major;
    info.compute_minor = prop.minor;
    int current = 0;
    size_t free_bytes = 0, total_bytes = 0;
    // A failed device's context answers every call with its sticky error: not asked (free 0).
    if (device_failure(d).empty() && cudaGetDevice(&current) == cudaSuccess &&
        cudaSetDevice(d) == cudaSuccess) {
      if (cudaMemGetInfo(&free_bytes, &total_bytes) == cudaSuccess) {
        info.free_memory = free_bytes;
      } else {
        (void)cudaGetLastError();  // not left for the next launch check of this thread
      }
      (void)cudaSetDevice(current);
    }
    out.push_back(info);
  }
  return out;
}

std::string describe(const DeviceInfo& d) {
  return fmt::format("{} (sm_{}{}, {} SMs, {}, {} free)", d.name, d.compute_major, d.compute_minor,
                     d.multiprocessors, format_bytes(d.total_memory), format_bytes(d.free_memory));
}

}  // namespace stripesolve::gpu
