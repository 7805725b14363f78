#include "tridiag/parallel_for.h"

#include <algorithm>
#include <atomic>
#include <thread>
#include <vector>

#include "base/mutex.h"

namespace stripesolve::tridiag {

unsigned resolve_threads(unsigned requested) {
  if (requested > 0) return requested;
  return std::max(1u, std::thread::hardware_concurrency());
}

Status parallel_for(std::size_t count, unsigned threads, std::size_t grain,
                    const std::function<Status(std::size_t, std::size_t, unsigned)>& body) {
  grain = std::max<std::size_t>(grain, 1);
  const std::size_t chunks = (count + grain - 1) / grain;
  const unsigned workers =
      static_cast<unsigned>(std::min<std::size_t>(resolve_threads(threads), chunks));
  if (workers <= 1) {
    for (std::size_t b = 0; b < count; b += grain) {
      STRIPESOLVE_RETURN_IF_ERROR(body(b, std::min(count, b + grain), 0));
    }
    return Status::ok();
  }
  std::atomic<std::size_t> next{0};
  std::atomic<bool> failed{false};
  Mutex mu;
  std::size_t error_chunk = chunks;  // guarded by mu
  Status error;                      // guarded by mu
  auto run = [&](unsigned worker) {
    while (!failed.load(std::memory_order_relaxed)) {
      const std::size_t chunk = next.fetch_add(1, std::memory_order_relaxed);
      if (chunk >= chunks) return;
      const std::size_t begin = chunk * grain;
      Status st = body(begin, std::min(count, begin + grain), worker);
      if (!st.is_ok()) {
        MutexLock lock(mu);
        if (chunk < error_chunk) {
          error_chunk = chunk;
          error = std::move(st);
        }
        failed.store(true, std::memory_order_relaxed);
      }
    }
  };
  std::vector<std::thread> pool;
  pool.reserve(workers - 1);
  for (unsigned w = 1; w < workers; ++w) pool.emplace_back(run, w);
  run(0);
  for (auto& t : pool) t.join();
  return error;
}

}  // namespace stripesolve::tridiag
