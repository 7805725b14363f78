#include "scheduler/arena_pinning.h"

#include <chrono>

namespace stripesolve::scheduler {

std::unique_ptr<ArenaPinning> ArenaPinning::start(backend::DeviceEngine& engine, void* base,
                                                  uint64_t bytes) {
  std::unique_ptr<ArenaPinning> p(new ArenaPinning(engine, base, bytes));
  if (base != nullptr && bytes > 0) p->thread_ = std::thread([q = p.get()] { q->run(); });
  return p;
}

void ArenaPinning::run() {
  const auto t0 = std::chrono::steady_clock::now();
  status_ = engine_.register_host(base_, bytes_);
  pinned_ = status_.is_ok();
  seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

Status ArenaPinning::wait() {
  if (thread_.joinable()) thread_.join();
  return status_;
}

ArenaPinning::~ArenaPinning() {
  if (thread_.joinable()) thread_.join();
  if (pinned_) engine_.unregister_host(base_);
}

}  // namespace stripesolve::scheduler
