#include "daemon/job.h"

#include <string>

#include <gtest/gtest.h>

#include "daemon/dense_jobs.h"
#include "protocol/frame.h"
#include "protocol/messages.h"

namespace stripesolve::daemon {
namespace {

TEST(JobTest, StateMachineEdges) {
  Job job(1, 1000, "t", Lane::kSmall, nlohmann::json::object());
  EXPECT_EQ(job.state(), JobState::kPending);
  EXPECT_FALSE(job.try_transition(JobState::kCompleted));  // must run first
  EXPECT_TRUE(job.try_transition(JobState::kRunning));
  EXPECT_FALSE(job.try_transition(JobState::kPending));
  EXPECT_TRUE(job.try_transition(JobState::kCompleted));
  EXPECT_FALSE(job.try_transition(JobState::kCancelled));  // terminal stays terminal
  EXPECT_TRUE(is_terminal(job.state()));
  EXPECT_EQ(job.to_json()["state"], "COMPLETED");
}

// A finished job's progress: whole and without an ETA once completed; no ETA once cancelled.
TEST(JobTest, FinishedJobsShowNoStaleProgress) {
  Job done(1, 1000, "t", Lane::kDense, nlohmann::json::object());
  Job stopped(2, 1000, "t", Lane::kDense, nlohmann::json::object());
  for (Job* j : {&done, &stopped}) {
    ASSERT_TRUE(j->try_transition(JobState::kRunning));
    j->set_progress({{"phase", "factor"}, {"fraction", 0.4}, {"eta_seconds", 19.0}});
    EXPECT_EQ(j->to_json()["progress"]["eta_seconds"], 19.0);
  }
  done.transition(JobState::kCompleted);
  stopped.transition(JobState::kCancelled);
  const auto d = done.to_json()["progress"];
  EXPECT_EQ(d["fraction"], 1.0);
  EXPECT_EQ(d["phase"], "done");
  EXPECT_FALSE(d.contains("eta_seconds"));
  const auto s = stopped.to_json()["progress"];
  EXPECT_EQ(s["fraction"], 0.4);
  EXPECT_EQ(s["phase"], "factor");
  EXPECT_FALSE(s.contains("eta_seconds"));
}

// `logs -f` reads on from where it stopped; the numbering survives the bound on kept lines.
// A client's params nested deeper than the replies may carry are shown cut, so that the job
// list's frame stays readable (protocol/frame.cc bounds a header at 32 levels).
// A dense solve's progress carries a rate and an ETA only once there is work to measure them by:
// the scheduler's zeros used to reach the client as "0.0 GFLOP/s" and "ETA 0s".
TEST(JobTest, DenseProgressHasARateAndAnEtaOnlyOnceThePhaseHasMoved) {
  scheduler::Progress p;
  p.phase = "factor";
  p.stripes_total = 6;
  EXPECT_FALSE(dense_progress_json(p).contains("eta_seconds"));
  EXPECT_FALSE(dense_progress_json(p).contains("gflops"));
  p.fraction = 0.25;
  p.eta_seconds = 12.5;
  p.gflops = 75.0;
  p.stripes_done = 1;
  const nlohmann::json j = dense_progress_json(p);
  EXPECT_EQ(j["eta_seconds"], 12.5);
  EXPECT_EQ(j["gflops"], 75.0);
  EXPECT_EQ(j["stripes_done"], 1);
  EXPECT_EQ(j["phase"], "factor");
}

TEST(JobTest, DeeplyNestedParamsAreShownCut) {
  nlohmann::json deep = 1;
  for (int k = 0; k < 29; ++k) deep = nlohmann::json::array({deep});
  Job job(1, 1000, "dense_solve", Lane::kDense,
          {{"store", deep}, {"matrix", "A"}, {"rhs", {{"generate", "ones"}}}});
  const nlohmann::json shown = job.to_json()["params"];
  EXPECT_EQ(shown["matrix"], "A");
  EXPECT_EQ(shown["rhs"]["generate"], "ones");
  // params (level 1) > store (2) > 14 arrays more (levels 3..16) > the note.
  nlohmann::json v = shown["store"];
  int levels = 1;
  while (v.is_array()) {
    v = v[0];
    ++levels;
  }
  EXPECT_EQ(levels, 16);
  EXPECT_EQ(v, "(nested deeper than 16 levels: not shown)");
  EXPECT_EQ(job.params()["store"], deep);  // what the job runs with is the client's
  // The job list's reply as the daemon frames it parses.
  const nlohmann::json reply = {{"jobs", nlohmann::json::array({job.to_json()})}};
  std::string bytes;
  ASSERT_TRUE(
      protocol::append_frame(bytes, protocol::make_frame(protocol::MessageType::kOk, 7, reply))
          .is_ok());
  protocol::FrameParser parser;
  ASSERT_TRUE(parser.feed(bytes).is_ok()) << parser.error().message();
  EXPECT_TRUE(parser.next().has_value());
}

TEST(JobTest, LogLinesAreNumberedForFollowing) {
  Job job(1, 1000, "t", Lane::kSmall, nlohmann::json::object());
  for (int i = 0; i < 2005; ++i) job.append_log("line " + std::to_string(i));
  auto all = job.log_since(0);
  EXPECT_EQ(all.first, 5u);  // 2000 kept, the 5 oldest dropped
  EXPECT_EQ(all.next, 2005u);
  ASSERT_EQ(all.lines.size(), 2000u);
  EXPECT_NE(all.lines.front().find(" line 5"), std::string::npos) << all.lines.front();
  auto tail = job.log_since(2003);
  EXPECT_EQ(tail.first, 2003u);
  ASSERT_EQ(tail.lines.size(), 2u);
  EXPECT_NE(tail.lines.back().find(" line 2004"), std::string::npos) << tail.lines.back();
  auto none = job.log_since(9999);
  EXPECT_TRUE(none.lines.empty());
  EXPECT_EQ(none.first, 2005u);
  EXPECT_EQ(none.next, 2005u);
}

TEST(JobTest, IllegalTransitionAborts) {
  Job job(1, 1000, "t", Lane::kSmall, nlohmann::json::object());
  EXPECT_DEATH(job.transition(JobState::kFailed), "illegal state change PENDING -> FAILED");
}

TEST(JobTest, OwnershipRule) {
  EXPECT_TRUE(may_access(1000, 1000));
  EXPECT_FALSE(may_access(1001, 1000));
  EXPECT_TRUE(may_access(0, 1000));  // root sees everything
}

TEST(JobTest, CancelHooksRunOnceAndLate) {
  Job job(1, 1000, "t", Lane::kDense, nlohmann::json::object());
  int calls = 0;
  job.on_cancel([&] { ++calls; });
  job.request_cancel();
  job.request_cancel();
  EXPECT_EQ(calls, 1);
  job.on_cancel([&] { ++calls; });  // registered after the request: runs at once
  EXPECT_EQ(calls, 2);
  EXPECT_TRUE(job.cancel_requested());
}

// What readers of `job` find after its first publication: one range, rows [row_begin, row_begin +
// rows) of an n x nrhs solution.
void expect_one_range(const Job& job, int64_t row_begin, int64_t rows, int64_t n, int64_t nrhs) {
  int64_t got_n = 0, got_nrhs = 0;
  const auto ranges = job.published_since(0, &got_n, &got_nrhs);
  ASSERT_EQ(ranges.size(), 1u);
  EXPECT_EQ(ranges[0].row_begin, row_begin);
  EXPECT_EQ(ranges[0].rows, rows);
  EXPECT_EQ(got_n, n);
  EXPECT_EQ(got_nrhs, nrhs);
}

TEST(JobTest, PublishedRowsAreRowMajorAndNotifyListeners) {
  Job job(3, 1000, "t", Lane::kDense, nlohmann::json::object());
  int events = 0;
  const uint64_t h = job.add_listener([&] { ++events; });
  ASSERT_TRUE(job.begin_solution(4, 2).is_ok());
  const double x[] = {1, 2, 10, 20};  // rows 2..3, column-major (ld 2): col0 = 1,2 col1 = 10,20
  ASSERT_TRUE(job.publish_rows(2, 2, x).is_ok());
  EXPECT_EQ(events, 1);
  expect_one_range(job, 2, 2, 4, 2);
  auto buf = job.solution_buffer();
  EXPECT_EQ((*buf)[4], 1);
  EXPECT_EQ((*buf)[5], 10);
  EXPECT_EQ((*buf)[6], 2);
  EXPECT_EQ((*buf)[7], 20);
  EXPECT_EQ(job.publish_rows(3, 2, x).message(), "solution rows [3, 5) outside [0, 4)");
  job.remove_listener(h);
  job.mark_fetched();
  EXPECT_FALSE(job.has_solution());
  EXPECT_EQ((*buf)[5], 10);  // a holder keeps the buffer alive
  EXPECT_EQ(job.begin_solution(4, 2).message(), "solution already begun");
}

TEST(JobTest, SetSolutionPublishesAWholeArrayAsOneValueRows) {
  Job job(5, 1000, "t", Lane::kTridiag, nlohmann::json::object());
  int events = 0;
  const uint64_t h = job.add_listener([&] { ++events; });
  EXPECT_EQ(job.set_solution({2, 3}, {1, 2, 3, 4, 5}).message(),
            "solution of 5 values does not fill an array of shape [2, 3]");
  ASSERT_TRUE(job.set_solution({2, 3}, {1, 2, 3, 4, 5, 6}).is_ok());
  EXPECT_EQ(events, 1);
  expect_one_range(job, 0, 6, 6, 1);
  EXPECT_EQ(job.array_shape(), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ((*job.solution_buffer())[5], 6);
  EXPECT_EQ(job.to_json()["solution"]["array_shape"], nlohmann::json({2, 3}));
  EXPECT_EQ(job.to_json()["solution"]["rows_ready"], 6);
  EXPECT_EQ(job.set_solution({6}, std::vector<double>(6)).message(), "solution already begun");
  job.remove_listener(h);
}

TEST(JobTest, TraceIsChromeJson) {
  Job job(4, 1000, "t", Lane::kSmall, nlohmann::json::object());
  job.add_trace_span({"run t", "job", 10, 20, 0});
  job.set_engine_trace(
      R"({"traceEvents":[{"name":"elim.I","ph":"X","ts":1,"dur":2,"pid":1,"tid":3}]})");
  auto j = nlohmann::json::parse(job.trace_json());
  ASSERT_EQ(j["traceEvents"].size(), 2u);
  EXPECT_EQ(j["traceEvents"][0]["name"], "elim.I");
  EXPECT_EQ(j["traceEvents"][1]["dur"], 20);
  EXPECT_FALSE(j["otherData"].contains("note"));
  EXPECT_FALSE(j["otherData"].contains("dropped_spans"));
  // An engine trace that kept only its first and latest spans says how many it dropped.
  job.set_engine_trace(
      R"({"traceEvents":[{"name":"elim.I","ph":"X","ts":1,"dur":2,"pid":1,"tid":3}],)"
      R"("otherData":{"dropped_spans":7}})");
  EXPECT_EQ(nlohmann::json::parse(job.trace_json())["otherData"]["dropped_spans"], 7);
}

// An empty trace says why: traces live in memory, so a job from before a restart has none.
TEST(JobTest, AnEmptyTraceSaysWhy) {
  Job pending(5, 1000, "t", Lane::kSmall, nlohmann::json::object());
  EXPECT_EQ(nlohmann::json::parse(pending.trace_json())["otherData"]["note"],
            "no trace events: the job has not started");
  Job restored(6, 1000, "dense_solve", Lane::kDense, nlohmann::json::object());
  Job::History h;
  h.state = JobState::kCompleted;
  h.log = {"completed in 0.5 s"};
  restored.restore_history(std::move(h));
  const auto j = nlohmann::json::parse(restored.trace_json());
  EXPECT_TRUE(j["traceEvents"].empty());
  EXPECT_EQ(
      j["otherData"]["note"],
      "no trace events: a job's trace is kept in the daemon's memory, and this job ran before "
      "the daemon's last restart");
}

}  // namespace
}  // namespace stripesolve::daemon
