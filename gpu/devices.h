// The GPUs of this host, as the dense and tridiagonal engines see them, and the one device-memory
// budget they share.
//
// No CUDA type appears here: in a build without CUDA (or on a host without a device)
// device_count() is 0 and list_devices() is empty. Everything that calls the CUDA runtime lives
// in gpu/cuda/ (check.h, device_buffer.h) and is included only by .cu / CUDA-enabled .cc files.
//
// DeviceBudget: every job that allocates device memory (a dense solve's GPU tier, a tridiagonal
// batch) first reserves its bytes from the process-wide budget of that device, so that two jobs
// running at once never ask the device for more than the configured budget together; a job that
// does not fit waits or fails with kResourceExhausted naming both figures.
//
// Thread-safety: all functions and DeviceBudget's methods are thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "base/mutex.h"
#include "base/status.h"

namespace stripesolve::gpu {

struct DeviceInfo {
  int index = 0;
  std::string name;           // "NVIDIA H100 80GB HBM3"
  uint64_t total_memory = 0;  // bytes
  uint64_t free_memory = 0;   // bytes, when listed
  int multiprocessors = 0;
  int compute_major = 0;
  int compute_minor = 0;
};

// Whether this build has CUDA support at all.
bool built_with_cuda();

// Devices the CUDA runtime sees (0 without CUDA, without a driver or without a device).
int device_count();

// Properties of every device; empty when device_count() is 0.
std::vector<DeviceInfo> list_devices();

// "NVIDIA H100 80GB HBM3 (sm_90, 132 SMs, 79.1 GiB, 78.2 GiB free)".
std::string describe(const DeviceInfo& device);

// The devices the daemon's jobs use, by CUDA ordinal (engine.devices, engine.gpus): `listed` in
// its order when it is not empty, each below `available` (else kInvalidArgument: "engine.devices
// names device 3, but this host has 2 CUDA devices (0-1)"); otherwise devices 0 .. count-1, every
// device when count is 0, at most `available`. Empty when `available` is 0.
Result<std::vector<int>> choose_devices(const std::vector<int64_t>& listed, int64_t count,
                                        int available);

// Devices whose CUDA context hit a sticky error: a kernel fault, an illegal address, a
// device-side assert, a launch timeout (the errors CUDA documents as leaving the process unable
// to use the device until it is restarted; gpu/cuda/check.h notes them as it meets them). The
// daemon's jobs leave such a device out from then on instead of failing on it again and again;
// `daemon status` and the metrics name it. Process-wide.
struct DeviceFailure {
  int device = 0;
  std::string error;  // the first sticky error met on it
};
// Records the failure (the first error per device is kept) and logs it once, as an error.
void note_device_failure(int device, const std::string& error);
std::vector<DeviceFailure> device_failures();  // by device
// The device's first sticky error, or empty while it is healthy.
std::string device_failure(int device);
// `chosen` without the failed devices, in its order.
std::vector<int> without_failed(const std::vector<int>& chosen);
// "device 1: <error>; device 3: <error>" for the failed ones among `chosen`.
std::string describe_failures(const std::vector<int>& chosen);
// Tests only: forgets every failure.
void clear_device_failures_for_testing();
// Tests only: no failure noted from its construction to its end, however the test leaves.
struct ScopedDeviceFailuresForTesting {
  ScopedDeviceFailuresForTesting() { clear_device_failures_for_testing(); }
  ~ScopedDeviceFailuresForTesting() { clear_device_failures_for_testing(); }
  ScopedDeviceFailuresForTesting(const ScopedDeviceFailuresForTesting&) = delete;
  ScopedDeviceFailuresForTesting& operator=(const ScopedDeviceFailuresForTesting&) = delete;
};
// Called once per device, after it is first noted failed, on the thread that met the error (no
// lock of the caller's is known to be held: keep it short). One listener per process (the
// daemon's, daemon.shutdown.on_gpu_failure); an empty function removes it, and returns only once
// no call of the old one is running.
void set_device_failure_listener(std::function<void(int device, const std::string& error)> f);

// The bytes of one device that jobs may hold at once. A reservation is released by its
// destructor. The budget of device d is set once at daemon start (set_limit), before any job.
class DeviceBudget {
 public:
  class Reservation {
   public:
    Reservation() = default;
    Reservation(Reservation&& other) noexcept;
    Reservation& operator=(Reservation&& other) noexcept;
    Reservation(const Reservation&) = delete;
    Reservation& operator=(const Reservation&) = delete;
    ~Reservation();
    uint64_t bytes() const { return bytes_; }
    // Gives back what the job found it does not need, keeping `bytes` (no-op when that is not
    // less): a dense solve reserves its budget before its plan sizes the GPU tier.
    void shrink_to(uint64_t bytes);

   private:
    friend class DeviceBudget;
    Reservation(DeviceBudget* owner, uint64_t bytes) : owner_(owner), bytes_(bytes) {}
    DeviceBudget* owner_ = nullptr;
    uint64_t bytes_ = 0;
  };

  // The budget of device `device` (process-wide, created on first use with no limit set).
  static DeviceBudget& of(int device);

  // 0 = no limit of our own (the device's free memory is then the only bound).
  void set_limit(uint64_t bytes);
  uint64_t limit() const;
  uint64_t reserved() const;
  // What a reservation may still take: limit - reserved, or UINT64_MAX without a limit.
  uint64_t available() const;

  // Reserves `bytes` now or fails with kResourceExhausted ("<what>: needs X of device memory,
  // Y of the Z budget are held by other jobs").
  Result<Reservation> reserve(uint64_t bytes, const std::string& what);

 private:
  void release(uint64_t bytes);

  mutable Mutex mu_;
  uint64_t limit_ GUARDED_BY(mu_) = 0;
  uint64_t reserved_ GUARDED_BY(mu_) = 0;
};

}  // namespace stripesolve::gpu
