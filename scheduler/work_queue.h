// A closable FIFO between the master role and the elimination roles.
//
// Thread-safety: push/pop/close from any thread; `mu_` guards `items_` and `closed_`.
#pragma once

#include <chrono>
#include <deque>
#include <optional>

#include "base/mutex.h"

namespace stripesolve::scheduler {

template <typename T>
class WorkQueue {
 public:
  void push(T item) {
    {
      MutexLock lock(mu_);
      items_.push_back(std::move(item));
    }
    ready_.notify_all();  // consumers may be waiting for different items (pop's `eligible`)
  }
  // Blocks until an item for which `eligible` holds is available; nullopt once closed with none
  // left. Among the eligible items takes the one of lowest rank(item), the oldest on ties.
  template <typename Eligible, typename Rank>
  std::optional<T> pop(Eligible eligible, Rank rank) {
    MutexLock lock(mu_);
    while (true) {
      auto best = find_best(eligible, rank);
      if (best != items_.end()) return take(best);
      if (closed_) return std::nullopt;
      ready_.wait(lock);
    }
  }
  // As pop(), but for up to `patience` takes only an eligible item that `preferred` holds for,
  // waiting for one to be pushed; then any eligible item. For a consumer that knows which item
  // comes next and would otherwise take a worse one just before it arrives.
  template <typename Eligible, typename Rank, typename Preferred>
  std::optional<T> pop_preferring(Eligible eligible, Rank rank, Preferred preferred,
                                  std::chrono::steady_clock::duration patience) {
    const auto deadline = std::chrono::steady_clock::now() + patience;
    {
      MutexLock lock(mu_);
      auto both = [&](const T& item) { return eligible(item) && preferred(item); };
      while (true) {
        auto best = find_best(both, rank);
        if (best != items_.end()) return take(best);
        if (closed_ || std::chrono::steady_clock::now() >= deadline) break;
        ready_.wait_until(lock, deadline);
      }
    }
    return pop(eligible, rank);
  }
  std::optional<T> pop() {
    return pop([](const T&) { return true; }, [](const T&) { return 0; });
  }
  void close() {
    {
      MutexLock lock(mu_);
      closed_ = true;
    }
    ready_.notify_all();
  }

 private:
  template <typename Eligible, typename Rank>
  typename std::deque<T>::iterator find_best(Eligible& eligible, Rank& rank) REQUIRES(mu_) {
    auto best = items_.end();
    for (auto it = items_.begin(); it != items_.end(); ++it) {
      if (eligible(*it) && (best == items_.end() || rank(*it) < rank(*best))) best = it;
    }
    return best;
  }
  T take(typename std::deque<T>::iterator it) REQUIRES(mu_) {
    T item = std::move(*it);
    items_.erase(it);
    return item;
  }

  Mutex mu_;
  CondVar ready_;
  std::deque<T> items_ GUARDED_BY(mu_);
  bool closed_ GUARDED_BY(mu_) = false;
};

}  // namespace stripesolve::scheduler
