// ArenaPinning (arena_pinning.h) on the host engine: the pages are faulted in and registered
// while another thread writes into them (the load of A), and nothing written is lost.
#include "scheduler/arena_pinning.h"

#include <cstdlib>
#include <memory>
#include <string>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "backend/host_device_engine.h"

namespace stripesolve::scheduler {
namespace {

TEST(ArenaPinningTest, PopulatesAndPinsWithoutTouchingWhatTheLoadWrote) {
  constexpr uint64_t kBytes = uint64_t{64} << 20;
  std::unique_ptr<unsigned char, decltype(&std::free)> block(
      static_cast<unsigned char*>(std::aligned_alloc(uint64_t{2} << 20, kBytes)), &std::free);
  ASSERT_NE(block, nullptr);
  unsigned char* data = block.get();
  for (uint64_t i = 0; i < kBytes / 2; ++i) data[i] = static_cast<unsigned char>(i * 7 + 1);
  auto engine = backend::make_host_device_engine();
  TraceRecorder trace;
  {
    auto pinning = ArenaPinning::start(*engine, data, kBytes, 0, &trace);
    std::thread load([&] {
      for (uint64_t i = kBytes / 2; i < kBytes; ++i)
        data[i] = static_cast<unsigned char>(i * 7 + 1);
    });
    load.join();
    ASSERT_TRUE(pinning->wait().is_ok());
    EXPECT_EQ(pinning->bytes(), kBytes);
    for (uint64_t i = 0; i < kBytes; ++i) {
      ASSERT_EQ(data[i], static_cast<unsigned char>(i * 7 + 1)) << i;
    }
  }  // unpinned
  const nlohmann::json events = nlohmann::json::parse(trace.to_json());
  bool populated = false, registered = false;
  for (const auto& e : events["traceEvents"]) {
    const std::string name = e.value("name", std::string());
    populated = populated || name == "populate";
    registered = registered || name == "register";
  }
  EXPECT_TRUE(populated);
  EXPECT_TRUE(registered);
}

// Bytes above the pinned span (the copy of A for the residual) are faulted in after the
// registration, not pinned, and what a concurrent copy wrote there survives; wait() does not
// wait for them.
TEST(ArenaPinningTest, FaultsInTheBytesAboveThePinnedSpanWithoutPinningThem) {
  constexpr uint64_t kPinned = uint64_t{32} << 20, kAll = uint64_t{96} << 20;
  std::unique_ptr<unsigned char, decltype(&std::free)> block(
      static_cast<unsigned char*>(std::aligned_alloc(uint64_t{2} << 20, kAll)), &std::free);
  ASSERT_NE(block, nullptr);
  unsigned char* data = block.get();
  auto engine = backend::make_host_device_engine();
  TraceRecorder trace;
  {
    auto pinning = ArenaPinning::start(*engine, data, kPinned, kAll, &trace);
    std::thread copy([&] {
      for (uint64_t i = kPinned; i < kAll; ++i) data[i] = static_cast<unsigned char>(i * 5 + 3);
    });
    ASSERT_TRUE(pinning->wait().is_ok());
    EXPECT_EQ(pinning->bytes(), kPinned);
    copy.join();
  }  // the faulting above joined, the span unpinned
  for (uint64_t i = kPinned; i < kAll; ++i) {
    ASSERT_EQ(data[i], static_cast<unsigned char>(i * 5 + 3)) << i;
  }
  const nlohmann::json events = nlohmann::json::parse(trace.to_json());
  uint64_t registered = 0, above = 0;
  for (const auto& e : events["traceEvents"]) {
    const std::string name = e.value("name", std::string());
    if (!e.contains("args") || !e["args"].contains("bytes")) continue;
    const uint64_t bytes = std::stoull(e["args"]["bytes"].get<std::string>());
    if (name == "register") registered = bytes;
    if (name == "populate above") above = bytes;
  }
  EXPECT_EQ(registered, kPinned);
  EXPECT_EQ(above, kAll - kPinned);
}

}  // namespace
}  // namespace stripesolve::scheduler
