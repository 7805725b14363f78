// A std::mutex the thread-safety analysis knows (base/thread_annotations.h), its RAII lock and a
// condition variable that waits on that lock. libstdc++'s own std::mutex carries no capability
// attributes, so members GUARDED_BY a std::mutex would not be checked.
//
//   mutable Mutex mu_;
//   int count_ GUARDED_BY(mu_) = 0;
//   CondVar changed_;
//   ...
//   MutexLock lock(mu_);
//   while (count_ == 0) changed_.wait(lock);  // the analysis sees count_ read under mu_
//
// Predicates are written as loops around wait() rather than lambdas: the analysis checks a
// lambda's body on its own, without the caller's lock.
//
// Thread-safety: Mutex and CondVar are shared between threads; a MutexLock belongs to one.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>

#include "base/thread_annotations.h"

namespace stripesolve {

class CAPABILITY("mutex") Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void lock() ACQUIRE() { mu_.lock(); }
  void unlock() RELEASE() { mu_.unlock(); }
  bool try_lock() TRY_ACQUIRE(true) { return mu_.try_lock(); }

 private:
  friend class MutexLock;
  std::mutex mu_;
};

// Holds `mu` from construction to destruction, or to unlock(); lock() takes it again.
class SCOPED_CAPABILITY MutexLock {
 public:
  explicit MutexLock(Mutex& mu) ACQUIRE(mu) : lock_(mu.mu_) {}
  // Takes over `mu`, already held (after a successful try_lock()).
  MutexLock(Mutex& mu, std::adopt_lock_t) REQUIRES(mu) : lock_(mu.mu_, std::adopt_lock) {}
  ~MutexLock() RELEASE() = default;
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

  void unlock() RELEASE() { lock_.unlock(); }
  void lock() ACQUIRE() { lock_.lock(); }

 private:
  friend class CondVar;
  std::unique_lock<std::mutex> lock_;
};

class CondVar {
 public:
  // Releases the lock while waiting; holds it again on return (spurious wake-ups included, so
  // callers loop on their condition).
  void wait(MutexLock& lock) { cv_.wait(lock.lock_); }
  // false on timeout.
  template <class Rep, class Period>
  bool wait_for(MutexLock& lock, const std::chrono::duration<Rep, Period>& timeout) {
    return cv_.wait_for(lock.lock_, timeout) == std::cv_status::no_timeout;
  }
  template <class Clock, class Duration>
  bool wait_until(MutexLock& lock, const std::chrono::time_point<Clock, Duration>& deadline) {
    return cv_.wait_until(lock.lock_, deadline) == std::cv_status::no_timeout;
  }
  void notify_one() { cv_.notify_one(); }
  void notify_all() { cv_.notify_all(); }

 private:
  std::condition_variable cv_;
};

}  // namespace stripesolve
