#include "scheduler/arena_pinning.h"

#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <string>
#include <vector>

namespace stripesolve::scheduler {
namespace {

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23  // Linux 5.14
#endif

// Faults [base, base + bytes) in, writable, on `threads` threads, leaving what the pages hold
// (MADV_POPULATE_WRITE: the load may already have read stripes into them). On one thread inside
// cudaHostRegister this took 6.7-12 s for 30 GiB on the H200 host, and a read of the load could
// wait all that time behind it; on 16 threads first, 1.05 s, and the registration of the
// faulted pages 0.8 s. A kernel without MADV_POPULATE_WRITE leaves the faulting to the
// registration, as before.
void populate(void* base, uint64_t bytes, unsigned threads) {
  constexpr uint64_t kChunk = uint64_t{64} << 20;
  std::atomic<uint64_t> next{0};
  std::atomic<bool> refused{false};
  auto work = [&] {
    for (uint64_t at; !refused.load(std::memory_order_relaxed) &&
                      (at = next.fetch_add(kChunk, std::memory_order_relaxed)) < bytes;) {
      if (madvise(static_cast<char*>(base) + at, std::min(kChunk, bytes - at),
                  MADV_POPULATE_WRITE) != 0) {
        refused.store(true, std::memory_order_relaxed);
      }
    }
  };
  std::vector<std::thread> helpers;
  for (unsigned k = 1; k < threads; ++k) helpers.emplace_back(work);
  work();
  for (std::thread& t : helpers) t.join();
}

}  // namespace

std::unique_ptr<ArenaPinning> ArenaPinning::start(backend::DeviceEngine& engine, void* base,
                                                  uint64_t bytes, uint64_t fault_bytes,
                                                  TraceRecorder* trace) {
  std::unique_ptr<ArenaPinning> p(new ArenaPinning(engine, base, bytes, fault_bytes, trace));
  if (base != nullptr && bytes > 0) {
    p->thread_ = std::thread([q = p.get()] { q->run(); });
  } else {
    p->registered_.set_value();
  }
  return p;
}

void ArenaPinning::run() {
  const unsigned threads = std::clamp(std::thread::hardware_concurrency(), 1u, 16u);
  const auto t0 = std::chrono::steady_clock::now();
  {
    TraceRecorder::Span span(trace_, "pinning", "populate", {{"bytes", std::to_string(bytes_)}});
    populate(base_, bytes_, threads);
  }
  {
    TraceRecorder::Span span(trace_, "pinning", "register", {{"bytes", std::to_string(bytes_)}});
    status_ = engine_.register_host(base_, bytes_);
    pinned_ = status_.is_ok();
    seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  registered_.set_value();
  if (fault_bytes_ > bytes_) {
    const uint64_t above = fault_bytes_ - bytes_;
    TraceRecorder::Span span(trace_, "pinning", "populate above",
                             {{"bytes", std::to_string(above)}});
    populate(static_cast<char*>(base_) + bytes_, above, threads);
  }
}

Status ArenaPinning::wait() {
  registered_ready_.wait();
  return status_;
}

ArenaPinning::~ArenaPinning() {
  if (thread_.joinable()) thread_.join();
  if (pinned_) engine_.unregister_host(base_);
}

}  // namespace stripesolve::scheduler
