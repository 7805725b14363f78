// What the dense GPU benchmark's files share: time since start, progress notes on stderr, and
// a loop over the host's threads.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <thread>
#include <vector>

namespace dense_gpu_bench {

using Clock = std::chrono::steady_clock;

inline double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

inline const Clock::time_point g_start = Clock::now();

// Progress on stderr, stamped with seconds since start.
template <typename... Args>
void note(const char* fmt, Args... args) {
  std::fprintf(stderr, "[%8.1f s] ", seconds_since(g_start));
  if constexpr (sizeof...(Args) == 0) {
    std::fputs(fmt, stderr);
  } else {
    std::fprintf(stderr, fmt, args...);
  }
  std::fputc('\n', stderr);
}

inline int host_threads() {
  return std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
}

// Runs body(begin, end) on [0, count) split over the host's threads.
inline void parallel_for(int64_t count, const std::function<void(int64_t, int64_t)>& body) {
  const int64_t t = std::min<int64_t>(host_threads(), std::max<int64_t>(1, count));
  std::vector<std::thread> pool;
  for (int64_t k = 0; k < t; ++k) {
    pool.emplace_back([&, k] { body(count * k / t, count * (k + 1) / t); });
  }
  for (auto& th : pool) th.join();
}

}  // namespace dense_gpu_bench
