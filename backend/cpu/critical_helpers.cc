// A small pool of std::threads under base/mutex.h. Boost.Asio's thread_pool did the same job but
// does not build under ThreadSanitizer (its handlers use std::atomic_thread_fence, which GCC
// refuses with -fsanitize=thread), and the CI runs the threaded tests there.
#include "backend/cpu/critical_helpers.h"

#include <cstddef>
#include <deque>
#include <thread>
#include <utility>
#include <vector>

#include "base/mutex.h"

namespace stripesolve::backend {

namespace {
thread_local CriticalHelpers* current_helpers = nullptr;
thread_local bool current_background = false;
}  // namespace

// The helpers' queue. Ownership: `jobs` and `closing` under `mu`; each job is run by the helper
// that pops it; run() waits on `done` for its own pieces.
struct CriticalHelpers::Pool {
  Mutex mu;
  CondVar work;  // a job queued, or closing
  CondVar done;  // a piece finished
  // Pieces of critical scopes, then background ones: [0, urgent) and [urgent, size()).
  std::deque<std::function<void()>> jobs GUARDED_BY(mu);
  size_t urgent GUARDED_BY(mu) = 0;
  bool closing GUARDED_BY(mu) = false;
  std::vector<std::thread> threads;

  void serve() {
    for (;;) {
      std::function<void()> job;
      {
        MutexLock lock(mu);
        while (jobs.empty() && !closing) work.wait(lock);
        if (jobs.empty()) return;
        job = std::move(jobs.front());
        jobs.pop_front();
        if (urgent > 0) --urgent;
      }
      job();
    }
  }
};

CriticalHelpers::CriticalHelpers(int threads)
    : threads_(threads < 1 ? 1 : threads), pool_(std::make_unique<Pool>()) {
  for (int t = 0; t < threads_; ++t) {
    pool_->threads.emplace_back([pool = pool_.get()] { pool->serve(); });
  }
}

CriticalHelpers::~CriticalHelpers() {
  {
    MutexLock lock(pool_->mu);
    pool_->closing = true;
  }
  pool_->work.notify_all();
  for (auto& t : pool_->threads) t.join();
}

void CriticalHelpers::run(int pieces, const std::function<void(int)>& piece) {
  if (pieces <= 1) {
    if (pieces == 1) piece(0);
    return;
  }
  Pool& pool = *pool_;
  int left = pieces - 1;  // pieces on the helpers not finished yet; under pool.mu
  {
    MutexLock lock(pool.mu);
    for (int p = 1; p < pieces; ++p) {
      auto job = [this, &pool, &piece, &left, p] {
        piece(p);
        helped_.fetch_add(1, std::memory_order_relaxed);
        MutexLock done_lock(pool.mu);
        --left;
        pool.done.notify_all();
      };
      if (current_background) {
        pool.jobs.emplace_back(std::move(job));
      } else {
        pool.jobs.emplace(pool.jobs.begin() + static_cast<std::ptrdiff_t>(pool.urgent),
                          std::move(job));
        ++pool.urgent;
      }
    }
  }
  pool.work.notify_all();
  piece(0);
  MutexLock lock(pool.mu);
  while (left > 0) pool.done.wait(lock);
}

int64_t CriticalHelpers::queued() const {
  MutexLock lock(pool_->mu);
  return static_cast<int64_t>(pool_->jobs.size());
}

CriticalScope::CriticalScope(CriticalHelpers* helpers, bool background)
    : before_(current_helpers), before_background_(current_background) {
  current_helpers = helpers;
  current_background = background;
}

CriticalScope::~CriticalScope() {
  current_helpers = before_;
  current_background = before_background_;
}

CriticalHelpers* critical_helpers() {
  return current_helpers;
}

}  // namespace stripesolve::backend
