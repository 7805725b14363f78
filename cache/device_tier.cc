#include "cache/device_tier.h"

#include <chrono>
#include <optional>
#include <string>

#include "base/internal_error.h"
#include "base/units.h"

namespace stripesolve::cache {

namespace {

uint64_t slot_of(uint64_t slot_bytes) {
  STRIPESOLVE_CHECK(slot_bytes > 0, "GPU tier: a slot of 0 bytes");
  return Arena::round_up(slot_bytes);
}

}  // namespace

DeviceTier::DeviceTier(uint64_t pool_bytes, uint64_t slot_bytes, std::function<Status()> abandon)
    : slot_(slot_of(slot_bytes)),
      pool_(pool_bytes / slot_ * slot_, Arena::OffsetsOnly{}),
      abandon_(std::move(abandon)) {}

Status DeviceTier::wait_locked(MutexLock& lock) {
  changed_.wait_for(lock, std::chrono::milliseconds(50));
  if (!failure_.is_ok()) return failure_;
  if (abandon_) {
    Status st = abandon_();
    if (!st.is_ok()) {
      failure_ = st;
      changed_.notify_all();
      return st;
    }
  }
  return Status::ok();
}

DeviceTier::Usage DeviceTier::usage() const {
  MutexLock lock(mu_);
  return Usage{pool_.capacity(), pool_.used(), peak_, pool_.free_bytes(), pool_.largest_hole()};
}

std::optional<DeviceInstance> DeviceTier::find(int64_t stripe) const {
  MutexLock lock(mu_);
  auto it = parts_.find(stripe);
  if (it == parts_.end()) return std::nullopt;
  return it->second;
}

Result<Extent> DeviceTier::allocate_locked(MutexLock& lock, uint64_t bytes, const std::string& what,
                                           bool high) {
  bytes = in_slots(bytes);
  // The dead end: no role but this one works without waiting for memory itself, and nothing
  // changed for kDeadEndGrace (a role between tasks may yet start work that frees memory).
  std::optional<uint64_t> stalled_at;  // changes_ when it was first seen
  auto stalled_since = std::chrono::steady_clock::now();
  for (;;) {
    if (!failure_.is_ok()) return failure_;
    if (auto e = high ? pool_.allocate_high(bytes) : pool_.allocate(bytes)) {
      peak_ = std::max(peak_, pool_.used());
      return *e;
    }
    // Memory is freed by roles at work (a J part after its update, a block after its last
    // update), not by those waiting for memory themselves.
    const bool alone = working_ - waiting_ <= 1;
    const auto now = std::chrono::steady_clock::now();
    if (!alone || stalled_at != changes_) {
      stalled_at = alone ? std::optional<uint64_t>(changes_) : std::nullopt;
      stalled_since = now;
    } else if (now - stalled_since >= kDeadEndGrace) {
      return Status::resource_exhausted(
          "GPU tier: " + what + " needs " + format_bytes(bytes) +
          " of device memory; the pool of " + format_bytes(pool_.capacity()) + " has " +
          format_bytes(pool_.largest_hole()) +
          " free in one piece (raise engine.gpu_memory or lower engine.meta_stripes)");
    }
    ++waiting_;
    const Status st = wait_locked(lock);
    --waiting_;
    STRIPESOLVE_RETURN_IF_ERROR(st);
  }
}

Result<DeviceInstance> DeviceTier::allocate(int64_t stripe, int64_t i0_store, uint64_t bytes) {
  MutexLock lock(mu_);
  STRIPESOLVE_CHECK(parts_.find(stripe) == parts_.end(),
                    "GPU tier: stripe " + std::to_string(stripe) + " allocated twice");
  STRIPESOLVE_ASSIGN_OR_RETURN(Extent e,
                               allocate_locked(lock, bytes, "stripe " + std::to_string(stripe)));
  DeviceInstance inst{stripe, i0_store, e.offset, e.bytes, false, 0};
  parts_[stripe] = inst;
  return inst;
}

DeviceInstance& DeviceTier::instance_locked(int64_t stripe) {
  auto it = parts_.find(stripe);
  STRIPESOLVE_CHECK(it != parts_.end(),
                    "GPU tier: no instance of stripe " + std::to_string(stripe));
  return it->second;
}

void DeviceTier::set_newer(int64_t stripe, bool newer) {
  MutexLock lock(mu_);
  instance_locked(stripe).newer = newer;
}

void DeviceTier::set_uses(int64_t stripe, int64_t uses) {
  MutexLock lock(mu_);
  instance_locked(stripe).uses = uses;
}

bool DeviceTier::release_use(int64_t stripe) {
  MutexLock lock(mu_);
  auto it = parts_.find(stripe);
  if (it == parts_.end()) return false;
  return --it->second.uses <= 0;
}

void DeviceTier::free(int64_t stripe) {
  MutexLock lock(mu_);
  auto it = parts_.find(stripe);
  if (it == parts_.end()) return;
  pool_.release(Extent{it->second.offset, it->second.bytes});
  parts_.erase(it);
  ++changes_;
  changed_.notify_all();
}

Result<DeviceTier::Block> DeviceTier::acquire_block(int64_t i0, int64_t i1, uint64_t bytes,
                                                    int64_t uses) {
  MutexLock lock(mu_);
  const auto key = std::make_pair(i0, i1);
  for (;;) {
    if (!failure_.is_ok()) return failure_;
    auto it = blocks_.find(key);
    if (it == blocks_.end()) break;
    if (it->second.ready) return Block{it->second.extent.offset, false};
    // Another worker is allocating or assembling it. Waiting here frees nothing: not working
    // meanwhile, so that allocate_locked can still tell a dead end.
    --working_;
    const Status st = wait_locked(lock);
    ++working_;
    STRIPESOLVE_RETURN_IF_ERROR(st);
  }
  // The entry goes in before the allocation, which may wait (unlocked) for room: whoever asks
  // meanwhile waits for this block instead of making a second one.
  blocks_[key] = BlockEntry{Extent{}, uses, false};
  // From the top of the pool, the stripes from the bottom: a stripe left between two blocks
  // would split the hole the next block needs (fragmentation, not room, failed the U block of a
  // RAM-tier solve at some budgets).
  Result<Extent> e = allocate_locked(
      lock, bytes,
      "the U block of stripes [" + std::to_string(i0) + ", " + std::to_string(i1) + ")", true);
  if (!e.is_ok()) {
    blocks_.erase(key);
    changed_.notify_all();
    return e.status();
  }
  blocks_[key].extent = *e;
  return Block{e->offset, true};
}

void DeviceTier::block_ready(int64_t i0, int64_t i1) {
  MutexLock lock(mu_);
  auto it = blocks_.find({i0, i1});
  STRIPESOLVE_CHECK(it != blocks_.end(), "GPU tier: no block to mark ready");
  it->second.ready = true;
  changed_.notify_all();
}

void DeviceTier::release_block(int64_t i0, int64_t i1) {
  MutexLock lock(mu_);
  auto it = blocks_.find({i0, i1});
  if (it == blocks_.end()) return;
  if (--it->second.uses > 0) return;
  pool_.release(it->second.extent);
  blocks_.erase(it);
  ++changes_;
  changed_.notify_all();
}

void DeviceTier::begin_work() {
  MutexLock lock(mu_);
  ++working_;
  ++changes_;
}

void DeviceTier::end_work() {
  MutexLock lock(mu_);
  --working_;
  ++changes_;
  changed_.notify_all();
}

void DeviceTier::fail(Status status) {
  MutexLock lock(mu_);
  if (failure_.is_ok()) failure_ = std::move(status);
  changed_.notify_all();
}

}  // namespace stripesolve::cache
