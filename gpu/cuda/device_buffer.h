// One cudaMalloc'd block, freed by the destructor. Allocation failures are values
// (kResourceExhausted naming the size and purpose), never exceptions.
#pragma once

#include <cstdint>
#include <string>
#include <utility>

#include <cuda_runtime.h>

#include "gpu/cuda/check.h"

namespace stripesolve::gpu {

class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(DeviceBuffer&& other) noexcept
      : data_(std::exchange(other.data_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept {
    if (this != &other) {
      reset();
      data_ = std::exchange(other.data_, nullptr);
      bytes_ = std::exchange(other.bytes_, 0);
    }
    return *this;
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer() { reset(); }

  static Result<DeviceBuffer> allocate(uint64_t bytes, const std::string& what) {
    DeviceBuffer b;
    STRIPESOLVE_RETURN_IF_ERROR(
        cuda_check(cudaMalloc(&b.data_, bytes == 0 ? 1 : bytes),
                   "cudaMalloc of " + std::to_string(bytes) + " bytes for " + what));
    b.bytes_ = bytes;
    return Result<DeviceBuffer>(std::move(b));  // spelt out: nvcc's front end does not move here
  }

  void reset() {
    if (data_ != nullptr) (void)cudaFree(data_);
    data_ = nullptr;
    bytes_ = 0;
  }

  void* get() const { return data_; }
  template <typename T>
  T* as() const {
    return static_cast<T*>(data_);
  }
  uint64_t bytes() const { return bytes_; }

 private:
  void* data_ = nullptr;
  uint64_t bytes_ = 0;
};

}  // namespace stripesolve::gpu
