// A closable FIFO between the master role and the elimination roles.
//
// Thread-safety: push/pop/close from any thread; `mu_` guards `items_` and `closed_`.
#pragma once

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
    auto best = items_.end();
    while (true) {
      best = items_.end();
      for (auto it = items_.begin(); it != items_.end(); ++it) {
        if (eligible(*it) && (best == items_.end() || rank(*it) < rank(*best))) best = it;
      }
      if (best != items_.end() || closed_) break;
      ready_.wait(lock);
    }
    if (best == items_.end()) return std::nullopt;
    T item = std::move(*best);
    items_.erase(best);
    return item;
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
  Mutex mu_;
  CondVar ready_;
  std::deque<T> items_ GUARDED_BY(mu_);
  bool closed_ GUARDED_BY(mu_) = false;
};

}  // namespace stripesolve::scheduler
