#include "cache/arena.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstdlib>
#include <string>
#include <utility>

#include "base/internal_error.h"

namespace stripesolve::cache {

Arena::Arena(uint64_t capacity, HugePages huge_pages)
    : capacity_(capacity / kExtentAlignment * kExtentAlignment) {
  if (capacity_ == 0) return;
  // A large arena in 2 MiB pages where the kernel has them (transparent huge pages on request):
  // the load's first touch, the O_DIRECT reads and the GPU tier's pinning walk 512x fewer
  // pages. Only a hint: without them the block works the same.
  const bool huge = huge_pages == HugePages::kWhenLarge && capacity_ >= kHugePagesFrom;
  const uint64_t alignment = huge ? kHugePage : kExtentAlignment;
  const uint64_t bytes = (capacity_ + alignment - 1) / alignment * alignment;
  base_ = static_cast<std::byte*>(std::aligned_alloc(alignment, bytes));
  if (base_ == nullptr) {
    refused_ = std::exchange(capacity_, 0);
    return;
  }
  if (huge) (void)madvise(base_, bytes, MADV_HUGEPAGE);
  holes_.emplace(0, capacity_);
}

Arena::Arena(uint64_t capacity, OffsetsOnly)
    : capacity_(capacity / kExtentAlignment * kExtentAlignment) {
  if (capacity_ > 0) holes_.emplace(0, capacity_);
}

Arena::~Arena() {
  std::free(base_);
}

uint64_t Arena::largest_hole() const {
  uint64_t best = 0;
  for (const auto& [off, bytes] : holes_) best = bytes > best ? bytes : best;
  return best;
}

uint64_t Arena::largest_hole_with(std::vector<Extent> extents) const {
  for (const auto& [offset, bytes] : holes_) extents.push_back(Extent{offset, bytes});
  std::sort(extents.begin(), extents.end(),
            [](const Extent& a, const Extent& b) { return a.offset < b.offset; });
  uint64_t best = 0;
  uint64_t run_begin = 0;
  uint64_t run_end = 0;
  for (const Extent& e : extents) {
    if (e.offset != run_end) run_begin = e.offset;  // extents never overlap: a gap ends the run
    run_end = e.offset + e.bytes;
    best = std::max(best, run_end - run_begin);
  }
  return best;
}

std::optional<Extent> Arena::allocate(uint64_t bytes) {
  const uint64_t want = round_up(bytes == 0 ? 1 : bytes);
  for (auto it = holes_.begin(); it != holes_.end(); ++it) {
    if (it->second < want) continue;
    const Extent e{it->first, want};
    const uint64_t rest = it->second - want;
    const uint64_t rest_offset = it->first + want;
    holes_.erase(it);
    if (rest > 0) holes_.emplace(rest_offset, rest);
    used_ += want;
    return e;
  }
  return std::nullopt;
}

std::optional<Extent> Arena::allocate_high(uint64_t bytes) {
  const uint64_t want = round_up(bytes == 0 ? 1 : bytes);
  for (auto it = holes_.rbegin(); it != holes_.rend(); ++it) {
    if (it->second < want) continue;
    const Extent e{it->first + it->second - want, want};
    if (it->second == want) {
      holes_.erase(std::next(it).base());
    } else {
      it->second -= want;
    }
    used_ += want;
    return e;
  }
  return std::nullopt;
}

void Arena::release(const Extent& e) {
  STRIPESOLVE_CHECK(e.offset % kExtentAlignment == 0 && e.bytes % kExtentAlignment == 0 &&
                        e.offset + e.bytes <= capacity_ && e.bytes <= used_,
                    "bad extent " + std::to_string(e.offset) + "+" + std::to_string(e.bytes));
  uint64_t off = e.offset;
  uint64_t bytes = e.bytes;
  auto next = holes_.lower_bound(off);
  STRIPESOLVE_CHECK(next == holes_.end() || next->first >= off + bytes,
                    "extent released twice at offset " + std::to_string(off));
  if (next != holes_.end() && next->first == off + bytes) {
    bytes += next->second;
    next = holes_.erase(next);
  }
  if (next != holes_.begin()) {
    auto prev = std::prev(next);
    STRIPESOLVE_CHECK(prev->first + prev->second <= off,
                      "extent released twice at offset " + std::to_string(off));
    if (prev->first + prev->second == off) {
      off = prev->first;
      bytes += prev->second;
      holes_.erase(prev);
    }
  }
  holes_.emplace(off, bytes);
  used_ -= e.bytes;
}

}  // namespace stripesolve::cache
