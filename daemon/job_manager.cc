#include "daemon/job_manager.h"

#include <exception>
#include <new>

#include <fmt/format.h>

#include "base/logging.h"

namespace stripesolve::daemon {
namespace {
double micros_since(Clock::time_point origin, Clock::time_point t) {
  return std::chrono::duration<double, std::micro>(t - origin).count();
}

double millis_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
      .count();
}

// Runs a job's runner so that nothing it throws leaves the worker thread: an exception escaping
// a std::thread ends the process, and with it every other user's jobs (issue 15). Runners report
// errors as values; an exception here is a runner bug or an allocation the request's bounds did
// not foresee, and the job fails with what it was.
Result<nlohmann::json> run_guarded(const JobType& type, JobContext& ctx) {
  try {
    return type.run(ctx);
  } catch (const std::bad_alloc&) {
    return Status::resource_exhausted(
        "the daemon ran out of memory while running this job "
        "(std::bad_alloc); try a smaller request");
  } catch (const std::exception& e) {
    return Status::internal(fmt::format("the job stopped on an unexpected error: {}", e.what()));
  } catch (...) {
    return Status::internal("the job stopped on an unexpected error of unknown type");
  }
}
}  // namespace

// The job goes into the line's prefix ("job N: ") or JSON field ("job"), from any thread.
void JobContext::log(std::string_view message) {
  LogJobScope scope(static_cast<int64_t>(job_->id()));
  log_->info("{}: {}", job_->type(), message);
  job_->append_log(std::string(message));
}

void JobContext::warn(std::string_view message) {
  LogJobScope scope(static_cast<int64_t>(job_->id()));
  log_->warn("{}: {}", job_->type(), message);
  job_->append_log("warning: " + std::string(message));
}

void JobRegistry::add(std::string type, Lane lane, JobRunner run, FinishedBeforeRestart finished) {
  types_[std::move(type)] = JobType{lane, std::move(run), std::move(finished)};
}

const JobType* JobRegistry::find(std::string_view type) const {
  auto it = types_.find(type);
  return it == types_.end() ? nullptr : &it->second;
}

std::string JobRegistry::names() const {
  std::string out;
  for (const auto& [name, t] : types_) {
    if (!out.empty()) out += ", ";
    out += name;
  }
  return out;
}

JobManager::JobManager(JobManagerConfig config, JobRegistry registry, JobJournal* journal)
    : config_(config), registry_(std::move(registry)), journal_(journal), log_(logger("jobs")) {
  if (journal_ != nullptr) next_id_ = journal_->next_id();
  for (int i = 0; i < std::max(1, config_.small_concurrency); ++i) {
    small_.workers.emplace_back([this] { worker_loop(Lane::kSmall); });
  }
  for (int i = 0; i < std::max(1, config_.dense_concurrency); ++i) {
    dense_.workers.emplace_back([this] { worker_loop(Lane::kDense); });
  }
  for (int i = 0; i < std::max(1, config_.tridiag_concurrency); ++i) {
    tridiag_.workers.emplace_back([this] { worker_loop(Lane::kTridiag); });
  }
}

JobManager::LaneQueue& JobManager::lane_queue(Lane lane) {
  switch (lane) {
    case Lane::kSmall:
      return small_;
    case Lane::kDense:
      return dense_;
    case Lane::kTridiag:
      return tridiag_;
  }
  return small_;
}

JobManager::~JobManager() {
  stop_accepting();
  cancel_all();
  {
    MutexLock lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  for (auto* lane : {&small_, &dense_, &tridiag_}) {
    for (auto& t : lane->workers) t.join();
  }
}

Result<std::shared_ptr<Job>> JobManager::submit(uid_t owner, const nlohmann::json& spec,
                                                std::vector<UniqueFd> files) {
  if (!spec.is_object()) return Status::invalid_argument("job must be an object");
  auto type_it = spec.find("type");
  if (type_it == spec.end() || !type_it->is_string()) {
    return Status::invalid_argument("job has no string field 'type' (known: " + registry_.names() +
                                    ")");
  }
  const std::string type = type_it->get<std::string>();
  const JobType* jt = registry_.find(type);
  if (jt == nullptr) {
    return Status::invalid_argument(
        fmt::format("unknown job type '{}' (known: {})", type, registry_.names()));
  }
  std::shared_ptr<Job> job;
  {
    MutexLock lock(mu_);
    if (!accepting_) {
      return Status::unavailable(std::string(kDrainingMessage));
    }
    const auto nfiles = static_cast<int64_t>(files.size());
    if (nfiles > 0 && files_held_[owner] + nfiles > config_.max_files_per_uid) {
      return Status::resource_exhausted(fmt::format("the jobs of uid {} already hold {} files "
                                                    "(limit daemon.limits.max_job_files_per_uid = "
                                                    "{}); wait for some to end",
                                                    owner, files_held_[owner],
                                                    config_.max_files_per_uid))
          .set_retryable();
    }
    if (static_cast<int64_t>(jobs_.size()) >= config_.max_jobs) {
      return Status::resource_exhausted(
                 fmt::format("too many jobs kept ({}, limit daemon.limits.max_jobs); fetch or wait "
                             "for results to expire",
                             jobs_.size()))
          .set_retryable();
    }
    job = std::make_shared<Job>(next_id_++, owner, type, jt->lane, spec, std::move(files));
    job->set_state_hook([this](const Job& j) { journal_state(j); });
    if (journal_ != nullptr) {
      // Before the id reaches the client: a job it was told about is never forgotten.
      const auto start = std::chrono::steady_clock::now();
      Status recorded = journal_->record_submit(*job);
      log_->debug("job {} PENDING journaled in {:.2f} ms", job->id(), millis_since(start));
      if (!recorded.is_ok()) {
        return Status::unavailable("the job journal could not record the job: " +
                                   recorded.message())
            .set_retryable();
      }
    }
    files_held_[owner] += nfiles;
    jobs_[job->id()] = job;
    lane_queue(jt->lane).queue.push_back(job);
    ++submitted_total_;
    ++active_;
  }
  log_->info("job {} {} submitted by uid {} ({} lane)", job->id(), type, owner,
             lane_name(jt->lane));
  job->append_log(fmt::format("submitted by uid {}", owner));
  cv_.notify_all();
  return job;
}

Result<std::shared_ptr<Job>> JobManager::find(uid_t requester, uint64_t id) const {
  MutexLock lock(mu_);
  auto it = jobs_.find(id);
  // Another user's job reads exactly like a job that does not exist.
  if (it == jobs_.end() || !may_access(requester, it->second->owner())) {
    return Status::not_found(fmt::format("job {} not found", id));
  }
  return it->second;
}

std::vector<std::shared_ptr<Job>> JobManager::list(uid_t requester, bool all) const {
  MutexLock lock(mu_);
  std::vector<std::shared_ptr<Job>> out;
  for (const auto& [id, job] : jobs_) {
    if (job->owner() == requester || (all && requester == 0)) out.push_back(job);
  }
  return out;
}

Result<std::shared_ptr<Job>> JobManager::cancel(uid_t requester, uint64_t id) {
  STRIPESOLVE_ASSIGN_OR_RETURN(std::shared_ptr<Job> job, find(requester, id));
  if (!is_terminal(job->state())) {
    MutexLock lock(mu_);
    user_cancels_.insert(id);
  }
  job->request_cancel();
  const std::string reason = fmt::format("cancelled by uid {} while pending", requester);
  if (job->cancel_if_pending(Status::cancelled(reason))) {  // it never runs
    job->append_log(reason);
    release_files(*job);
    MutexLock lock(mu_);
    --active_;
    cv_.notify_all();
  } else if (job->state() == JobState::kRunning) {
    job->append_log(fmt::format("cancel requested by uid {}", requester));
  }
  log_->info("job {} cancel requested by uid {}", id, requester);
  return job;
}

size_t JobManager::expire(Clock::time_point now) {
  std::vector<uint64_t> expired;
  {
    MutexLock lock(mu_);
    for (auto it = jobs_.begin(); it != jobs_.end();) {
      const JobState s = it->second->state();
      if (is_terminal(s) && it->second->finished() + config_.result_ttl <= now) {
        log_->info("job {} expired ({} for longer than the result ttl)", it->first,
                   job_state_name(s));
        expired.push_back(it->first);
        it = jobs_.erase(it);
      } else {
        ++it;
      }
    }
  }
  if (journal_ != nullptr) {
    for (uint64_t id : expired) {
      if (Status st = journal_->forget(id); !st.is_ok())
        log_->warn("job {}: {}", id, st.to_string());
    }
  }
  return expired.size();
}

void JobManager::stop_accepting() {
  MutexLock lock(mu_);
  accepting_ = false;
}

void JobManager::cancel_all() {
  std::vector<std::shared_ptr<Job>> live;
  {
    MutexLock lock(mu_);
    shutdown_cancel_ = true;
    for (const auto& [id, job] : jobs_) {
      if (!is_terminal(job->state())) live.push_back(job);
    }
  }
  for (auto& job : live) {
    // With a journal the job runs again after the restart: what it keeps (a half-made factor's
    // progress) is not lost.
    job->request_cancel(journal_ != nullptr);
    const Status reason = journal_ != nullptr
                              ? Status::unavailable(std::string(kStoppedByShutdownMessage))
                              : Status::cancelled("cancelled at daemon shutdown while pending");
    if (job->cancel_if_pending(reason)) {
      job->append_log("cancelled at daemon shutdown while pending");
      release_files(*job);
      MutexLock lock(mu_);
      --active_;
    }
  }
  cv_.notify_all();
}

bool JobManager::wait_idle(std::chrono::steady_clock::time_point deadline) {
  MutexLock lock(mu_);
  while (active_ != 0) {
    if (!cv_.wait_until(lock, deadline)) return active_ == 0;
  }
  return true;
}

JobManager::Counts JobManager::counts() const {
  MutexLock lock(mu_);
  Counts c;
  c.submitted_total = submitted_total_;
  for (const auto& [id, job] : jobs_) {
    switch (job->state()) {
      case JobState::kPending:
        ++c.pending;
        break;
      case JobState::kRunning:
        ++c.running;
        break;
      case JobState::kCompleted:
        ++c.completed;
        break;
      case JobState::kCompletedWithWarning:
        ++c.completed_with_warning;
        break;
      case JobState::kFailed:
        ++c.failed;
        break;
      case JobState::kCancelled:
        ++c.cancelled;
        break;
    }
  }
  return c;
}

std::vector<std::shared_ptr<Job>> JobManager::running_jobs() const {
  MutexLock lock(mu_);
  std::vector<std::shared_ptr<Job>> out;
  for (const auto& [id, job] : jobs_) {
    if (job->state() == JobState::kRunning) out.push_back(job);
  }
  return out;
}

void JobManager::release_files(Job& job) {
  const auto closed = static_cast<int64_t>(job.release_files());
  if (closed == 0) return;
  MutexLock lock(mu_);
  auto it = files_held_.find(job.owner());
  if (it == files_held_.end()) return;
  it->second -= closed;
  if (it->second <= 0) files_held_.erase(it);
}

void JobManager::worker_loop(Lane lane) {
  LaneQueue& q = lane_queue(lane);
  while (true) {
    std::shared_ptr<Job> job;
    bool shutting_down = false;
    {
      MutexLock lock(mu_);
      while (!stopping_ && q.queue.empty()) cv_.wait(lock);
      if (q.queue.empty()) return;  // stopping with nothing left
      job = std::move(q.queue.front());
      q.queue.pop_front();
      shutting_down = shutdown_cancel_;
    }
    // cancel_all() settles every job still pending (the journal keeps it PENDING): a lane its
    // cancellations free must not start one meanwhile (it would be journalled RUNNING).
    if (shutting_down) continue;
    if (!job->try_transition(JobState::kRunning)) continue;  // cancelled while pending
    run_job(job);
    {
      MutexLock lock(mu_);
      --active_;
    }
    cv_.notify_all();
  }
}

void JobManager::run_job(const std::shared_ptr<Job>& job) {
  // Whatever the runner logs on this thread (the engine's plan, the store) names the job.
  LogJobScope scope(static_cast<int64_t>(job->id()));
  const auto start = Clock::now();
  job->add_trace_span({"queued", "job", 0, micros_since(job->created(), start), 0});
  JobContext ctx(job, log_);
  const JobType* jt = registry_.find(job->type());
  ctx.log("running");
  Result<nlohmann::json> result = Status::internal("runner did not run");
  if (job->cancel_requested()) {
    result = Status::cancelled("cancelled before it started");
  } else {
    result = run_guarded(*jt, ctx);
  }
  // The runner is done with the passed files: close them before the job reports its end, so a
  // client that renames its output on COMPLETED finds no descriptor of the daemon still open.
  release_files(*job);
  const auto end = Clock::now();
  job->add_trace_span({"run " + job->type(), "job", micros_since(job->created(), start),
                       micros_since(start, end), 0});
  const double secs = std::chrono::duration<double>(end - start).count();
  if (result.is_ok()) {
    // A runner flags a result it cannot vouch for with a non-empty "warning" (a dense solve's
    // quality contract, issue 17): the job ends COMPLETED_WITH_WARNING, never plain COMPLETED.
    const nlohmann::json& r = *result;
    const bool warned = r.is_object() && r.contains("warning") && r["warning"].is_string() &&
                        !r["warning"].get<std::string>().empty();
    if (warned) ctx.warn("completed with a warning: " + r["warning"].get<std::string>());
    job->set_result(std::move(result).value());
    ctx.log(fmt::format("completed in {:.3f} s", secs));
    // A dense solve's kept solution outlives the process: `result` works after a restart.
    if (journal_ != nullptr && job->lane() == Lane::kDense && job->has_solution()) {
      const auto store_start = std::chrono::steady_clock::now();
      auto stored = journal_->store_solution(*job);
      log_->debug("job {} solution stored in {:.2f} ms", job->id(), millis_since(store_start));
      if (stored.is_ok()) {
        job->set_result_location(*stored);
      } else {
        ctx.warn("the solution is kept in memory only: " + stored.status().to_string());
      }
    }
    job->transition(warned ? JobState::kCompletedWithWarning : JobState::kCompleted);
  } else if (job->cancel_requested() && stopped_by_shutdown(*job)) {
    job->set_error(Status::unavailable(std::string(kStoppedByShutdownMessage)));
    ctx.log(fmt::format("stopped by the shutdown after {:.3f} s", secs));
    job->transition(JobState::kCancelled);
  } else if (job->cancel_requested() || result.status().code() == StatusCode::kCancelled) {
    job->set_error(
        Status::cancelled(result.status().code() == StatusCode::kCancelled
                              ? result.status().message()
                              : "cancelled on request (" + result.status().message() + ")"));
    ctx.log(fmt::format("cancelled after {:.3f} s", secs));
    job->transition(JobState::kCancelled);
  } else {
    job->set_error(result.status());
    ctx.warn("failed: " + result.status().to_string());
    job->transition(JobState::kFailed);
  }
}

bool JobManager::stopped_by_shutdown(const Job& job) const {
  MutexLock lock(mu_);
  return journal_ != nullptr && shutdown_cancel_ && !user_cancels_.contains(job.id());
}

void JobManager::journal_state(const Job& job) {
  if (journal_ == nullptr) return;
  if (const JobState state = job.state(); is_terminal(state)) {
    MutexLock lock(mu_);
    const bool by_user = user_cancels_.erase(job.id()) > 0;
    if (state == JobState::kCancelled && shutdown_cancel_ && !by_user) {
      // Stopped by the shutdown, not by its owner: the journal keeps it PENDING or RUNNING, and
      // the next start runs it again.
      log_->info("job {} stopped by the shutdown; it runs again at the next start", job.id());
      return;
    }
  }
  const auto start = std::chrono::steady_clock::now();
  Status st = journal_->record_state(job, job.result_location());
  log_->debug("job {} {} journaled in {:.2f} ms", job.id(), job_state_name(job.state()),
              millis_since(start));
  if (!st.is_ok()) {
    log_->warn("job {}: the journal missed a state change ({}): {}", job.id(),
               job_state_name(job.state()), st.to_string());
  }
}

}  // namespace stripesolve::daemon
