// The job manager: admission, lanes of worker threads, ownership checks, cancellation, expiry.
//
// Each job type is registered with a lane and a runner. Each lane (small, dense, tridiag) has its
// own FIFO queue and its own worker threads (`concurrency`), so small jobs and tridiagonal
// batches never wait behind a dense solve that holds the dense lane for hours. A runner is called
// on a worker thread with a JobContext; it returns the job's result JSON or an error; a job whose
// cancel was requested and whose runner returns an error ends CANCELLED, otherwise FAILED. A runner
// that throws (std::bad_alloc included) fails its job with the exception's message; no job can end
// the worker thread or the process.
//
// Ownership: every lookup takes the requesting uid; a job is visible to its owner and to root
// only (may_access); other users get "job N not found", exactly as for a job that never existed.
//
// Journal (daemon/job_journal.h, optional): a submit is recorded before its id is returned, and
// every state change after it happens; restore() rebuilds the table from it after a restart:
// finished jobs come back as they ended (until the result TTL), pending jobs are queued again in
// their order, a dense job that was RUNNING is queued first in its lane (its partial factor was
// removed by the store at start-up), and a job whose inputs lived only in the old process (passed
// descriptors, uploads, tridiagonal arrays) fails with "the daemon restarted; submit again".
// Jobs that cancel_all() stops at shutdown (and no user cancelled) stay in the journal as they
// were, PENDING or RUNNING: a stop for a reboot costs no queued or running work.
//
// Threading: all public methods are thread-safe; mu_ guards the job table and the queues. The
// journal has a mutex of its own; it is called with mu_ held only on submit (so that ids reach
// the journal in order), never on a progress update.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>
#include <spdlog/logger.h>

#include "base/mutex.h"
#include "base/status.h"
#include "daemon/job.h"
#include "daemon/job_journal.h"

namespace stripesolve::daemon {

// What a runner sees of its job.
class JobContext {
 public:
  JobContext(std::shared_ptr<Job> job, std::shared_ptr<spdlog::logger> log)
      : job_(std::move(job)), log_(std::move(log)) {}
  Job& job() { return *job_; }
  uid_t owner() const { return job_->owner(); }
  const nlohmann::json& params() const { return job_->params(); }
  bool cancelled() const { return job_->cancel_requested(); }
  // Descriptor i passed with the submit (daemon/job_files.h has the checked accessors).
  int file(size_t index) const { return job_->file(index); }
  // Logs to the daemon log (with the job id) and to the job's own log.
  void log(std::string_view message);
  void warn(std::string_view message);

 private:
  std::shared_ptr<Job> job_;
  std::shared_ptr<spdlog::logger> log_;
};

using JobRunner = std::function<Result<nlohmann::json>(JobContext&)>;

// The error of a job that a shutdown stopped while the journal keeps it to run again (code
// kUnavailable, state CANCELLED): clients that wait reconnect and follow it on the next daemon.
inline constexpr std::string_view kStoppedByShutdownMessage =
    "stopped by the daemon's shutdown; the job journal keeps it, and the daemon runs it again when "
    "it "
    "starts (or fails it, saying why, if it cannot)";

// What a submit (or an upload) gets while the daemon drains.
inline constexpr std::string_view kDrainingMessage =
    "the daemon is draining (it stops once its jobs have ended) and accepts no new work; status, "
    "watch, result and cancel still work";

// Whether a job that was RUNNING when the daemon died had finished its work before that: the
// kill came between its work's commit (a matrix the store holds complete) and the journal's
// record of its end. Given the job's params and when it started; returns the result the job
// would have returned, or nullopt (then restore() fails or re-runs it as for any other job).
using FinishedBeforeRestart = std::function<std::optional<nlohmann::json>(
    const nlohmann::json& params, Clock::time_point started)>;

struct JobType {
  Lane lane = Lane::kSmall;
  JobRunner run;
  FinishedBeforeRestart finished_before_restart;  // empty: never
};

class JobRegistry {
 public:
  void add(std::string type, Lane lane, JobRunner run, FinishedBeforeRestart finished = {});
  const JobType* find(std::string_view type) const;
  std::string names() const;  // "a, b, c"

 private:
  std::map<std::string, JobType, std::less<>> types_;
};

struct JobManagerConfig {
  int small_concurrency = 4;
  int dense_concurrency = 1;
  int tridiag_concurrency = 2;
  int64_t max_jobs = 10000;  // records kept (pending + running + finished, not yet expired)
  // Passed files one uid's pending and running jobs may hold (each job closes its files when it
  // ends): a bound on the descriptors a user can make the daemon keep open.
  int64_t max_files_per_uid = 256;
  std::chrono::seconds result_ttl{24 * 3600};
};

class JobManager {
 public:
  // `journal` (may be null: nothing is recorded) must outlive the manager.
  JobManager(JobManagerConfig config, JobRegistry registry, JobJournal* journal = nullptr);
  ~JobManager();  // cancels what is left and joins the workers
  JobManager(const JobManager&) = delete;
  JobManager& operator=(const JobManager&) = delete;

  // `spec` is {"type": ..., fields...}; `files` the descriptors passed with it, which the job
  // holds until it ends. Errors: unknown type, stopped, too many jobs, too many files held.
  Result<std::shared_ptr<Job>> submit(uid_t owner, const nlohmann::json& spec,
                                      std::vector<UniqueFd> files = {});
  Result<std::shared_ptr<Job>> find(uid_t requester, uint64_t id) const;
  // The requester's jobs (root with all = true: everybody's), oldest first.
  std::vector<std::shared_ptr<Job>> list(uid_t requester, bool all) const;
  Result<std::shared_ptr<Job>> cancel(uid_t requester, uint64_t id);
  // Rebuilds the job table from the journal (see above); call once, before the first submit.
  struct Restored {
    int64_t finished = 0, requeued = 0, failed = 0;
  };
  Result<Restored> restore();

  // Drops finished jobs older than the TTL; returns how many.
  size_t expire(Clock::time_point now);

  // Shutdown: stop_accepting() makes submit fail; cancel_all() cancels pending and running jobs;
  // wait_idle() waits until nothing is pending or running (or the deadline passes).
  void stop_accepting();
  void cancel_all();
  bool wait_idle(std::chrono::steady_clock::time_point deadline);

  struct Counts {
    int64_t pending = 0, running = 0, completed = 0, completed_with_warning = 0, failed = 0,
            cancelled = 0;
    uint64_t submitted_total = 0;
  };
  Counts counts() const;
  std::vector<std::shared_ptr<Job>> running_jobs() const;
  const JobManagerConfig& config() const { return config_; }

 private:
  struct LaneQueue {
    std::deque<std::shared_ptr<Job>> queue;
    std::vector<std::thread> workers;
  };
  void worker_loop(Lane lane);
  LaneQueue& lane_queue(Lane lane);
  void run_job(const std::shared_ptr<Job>& job);
  // Closes the job's files and forgets them in files_held_.
  void release_files(Job& job);
  // Whether cancel_all() stopped the job and its owner did not ask for it (mu_ not held).
  bool stopped_by_shutdown(const Job& job) const;
  // Records the job's present state in the journal (a warning if that fails); every job's state
  // hook (Job::set_state_hook).
  void journal_state(const Job& job);

  const JobManagerConfig config_;
  const JobRegistry registry_;
  JobJournal* const journal_;
  std::shared_ptr<spdlog::logger> log_;

  mutable Mutex mu_;
  CondVar cv_;  // queue changes, stop, job finished
  std::map<uint64_t, std::shared_ptr<Job>> jobs_ GUARDED_BY(mu_);
  LaneQueue small_, dense_, tridiag_;  // queues guarded by mu_; workers fixed after construction
  uint64_t next_id_ GUARDED_BY(mu_) = 1;
  uint64_t submitted_total_ GUARDED_BY(mu_) = 0;
  int64_t active_ = 0;  // pending + running, guarded by mu_
  bool accepting_ GUARDED_BY(mu_) = true;
  bool stopping_ GUARDED_BY(mu_) = false;
  bool shutdown_cancel_ = false;     // cancel_all() ran; guarded by mu_
  std::set<uint64_t> user_cancels_;  // jobs a user asked to cancel; guarded by mu_
  std::map<uid_t, int64_t>
      files_held_;  // by owner, files of pending and running jobs; guarded by mu_
};

}  // namespace stripesolve::daemon
