// Helper threads for the critical path of the CPU tier's factorization (issue 19).
//
// The engine gives each of its k elim.J workers cores / k OpenBLAS threads (BlasThreadsScope),
// one on a 16-core host with 16 workers: elim.I's eliminations and the updates elim.I waits for
// (one 512 x n x 512 GEMM each) then ran on one core each, one after another, while the sweep
// lanes idled half the time (n = 16384: elim.I and the lanes each busy about 55%, 0.78x dgetrf).
// OpenBLAS's thread count is the process's, not a call's, so a call cannot ask for more threads
// than the others. Instead a thread on the critical path opens a CriticalScope: the CPU backend's
// block updates on that thread (elim.I's substripe updates, the critical J updates) split their
// dtrsm by rows and their dgemm by columns into pieces, one on the calling thread and the others
// on the helpers, each a single-threaded OpenBLAS call (no shared pool, so they run side by side).
// The split leaves every entry's arithmetic as it was: each row of a dtrsm and each column of a
// dgemm is computed the same way whatever the pieces (results are bitwise equal, tested).
//
// Threads: a CriticalHelpers is shared by the threads that open scopes on it (run() may be called
// from several at once; their pieces queue on the same pool). The scope is the calling thread's
// (thread_local); it does not reach threads the call starts.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>

namespace stripesolve::backend {

class CriticalHelpers {
 public:
  // `threads` >= 1 helper threads (a pool of them, started here, joined by the destructor).
  explicit CriticalHelpers(int threads);
  ~CriticalHelpers();
  CriticalHelpers(const CriticalHelpers&) = delete;
  CriticalHelpers& operator=(const CriticalHelpers&) = delete;

  // How many pieces a call may split into: the helpers and the calling thread.
  int ways() const { return threads_ + 1; }
  // Runs piece(p) for p in [0, pieces): piece 0 on the calling thread, the others on the helpers;
  // returns when all have run. `piece` must not throw.
  void run(int pieces, const std::function<void(int)>& piece);
  // Pieces run on the helpers so far (tests).
  int64_t helped() const { return helped_.load(std::memory_order_relaxed); }
  // Pieces waiting for a helper now (tests).
  int64_t queued() const;

 private:
  struct Pool;
  int threads_;
  std::atomic<int64_t> helped_{0};
  std::unique_ptr<Pool> pool_;
};

// While it lives, the calling thread's block updates on the CPU backend split over `helpers`
// (null: no split). Pieces of a `background` scope (sweep updates that share the helpers) queue
// behind all others; the others' go ahead of every queued background piece. Scopes nest; each
// restores what it found.
class CriticalScope {
 public:
  explicit CriticalScope(CriticalHelpers* helpers, bool background = false);
  ~CriticalScope();
  CriticalScope(const CriticalScope&) = delete;
  CriticalScope& operator=(const CriticalScope&) = delete;

 private:
  CriticalHelpers* before_;
  bool before_background_;
};

// The calling thread's helpers (its innermost CriticalScope), or null.
CriticalHelpers* critical_helpers();

}  // namespace stripesolve::backend
