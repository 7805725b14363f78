#include "scheduler/trace.h"

#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace stripesolve::scheduler {
namespace {

TEST(TraceTest, SpansFromSeveralThreadsBecomeChromeTraceEvents) {
  TraceRecorder trace;
  std::vector<std::thread> threads;
  for (int t = 0; t < 3; ++t) {
    threads.emplace_back([&, t] {
      for (int k = 0; k < 10; ++k) {
        TraceRecorder::Span span(&trace, "elim.J" + std::to_string(t), "update",
                                 {{"J", std::to_string(k)}});
      }
    });
  }
  for (auto& th : threads) th.join();
  { TraceRecorder::Span span(nullptr, "master", "ignored"); }
  EXPECT_EQ(trace.size(), 30u);
  auto j = nlohmann::json::parse(trace.to_json());
  int spans = 0, names = 0;
  for (const auto& e : j["traceEvents"]) {
    if (e["ph"] == "X") {
      ++spans;
      EXPECT_EQ(e["name"], "update");
      EXPECT_GE(e["dur"].get<int64_t>(), 0);
      EXPECT_TRUE(e["args"].contains("J"));
    } else {
      EXPECT_EQ(e["ph"], "M");
      ++names;
    }
  }
  EXPECT_EQ(spans, 30);
  EXPECT_EQ(names, 3);
}

}  // namespace
}  // namespace stripesolve::scheduler
