#include "scheduler/arena_pinning.h"

#include <algorithm>

namespace stripesolve::scheduler {

std::unique_ptr<ArenaPinning> ArenaPinning::start(backend::DeviceEngine& engine, void* base,
                                                  uint64_t bytes, uint64_t piece) {
  std::unique_ptr<ArenaPinning> p(
      new ArenaPinning(engine, static_cast<char*>(base), bytes, std::max<uint64_t>(piece, 1)));
  if (base != nullptr && bytes > 0) p->thread_ = std::thread([q = p.get()] { q->run(); });
  return p;
}

void ArenaPinning::run() {
  for (uint64_t offset = 0; offset < bytes_ && !stop_.load(std::memory_order_relaxed);
       offset += piece_) {
    status_ = engine_.register_host(base_ + offset, std::min(piece_, bytes_ - offset));
    if (!status_.is_ok()) return;
    ++pinned_pieces_;
  }
}

Status ArenaPinning::wait() {
  if (thread_.joinable()) thread_.join();
  return status_;
}

ArenaPinning::~ArenaPinning() {
  stop_.store(true, std::memory_order_relaxed);
  if (thread_.joinable()) thread_.join();
  for (uint64_t k = pinned_pieces_; k > 0; --k) engine_.unregister_host(base_ + (k - 1) * piece_);
}

}  // namespace stripesolve::scheduler
