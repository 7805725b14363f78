#include "scheduler/trace.h"

#include <nlohmann/json.hpp>

namespace stripesolve::scheduler {

TraceRecorder::TraceRecorder() : epoch_(Clock::now()) {}

int TraceRecorder::tid_locked(const std::string& role) {
  auto it = roles_.find(role);
  if (it != roles_.end()) return it->second;
  const int tid = static_cast<int>(roles_.size()) + 1;
  roles_.emplace(role, tid);
  return tid;
}

void TraceRecorder::record(const std::string& role, std::string name, Clock::time_point begin,
                           Clock::time_point end, Args args) {
  using std::chrono::duration_cast;
  using std::chrono::microseconds;
  const int64_t ts = duration_cast<microseconds>(begin - epoch_).count();
  const int64_t dur = duration_cast<microseconds>(end - begin).count();
  MutexLock lock(mu_);
  events_.push_back(Event{std::move(name), tid_locked(role), ts, dur, std::move(args)});
}

TraceRecorder::Span::Span(TraceRecorder* recorder, std::string role, std::string name, Args args)
    : recorder_(recorder),
      role_(std::move(role)),
      name_(std::move(name)),
      args_(std::move(args)),
      begin_(Clock::now()) {}

TraceRecorder::Span::~Span() {
  if (recorder_ != nullptr) {
    recorder_->record(role_, std::move(name_), begin_, Clock::now(), std::move(args_));
  }
}

size_t TraceRecorder::size() const {
  MutexLock lock(mu_);
  return events_.size();
}

std::string TraceRecorder::to_json() const {
  MutexLock lock(mu_);
  nlohmann::json events = nlohmann::json::array();
  for (const auto& [role, tid] : roles_) {
    events.push_back({{"name", "thread_name"},
                      {"ph", "M"},
                      {"pid", 1},
                      {"tid", tid},
                      {"args", {{"name", role}}}});
  }
  for (const Event& e : events_) {
    nlohmann::json j = {{"name", e.name}, {"ph", "X"},     {"pid", 1},
                        {"tid", e.tid},   {"ts", e.ts_us}, {"dur", e.dur_us}};
    if (!e.args.empty()) {
      nlohmann::json a = nlohmann::json::object();
      for (const auto& [k, v] : e.args) a[k] = v;
      j["args"] = a;
    }
    events.push_back(std::move(j));
  }
  return nlohmann::json{{"traceEvents", events}, {"displayTimeUnit", "ms"}}.dump();
}

}  // namespace stripesolve::scheduler
