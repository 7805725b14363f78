#include <gtest/gtest.h>

#include "gpu/devices.h"

namespace stripesolve::gpu {
namespace {

TEST(DeviceBudget, ReservationsAddUpAndRelease) {
  DeviceBudget budget;
  budget.set_limit(1000);
  auto a = budget.reserve(600, "dense solve");
  ASSERT_TRUE(a.is_ok());
  EXPECT_EQ(budget.reserved(), 600u);
  auto b = budget.reserve(500, "tridiagonal batch");
  ASSERT_FALSE(b.is_ok());
  EXPECT_EQ(b.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(b.status().message().find("tridiagonal batch"), std::string::npos);
  {
    auto c = budget.reserve(400, "small");
    ASSERT_TRUE(c.is_ok());
    EXPECT_EQ(budget.reserved(), 1000u);
  }
  EXPECT_EQ(budget.reserved(), 600u);
  DeviceBudget::Reservation moved = std::move(*a);
  EXPECT_EQ(moved.bytes(), 600u);
  EXPECT_EQ(budget.reserved(), 600u);
}

TEST(DeviceBudget, AvailableIsWhatTheOthersLeave) {
  DeviceBudget budget;
  EXPECT_EQ(budget.available(), UINT64_MAX);
  budget.set_limit(1000);
  auto a = budget.reserve(700, "dense solve");
  ASSERT_TRUE(a.is_ok());
  EXPECT_EQ(budget.available(), 300u);
}

// A dense solve reserves the whole budget before its plan, then keeps what its GPU tier
// allocated: the rest is another job's at once, and the release gives back only what is kept.
TEST(DeviceBudget, AShrunkReservationGivesTheRestBack) {
  DeviceBudget budget;
  budget.set_limit(1000);
  auto dense = budget.reserve(900, "dense solve");
  ASSERT_TRUE(dense.is_ok());
  EXPECT_FALSE(budget.reserve(300, "tridiagonal batch").is_ok());
  dense->shrink_to(250);
  EXPECT_EQ(dense->bytes(), 250u);
  dense->shrink_to(400);  // never grows
  EXPECT_EQ(dense->bytes(), 250u);
  auto batch = budget.reserve(700, "tridiagonal batch");
  ASSERT_TRUE(batch.is_ok());
  EXPECT_EQ(budget.reserved(), 950u);
  *dense = DeviceBudget::Reservation();
  EXPECT_EQ(budget.reserved(), 700u);
}

TEST(DeviceBudget, NoLimitAcceptsAnything) {
  DeviceBudget budget;
  auto a = budget.reserve(uint64_t{1} << 50, "huge");
  EXPECT_TRUE(a.is_ok());
}

TEST(Devices, ListMatchesCount) {
  const auto devices = list_devices();
  EXPECT_EQ(static_cast<int>(devices.size()), device_count());
  if (devices.empty()) GTEST_SKIP() << "no CUDA device on this host: nothing more to check";
  EXPECT_GT(devices[0].total_memory, 0u);
  EXPECT_FALSE(describe(devices[0]).empty());
}

TEST(Devices, ChooseTakesTheListOrTheFirstCount) {
  using V = std::vector<int>;
  EXPECT_EQ(*choose_devices({}, 0, 4), (V{0, 1, 2, 3}));  // every device
  EXPECT_EQ(*choose_devices({}, 2, 4), (V{0, 1}));
  EXPECT_EQ(*choose_devices({}, 8, 2), (V{0, 1}));      // at most what the host has
  EXPECT_EQ(*choose_devices({3, 1}, 0, 4), (V{3, 1}));  // the list, in its order
  EXPECT_TRUE(choose_devices({2}, 0, 0)->empty());      // no device: the CPU
  const auto absent = choose_devices({1, 3}, 0, 2);
  ASSERT_FALSE(absent.is_ok());
  EXPECT_EQ(absent.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(absent.status().message(),
            "engine.devices names device 3, but this host has 2 CUDA devices (0-1)");
  EXPECT_EQ(choose_devices({1}, 0, 1).status().message(),
            "engine.devices names device 1, but this host has 1 CUDA device (0)");
}

}  // namespace
}  // namespace stripesolve::gpu
