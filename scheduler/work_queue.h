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
    ready_.notify_one();
  }
  // Blocks until an item is available; nullopt once closed and drained. Takes the first item
  // for which `urgent` holds, else the oldest.
  template <typename Pred>
  std::optional<T> pop(Pred urgent) {
    std::unique_lock<std::mutex> lock(mu_);
    ready_.wait(lock, [&] { return !items_.empty() || closed_; });
    if (items_.empty()) return std::nullopt;
    auto it = items_.begin();
    for (auto u = items_.begin(); u != items_.end(); ++u) {
      if (urgent(*u)) {
        it = u;
        break;
      }
    }
    T item = std::move(*it);
    items_.erase(it);
    return item;
  }
  std::optional<T> pop() {
    return pop([](const T&) { return false; });
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
