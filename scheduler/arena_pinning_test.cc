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
    auto pinning = ArenaPinning::start(*engine, data, kBytes, &trace);
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

}  // namespace
}  // namespace stripesolve::scheduler
