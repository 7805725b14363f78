// gpu/devices.h: the devices that hit a sticky CUDA error (no CUDA call here).
#include <algorithm>
#include <map>
#include <string>

#include <fmt/format.h>

#include "base/logging.h"
#include "base/mutex.h"
#include "gpu/devices.h"

namespace stripesolve::gpu {
namespace {

struct Failures {
  Mutex mu;
  std::map<int, std::string> by_device GUARDED_BY(mu);
  // Held while the listener runs, so that replacing it waits for a call in flight.
  Mutex listener_mu;  // never held with mu
  std::function<void(int, const std::string&)> listener GUARDED_BY(listener_mu);
};

Failures& failures() {
  static Failures* f = new Failures;  // never destroyed: read by threads until exit
  return *f;
}

}  // namespace

void note_device_failure(int device, const std::string& error) {
  Failures& f = failures();
  {
    MutexLock lock(f.mu);
    if (!f.by_device.emplace(device, error).second) return;
  }
  logger("gpu")->error(
      "GPU device {} is unusable until the daemon restarts: {}. Its jobs go to the other "
      "devices, or to the CPU backend where engine.backend is auto",
      device, error);
  MutexLock lock(f.listener_mu);
  if (f.listener) f.listener(device, error);
}

void set_device_failure_listener(std::function<void(int device, const std::string& error)> fn) {
  Failures& f = failures();
  MutexLock lock(f.listener_mu);
  f.listener = std::move(fn);
}

std::vector<DeviceFailure> device_failures() {
  Failures& f = failures();
  MutexLock lock(f.mu);
  std::vector<DeviceFailure> out;
  for (const auto& [device, error] : f.by_device) out.push_back({device, error});
  return out;
}

std::string device_failure(int device) {
  Failures& f = failures();
  MutexLock lock(f.mu);
  auto it = f.by_device.find(device);
  return it == f.by_device.end() ? std::string() : it->second;
}

std::vector<int> without_failed(const std::vector<int>& chosen) {
  Failures& f = failures();
  MutexLock lock(f.mu);
  std::vector<int> out;
  for (const int d : chosen) {
    if (!f.by_device.contains(d)) out.push_back(d);
  }
  return out;
}

std::string describe_failures(const std::vector<int>& chosen) {
  Failures& f = failures();
  MutexLock lock(f.mu);
  std::string out;
  for (const int d : chosen) {
    auto it = f.by_device.find(d);
    if (it == f.by_device.end()) continue;
    out += fmt::format("{}device {}: {}", out.empty() ? "" : "; ", d, it->second);
  }
  return out;
}

void clear_device_failures_for_testing() {
  Failures& f = failures();
  MutexLock lock(f.mu);
  f.by_device.clear();
}

}  // namespace stripesolve::gpu
