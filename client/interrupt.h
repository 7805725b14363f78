// Ctrl-C while the client waits for a job (issue 20): the first press stops the waiting, not the
// job; a second one within a grace period cancels the job.
//
// InterruptWatch installs a SIGINT handler without SA_RESTART, so a blocked recv() returns EINTR
// and Connection::receive() asks interrupted() whether to give up (kCancelled "interrupted").
// The handler only counts presses (an atomic); everything else runs on the main thread.
//
// Thread-safety: one watch per process, on the main thread; presses() is async-signal-safe.
#pragma once

#include <chrono>
#include <csignal>

namespace stripesolve::client {

class InterruptWatch {
 public:
  InterruptWatch();   // installs the handler
  ~InterruptWatch();  // restores the previous one
  InterruptWatch(const InterruptWatch&) = delete;
  InterruptWatch& operator=(const InterruptWatch&) = delete;

  // Ctrl-C presses since the watch was installed.
  static int presses();
  // Waits up to `grace` for a press beyond `seen`; true if one came.
  static bool another_press_within(int seen, std::chrono::milliseconds grace);

 private:
  struct sigaction previous_ {};
};

}  // namespace stripesolve::client
