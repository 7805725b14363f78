// For the daemon's tests: waits (up to 5 s) until a job has ended.
#pragma once

#include <chrono>
#include <memory>
#include <thread>

#include "daemon/job.h"

namespace stripesolve::daemon {

inline void wait_terminal(const std::shared_ptr<Job>& job) {
  for (int i = 0; i < 5000 && !is_terminal(job->state()); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

}  // namespace stripesolve::daemon
