// Per-role activity spans of a solve, exported as Chrome trace-event JSON (chrome://tracing,
// Perfetto): the chronogram of 002 Fig 28. Each role (master, io, elim.I, elim.J0.., dsr) is one
// "thread" row; each span is a complete event ("ph":"X") with microsecond start and duration
// relative to the recorder's creation, plus optional string arguments (stripe, bytes, range).
//
// Thread-safety: every method may be called from any thread; `mu_` guards the event lists.
// Memory: a solve of N stripes makes O(N^2 / S^m) spans (a few hundred bytes each, and as many
// again in the JSON), so at most `max_spans` are kept: the first half as they come, then the
// latest half in a ring, so that a long solve's trace shows its start and its end. The spans in
// between are counted (dropped()) and marked in the JSON by an instant event where they were
// (a matrix in 600 thin stripes made a daemon's trace of several hundred MB before the bound).
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

  // About 3 MB of JSON (90-100 bytes a span): a job's trace is one reply of the daemon, whose
  // payload is at most 4 MiB (daemon.limits.max_payload_bytes).
  static constexpr size_t kDefaultMaxSpans = 32768;
  explicit TraceRecorder(size_t max_spans = kDefaultMaxSpans);

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

  size_t size() const;       // spans kept
  uint64_t dropped() const;  // spans recorded but not kept (between the first and the latest)
  // {"traceEvents":[...],"displayTimeUnit":"ms"} with thread_name metadata per role; with spans
  // dropped, an instant event saying how many where they were, and "otherData":
  // {"dropped_spans": n}. Written as it goes, not built as a JSON tree first.
  std::string to_json() const;

 private:
  struct Event {
    std::string name;
    int tid;
    int64_t ts_us;
    int64_t dur_us;
    Args args;
  };
  TraceRecorder(Clock::time_point epoch, size_t kept);  // kept >= 2: half first, half latest
  int tid_locked(const std::string& role) REQUIRES(mu_);

  const Clock::time_point epoch_;
  const size_t first_cap_;   // spans kept from the start
  const size_t latest_cap_;  // spans kept at the end, in the ring
  mutable Mutex mu_;
  std::vector<Event> first_ GUARDED_BY(mu_);
  std::vector<Event> latest_ GUARDED_BY(mu_);  // a ring once full, its oldest at latest_next_
  size_t latest_next_ GUARDED_BY(mu_) = 0;
  uint64_t dropped_ GUARDED_BY(mu_) = 0;
  std::map<std::string, int> roles_ GUARDED_BY(mu_);  // role -> tid, in order of appearance
};

}  // namespace stripesolve::scheduler
