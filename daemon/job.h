// A job of the daemon: its state machine, owner, progress, logs, result and streamed solution.
//
// States: PENDING -> RUNNING -> COMPLETED | COMPLETED_WITH_WARNING | FAILED | CANCELLED, and
// PENDING -> CANCELLED.
// transition() is the only way to change the state; an illegal edge is a bug (internal_error).
//
// Threading: a Job is shared (shared_ptr) between the job manager, the worker thread running it
// and connections watching it. Every mutable member is guarded by mu_; the solution values are
// written by the worker only for rows not yet published and read by others only for rows
// published through publish_rows() (the mutex orders the two), so reads need no lock.
// Listeners are called without mu_ held, from whichever thread made the change; they must be
// cheap (the server's listener posts to its I/O thread).
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/mutex.h"
#include "base/status.h"
#include "base/unique_fd.h"

namespace stripesolve::daemon {

enum class JobState {
  kPending,    // queued in its lane; may be cancelled directly
  kRunning,    // a worker runs it; cancel() asks the runner to stop
  kCompleted,  // terminal: result (and solution rows) available until fetched or expired
  // terminal: like kCompleted, but the result's "warning" says why it may not be trusted (a
  // dense solve above its backward-error tolerance or singular to working precision, issue 17)
  kCompletedWithWarning,
  kFailed,     // terminal: error() says why
  kCancelled,  // terminal: stopped on request or at shutdown
};
std::string_view job_state_name(JobState s);
bool is_terminal(JobState s);
// kCompleted or kCompletedWithWarning: the job has a result (and maybe a solution) to fetch.
bool has_result(JobState s);

// Small jobs (matrix management, queries), dense solves and tridiagonal batches run in separate
// lanes so that a long solve never blocks small jobs (ARCHITECTURE.md §10). Tridiagonal batches
// get a lane of their own rather than the small one: they take seconds of all cores (not the
// milliseconds of a query), so a burst of them must not delay matrix management either, and
// they must never queue behind an hours-long dense solve.
enum class Lane { kSmall, kDense, kTridiag };
std::string_view lane_name(Lane lane);

// Who may see a job: its owner, and root.
bool may_access(uid_t requester, uid_t owner);

using Clock = std::chrono::system_clock;

// One span of the job's Chrome trace (times relative to the job's creation).
struct TraceSpan {
  std::string name;
  std::string category;
  double start_us = 0;
  double duration_us = 0;
  int64_t tid = 0;
};

class Job {
 public:
  // `files`: the descriptors the client passed with the submit; a field {"fd": i} of `params`
  // names files[i] (daemon/job_files.h).
  Job(uint64_t id, uid_t owner, std::string type, Lane lane, nlohmann::json params,
      std::vector<UniqueFd> files = {});

  uint64_t id() const { return id_; }
  uid_t owner() const { return owner_; }
  const std::string& type() const { return type_; }
  Lane lane() const { return lane_; }
  const nlohmann::json& params() const { return params_; }  // immutable after construction

  JobState state() const;
  // Moves to `next`; aborts on an illegal edge. Notifies listeners.
  void transition(JobState next);
  // Like transition(), but returns false instead of aborting when the job is already terminal
  // or the edge is illegal (used by cancel races).
  bool try_transition(JobState next);
  // PENDING -> CANCELLED atomically, with `reason` as the job's error; false if the job already
  // left PENDING (a running job is ended by its worker, never from outside).
  bool cancel_if_pending(Status reason = Status::cancelled("cancelled while pending"));

  // Cancellation: sets the flag and runs the registered hooks (e.g. the engine's CancelToken).
  // by_shutdown: the daemon stops and the journal keeps the job to run again after the restart
  // (hooks may then keep work for it: cancel_for_restart()).
  void request_cancel(bool by_shutdown = false);
  bool cancel_for_restart() const { return cancel_for_restart_.load(std::memory_order_acquire); }
  bool cancel_requested() const { return cancel_requested_.load(std::memory_order_acquire); }
  // Registers a hook run by request_cancel() (immediately if already requested).
  void on_cancel(std::function<void()> hook);

  void set_progress(nlohmann::json progress);
  nlohmann::json progress() const;
  void set_result(nlohmann::json result);
  void set_error(Status status);
  Status error() const;
  void append_log(std::string line);
  std::vector<std::string> log_lines() const;
  // The lines numbered from `from` on (a job's lines are numbered 0, 1, ... for its life; the
  // oldest are dropped past a bound, so `first` may be above `from`) and the next number:
  // `logs -f` asks again from `next`.
  struct LogSlice {
    std::vector<std::string> lines;
    uint64_t first = 0;
    uint64_t next = 0;
  };
  LogSlice log_since(uint64_t from) const;
  void add_trace_span(TraceSpan span);
  void set_engine_trace(std::string chrome_json);
  std::string trace_json() const;  // Chrome trace-event JSON

  // Solution streaming: begin_solution() allocates n x nrhs (row-major); publish_rows() copies
  // rows [row_begin, row_begin + rows) from column-major `x` (ld = rows) and makes them visible.
  Status begin_solution(int64_t n, int64_t nrhs);
  Status publish_rows(int64_t row_begin, int64_t rows, const double* x);
  // Installs a whole solution at once and publishes it: `values` in C order of an array of
  // `array_shape` (1-D or 2-D). It streams as array_shape's element count rows of one value, so
  // no single row outgrows a frame however wide the array is; the result header carries
  // array_shape for the client's .npy (tridiagonal batches, whose solution has the rhs shape).
  Status set_solution(std::vector<int64_t> array_shape, std::vector<double> values);
  // The .npy shape set by set_solution(); empty for begin_solution() (the client then writes
  // (n,) or (n, nrhs)).
  std::vector<int64_t> array_shape() const;
  struct RowRange {
    int64_t row_begin;
    int64_t rows;
  };
  // Published ranges from index `from` on (in publication order) and the shape (0 if none).
  std::vector<RowRange> published_since(size_t from, int64_t* n, int64_t* nrhs) const;
  bool has_solution() const;
  // The row-major buffer; a holder keeps it alive after mark_fetched(). Only published rows
  // may be read.
  std::shared_ptr<const std::vector<double>> solution_buffer() const;
  // Marks the result fetched: frees the solution; the job record stays until it expires.
  void mark_fetched();
  bool fetched() const;

  Clock::time_point created() const { return created_; }
  Clock::time_point started() const;
  Clock::time_point finished() const;
  nlohmann::json result() const;

  // A job the journal knew from before a restart (daemon/job_journal.h): its state, times,
  // result or error and log as recorded. Only before the job is shared (no listener, no worker).
  struct History {
    JobState state = JobState::kPending;
    Clock::time_point created{}, started{}, finished{};
    nlohmann::json result;
    Status error;
    std::vector<std::string> log;
  };
  void restore_history(History history);

  // Listeners: called after every change (state, progress, rows). Returns a handle for remove.
  uint64_t add_listener(std::function<void()> fn);
  // Called after every state change, before the listeners: the job manager records the change
  // in its journal there, so nobody learns of a state that is not yet durable. Set before the
  // job is shared; called without mu_ held, from the thread that made the change.
  void set_state_hook(std::function<void(const Job&)> hook) { state_hook_ = std::move(hook); }
  // Where the finished job's solution is stored (daemon/job_journal.h); empty if nowhere.
  void set_result_location(std::string path);
  std::string result_location() const;
  void remove_listener(uint64_t handle);

  nlohmann::json to_json() const;

  // The passed files: descriptor i, or -1 once released. The worker running the job may use them
  // until the job manager releases them (when the runner returns, or when a pending job is
  // cancelled); releasing closes them.
  int file(size_t index) const;
  size_t file_count() const;
  // Closes the files; returns how many were held.
  size_t release_files();

 private:
  bool legal_edge(JobState from, JobState to) const;
  void notify();

  const uint64_t id_;
  const uid_t owner_;
  const std::string type_;
  const Lane lane_;
  const nlohmann::json params_;
  Clock::time_point created_;  // set at construction, or by restore_history() before sharing
  std::atomic<bool> cancel_requested_{false};
  std::atomic<bool> cancel_for_restart_{false};
  std::function<void(const Job&)> state_hook_;  // set before sharing, then read only

  mutable Mutex mu_;
  JobState state_ GUARDED_BY(mu_) = JobState::kPending;
  Clock::time_point started_ GUARDED_BY(mu_){}, finished_{};
  nlohmann::json progress_ GUARDED_BY(mu_) = nlohmann::json::object();
  nlohmann::json result_ GUARDED_BY(mu_);
  Status error_ GUARDED_BY(mu_);
  std::deque<std::string> log_ GUARDED_BY(mu_);
  uint64_t log_dropped_ = 0;  // lines dropped from log_'s front; guarded by mu_
  std::vector<TraceSpan> spans_ GUARDED_BY(mu_);
  std::string engine_trace_ GUARDED_BY(mu_);
  bool restored_ GUARDED_BY(mu_) = false;  // restore_history() ran: a job from before a restart
  std::vector<std::function<void()>> cancel_hooks_;                    // guarded by mu_
  std::vector<std::pair<uint64_t, std::function<void()>>> listeners_;  // guarded by mu_
  uint64_t next_listener_ GUARDED_BY(mu_) = 1;
  // Solution (row-major n x nrhs). The vector is sized once in begin_solution().
  std::shared_ptr<std::vector<double>> solution_;  // pointer guarded by mu_
  int64_t n_ GUARDED_BY(mu_) = 0, nrhs_ = 0;
  std::vector<int64_t> array_shape_ GUARDED_BY(mu_);
  std::vector<RowRange> published_ GUARDED_BY(mu_);
  bool fetched_ GUARDED_BY(mu_) = false;
  std::string result_location_ GUARDED_BY(mu_);
  std::vector<UniqueFd> files_ GUARDED_BY(mu_);
};

}  // namespace stripesolve::daemon
