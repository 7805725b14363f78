// JobManager::restore (daemon/job_manager.h): the journal's jobs at start-up, finished ones kept
// for their result ttl, pending and interrupted ones queued again where a re-run can start from
// what is stored, running ones whose work their type finds committed completed
// (JobType::finished_before_restart), the others failed with what to do. The rest of the class
// is in job_manager.cc.
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "daemon/job_manager.h"

namespace stripesolve::daemon {

namespace {
// Whether the request needs something that lived only in the old process: a passed descriptor
// ({"fd": i}) or an upload ({"upload": id}).
bool needs_process_inputs(const nlohmann::json& j) {
  if (j.is_object()) {
    if (j.contains("fd") || j.contains("upload")) return true;
    for (const auto& [key, value] : j.items()) {
      if (needs_process_inputs(value)) return true;
    }
  } else if (j.is_array()) {
    for (const auto& value : j) {
      if (needs_process_inputs(value)) return true;
    }
  }
  return false;
}

// The result of a job that was RUNNING when the daemon died but had finished its work
// (JobType::finished_before_restart), else nullopt.
std::optional<nlohmann::json> finished_before(const JobType* jt, const JournalRecord& r) {
  if (jt == nullptr || !jt->finished_before_restart || r.state != JobState::kRunning) {
    return std::nullopt;
  }
  return jt->finished_before_restart(r.params, r.started);
}
}  // namespace

Result<JobManager::Restored> JobManager::restore() {
  Restored counts;
  if (journal_ == nullptr) return counts;
  STRIPESOLVE_ASSIGN_OR_RETURN(std::vector<JournalRecord> records, journal_->load());
  std::vector<std::shared_ptr<Job>> first, after;  // queued first (were RUNNING), then in order
  const auto now = Clock::now();
  for (JournalRecord& r : records) {
    const JobType* jt = registry_.find(r.type);
    const Lane lane = jt != nullptr ? jt->lane : Lane::kSmall;
    auto job = std::make_shared<Job>(r.id, r.owner, r.type, lane, r.params);
    const JobState was = r.state;
    Job::History h{was,
                   r.created,
                   r.started,
                   r.finished,
                   std::move(r.result),
                   std::move(r.error),
                   std::move(r.log)};
    if (is_terminal(was)) {
      if (r.finished + config_.result_ttl <= now) {
        (void)journal_->forget(r.id);
        continue;
      }
      job->restore_history(std::move(h));
      if (!r.result_file.empty()) {
        if (Status st = JobJournal::load_solution(r.result_file, *job); !st.is_ok()) {
          job->append_log("warning: the stored solution could not be read after the restart: " +
                          st.to_string());
        }
      }
      ++counts.finished;
    } else if (std::optional<nlohmann::json> result = finished_before(jt, r)) {
      // The kill came after the job's work was committed, before the journal heard of its end.
      h.state = JobState::kCompleted;
      h.finished = now;
      h.result = std::move(*result);
      job->restore_history(std::move(h));
      job->append_log(
          "the daemon restarted after this job had finished its work (found complete in the "
          "store): completed");
      ++counts.finished;
      journal_state(*job);
    } else {
      // Re-run: a pending job as it was; a running one only in the dense lane, whose solve
      // starts again from the stored matrix (a small job may have half done what it did).
      // An in-place solve that was running has overwritten part of its matrix: no re-run can
      // start from it (docs/operations.md).
      const bool in_place_started =
          was == JobState::kRunning && r.params.value("in_place", false) == true;
      const bool rerun = jt != nullptr && lane != Lane::kTridiag &&
                         !needs_process_inputs(r.params) && !in_place_started &&
                         (was == JobState::kPending || lane == Lane::kDense);
      h.state = rerun ? JobState::kPending : JobState::kFailed;
      h.started = {};
      if (!rerun) {
        h.finished = now;
        if (jt == nullptr) {
          h.error = Status::unavailable(
              "the daemon restarted and no longer knows this job type; submit again");
        } else if (in_place_started) {
          h.error = Status::failed_precondition(
              fmt::format("the daemon restarted during an in-place factorization: matrix '{}' was "
                          "being overwritten and must be re-imported ('stripesolve matrix rm', "
                          "then import it again) before you submit again",
                          r.params.value("matrix", std::string())));
        } else {
          h.error = Status::unavailable(
              "the daemon restarted; submit again (its inputs lived only in the old process, or it "
              "was running and may have half done its work)");
        }
      }
      job->restore_history(std::move(h));
      if (rerun) {
        job->append_log(was == JobState::kRunning
                            ? "the daemon restarted while it ran; queued again, first in its lane"
                            : "the daemon restarted; queued again");
        (was == JobState::kRunning ? first : after).push_back(job);
        ++counts.requeued;
      } else {
        job->append_log("failed: " + job->error().message());
        ++counts.failed;
      }
      journal_state(*job);
    }
    job->set_state_hook([this](const Job& j) { journal_state(j); });
    MutexLock lock(mu_);
    jobs_[job->id()] = job;
  }
  {
    MutexLock lock(mu_);
    for (auto* list : {&first, &after}) {
      for (auto& job : *list) {
        lane_queue(job->lane()).queue.push_back(job);
        ++active_;
      }
    }
  }
  cv_.notify_all();
  return counts;
}

}  // namespace stripesolve::daemon
