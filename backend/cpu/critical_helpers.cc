// Boost.Asio's thread_pool runs the pieces (a well-kept pool instead of one written here); a
// std::latch per run() waits for them.
#include "backend/cpu/critical_helpers.h"

#include <latch>

#include <boost/asio/post.hpp>
#include <boost/asio/thread_pool.hpp>

namespace stripesolve::backend {

namespace {
thread_local CriticalHelpers* current_helpers = nullptr;
}  // namespace

struct CriticalHelpers::Pool {
  explicit Pool(int threads) : pool(static_cast<std::size_t>(threads)) {}
  boost::asio::thread_pool pool;
};

CriticalHelpers::CriticalHelpers(int threads)
    : threads_(threads < 1 ? 1 : threads), pool_(std::make_unique<Pool>(threads_)) {}

CriticalHelpers::~CriticalHelpers() {
  pool_->pool.join();
}

void CriticalHelpers::run(int pieces, const std::function<void(int)>& piece) {
  if (pieces <= 1) {
    if (pieces == 1) piece(0);
    return;
  }
  std::latch done(pieces - 1);
  for (int p = 1; p < pieces; ++p) {
    boost::asio::post(pool_->pool, [this, &piece, &done, p] {
      piece(p);
      helped_.fetch_add(1, std::memory_order_relaxed);
      done.count_down();
    });
  }
  piece(0);
  done.wait();
}

CriticalScope::CriticalScope(CriticalHelpers* helpers) : before_(current_helpers) {
  current_helpers = helpers;
}

CriticalScope::~CriticalScope() {
  current_helpers = before_;
}

CriticalHelpers* critical_helpers() {
  return current_helpers;
}

}  // namespace stripesolve::backend
