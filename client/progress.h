// Progress output of the CLI: a one-line bar redrawn on stderr when stderr is a terminal
// (phase, percent, GFLOP/s, I/O GB/s, ETA), plain lines otherwise (one per update, at most one
// every `min_interval` seconds so logs stay readable). Pure formatting is separate for tests.
#pragma once

#include <chrono>
#include <string>

#include <nlohmann/json.hpp>

namespace stripesolve::client {

// "[##########..........]  50.0% factor  12.3 GFLOP/s  I/O 1.20 GB/s  ETA 1m05s" (bar when
// `bar_width` > 0).
std::string format_progress(const nlohmann::json& progress, int bar_width);
std::string format_duration(double seconds);  // "45s", "1m05s", "2h03m"
// "312.4 GFLOP/s", or "33.51 TFLOP/s" from 1000 GFLOP/s on (the GPU tier's rates).
std::string format_flop_rate(double gflops);

class ProgressDisplay {
 public:
  explicit ProgressDisplay(bool enabled, double min_interval_seconds = 2.0);
  ~ProgressDisplay();
  void update(const nlohmann::json& progress);
  void finish();  // ends the bar line
  // A line between updates (e.g. "daemon restarting, job 7 will resume"), when enabled: it
  // ends the bar line first.
  void notice(const std::string& line);

 private:
  bool enabled_;
  bool tty_;
  bool drawn_ = false;
  double min_interval_;
  std::chrono::steady_clock::time_point last_{};
};

}  // namespace stripesolve::client
