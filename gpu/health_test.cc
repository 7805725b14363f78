#include <gtest/gtest.h>

#include "gpu/devices.h"

namespace stripesolve::gpu {
namespace {

class DeviceHealth : public ::testing::Test {
 protected:
  void SetUp() override { clear_device_failures_for_testing(); }
  void TearDown() override { clear_device_failures_for_testing(); }
};

TEST_F(DeviceHealth, AFailedDeviceIsLeftOutAndNamedWithItsFirstError) {
  EXPECT_TRUE(device_failures().empty());
  EXPECT_EQ(without_failed({0, 1, 2}), (std::vector<int>{0, 1, 2}));
  note_device_failure(1, "kernel: cudaErrorIllegalAddress: an illegal memory access");
  note_device_failure(1, "cudaStreamSynchronize: cudaErrorIllegalAddress");  // kept: the first
  EXPECT_EQ(without_failed({2, 1, 0}), (std::vector<int>{2, 0}));
  EXPECT_EQ(without_failed({1}), std::vector<int>{});
  EXPECT_EQ(device_failure(1), "kernel: cudaErrorIllegalAddress: an illegal memory access");
  EXPECT_EQ(device_failure(0), "");
  ASSERT_EQ(device_failures().size(), 1u);
  EXPECT_EQ(device_failures()[0].device, 1);
  note_device_failure(3, "cudaErrorAssert");
  EXPECT_EQ(describe_failures({0, 1, 2, 3}),
            "device 1: kernel: cudaErrorIllegalAddress: an illegal memory access; device 3: "
            "cudaErrorAssert");
  EXPECT_EQ(describe_failures({0, 2}), "");
}

}  // namespace
}  // namespace stripesolve::gpu
