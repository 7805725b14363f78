#include <algorithm>
#include <string>

#include <fmt/format.h>

#include "gpu/devices.h"

namespace stripesolve::gpu {

Result<std::vector<int>> choose_devices(const std::vector<int64_t>& listed, int64_t count,
                                        int available) {
  std::vector<int> chosen;
  if (available <= 0) return chosen;
  for (const int64_t d : listed) {
    if (d < 0 || d >= available) {
      const std::string range = available == 1 ? "0" : fmt::format("0-{}", available - 1);
      return Status::invalid_argument(
          fmt::format("engine.devices names device {}, but this host has {} CUDA device{} ({})", d,
                      available, available == 1 ? "" : "s", range));
    }
    chosen.push_back(static_cast<int>(d));
  }
  if (!listed.empty()) return chosen;
  const int64_t n = count > 0 ? std::min<int64_t>(count, available) : available;
  for (int d = 0; d < n; ++d) chosen.push_back(d);
  return chosen;
}

}  // namespace stripesolve::gpu
