// gpu/devices.h in a build without CUDA: no devices.
#include "gpu/devices.h"

namespace stripesolve::gpu {

bool built_with_cuda() {
  return false;
}
int device_count() {
  return 0;
}
std::vector<DeviceInfo> list_devices() {
  return {};
}
std::string describe(const DeviceInfo& device) {
  return device.name;
}

}  // namespace stripesolve::gpu
