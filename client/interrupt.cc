#include "client/interrupt.h"

#include <atomic>
#include <thread>

namespace stripesolve::client {
namespace {

std::atomic<int> g_presses{0};

extern "C" void on_sigint(int) {
  g_presses.fetch_add(1, std::memory_order_relaxed);
}

}  // namespace

InterruptWatch::InterruptWatch() {
  g_presses.store(0);
  struct sigaction sa {};
  sa.sa_handler = on_sigint;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = 0;  // no SA_RESTART: a blocked recv() returns EINTR
  sigaction(SIGINT, &sa, &previous_);
}

InterruptWatch::~InterruptWatch() {
  sigaction(SIGINT, &previous_, nullptr);
}

int InterruptWatch::presses() {
  return g_presses.load(std::memory_order_relaxed);
}

bool InterruptWatch::another_press_within(int seen, std::chrono::milliseconds grace) {
  const auto end = std::chrono::steady_clock::now() + grace;
  while (std::chrono::steady_clock::now() < end) {
    if (presses() > seen) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return presses() > seen;
}

}  // namespace stripesolve::client
