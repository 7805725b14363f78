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
  threads.reserve(3);
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

namespace stripesolve::scheduler {
namespace {

TEST(TraceTest, ALongSolveKeepsItsFirstAndLatestSpans) {
  TraceRecorder trace(10);
  for (int k = 0; k < 25; ++k) {
    TraceRecorder::Span span(&trace, "elim.I", "s" + std::to_string(k),
                             {{"I", "\"" + std::to_string(k) + "\\"}});
  }
  EXPECT_EQ(trace.size(), 10u);
  EXPECT_EQ(trace.dropped(), 15u);
  auto j = nlohmann::json::parse(trace.to_json());
  std::vector<std::string> spans;
  int marks = 0;
  for (const auto& e : j["traceEvents"]) {
    if (e["ph"] == "X") {
      spans.push_back(e["name"]);
      // Quotes and backslashes survive the writer's escaping.
      EXPECT_EQ(e["args"]["I"].get<std::string>().front(), '"');
    } else if (e["ph"] == "i") {
      ++marks;
      EXPECT_EQ(spans.size(), 5u) << "the mark stands where the spans were dropped";
      EXPECT_EQ(e["name"], "15 spans not kept here (the trace keeps the first 5 and the latest 5)");
    }
  }
  EXPECT_EQ(spans, (std::vector<std::string>{"s0", "s1", "s2", "s3", "s4", "s20", "s21", "s22",
                                             "s23", "s24"}));
  EXPECT_EQ(marks, 1);
  EXPECT_EQ(j["otherData"]["dropped_spans"], 15);
  EXPECT_EQ(j["displayTimeUnit"], "ms");
}

TEST(TraceTest, AnEmptyTraceIsValidJson) {
  TraceRecorder trace;
  auto j = nlohmann::json::parse(trace.to_json());
  EXPECT_TRUE(j["traceEvents"].empty());
  EXPECT_EQ(trace.dropped(), 0u);
}

}  // namespace
}  // namespace stripesolve::scheduler
