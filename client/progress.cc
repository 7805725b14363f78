#include "client/progress.h"

#include <unistd.h>

#include <cmath>
#include <cstdio>

#include <fmt/format.h>

namespace stripesolve::client {

std::string format_duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  const int64_t s = static_cast<int64_t>(seconds + 0.5);
  if (s < 60) return fmt::format("{}s", s);
  if (s < 3600) return fmt::format("{}m{:02}s", s / 60, s % 60);
  return fmt::format("{}h{:02}m", s / 3600, (s % 3600) / 60);
}

std::string format_flop_rate(double gflops) {
  if (gflops >= 1000.0) return fmt::format("{:.2f} TFLOP/s", gflops / 1000.0);
  return fmt::format("{:.1f} GFLOP/s", gflops);
}

std::string format_progress(const nlohmann::json& p, int bar_width) {
  const std::string phase = p.value("phase", p.value("state", std::string("pending")));
  // A job that completed is whole, whatever progress it kept (a job from before a daemon restart
  // keeps none).
  const bool whole = phase == "done" || phase == "COMPLETED" || phase == "COMPLETED_WITH_WARNING";
  const double fraction = whole ? 1.0 : std::clamp(p.value("fraction", 0.0), 0.0, 1.0);
  std::string out;
  if (bar_width > 0) {
    const int filled = static_cast<int>(fraction * bar_width);
    out.push_back('[');
    out.append(static_cast<size_t>(filled), '#');
    out.append(static_cast<size_t>(bar_width - filled), '.');
    out.append("] ");
  }
  out += fmt::format("{:5.1f}% {}", 100.0 * fraction, phase);
  if (p.value("stripes_total", 0) > 0) {
    out += fmt::format(" ({}/{} stripes)", p.value("stripes_done", 0), p.value("stripes_total", 0));
  }
  if (p.contains("gflops")) out += "  " + format_flop_rate(p.value("gflops", 0.0));
  if (p.contains("device")) out += " on " + p.value("device", std::string());
  if (p.contains("io_bytes_per_second")) {
    out += fmt::format("  I/O {:.2f} GB/s", p.value("io_bytes_per_second", 0.0) / 1e9);
  }
  if (p.contains("eta_seconds")) out += "  ETA " + format_duration(p.value("eta_seconds", -1.0));
  return out;
}

ProgressDisplay::ProgressDisplay(bool enabled, double min_interval_seconds)
    : enabled_(enabled), tty_(::isatty(STDERR_FILENO) == 1), min_interval_(min_interval_seconds) {}

ProgressDisplay::~ProgressDisplay() {
  finish();
}

void ProgressDisplay::update(const nlohmann::json& progress) {
  if (!enabled_) return;
  const auto now = std::chrono::steady_clock::now();
  if (tty_) {
    std::fprintf(stderr, "\r\033[K%s", format_progress(progress, 30).c_str());
    std::fflush(stderr);
    drawn_ = true;
    return;
  }
  if (last_ != std::chrono::steady_clock::time_point{} &&
      std::chrono::duration<double>(now - last_).count() < min_interval_) {
    return;
  }
  last_ = now;
  std::fprintf(stderr, "job %s: %s\n", progress.value("job", nlohmann::json()).dump().c_str(),
               format_progress(progress, 0).c_str());
}

void ProgressDisplay::notice(const std::string& line) {
  if (!enabled_) return;
  finish();
  std::fprintf(stderr, "%s\n", line.c_str());
}

void ProgressDisplay::finish() {
  if (drawn_) {
    std::fputc('\n', stderr);
    drawn_ = false;
  }
}

}  // namespace stripesolve::client
