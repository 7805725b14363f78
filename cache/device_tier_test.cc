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
  DeviceTier tier(3 * kUnit, nullptr);
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
// only one that could free memory, both fail at once instead of waiting for each other.
TEST(DeviceTier, AWaiterForABlockDoesNotHideADeadEnd) {
  DeviceTier tier(3 * kUnit, nullptr);
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
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5));
}

}  // namespace
}  // namespace stripesolve::cache
