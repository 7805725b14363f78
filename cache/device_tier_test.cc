#include "cache/device_tier.h"

#include <atomic>
#include <chrono>
#include <thread>

#include <gtest/gtest.h>

namespace stripesolve::cache {
namespace {

constexpr uint64_t kUnit = 1 << 20;

// Two workers ask for the same U block while the pool has no room for it: one allocates (and
// waits for room), the other waits for that block instead of making a second one (which would
// assemble it again from stripes the first assembly freed: the H100 run's "left the device
// early").
TEST(DeviceTier, ConcurrentAsksForABlockMakeOne) {
  DeviceTier tier(3 * kUnit, kUnit, nullptr);
  ASSERT_TRUE(tier.allocate(0, 0, 2 * kUnit).is_ok());
  tier.begin_work();  // the holder of stripe 0, which frees it below
  std::atomic<int> created{0};
  std::atomic<uint64_t> offsets[2];
  auto ask = [&](int w) {
    tier.begin_work();
    auto b = tier.acquire_block(4, 8, 2 * kUnit, 2);
    ASSERT_TRUE(b.is_ok()) << b.status().to_string();
    offsets[w] = b->offset;
    if (b->created) {
      ++created;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));  // "assembles" it
      tier.block_ready(4, 8);
    }
    tier.release_block(4, 8);
    tier.end_work();
  };
  std::thread a(ask, 0), b(ask, 1);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  tier.free(0);
  tier.end_work();
  a.join();
  b.join();
  EXPECT_EQ(created.load(), 1);
  EXPECT_EQ(offsets[0].load(), offsets[1].load());
  EXPECT_EQ(tier.usage().used, 0u) << "the block goes after its last release";
}

// A worker waiting for someone else's block frees nothing: when the allocating worker is the
// only one that could free memory, both fail (after kDeadEndGrace) instead of waiting for each
// other forever.
TEST(DeviceTier, AWaiterForABlockDoesNotHideADeadEnd) {
  DeviceTier tier(3 * kUnit, kUnit, nullptr);
  ASSERT_TRUE(tier.allocate(0, 0, 2 * kUnit).is_ok());  // held by nobody working
  std::atomic<int> failed{0};
  auto ask = [&] {
    tier.begin_work();
    auto b = tier.acquire_block(4, 8, 2 * kUnit, 2);
    if (!b.is_ok()) {
      EXPECT_EQ(b.status().code(), StatusCode::kResourceExhausted) << b.status().to_string();
      ++failed;
    }
    tier.end_work();
  };
  const auto t0 = std::chrono::steady_clock::now();
  std::thread a(ask), b(ask);
  a.join();
  b.join();
  EXPECT_EQ(failed.load(), 2);
  EXPECT_LT(std::chrono::steady_clock::now() - t0,
            DeviceTier::kDeadEndGrace + std::chrono::seconds(8));
}

// Roles waiting for room free nothing: three at work, all waiting, is a dead end (the
// 2026-11-29 hang: three elim.J workers each counted the others as at work, forever).
TEST(DeviceTier, RolesAllWaitingForRoomFailInsteadOfHanging) {
  DeviceTier tier(2 * kUnit, kUnit, nullptr);
  ASSERT_TRUE(tier.allocate(0, 0, kUnit).is_ok());
  ASSERT_TRUE(tier.allocate(1, 0, kUnit).is_ok());  // held by nobody at work
  std::atomic<int> exhausted{0};
  auto ask = [&](int64_t stripe) {
    tier.begin_work();
    auto part = tier.allocate(stripe, 0, kUnit);
    if (!part.is_ok()) {
      if (part.status().code() == StatusCode::kResourceExhausted) ++exhausted;
      tier.fail(part.status());  // as the roles do: the others end with it
    }
    tier.end_work();
  };
  const auto t0 = std::chrono::steady_clock::now();
  std::thread a(ask, 2), b(ask, 3), c(ask, 4);
  a.join();
  b.join();
  c.join();
  EXPECT_EQ(exhausted.load(), 3);
  EXPECT_LT(std::chrono::steady_clock::now() - t0,
            DeviceTier::kDeadEndGrace + std::chrono::seconds(8));
}

// Instances of every width take a whole slot each, and blocks whole slots: however they come and
// go, a stripe fits whenever a slot is free. With exact sizes, the failing solve's pool (six
// full stripes, four narrower, a block) had 2 MiB free in three pieces and no 1 MiB one.
TEST(DeviceTier, AStripeFitsWheneverASlotIsFree) {
  constexpr uint64_t kSlot = kUnit;
  DeviceTier tier(16 * kSlot + kSlot / 2, kSlot, nullptr);
  EXPECT_EQ(tier.usage().capacity, 16 * kSlot) << "whole slots only";
  // Parts narrowing like a factorization's (columns [i0, n) of n = 256 per slot's 4 KiB rows).
  for (int64_t s = 0; s < 12; ++s) {
    const uint64_t width = kSlot - static_cast<uint64_t>(s) * 20 * 4096;
    auto part = tier.allocate(s, s, width);
    ASSERT_TRUE(part.is_ok()) << s << ": " << part.status().to_string();
    EXPECT_EQ(part->bytes, kSlot);
    EXPECT_EQ(part->offset % kSlot, 0u);
  }
  auto block = tier.acquire_block(12, 15, 3 * kSlot - 5 * 4096, 1);
  ASSERT_TRUE(block.is_ok()) << block.status().to_string();
  EXPECT_EQ(block->offset, 13 * kSlot) << "from the top, in whole slots";
  for (int64_t s : {1, 4, 6, 9}) tier.free(s);
  EXPECT_EQ(tier.usage().largest_free_piece, kSlot);
  for (int64_t s : {20, 21, 22, 23, 24}) {  // four freed slots and the one left free
    auto full = tier.allocate(s, 0, kSlot);
    ASSERT_TRUE(full.is_ok()) << s << ": " << full.status().to_string();
  }
  auto none = tier.allocate(25, 0, 4096);
  ASSERT_FALSE(none.is_ok());
  EXPECT_EQ(none.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(none.status().message().find("free in one piece"), std::string::npos)
      << none.status().to_string();
}

}  // namespace
}  // namespace stripesolve::cache
