#include "daemon/job_manager.h"

#include <atomic>
#include <future>

#include <gtest/gtest.h>

#include "daemon/wait_terminal.h"

namespace stripesolve::daemon {
namespace {

using namespace std::chrono_literals;

// A real job type for these tests: it waits until released or cancelled, so tests control
// exactly when it ends.
struct Gate {
  std::mutex mu;
  std::condition_variable cv;
  bool open = false;
  void release() {
    std::lock_guard<std::mutex> l(mu);
    open = true;
    cv.notify_all();
  }
};

JobRunner gated_runner(Gate& gate) {
  return [&gate](JobContext& ctx) -> Result<nlohmann::json> {
    std::unique_lock<std::mutex> l(gate.mu);
    ctx.job().on_cancel([&gate] { gate.cv.notify_all(); });
    while (!gate.open && !ctx.cancelled()) gate.cv.wait_for(l, 10ms);
    if (ctx.cancelled()) return Status::cancelled("stopped at the gate");
    return nlohmann::json{{"released", true}};
  };
}

JobRegistry registry_with(Gate& gate) {
  JobRegistry r;
  r.add("sum", Lane::kSmall, [](JobContext& ctx) -> Result<nlohmann::json> {
    int64_t s = 0;
    for (auto& v : ctx.params().at("values")) s += v.get<int64_t>();
    return nlohmann::json{{"sum", s}};
  });
  r.add("gated", Lane::kDense, gated_runner(gate));
  r.add("fails", Lane::kSmall, [](JobContext&) -> Result<nlohmann::json> {
    return Status::numerical("zero pivot in row 7");
  });
  return r;
}

TEST(JobManagerTest, RunsJobsAndReportsResults) {
  Gate gate;
  JobManager m({}, registry_with(gate));
  auto job = m.submit(1000, {{"type", "sum"}, {"values", {1, 2, 3}}});
  ASSERT_TRUE(job.is_ok());
  wait_terminal(*job);
  EXPECT_EQ((*job)->state(), JobState::kCompleted);
  EXPECT_EQ((*job)->to_json()["result"]["sum"], 6);
  auto bad = m.submit(1000, {{"type", "fails"}});
  wait_terminal(*bad);
  EXPECT_EQ((*bad)->state(), JobState::kFailed);
  EXPECT_EQ((*bad)->error().message(), "zero pivot in row 7");
}

TEST(JobManagerTest, UnknownTypeIsAClearError) {
  Gate gate;
  JobManager m({}, registry_with(gate));
  EXPECT_EQ(m.submit(1, {{"type", "nope"}}).status().message(),
            "unknown job type 'nope' (known: fails, gated, sum)");
  EXPECT_EQ(m.submit(1, {{"x", 1}}).status().message(),
            "job has no string field 'type' (known: fails, gated, sum)");
}

TEST(JobManagerTest, OwnershipIsCheckedOnEveryLookup) {
  Gate gate;
  JobManager m({}, registry_with(gate));
  auto job = m.submit(1000, {{"type", "gated"}});
  ASSERT_TRUE(job.is_ok());
  const uint64_t id = (*job)->id();
  // Another user can neither see, list nor cancel it; the error equals a missing job's.
  EXPECT_EQ(m.find(1001, id).status().message(), "job 1 not found");
  EXPECT_EQ(m.cancel(1001, id).status().message(), "job 1 not found");
  EXPECT_TRUE(m.list(1001, true).empty());
  EXPECT_FALSE((*job)->cancel_requested());
  // The owner and root can.
  EXPECT_TRUE(m.find(1000, id).is_ok());
  EXPECT_EQ(m.list(1000, false).size(), 1u);
  EXPECT_EQ(m.list(0, true).size(), 1u);
  EXPECT_TRUE(m.list(0, false).empty());
  EXPECT_TRUE(m.cancel(0, id).is_ok());
  wait_terminal(*job);
  EXPECT_EQ((*job)->state(), JobState::kCancelled);
}

TEST(JobManagerTest, SmallJobsDoNotWaitBehindDenseJobs) {
  Gate gate;
  JobManager m({.small_concurrency = 2, .dense_concurrency = 1}, registry_with(gate));
  auto dense1 = m.submit(1, {{"type", "gated"}});
  auto dense2 = m.submit(1, {{"type", "gated"}});
  std::vector<std::shared_ptr<Job>> small;
  for (int i = 0; i < 20; ++i) small.push_back(*m.submit(1, {{"type", "sum"}, {"values", {i}}}));
  for (auto& j : small) {
    wait_terminal(j);
    EXPECT_EQ(j->state(), JobState::kCompleted);
  }
  EXPECT_EQ((*dense2)->state(), JobState::kPending);  // the dense lane has one worker
  // Cancelling a pending job ends it at once; it never runs.
  ASSERT_TRUE(m.cancel(1, (*dense2)->id()).is_ok());
  EXPECT_EQ((*dense2)->state(), JobState::kCancelled);
  EXPECT_EQ((*dense2)->error().message(), "cancelled by uid 1 while pending");
  gate.release();
  wait_terminal(*dense1);
  EXPECT_EQ((*dense1)->state(), JobState::kCompleted);
  EXPECT_TRUE(m.wait_idle(std::chrono::steady_clock::now() + 10s));
  auto c = m.counts();
  EXPECT_EQ(c.completed, 21);
  EXPECT_EQ(c.cancelled, 1);
  EXPECT_EQ(c.submitted_total, 22u);
}

TEST(JobManagerTest, TridiagLaneRunsWhileTheOtherLanesAreBusy) {
  Gate gate;
  JobRegistry r = registry_with(gate);
  r.add("small_gated", Lane::kSmall, gated_runner(gate));
  r.add("batch", Lane::kTridiag, [](JobContext&) -> Result<nlohmann::json> {
    return nlohmann::json{{"solved", true}};
  });
  JobManager m({.small_concurrency = 1, .dense_concurrency = 1, .tridiag_concurrency = 1},
               std::move(r));
  auto dense = *m.submit(1, {{"type", "gated"}});
  auto small = *m.submit(1, {{"type", "small_gated"}});
  while (dense->state() != JobState::kRunning || small->state() != JobState::kRunning) {
    std::this_thread::sleep_for(1ms);
  }
  auto batch = *m.submit(1, {{"type", "batch"}});
  wait_terminal(batch);
  EXPECT_EQ(batch->state(), JobState::kCompleted);
  EXPECT_EQ(batch->to_json()["lane"], "tridiag");
  EXPECT_EQ(dense->state(), JobState::kRunning);  // still holding their lanes
  EXPECT_EQ(small->state(), JobState::kRunning);
  gate.release();
  EXPECT_TRUE(m.wait_idle(std::chrono::steady_clock::now() + 10s));
}

TEST(JobManagerTest, CancelRunningAndShutdown) {
  Gate gate;
  JobManager m({}, registry_with(gate));
  auto running = *m.submit(1, {{"type", "gated"}});
  while (running->state() != JobState::kRunning) std::this_thread::sleep_for(1ms);
  ASSERT_TRUE(m.cancel(1, running->id()).is_ok());
  wait_terminal(running);
  EXPECT_EQ(running->state(), JobState::kCancelled);
  // Either the runner saw the cancel ("stopped at the gate") or it came before the runner began.
  EXPECT_EQ(running->error().code(), StatusCode::kCancelled);
  m.stop_accepting();
  EXPECT_EQ(m.submit(1, {{"type", "sum"}, {"values", {1}}}).status().message(),
            std::string(kDrainingMessage));
}

TEST(JobManagerTest, ExpiryDropsFinishedJobs) {
  Gate gate;
  JobManager m({.result_ttl = std::chrono::seconds(60)}, registry_with(gate));
  auto job = *m.submit(1, {{"type", "sum"}, {"values", {1}}});
  wait_terminal(job);
  EXPECT_EQ(m.expire(Clock::now()), 0u);
  EXPECT_EQ(m.expire(Clock::now() + std::chrono::seconds(61)), 1u);
  EXPECT_EQ(m.find(1, job->id()).status().code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace stripesolve::daemon
