#include "daemon/job.h"

#include <algorithm>
#include <cstring>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "base/internal_error.h"
#include "base/utc_time.h"

namespace stripesolve::daemon {
namespace {
constexpr size_t kMaxLogLines = 2000;

std::string iso_time(Clock::time_point t) {
  return t == Clock::time_point{} ? "" : utc_time(t);
}

// A job's params as the daemon's replies show them: a structured value more than
// kShownParamsDepth levels down (params itself is level 1) is replaced by a note. The params are
// the client's JSON as submitted, checked only when the job runs, and the job list sends them
// 3 levels into its header, which the protocol bounds at 32 levels (protocol/frame.cc): params
// nested 29 deep made a reply no client could read (the protocol fuzz test). Params the daemon
// accepts nest 2 levels.
constexpr int kShownParamsDepth = 16;

nlohmann::json shown_params(const nlohmann::json& v, int level) {
  if (!v.is_structured()) return v;
  if (level > kShownParamsDepth) {
    return fmt::format("(nested deeper than {} levels: not shown)", kShownParamsDepth);
  }
  nlohmann::json out = v.is_array() ? nlohmann::json::array() : nlohmann::json::object();
  for (auto it = v.begin(); it != v.end(); ++it) {
    if (v.is_array()) {
      out.push_back(shown_params(*it, level + 1));
    } else {
      out[it.key()] = shown_params(it.value(), level + 1);
    }
  }
  return out;
}
}  // namespace

std::string_view job_state_name(JobState s) {
  switch (s) {
    case JobState::kPending:
      return "PENDING";
    case JobState::kRunning:
      return "RUNNING";
    case JobState::kCompleted:
      return "COMPLETED";
    case JobState::kCompletedWithWarning:
      return "COMPLETED_WITH_WARNING";
    case JobState::kFailed:
      return "FAILED";
    case JobState::kCancelled:
      return "CANCELLED";
  }
  return "?";
}

bool is_terminal(JobState s) {
  return has_result(s) || s == JobState::kFailed || s == JobState::kCancelled;
}

bool has_result(JobState s) {
  return s == JobState::kCompleted || s == JobState::kCompletedWithWarning;
}

std::string_view lane_name(Lane lane) {
  switch (lane) {
    case Lane::kSmall:
      return "small";
    case Lane::kDense:
      return "dense";
    case Lane::kTridiag:
      return "tridiag";
  }
  return "?";
}

bool may_access(uid_t requester, uid_t owner) {
  return requester == 0 || requester == owner;
}

Job::Job(uint64_t id, uid_t owner, std::string type, Lane lane, nlohmann::json params,
         std::vector<UniqueFd> files)
    : id_(id),
      owner_(owner),
      type_(std::move(type)),
      lane_(lane),
      params_(std::move(params)),
      created_(Clock::now()),
      files_(std::move(files)) {}

int Job::file(size_t index) const {
  MutexLock lock(mu_);
  return index < files_.size() ? files_[index].get() : -1;
}

size_t Job::file_count() const {
  MutexLock lock(mu_);
  return files_.size();
}

size_t Job::release_files() {
  std::vector<UniqueFd> files;
  {
    MutexLock lock(mu_);
    files.swap(files_);
  }
  size_t held = 0;
  for (const UniqueFd& f : files) held += f.valid() ? 1 : 0;
  return held;  // closed here, outside the lock
}

JobState Job::state() const {
  MutexLock lock(mu_);
  return state_;
}

bool Job::legal_edge(JobState from, JobState to) const {
  switch (from) {
    case JobState::kPending:
      return to == JobState::kRunning || to == JobState::kCancelled;
    case JobState::kRunning:
      return has_result(to) || to == JobState::kFailed || to == JobState::kCancelled;
    default:
      return false;
  }
}

bool Job::try_transition(JobState next) {
  {
    MutexLock lock(mu_);
    if (!legal_edge(state_, next)) return false;
    state_ = next;
    const auto now = Clock::now();
    if (next == JobState::kRunning) started_ = now;
    if (is_terminal(next)) finished_ = now;
  }
  if (state_hook_) state_hook_(*this);
  notify();
  return true;
}

bool Job::cancel_if_pending(Status reason) {
  {
    MutexLock lock(mu_);
    if (state_ != JobState::kPending) return false;
    state_ = JobState::kCancelled;
    error_ = std::move(reason);
    finished_ = Clock::now();
  }
  if (state_hook_) state_hook_(*this);
  notify();
  return true;
}

void Job::transition(JobState next) {
  JobState from;
  {
    MutexLock lock(mu_);
    from = state_;
  }
  if (!try_transition(next)) {
    internal_error(fmt::format("job {}: illegal state change {} -> {}", id_, job_state_name(from),
                               job_state_name(next)));
  }
}

void Job::request_cancel(bool by_shutdown) {
  std::vector<std::function<void()>> hooks;
  {
    MutexLock lock(mu_);
    if (cancel_requested_.load()) return;
    cancel_for_restart_.store(by_shutdown, std::memory_order_release);
    cancel_requested_.store(true, std::memory_order_release);
    hooks = cancel_hooks_;
  }
  for (auto& h : hooks) h();
}

void Job::on_cancel(std::function<void()> hook) {
  {
    MutexLock lock(mu_);
    if (!cancel_requested_.load()) {
      cancel_hooks_.push_back(std::move(hook));
      return;
    }
  }
  hook();
}

void Job::set_progress(nlohmann::json progress) {
  {
    MutexLock lock(mu_);
    progress_ = std::move(progress);
  }
  notify();
}

nlohmann::json Job::progress() const {
  MutexLock lock(mu_);
  return progress_;
}

void Job::set_result(nlohmann::json result) {
  MutexLock lock(mu_);
  result_ = std::move(result);
}

void Job::set_error(Status status) {
  MutexLock lock(mu_);
  error_ = std::move(status);
}

Status Job::error() const {
  MutexLock lock(mu_);
  return error_;
}

void Job::append_log(std::string line) {
  MutexLock lock(mu_);
  log_.push_back(iso_time(Clock::now()) + " " + std::move(line));
  if (log_.size() > kMaxLogLines) {
    log_.pop_front();
    ++log_dropped_;
  }
}

Job::LogSlice Job::log_since(uint64_t from) const {
  MutexLock lock(mu_);
  LogSlice slice;
  slice.first = std::max(from, log_dropped_);
  slice.next = log_dropped_ + log_.size();
  if (slice.first < slice.next) {
    slice.lines.assign(log_.begin() + static_cast<std::ptrdiff_t>(slice.first - log_dropped_),
                       log_.end());
  } else {
    slice.first = slice.next;
  }
  return slice;
}

std::vector<std::string> Job::log_lines() const {
  MutexLock lock(mu_);
  return {log_.begin(), log_.end()};
}

void Job::add_trace_span(TraceSpan span) {
  MutexLock lock(mu_);
  spans_.push_back(std::move(span));
}

void Job::set_engine_trace(std::string chrome_json) {
  MutexLock lock(mu_);
  engine_trace_ = std::move(chrome_json);
}

std::string Job::trace_json() const {
  MutexLock lock(mu_);
  nlohmann::json events = nlohmann::json::array();
  nlohmann::json dropped;  // the engine's spans not kept (scheduler/trace.h), where it dropped any
  // The engine's own trace (per-role spans, 002 Fig 28) comes first when it recorded one.
  if (!engine_trace_.empty()) {
    auto parsed = nlohmann::json::parse(engine_trace_, nullptr, false);
    if (parsed.is_object() && parsed.contains("traceEvents")) {
      for (auto& e : parsed["traceEvents"]) events.push_back(e);
      if (parsed.contains("otherData") && parsed["otherData"].contains("dropped_spans")) {
        dropped = parsed["otherData"]["dropped_spans"];
      }
    } else if (parsed.is_array()) {
      for (auto& e : parsed) events.push_back(e);
    }
  }
  for (const TraceSpan& s : spans_) {
    events.push_back({{"name", s.name},
                      {"cat", s.category},
                      {"ph", "X"},
                      {"ts", s.start_us},
                      {"dur", s.duration_us},
                      {"pid", 1},
                      {"tid", s.tid}});
  }
  nlohmann::json out = {{"traceEvents", events},
                        {"displayTimeUnit", "ms"},
                        {"otherData", {{"job", id_}, {"type", type_}}}};
  if (!dropped.is_null()) out["otherData"]["dropped_spans"] = dropped;
  if (events.empty()) {  // say why, rather than hand over an empty trace without a word
    out["otherData"]["note"] =
        restored_ && is_terminal(state_)
            ? "no trace events: a job's trace is kept in the daemon's memory, and this job ran "
              "before the daemon's last restart"
        : state_ == JobState::kPending ? "no trace events: the job has not started"
                                       : "no trace events recorded";
  }
  return out.dump();
}

Status Job::begin_solution(int64_t n, int64_t nrhs) {
  if (n <= 0 || nrhs <= 0) {
    return Status::invalid_argument(
        fmt::format("solution shape ({}, {}) must be positive", n, nrhs));
  }
  MutexLock lock(mu_);
  if (solution_ != nullptr || fetched_)
    return Status::failed_precondition("solution already begun");
  solution_ = std::make_shared<std::vector<double>>(static_cast<size_t>(n * nrhs), 0.0);
  n_ = n;
  nrhs_ = nrhs;
  return Status::ok();
}

Status Job::publish_rows(int64_t row_begin, int64_t rows, const double* x) {
  int64_t n, nrhs;
  std::shared_ptr<std::vector<double>> buffer;
  {
    MutexLock lock(mu_);
    n = n_;
    nrhs = nrhs_;
    buffer = solution_;
  }
  if (buffer == nullptr) return Status::failed_precondition("publish_rows before begin_solution");
  if (row_begin < 0 || rows <= 0 || row_begin + rows > n) {
    return Status::invalid_argument(
        fmt::format("solution rows [{}, {}) outside [0, {})", row_begin, row_begin + rows, n));
  }
  double* dst = buffer->data();
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t j = 0; j < nrhs; ++j) dst[(row_begin + i) * nrhs + j] = x[j * rows + i];
  }
  {
    MutexLock lock(mu_);
    published_.push_back({row_begin, rows});
  }
  notify();
  return Status::ok();
}

Status Job::set_solution(std::vector<int64_t> array_shape, std::vector<double> values) {
  int64_t count = array_shape.empty() || array_shape.size() > 2 ? 0 : 1;
  for (int64_t d : array_shape) count *= d;
  if (count <= 0 || static_cast<size_t>(count) != values.size()) {
    return Status::invalid_argument(
        fmt::format("solution of {} values does not fill an array of shape [{}]", values.size(),
                    fmt::join(array_shape, ", ")));
  }
  {
    MutexLock lock(mu_);
    if (solution_ != nullptr || fetched_)
      return Status::failed_precondition("solution already begun");
    solution_ = std::make_shared<std::vector<double>>(std::move(values));
    n_ = count;
    nrhs_ = 1;
    array_shape_ = std::move(array_shape);
    published_.push_back({0, count});
  }
  notify();
  return Status::ok();
}

std::vector<int64_t> Job::array_shape() const {
  MutexLock lock(mu_);
  return array_shape_;
}

std::vector<Job::RowRange> Job::published_since(size_t from, int64_t* n, int64_t* nrhs) const {
  MutexLock lock(mu_);
  *n = n_;
  *nrhs = nrhs_;
  if (from >= published_.size()) return {};
  return {published_.begin() + static_cast<std::ptrdiff_t>(from), published_.end()};
}

bool Job::has_solution() const {
  MutexLock lock(mu_);
  return solution_ != nullptr;
}

std::shared_ptr<const std::vector<double>> Job::solution_buffer() const {
  MutexLock lock(mu_);
  return solution_;
}

void Job::mark_fetched() {
  MutexLock lock(mu_);
  fetched_ = true;
  solution_.reset();
}

bool Job::fetched() const {
  MutexLock lock(mu_);
  return fetched_;
}

void Job::set_result_location(std::string path) {
  MutexLock lock(mu_);
  result_location_ = std::move(path);
}

std::string Job::result_location() const {
  MutexLock lock(mu_);
  return result_location_;
}

Clock::time_point Job::started() const {
  MutexLock lock(mu_);
  return started_;
}

nlohmann::json Job::result() const {
  MutexLock lock(mu_);
  return result_;
}

void Job::restore_history(History history) {
  MutexLock lock(mu_);
  restored_ = true;
  state_ = history.state;
  if (history.created != Clock::time_point{}) created_ = history.created;
  started_ = history.started;
  finished_ = history.finished;
  result_ = std::move(history.result);
  error_ = std::move(history.error);
  log_.assign(std::make_move_iterator(history.log.begin()),
              std::make_move_iterator(history.log.end()));
  while (log_.size() > kMaxLogLines) {
    log_.pop_front();
    ++log_dropped_;
  }
}

Clock::time_point Job::finished() const {
  MutexLock lock(mu_);
  return finished_;
}

uint64_t Job::add_listener(std::function<void()> fn) {
  MutexLock lock(mu_);
  listeners_.emplace_back(next_listener_, std::move(fn));
  return next_listener_++;
}

void Job::remove_listener(uint64_t handle) {
  MutexLock lock(mu_);
  std::erase_if(listeners_, [&](const auto& l) { return l.first == handle; });
}

void Job::notify() {
  std::vector<std::function<void()>> fns;
  {
    MutexLock lock(mu_);
    fns.reserve(listeners_.size());
    for (auto& l : listeners_) fns.push_back(l.second);
  }
  for (auto& f : fns) f();
}

nlohmann::json Job::to_json() const {
  MutexLock lock(mu_);
  nlohmann::json j = {{"id", id_},
                      {"type", type_},
                      {"owner_uid", owner_},
                      {"state", std::string(job_state_name(state_))},
                      {"lane", std::string(lane_name(lane_))},
                      {"created", iso_time(created_)},
                      {"started", iso_time(started_)},
                      {"finished", iso_time(finished_)},
                      {"params", shown_params(params_, 1)},
                      {"progress", progress_}};
  // A finished job's progress says so: a completed one is whole, and none has an ETA left.
  if (is_terminal(state_) && j["progress"].is_object()) {
    j["progress"].erase("eta_seconds");
    if (has_result(state_)) {
      j["progress"]["fraction"] = 1.0;
      j["progress"]["phase"] = "done";
    }
  }
  if (!result_.is_null()) j["result"] = result_;
  if (state_ == JobState::kCompletedWithWarning && result_.is_object() &&
      result_.contains("warning")) {
    j["warning"] = result_["warning"];
  }
  if (!error_.is_ok()) {
    j["error"] = {{"code", std::string(status_code_name(error_.code()))},
                  {"message", error_.message()}};
  }
  if (n_ > 0) {
    int64_t rows_ready = 0;
    for (auto& p : published_) rows_ready += p.rows;
    j["solution"] = {{"shape", {n_, nrhs_}}, {"rows_ready", rows_ready}, {"fetched", fetched_}};
  }
  if (!array_shape_.empty()) j["solution"]["array_shape"] = array_shape_;
  return j;
}

}  // namespace stripesolve::daemon
