// Progress reporting and cancellation of a dense solve.
//
// ProgressMeter counts flops, stripes and I/O bytes as the roles finish work (atomics, any thread)
// and hands a Progress snapshot to the caller's callback at most once per interval (maybe_emit),
// plus once at every phase change and at the end. The callback runs on an engine thread, one call
// at a time (`emit_mu_`), and must not block for long.
//
// CancelToken: a flag the caller sets from any thread; the engine checks it before every stripe
// step and from its monitor role, so a cancel takes effect within one stripe step.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <string>

#include "base/mutex.h"

namespace stripesolve::scheduler {

class CancelToken {
 public:
  // keep_progress: the solve stops for now, not for good (a daemon's planned stop): a half-made
  // factor keeps its durable progress for the next run to resume (factor_progress.h).
  void cancel(bool keep_progress = false) {
    if (keep_progress) keep_progress_.store(true, std::memory_order_relaxed);
    cancelled_.store(true, std::memory_order_release);
  }
  bool cancelled() const { return cancelled_.load(std::memory_order_acquire); }
  bool keep_progress() const { return keep_progress_.load(std::memory_order_relaxed); }

 private:
  std::atomic<bool> cancelled_{false};
  std::atomic<bool> keep_progress_{false};
};

struct Progress {
  std::string phase;           // "factor", "forward", "backward", "residual", "done"
  double fraction = 0;         // of the phase's flops, 0..1
  double gflops = 0;           // over the phase so far
  uint64_t io_read_bytes = 0;  // whole solve so far
  uint64_t io_written_bytes = 0;
  double io_bytes_per_second = 0;  // (read + written) / elapsed of the whole solve
  uint64_t cache_hits = 0;
  uint64_t cache_misses = 0;
  double eta_seconds = 0;    // of the phase, from its rate so far (0 when unknown)
  int64_t stripes_done = 0;  // in the phase
  int64_t stripes_total = 0;
};

class ProgressMeter {
 public:
  using Sink = std::function<void(const Progress&)>;
  using CacheCounts = std::function<void(uint64_t* hits, uint64_t* misses)>;

  ProgressMeter(Sink sink, double interval_seconds);

  // Starts a phase (emits the previous state first). Not concurrent with itself.
  void begin_phase(const std::string& phase, double total_flops, int64_t stripes_total);
  void set_cache_counts(CacheCounts counts);

  void add_flops(double flops) {
    flops_.fetch_add(static_cast<uint64_t>(flops), std::memory_order_relaxed);
  }
  void add_stripe() { stripes_.fetch_add(1, std::memory_order_relaxed); }
  void add_io(uint64_t read, uint64_t written) {
    read_.fetch_add(read, std::memory_order_relaxed);
    written_.fetch_add(written, std::memory_order_relaxed);
  }

  void maybe_emit();  // rate-limited
  void emit();        // now
  Progress snapshot() const;

  uint64_t io_read_bytes() const { return read_.load(); }
  uint64_t io_written_bytes() const { return written_.load(); }
  double total_flops_done() const;  // over all phases

 private:
  using Clock = std::chrono::steady_clock;
  Sink sink_;
  const double interval_;
  const Clock::time_point start_ = Clock::now();
  std::atomic<uint64_t> flops_{0};
  std::atomic<int64_t> stripes_{0};
  std::atomic<uint64_t> read_{0};
  std::atomic<uint64_t> written_{0};
  mutable Mutex mu_;
  std::string phase_ GUARDED_BY(mu_);
  double phase_total_ GUARDED_BY(mu_) = 0;
  int64_t phase_stripes_ GUARDED_BY(mu_) = 0;
  double earlier_flops_ GUARDED_BY(mu_) = 0;  // flops of finished phases
  Clock::time_point phase_start_ GUARDED_BY(mu_) = start_;
  CacheCounts cache_counts_ GUARDED_BY(mu_);
  Mutex emit_mu_;  // one callback at a time
  Clock::time_point last_emit_ GUARDED_BY(emit_mu_){};
};

}  // namespace stripesolve::scheduler
