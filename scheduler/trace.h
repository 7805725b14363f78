// Per-role activity spans of a solve, exported as Chrome trace-event JSON (chrome://tracing,
// Perfetto): the chronogram of 002 Fig 28. Each role (master, io, elim.I, elim.J0.., dsr) is one
// "thread" row; each span is a complete event ("ph":"X") with microsecond start and duration
// relative to the recorder's creation, plus optional string arguments (stripe, bytes, range).
//
// Thread-safety: every method may be called from any thread; `mu_` guards the event list.
// Memory: one small record per span (a solve of N stripes records O(N^2 / S^m) spans).
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "base/mutex.h"

namespace stripesolve::scheduler {

class TraceRecorder {
 public:
  using Clock = std::chrono::steady_clock;
  using Args = std::vector<std::pair<std::string, std::string>>;

  TraceRecorder();

  void record(const std::string& role, std::string name, Clock::time_point begin,
              Clock::time_point end, Args args = {});

  // RAII span: measures from construction to destruction; no-op with a null recorder.
  class Span {
   public:
    Span(TraceRecorder* recorder, std::string role, std::string name, Args args = {});
    ~Span();
    Span(const Span&) = delete;
    Span& operator=(const Span&) = delete;

   private:
    TraceRecorder* recorder_;
    std::string role_;
    std::string name_;
    Args args_;
    Clock::time_point begin_;
  };

  size_t size() const;
  // {"traceEvents":[...],"displayTimeUnit":"ms"} with thread_name metadata per role.
  std::string to_json() const;

 private:
  struct Event {
    std::string name;
    int tid;
    int64_t ts_us;
    int64_t dur_us;
    Args args;
  };
  int tid_locked(const std::string& role) REQUIRES(mu_);

  const Clock::time_point epoch_;
  mutable Mutex mu_;
  std::vector<Event> events_ GUARDED_BY(mu_);
  std::map<std::string, int> roles_ GUARDED_BY(mu_);  // role -> tid, in order of appearance
};

}  // namespace stripesolve::scheduler
