#include <map>
#include <memory>

#include "base/mutex.h"
#include "base/units.h"
#include "gpu/devices.h"

namespace stripesolve::gpu {

DeviceBudget& DeviceBudget::of(int device) {
  static Mutex mu;
  static std::map<int, std::unique_ptr<DeviceBudget>> budgets;
  MutexLock lock(mu);
  auto& slot = budgets[device];
  if (!slot) slot = std::make_unique<DeviceBudget>();
  return *slot;
}

void DeviceBudget::set_limit(uint64_t bytes) {
  MutexLock lock(mu_);
  limit_ = bytes;
}

uint64_t DeviceBudget::limit() const {
  MutexLock lock(mu_);
  return limit_;
}

uint64_t DeviceBudget::reserved() const {
  MutexLock lock(mu_);
  return reserved_;
}

uint64_t DeviceBudget::available() const {
  MutexLock lock(mu_);
  if (limit_ == 0) return UINT64_MAX;
  return limit_ > reserved_ ? limit_ - reserved_ : 0;
}

Result<DeviceBudget::Reservation> DeviceBudget::reserve(uint64_t bytes, const std::string& what) {
  MutexLock lock(mu_);
  if (limit_ > 0 && (bytes > limit_ || reserved_ > limit_ - bytes)) {
    return Status::resource_exhausted(what + ": needs " + format_bytes(bytes) +
                                      " of device memory, " + format_bytes(reserved_) + " of the " +
                                      format_bytes(limit_) + " budget are held by other jobs");
  }
  reserved_ += bytes;
  return Reservation(this, bytes);
}

void DeviceBudget::release(uint64_t bytes) {
  MutexLock lock(mu_);
  reserved_ -= std::min(reserved_, bytes);
}

DeviceBudget::Reservation::Reservation(Reservation&& other) noexcept
    : owner_(other.owner_), bytes_(other.bytes_) {
  other.owner_ = nullptr;
  other.bytes_ = 0;
}

DeviceBudget::Reservation& DeviceBudget::Reservation::operator=(Reservation&& other) noexcept {
  if (this != &other) {
    if (owner_ != nullptr) owner_->release(bytes_);
    owner_ = other.owner_;
    bytes_ = other.bytes_;
    other.owner_ = nullptr;
    other.bytes_ = 0;
  }
  return *this;
}

void DeviceBudget::Reservation::shrink_to(uint64_t bytes) {
  if (owner_ == nullptr || bytes >= bytes_) return;
  owner_->release(bytes_ - bytes);
  bytes_ = bytes;
}

DeviceBudget::Reservation::~Reservation() {
  if (owner_ != nullptr) owner_->release(bytes_);
}

}  // namespace stripesolve::gpu
