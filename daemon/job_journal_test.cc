#include "daemon/job_journal.h"

#include <unistd.h>

#include <condition_variable>
#include <filesystem>
#include <map>
#include <mutex>
#include <thread>

#include <gtest/gtest.h>

#include "daemon/job_manager.h"
#include "daemon/wait_terminal.h"

namespace stripesolve::daemon {
namespace {

using namespace std::chrono_literals;

std::string temp_dir() {
  char tmpl[] = "/tmp/ss-journal-XXXXXX";
  return ::mkdtemp(tmpl);
}

// Job types for the restart tests: a dense job that blocks until its manager stops (so it is
// RUNNING when the "crash" comes), a dense job that publishes a solution, a tridiagonal one.
struct Blocker {
  std::mutex mu;
  std::condition_variable cv;
  bool running = false;
};

JobRegistry registry_with(Blocker& blocker, std::atomic<int>* runs = nullptr) {
  JobRegistry r;
  r.add("block", Lane::kDense, [&blocker, runs](JobContext& ctx) -> Result<nlohmann::json> {
    if (runs != nullptr) ++*runs;
    std::unique_lock<std::mutex> l(blocker.mu);
    blocker.running = true;
    blocker.cv.notify_all();
    while (!ctx.cancelled()) blocker.cv.wait_for(l, 5ms);
    return Status::cancelled("stopped");
  });
  r.add("solve", Lane::kDense, [runs](JobContext& ctx) -> Result<nlohmann::json> {
    if (runs != nullptr) ++*runs;
    const double x[3] = {1.5, -2.0, 3.25};
    STRIPESOLVE_RETURN_IF_ERROR(ctx.job().begin_solution(3, 1));
    STRIPESOLVE_RETURN_IF_ERROR(ctx.job().publish_rows(0, 3, x));
    return nlohmann::json{{"residual", 0.0}};
  });
  r.add("batch", Lane::kTridiag,
        [](JobContext&) -> Result<nlohmann::json> { return nlohmann::json::object(); });
  return r;
}

TEST(JobJournalTest, RecordsSurviveReopenAndIdsAreNeverReused) {
  const std::string dir = temp_dir();
  {
    auto journal = JobJournal::open(dir);
    ASSERT_TRUE(journal.is_ok()) << journal.status().to_string();
    EXPECT_EQ((*journal)->next_id(), 1u);
    Job job(41, 1000, "solve", Lane::kDense, {{"type", "solve"}, {"matrix", "K"}});
    ASSERT_TRUE((*journal)->record_submit(job).is_ok());
    job.append_log("running");
    job.transition(JobState::kRunning);
    job.set_error(Status::numerical("zero pivot in row 7"));
    job.transition(JobState::kFailed);
    ASSERT_TRUE((*journal)->record_state(job).is_ok());
  }
  auto journal = JobJournal::open(dir);
  ASSERT_TRUE(journal.is_ok());
  EXPECT_EQ((*journal)->next_id(), 42u);
  auto records = (*journal)->load();
  ASSERT_TRUE(records.is_ok());
  ASSERT_EQ(records->size(), 1u);
  const JournalRecord& r = records->front();
  EXPECT_EQ(r.id, 41u);
  EXPECT_EQ(r.owner, 1000u);
  EXPECT_EQ(r.params["matrix"], "K");
  EXPECT_EQ(r.state, JobState::kFailed);
  EXPECT_EQ(r.error.code(), StatusCode::kNumerical);
  EXPECT_EQ(r.error.message(), "zero pivot in row 7");
  ASSERT_FALSE(r.log.empty());
  EXPECT_NE(r.log.back().find("running"), std::string::npos);
  // Forgetting (expiry) keeps the id counter.
  ASSERT_TRUE((*journal)->forget(41).is_ok());
  EXPECT_EQ((*journal)->next_id(), 42u);
  std::filesystem::remove_all(dir);
}

TEST(JobJournalTest, ARestartRequeuesPendingAndRunningJobsAndKeepsFinishedOnes) {
  const std::string dir = temp_dir();
  uint64_t done_id = 0, running_id = 0, pending_id = 0, batch_id = 0, fd_id = 0;
  {
    auto journal = JobJournal::open(dir);
    ASSERT_TRUE(journal.is_ok());
    Blocker blocker;
    auto manager =
        std::make_unique<JobManager>(JobManagerConfig{}, registry_with(blocker), journal->get());
    JobManager& m = *manager;
    auto done = m.submit(1000, {{"type", "solve"}});
    ASSERT_TRUE(done.is_ok());
    wait_terminal(*done);
    ASSERT_EQ((*done)->state(), JobState::kCompleted);
    done_id = (*done)->id();
    auto running = m.submit(1000, {{"type", "block"}});
    ASSERT_TRUE(running.is_ok());
    {
      std::unique_lock<std::mutex> l(blocker.mu);
      blocker.cv.wait_for(l, 5s, [&] { return blocker.running; });
    }
    running_id = (*running)->id();
    auto pending = m.submit(1000, {{"type", "solve"}});
    auto batch = m.submit(1000, {{"type", "batch"}, {"a", {{"fd", 0}}}});
    auto with_fd = m.submit(1000, {{"type", "solve"}, {"rhs", {{"upload", 3}}}});
    ASSERT_TRUE(pending.is_ok() && batch.is_ok() && with_fd.is_ok());
    pending_id = (*pending)->id();
    batch_id = (*batch)->id();
    fd_id = (*with_fd)->id();
    wait_terminal(*batch);  // the tridiagonal lane is free: it ran
    auto dropped = m.submit(1000, {{"type", "solve"}});
    ASSERT_TRUE(dropped.is_ok());
    ASSERT_TRUE(m.cancel(1000, (*dropped)->id()).is_ok());
    // The shutdown cancels what is left in memory; the journal keeps it as it was, except the
    // job its owner cancelled.
    manager.reset();
    auto records = (*journal)->load();
    ASSERT_TRUE(records.is_ok());
    std::map<uint64_t, JobState> states;
    for (const auto& r : *records) states[r.id] = r.state;
    EXPECT_EQ(states[running_id], JobState::kRunning);
    EXPECT_EQ(states[pending_id], JobState::kPending);
    EXPECT_EQ(states[(*dropped)->id()], JobState::kCancelled);
  }
  // Batch ran and completed; for the restart test pretend it was still pending.
  {
    auto journal = JobJournal::open(dir);
    ASSERT_TRUE(journal.is_ok());
    Job batch(batch_id, 1000, "batch", Lane::kTridiag, {{"type", "batch"}});
    ASSERT_TRUE((*journal)->record_state(batch).is_ok());
  }
  auto journal = JobJournal::open(dir);
  ASSERT_TRUE(journal.is_ok());
  Blocker blocker;
  std::atomic<int> runs{0};
  JobManager m({}, registry_with(blocker, &runs), journal->get());
  auto restored = m.restore();
  ASSERT_TRUE(restored.is_ok()) << restored.status().to_string();
  EXPECT_EQ(restored->finished, 2);  // the solve that ran and the one its owner cancelled
  EXPECT_EQ(restored->requeued, 2);
  EXPECT_EQ(restored->failed, 2);
  // The finished solve is there with its solution.
  auto done = m.find(1000, done_id);
  ASSERT_TRUE(done.is_ok());
  EXPECT_EQ((*done)->state(), JobState::kCompleted);
  ASSERT_TRUE((*done)->has_solution());
  EXPECT_EQ((*(*done)->solution_buffer())[2], 3.25);
  // The running job runs again, first; the pending one after it.
  {
    std::unique_lock<std::mutex> l(blocker.mu);
    ASSERT_TRUE(blocker.cv.wait_for(l, 5s, [&] { return blocker.running; }));
  }
  auto pending = m.find(1000, pending_id);
  ASSERT_TRUE(pending.is_ok());
  EXPECT_EQ((*pending)->state(), JobState::kPending);
  ASSERT_TRUE(m.cancel(1000, running_id).is_ok());
  wait_terminal(*pending);
  EXPECT_EQ((*pending)->state(), JobState::kCompleted);
  for (uint64_t id : {batch_id, fd_id}) {
    auto failed = m.find(1000, id);
    ASSERT_TRUE(failed.is_ok());
    EXPECT_EQ((*failed)->state(), JobState::kFailed);
    EXPECT_NE((*failed)->error().message().find("the daemon restarted; submit again"),
              std::string::npos);
  }
  // New ids continue after the old ones.
  auto next = m.submit(1000, {{"type", "solve"}});
  ASSERT_TRUE(next.is_ok());
  EXPECT_GT((*next)->id(), fd_id);
  wait_terminal(*next);
  std::filesystem::remove_all(dir);
}

// A job RUNNING at the kill whose work its type finds committed (a matrix imported before the
// journal heard of the end) comes back COMPLETED with that result; one whose work is not found
// fails as before, and the check is asked only of jobs that were running.
TEST(JobJournalTest, ARunningJobWhoseWorkWasCommittedBeforeTheKillComesBackCompleted) {
  const std::string dir = temp_dir();
  std::vector<Clock::time_point> asked;
  const auto registry = [&asked] {
    JobRegistry r;
    r.add(
        "make", Lane::kSmall,
        [](JobContext&) -> Result<nlohmann::json> {
          return nlohmann::json{{"ran", true}};
        },
        [&asked](const nlohmann::json& p,
                 Clock::time_point started) -> std::optional<nlohmann::json> {
          asked.push_back(started);
          if (!p.value("committed", false)) return std::nullopt;
          return nlohmann::json{{"made", p.value("name", std::string())}};
        });
    return r;
  };
  const auto started = Clock::now() - 5s;
  {
    auto journal = JobJournal::open(dir);
    ASSERT_TRUE(journal.is_ok());
    const auto record = [&](uint64_t id, nlohmann::json params, JobState state) {
      Job job(id, 1000, "make", Lane::kSmall, std::move(params));
      ASSERT_TRUE((*journal)->record_submit(job).is_ok());
      Job::History h;
      h.state = state;
      h.created = started - 1s;
      h.started = state == JobState::kRunning ? started : Clock::time_point{};
      job.restore_history(std::move(h));
      ASSERT_TRUE((*journal)->record_state(job).is_ok());
    };
    record(1, {{"type", "make"}, {"name", "A"}, {"committed", true}}, JobState::kRunning);
    record(2, {{"type", "make"}, {"name", "B"}, {"committed", false}}, JobState::kRunning);
    record(3, {{"type", "make"}, {"name", "C"}, {"committed", true}}, JobState::kPending);
  }
  auto journal = JobJournal::open(dir);
  ASSERT_TRUE(journal.is_ok());
  JobManager m({}, registry(), journal->get());
  auto restored = m.restore();
  ASSERT_TRUE(restored.is_ok()) << restored.status().to_string();
  EXPECT_EQ(restored->finished, 1);
  EXPECT_EQ(restored->failed, 1);
  EXPECT_EQ(restored->requeued, 1);
  ASSERT_EQ(asked.size(), 2u);  // the two running jobs, with their start times
  EXPECT_EQ(std::chrono::duration_cast<std::chrono::seconds>(asked[0] - started).count(), 0);

  auto done = m.find(1000, 1);
  ASSERT_TRUE(done.is_ok());
  EXPECT_EQ((*done)->state(), JobState::kCompleted);
  EXPECT_EQ((*done)->result(), (nlohmann::json{{"made", "A"}}));
  const auto log = (*done)->log_lines();
  EXPECT_NE(std::string(log.back()).find("restarted after this job had finished its work"),
            std::string::npos);
  auto failed = m.find(1000, 2);
  ASSERT_TRUE(failed.is_ok());
  EXPECT_EQ((*failed)->state(), JobState::kFailed);
  EXPECT_NE((*failed)->error().message().find("the daemon restarted; submit again"),
            std::string::npos);
  auto rerun = m.find(1000, 3);  // pending: it runs (its check is never asked)
  ASSERT_TRUE(rerun.is_ok());
  wait_terminal(*rerun);
  EXPECT_EQ((*rerun)->result(), (nlohmann::json{{"ran", true}}));
  // The journal has the completion: a second restart finds it finished.
  auto records = (*journal)->load();
  ASSERT_TRUE(records.is_ok());
  for (const auto& r : *records) {
    if (r.id == 1) {
      EXPECT_EQ(r.state, JobState::kCompleted);
    }
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace stripesolve::daemon
