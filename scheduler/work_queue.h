// A closable FIFO between the master role and the elimination roles.
//
// Thread-safety: push/pop/close from any thread; `mu_` guards `items_` and `closed_`.
#pragma once

#include <condition_variable>
#include <deque>
#include <mutex>
#include <optional>

namespace stripesolve::scheduler {

template <typename T>
class WorkQueue {
 public:
  void push(T item) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      items_.push_back(std::move(item));
    }
    ready_.notify_all();  // consumers may be waiting for different items (pop's `eligible`)
  }
  // Blocks until an item for which `eligible` holds is available; nullopt once closed with none
  // left. Among the eligible items takes the one of lowest rank(item), the oldest on ties.
  template <typename Eligible, typename Rank>
  std::optional<T> pop(Eligible eligible, Rank rank) {
    std::unique_lock<std::mutex> lock(mu_);
    auto best = items_.end();
    ready_.wait(lock, [&] {
      best = items_.end();
      for (auto it = items_.begin(); it != items_.end(); ++it) {
        if (eligible(*it) && (best == items_.end() || rank(*it) < rank(*best))) best = it;
      }
      return best != items_.end() || closed_;
    });
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
      std::lock_guard<std::mutex> lock(mu_);
      closed_ = true;
    }
    ready_.notify_all();
  }

 private:
  std::mutex mu_;
  std::condition_variable ready_;
  std::deque<T> items_;
  bool closed_ = false;
};

}  // namespace stripesolve::scheduler
