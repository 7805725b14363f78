#include "cache/arena.h"

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

namespace stripesolve::cache {
namespace {

TEST(ArenaTest, ExtentsAreAlignedAndWithinCapacity) {
  Arena a(10 * kExtentAlignment + 100);
  EXPECT_EQ(a.capacity(), 10 * kExtentAlignment);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a.base()) % kExtentAlignment, 0u);
  auto e1 = a.allocate(1);
  auto e2 = a.allocate(kExtentAlignment + 1);
  ASSERT_TRUE(e1 && e2);
  EXPECT_EQ(e1->offset, 0u);
  EXPECT_EQ(e1->bytes, kExtentAlignment);
  EXPECT_EQ(e2->offset, kExtentAlignment);
  EXPECT_EQ(e2->bytes, 2 * kExtentAlignment);
  EXPECT_EQ(a.used(), 3 * kExtentAlignment);
  EXPECT_FALSE(a.allocate(8 * kExtentAlignment));
  EXPECT_TRUE(a.allocate(7 * kExtentAlignment));
  EXPECT_EQ(a.free_bytes(), 0u);
}

// A large arena starts on a 2 MiB boundary (transparent huge pages need one) and keeps the
// capacity asked for; all of it is usable.
TEST(ArenaTest, LargeArenasAreHugePageAligned) {
  Arena a(kHugePagesFrom + 3 * kExtentAlignment);
  EXPECT_EQ(a.capacity(), kHugePagesFrom + 3 * kExtentAlignment);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a.base()) % kHugePage, 0u);
  std::memset(a.base(), 0x5a, a.capacity());
  EXPECT_EQ(static_cast<unsigned char>(a.base()[a.capacity() - 1]), 0x5au);
  auto all = a.allocate(a.capacity());
  ASSERT_TRUE(all);
  EXPECT_EQ(all->bytes, a.capacity());
}

// The THPeligible field of the mapping that holds `p` in /proc/self/smaps: 1 or 0, or -1 where
// the kernel does not report it.
int thp_eligible(const void* p) {
  std::ifstream smaps("/proc/self/smaps");
  const auto at = reinterpret_cast<uintptr_t>(p);
  bool inside = false;
  for (std::string line; std::getline(smaps, line);) {
    unsigned long lo = 0, hi = 0;
    if (std::sscanf(line.c_str(), "%lx-%lx ", &lo, &hi) == 2) {
      inside = lo <= at && at < hi;
    } else if (inside && line.rfind("THPeligible:", 0) == 0) {
      return std::stoi(line.substr(12));
    }
  }
  return -1;
}

// engine.huge_pages: a large arena asks for huge pages (madvise), or not when told so.
TEST(ArenaTest, LargeArenasAskForHugePagesUnlessToldNot) {
  std::string setting;
  std::getline(std::ifstream("/sys/kernel/mm/transparent_hugepage/enabled"), setting);
  if (setting.find("[madvise]") == std::string::npos) {
    GTEST_SKIP() << "transparent huge pages are '" << setting
                 << "' here: only [madvise] tells an arena that asked from one that did not";
  }
  Arena asked(kHugePagesFrom);
  Arena plain(kHugePagesFrom, HugePages::kNo);
  const int eligible = thp_eligible(asked.base());
  if (eligible < 0) GTEST_SKIP() << "this kernel's smaps has no THPeligible field";
  EXPECT_EQ(eligible, 1);
  EXPECT_EQ(thp_eligible(plain.base()), 0);
}

TEST(ArenaTest, ReleasedNeighboursCoalesce) {
  Arena a(4 * kExtentAlignment);
  auto e0 = a.allocate(kExtentAlignment).value();
  auto e1 = a.allocate(kExtentAlignment).value();
  auto e2 = a.allocate(kExtentAlignment).value();
  auto e3 = a.allocate(kExtentAlignment).value();
  a.release(e0);
  a.release(e2);
  EXPECT_EQ(a.largest_hole(), kExtentAlignment);
  EXPECT_FALSE(a.allocate(2 * kExtentAlignment));
  a.release(e1);
  EXPECT_EQ(a.largest_hole(), 3 * kExtentAlignment);
  a.release(e3);
  EXPECT_EQ(a.largest_hole(), 4 * kExtentAlignment);
  EXPECT_EQ(a.used(), 0u);
}

TEST(ArenaTest, LargestHoleWithExtentsCountsOnlyNeighbours) {
  Arena a(5 * kExtentAlignment);
  auto e0 = a.allocate(kExtentAlignment).value();
  auto e1 = a.allocate(kExtentAlignment).value();
  auto e2 = a.allocate(kExtentAlignment).value();
  auto e3 = a.allocate(2 * kExtentAlignment).value();
  a.release(e0);
  EXPECT_EQ(a.largest_hole_with({}), kExtentAlignment);
  EXPECT_EQ(a.largest_hole_with({e1}), 2 * kExtentAlignment);      // joins the hole at 0
  EXPECT_EQ(a.largest_hole_with({e2}), kExtentAlignment);          // e1 between them
  EXPECT_EQ(a.largest_hole_with({e3, e2}), 3 * kExtentAlignment);  // any order
  EXPECT_EQ(a.largest_hole_with({e1, e2, e3}), 5 * kExtentAlignment);
  EXPECT_EQ(a.used(), 4 * kExtentAlignment);  // nothing was released
  EXPECT_EQ(a.largest_hole(), kExtentAlignment);
}

// Last fit takes the top of the highest hole that holds it; small extents from the bottom and
// large ones from the top leave the hole between them whole.
TEST(ArenaTest, AllocateHighTakesTheTopOfTheHighestHole) {
  const uint64_t k = kExtentAlignment;
  Arena a(10 * k);
  auto top = a.allocate_high(3 * k).value();
  EXPECT_EQ(top.offset, 7 * k);
  EXPECT_EQ(top.bytes, 3 * k);
  auto low = a.allocate(k).value();
  EXPECT_EQ(low.offset, 0u);
  EXPECT_EQ(a.largest_hole(), 6 * k);          // [k, 7k) in one piece
  auto next = a.allocate_high(6 * k).value();  // takes the hole whole
  EXPECT_EQ(next.offset, k);
  EXPECT_FALSE(a.allocate_high(1));
  a.release(low);
  a.release(top);
  EXPECT_EQ(a.allocate_high(2 * k)->offset, 8 * k);  // the highest hole, not the first
  EXPECT_EQ(a.allocate_high(k)->offset, 7 * k);
  EXPECT_EQ(a.allocate_high(k)->offset, 0u);  // the only hole left
  EXPECT_EQ(a.free_bytes(), 0u);
  a.release(next);
  EXPECT_EQ(a.largest_hole(), 6 * k);
}

// A block the OS refuses (1 PiB: above any x86-64 address space) leaves an empty arena that
// says what it asked for, instead of ending the process: the solve reports it as its error.
TEST(ArenaTest, ARefusedBlockLeavesAnEmptyArenaThatSaysSo) {
  const uint64_t asked = uint64_t{1} << 50;
  Arena a(asked);
  EXPECT_EQ(a.refused(), asked);
  EXPECT_EQ(a.capacity(), 0u);
  EXPECT_EQ(a.base(), nullptr);
  EXPECT_FALSE(a.allocate(4096).has_value());
  Arena fine(1 << 20);
  EXPECT_EQ(fine.refused(), 0u);
  EXPECT_EQ(fine.capacity(), 1u << 20);
}

TEST(ArenaDeathTest, DoubleReleaseIsABug) {
  Arena a(4 * kExtentAlignment);
  auto e0 = a.allocate(kExtentAlignment).value();
  a.allocate(kExtentAlignment).value();
  a.release(e0);
  EXPECT_DEATH(a.release(e0), "released twice");
}

}  // namespace
}  // namespace stripesolve::cache
