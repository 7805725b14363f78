// Daemon counters, rendered in the Prometheus text exposition format (version 0.0.4).
// Counters are atomics updated from any thread; render() reads them without locks.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

#include "daemon/job_manager.h"

namespace stripesolve::daemon {

struct Metrics {
  std::atomic<uint64_t> connections_total{0};
  std::atomic<int64_t> connections_open{0};
  std::atomic<uint64_t> connections_refused{0};
  std::atomic<uint64_t> connections_timed_out{0};  // no hello in time, or idle too long
  std::atomic<uint64_t> frames_in{0};
  std::atomic<uint64_t> frames_out{0};
  std::atomic<uint64_t> bytes_in{0};
  std::atomic<uint64_t> bytes_out{0};
  std::atomic<uint64_t> protocol_errors{0};
  std::atomic<uint64_t> progress_frames_dropped{0};
  std::atomic<uint64_t> result_bytes_streamed{0};
  std::atomic<uint64_t> requests_total{0};

  // The text exposition, including job counts by state and running jobs' progress.
  std::string render(const JobManager& jobs, double uptime_seconds, uint64_t upload_bytes) const;
};

}  // namespace stripesolve::daemon
