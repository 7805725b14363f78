#include "scheduler/progress.h"

#include <algorithm>

namespace stripesolve::scheduler {

ProgressMeter::ProgressMeter(Sink sink, double interval_seconds)
    : sink_(std::move(sink)), interval_(interval_seconds) {}

void ProgressMeter::begin_phase(const std::string& phase, double total_flops,
                                int64_t stripes_total) {
  bool had_phase = false;
  {
    MutexLock lock(mu_);
    had_phase = !phase_.empty();
  }
  if (had_phase) emit();
  {
    MutexLock lock(mu_);
    earlier_flops_ += static_cast<double>(flops_.exchange(0));
    stripes_.store(0);
    phase_ = phase;
    phase_total_ = total_flops;
    phase_stripes_ = stripes_total;
    phase_start_ = Clock::now();
  }
  emit();
}

void ProgressMeter::set_cache_counts(CacheCounts counts) {
  MutexLock lock(mu_);
  cache_counts_ = std::move(counts);
}

double ProgressMeter::total_flops_done() const {
  MutexLock lock(mu_);
  return earlier_flops_ + static_cast<double>(flops_.load());
}

Progress ProgressMeter::snapshot() const {
  MutexLock lock(mu_);
  const auto now = Clock::now();
  const double phase_s = std::chrono::duration<double>(now - phase_start_).count();
  const double total_s = std::chrono::duration<double>(now - start_).count();
  Progress p;
  p.phase = phase_;
  const double done = static_cast<double>(flops_.load());
  p.fraction = phase_total_ > 0 ? std::min(1.0, done / phase_total_) : 0.0;
  p.gflops = phase_s > 0 ? done / phase_s / 1e9 : 0.0;
  p.io_read_bytes = read_.load();
  p.io_written_bytes = written_.load();
  p.io_bytes_per_second =
      total_s > 0 ? static_cast<double>(p.io_read_bytes + p.io_written_bytes) / total_s : 0.0;
  if (cache_counts_) cache_counts_(&p.cache_hits, &p.cache_misses);
  p.eta_seconds = p.fraction > 0 ? phase_s * (1.0 - p.fraction) / p.fraction : 0.0;
  p.stripes_done = stripes_.load();
  p.stripes_total = phase_stripes_;
  return p;
}

void ProgressMeter::maybe_emit() {
  if (!sink_) return;
  if (!emit_mu_.try_lock()) return;
  MutexLock lock(emit_mu_, std::adopt_lock);
  const auto now = Clock::now();
  if (std::chrono::duration<double>(now - last_emit_).count() < interval_) return;
  last_emit_ = now;
  sink_(snapshot());
}

void ProgressMeter::emit() {
  if (!sink_) return;
  MutexLock lock(emit_mu_);
  last_emit_ = Clock::now();
  sink_(snapshot());
}

}  // namespace stripesolve::scheduler
