// The GPU tier of the stripe cache (8b of ../shared/design/ARCHITECTURE.md): which stripe parts
// and meta-stripe U blocks have an instance on the device, where in the device pool they are,
// and whether a part's device values are newer than its RAM cell (the RAM cell is then in
// kOnDevice, cell_state.h). Pure bookkeeping: the pool is device memory the caller allocated
// once (backend/device_engine.h); this class carves it with the RAM arena's first-fit allocator
// and never touches the memory.
//
// Lifetimes (decided by the GPU roles, scheduler/gpu_factor_run.h):
//   - a part instance is created by the first role that needs the part on the device (elim.I, or
//     elim.J copying J in) and freed when the role gives it up: J after its update unless it is
//     kept (newer), an eliminated stripe I when no update needs it any more (use count 0), or,
//     when the whole matrix is resident, at the end of the solve;
//   - a U block of a range [I0, I1) is created by the first J update by that range and freed
//     when the range's last update finishes.
// allocate() waits while the pool is full and some other role may still free memory, and fails
// with kResourceExhausted when nothing can (the planner sizes the budget to avoid it): when every
// other role at work is waiting for memory too, and nothing has changed for kDeadEndGrace.
//
// Slots: every allocation is a whole number of slots (the largest stripe's bytes), and the pool
// is a whole number of them. A stripe instance takes one slot whatever columns it holds; a U
// block or the right-hand sides take as many as their bytes need. Every hole is then whole slots,
// so a stripe fits whenever one slot is free. Exact sizes fragmented the pool: instances of every
// width left three holes of 2 MiB in all, none of them the 1 MiB a stripe needed, with no one
// left to free anything (a failed solve). Only a block can find the pool fragmented, and the
// roles keep a piece for it (GpuElimination::keep_j).
//
// Thread-safety: all methods are thread-safe (one mutex); offsets never move while allocated.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <utility>

#include "base/mutex.h"
#include "base/status.h"
#include "cache/arena.h"

namespace stripesolve::cache {

struct DeviceInstance {
  int64_t stripe = -1;
  int64_t i0_store = 0;  // the instance holds columns [i0_store, n): its RAM cell's or fewer
                         // (a J holds what its updates and elimination touch)
  uint64_t offset = 0;   // in the device pool
  uint64_t bytes = 0;
  bool newer = false;  // device values newer than RAM (RAM cell in kOnDevice)
  int64_t uses = 0;    // eliminated stripe: updates that still read it
};

class DeviceTier {
 public:
  // How long a dead end must last before allocate() gives up: a role between tasks may start
  // work that frees memory.
  static constexpr std::chrono::milliseconds kDeadEndGrace{2000};

  // `slot_bytes`: the largest stripe instance (> 0); the pool uses the whole slots of
  // `pool_bytes`. `abandon`: polled while waiting (every 50 ms); a non-ok status ends the wait
  // with it (the cache's failure: another role failed or the job was cancelled).
  DeviceTier(uint64_t pool_bytes, uint64_t slot_bytes, std::function<Status()> abandon);
  DeviceTier(const DeviceTier&) = delete;
  DeviceTier& operator=(const DeviceTier&) = delete;

  // The pool at one moment (read under one lock).
  struct Usage {
    uint64_t capacity = 0;
    uint64_t used = 0;
    uint64_t peak = 0;  // the most `used` has been
    uint64_t free_bytes = 0;
    uint64_t largest_free_piece = 0;  // the largest allocation that would succeed now
  };
  Usage usage() const;
  // The bytes an allocation of `bytes` takes: whole slots.
  uint64_t in_slots(uint64_t bytes) const { return (bytes + slot_ - 1) / slot_ * slot_; }
  uint64_t slot_bytes() const { return slot_; }

  // The stripe's instance, if it has one.
  std::optional<DeviceInstance> find(int64_t stripe) const;

  // Creates the stripe's instance (none may exist) of `bytes` (its slots; DeviceInstance::bytes
  // says how many), waiting for room; fails when the pool cannot hold it even after every other
  // holder has finished.
  Result<DeviceInstance> allocate(int64_t stripe, int64_t i0_store, uint64_t bytes);
  void set_newer(int64_t stripe, bool newer);
  void set_uses(int64_t stripe, int64_t uses);
  // One update no longer reads eliminated stripe `stripe`; true when that was the last.
  bool release_use(int64_t stripe);
  void free(int64_t stripe);

  // The U block of range [i0, i1): the existing one (created = false) or a new one of `bytes`
  // (created = true: the caller fills it, then calls block_ready). Others asking meanwhile wait.
  struct Block {
    uint64_t offset = 0;
    bool created = false;
  };
  Result<Block> acquire_block(int64_t i0, int64_t i1, uint64_t bytes, int64_t uses);
  void block_ready(int64_t i0, int64_t i1);
  // One update by [i0, i1) finished; frees the block after its last one.
  void release_block(int64_t i0, int64_t i1);

  // Roles call these around work that may free memory, so that allocate() can tell waiting
  // from a dead end.
  void begin_work();
  void end_work();
  // Wakes every waiter; later waits fail with `status`.
  void fail(Status status);

 private:
  // `high`: from the top of the pool (Arena::allocate_high), as the U blocks are.
  Result<Extent> allocate_locked(MutexLock& lock, uint64_t bytes, const std::string& what,
                                 bool high = false) REQUIRES(mu_);
  // Waits for a change (or 50 ms); the failure to return, if any.
  Status wait_locked(MutexLock& lock) REQUIRES(mu_);
  // The stripe's instance, which must exist.
  DeviceInstance& instance_locked(int64_t stripe) REQUIRES(mu_);

  struct BlockEntry {
    Extent extent;
    int64_t uses = 0;
    bool ready = false;
  };

  const uint64_t slot_;  // a multiple of kExtentAlignment
  mutable Mutex mu_;
  CondVar changed_;
  Arena pool_ GUARDED_BY(mu_);  // offsets only (no host memory)
  const std::function<Status()> abandon_;
  std::map<int64_t, DeviceInstance> parts_ GUARDED_BY(mu_);
  std::map<std::pair<int64_t, int64_t>, BlockEntry> blocks_ GUARDED_BY(mu_);
  int64_t working_ GUARDED_BY(mu_) = 0;   // roles between begin_work and end_work
  int64_t waiting_ GUARDED_BY(mu_) = 0;   // of those, waiting in allocate_locked for room
  uint64_t changes_ GUARDED_BY(mu_) = 0;  // frees, begin_work and end_work so far
  uint64_t peak_ GUARDED_BY(mu_) = 0;
  Status failure_ GUARDED_BY(mu_);
};

}  // namespace stripesolve::cache
