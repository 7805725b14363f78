// The job journal: every job's request, owner, state changes, log and result location, in an
// SQLite database (state.db) in the daemon's state directory (daemon.state_dir, beside the
// store), so that a killed or rebooted daemon knows its jobs again (issue 18;
// docs/storage-format.md "Job journal", docs/operations.md).
//
// Durability: WAL mode with synchronous=FULL; every record_*() call is one transaction that is
// on disk when it returns (the WAL is fsync'ed at each commit). A job is recorded when it is
// submitted (before its id reaches the client) and at each state change; its log lines reach the
// journal with the next state change. Job ids are never reused: next_id() survives restarts
// and expiry.
//
// Finished solutions (the row-major n x nrhs array a job keeps for `result`) are written to
// results/job-<id>.npy in the same directory, fdatasync'ed before the COMPLETED row names them.
//
// Threading: the journal owns one SQLite connection, guarded by mu_; every method may be called
// from any thread (the I/O thread on submit and cancel, worker threads on state changes). Nothing
// on a hot path calls it: progress updates and solution rows never touch the journal, only the
// few state changes of a job do.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/mutex.h"
#include "base/status.h"
#include "daemon/job.h"

struct sqlite3;

namespace stripesolve::daemon {

// One job as the journal last recorded it.
struct JournalRecord {
  uint64_t id = 0;
  uid_t owner = 0;
  std::string type;
  nlohmann::json params;
  JobState state = JobState::kPending;
  Clock::time_point created{}, started{}, finished{};
  nlohmann::json result;  // null unless COMPLETED
  Status error;
  std::vector<std::string> log;
  std::string result_file;  // the stored solution (absolute path), empty if none
};

class JobJournal {
 public:
  // Opens (creating it and `dir` when missing) dir/state.db.
  static Result<std::unique_ptr<JobJournal>> open(const std::string& dir);
  ~JobJournal();
  JobJournal(const JobJournal&) = delete;
  JobJournal& operator=(const JobJournal&) = delete;

  const std::string& dir() const { return dir_; }
  // The id the next job gets: larger than every id ever recorded.
  uint64_t next_id() const;

  // A new job (PENDING), its request and owner; moves next_id() past its id.
  Status record_submit(const Job& job);
  // The job's present state, times, result or error and log; `result_file` when its solution
  // was stored (store_solution()).
  Status record_state(const Job& job, const std::string& result_file = "");
  // Forgets an expired job (its row, its state changes and its stored solution).
  Status forget(uint64_t id);
  // Every job recorded, oldest first.
  Result<std::vector<JournalRecord>> load() const;

  // Writes the job's solution (published in full) to results/job-<id>.npy, durably; returns the
  // path.
  Result<std::string> store_solution(const Job& job) const;
  // Installs a stored solution into a restored job.
  static Status load_solution(const std::string& path, Job& job);

 private:
  JobJournal(std::string dir, sqlite3* db) : dir_(std::move(dir)), db_(db) {}
  Status exec(const char* sql) const REQUIRES(mu_);

  const std::string dir_;
  mutable Mutex mu_;
  sqlite3* db_ GUARDED_BY(mu_);
};

}  // namespace stripesolve::daemon
