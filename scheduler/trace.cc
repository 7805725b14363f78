#include "scheduler/trace.h"

#include <algorithm>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace stripesolve::scheduler {

TraceRecorder::TraceRecorder(size_t max_spans)
    : TraceRecorder(Clock::now(), std::max<size_t>(max_spans, 2)) {}

TraceRecorder::TraceRecorder(Clock::time_point epoch, size_t kept)
    : epoch_(epoch), first_cap_(kept / 2), latest_cap_(kept - kept / 2) {}

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
  Event e{std::move(name), tid_locked(role), ts, dur, std::move(args)};
  if (first_.size() < first_cap_) {
    first_.push_back(std::move(e));
  } else if (latest_.size() < latest_cap_) {
    latest_.push_back(std::move(e));
  } else {
    latest_[latest_next_] = std::move(e);  // the oldest of the latest goes
    latest_next_ = (latest_next_ + 1) % latest_cap_;
    ++dropped_;
  }
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
  return first_.size() + latest_.size();
}

uint64_t TraceRecorder::dropped() const {
  MutexLock lock(mu_);
  return dropped_;
}

namespace {

// A JSON string literal (quoted, escaped).
std::string quoted(const std::string& s) {
  return nlohmann::json(s).dump();
}

void append_span(std::string& out, const std::string& name, int tid, int64_t ts, int64_t dur,
                 const TraceRecorder::Args& args) {
  out += fmt::format(R"({{"name":{},"ph":"X","pid":1,"tid":{},"ts":{},"dur":{})", quoted(name), tid,
                     ts, dur);
  if (!args.empty()) {
    out += R"(,"args":{)";
    for (size_t k = 0; k < args.size(); ++k) {
      out +=
          fmt::format("{}{}:{}", k == 0 ? "" : ",", quoted(args[k].first), quoted(args[k].second));
    }
    out += '}';
  }
  out += "},";
}

}  // namespace

std::string TraceRecorder::to_json() const {
  MutexLock lock(mu_);
  std::string out = R"({"traceEvents":[)";
  for (const auto& [role, tid] : roles_) {
    out +=
        fmt::format(R"({{"name":"thread_name","ph":"M","pid":1,"tid":{},"args":{{"name":{}}}}},)",
                    tid, quoted(role));
  }
  for (const Event& e : first_) append_span(out, e.name, e.tid, e.ts_us, e.dur_us, e.args);
  // The ring in the order recorded: from its oldest (latest_next_ once it has wrapped).
  const size_t start = dropped_ > 0 ? latest_next_ : 0;
  if (dropped_ > 0 && !latest_.empty()) {
    out += fmt::format(
        R"j({{"name":"{} spans not kept here (the trace keeps the first {} and the latest {})","ph":"i","s":"g","pid":1,"tid":1,"ts":{}}},)j",
        dropped_, first_cap_, latest_cap_, latest_[start].ts_us);
  }
  for (size_t k = 0; k < latest_.size(); ++k) {
    const Event& e = latest_[(start + k) % latest_.size()];
    append_span(out, e.name, e.tid, e.ts_us, e.dur_us, e.args);
  }
  if (out.back() == ',') out.pop_back();
  out += R"(],"displayTimeUnit":"ms")";
  if (dropped_ > 0) out += fmt::format(R"(,"otherData":{{"dropped_spans":{}}})", dropped_);
  out += '}';
  return out;
}

}  // namespace stripesolve::scheduler
