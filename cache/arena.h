// The RAM arena of the stripe cache (002 §7.2, the vector V of Fig 15): one block of `capacity`
// bytes, carved into 4 KiB-aligned extents by first fit with coalescing of free neighbours.
//
// The arena never hands out more than its capacity: that is the cache's hard budget. Because the
// stripe parts shrink as the elimination advances (002 §7.2), a freed extent usually fits the next
// request and no compaction is needed; when no hole is large enough, allocate() returns nullopt and
// the cache evicts or waits.
//
// The block is allocated once at construction (4 KiB aligned, pages touched lazily by the OS;
// a large one 2 MiB aligned and in transparent huge pages where the kernel grants them).
// A CUDA backend registers it as pinned memory through base()/capacity() (cudaHostRegister) and
// unregisters it before the arena dies.
//
// Thread-safety: none; the owning StripeCache guards it with its mutex.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <vector>

namespace stripesolve::cache {

inline constexpr uint64_t kExtentAlignment = 4096;
// Arenas of kHugePagesFrom bytes or more ask for transparent huge pages of kHugePage bytes.
inline constexpr uint64_t kHugePage = uint64_t{2} << 20;
inline constexpr uint64_t kHugePagesFrom = uint64_t{64} << 20;

// Whether a large arena asks for transparent huge pages (`engine.huge_pages`).
enum class HugePages { kNo, kWhenLarge };

struct Extent {
  uint64_t offset = 0;  // from base(), a multiple of kExtentAlignment
  uint64_t bytes = 0;   // a multiple of kExtentAlignment
};

class Arena {
 public:
  // `capacity` is rounded down to a multiple of 4 KiB. Where the OS refuses the block (a budget
  // above what the host lends), the arena is empty and refused() says how much was asked: the
  // owner reports it as the job's error (engine.ram_budget is checked against nothing larger
  // than its minimum, so this is the first place a budget too large for the host shows).
  explicit Arena(uint64_t capacity, HugePages huge_pages = HugePages::kWhenLarge);
  // Offsets only: carves [0, capacity) without a host block (base() is null). The GPU tier's
  // device pool uses it.
  struct OffsetsOnly {};
  Arena(uint64_t capacity, OffsetsOnly);
  ~Arena();
  Arena(const Arena&) = delete;
  Arena& operator=(const Arena&) = delete;

  std::byte* base() const { return base_; }
  uint64_t capacity() const { return capacity_; }
  uint64_t refused() const { return refused_; }  // bytes the OS refused at construction, or 0
  uint64_t used() const { return used_; }
  uint64_t free_bytes() const { return capacity_ - used_; }
  // The largest extent allocate() could return now.
  uint64_t largest_hole() const;
  // The largest extent allocate() could return once `extents` (obtained from allocate() and not
  // yet released) were released too.
  uint64_t largest_hole_with(std::vector<Extent> extents) const;

  // First fit; `bytes` is rounded up to 4 KiB. nullopt when no hole is large enough.
  std::optional<Extent> allocate(uint64_t bytes);
  // Last fit: the top end of the highest hole large enough. Large, long-lived extents taken
  // from the top and small ones from the bottom keep the holes between them in one piece.
  std::optional<Extent> allocate_high(uint64_t bytes);
  // Returns an extent obtained from allocate(); merges it with free neighbours.
  void release(const Extent& extent);

  static uint64_t round_up(uint64_t bytes) {
    return (bytes + kExtentAlignment - 1) / kExtentAlignment * kExtentAlignment;
  }

 private:
  std::byte* base_ = nullptr;
  uint64_t capacity_ = 0;
  uint64_t refused_ = 0;
  uint64_t used_ = 0;
  std::map<uint64_t, uint64_t> holes_;  // offset -> bytes, non-adjacent
};

}  // namespace stripesolve::cache
