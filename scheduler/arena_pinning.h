// The RAM cache's arena pinned for the GPU tier (cudaHostRegister through DeviceEngine) on a
// thread of its own, in pieces, while the solve goes on: pinning tens of GiB takes seconds (it
// faults in and locks every page), and the load of A into the cache, which reads from the SSDs
// into the same pages and needs no pinning, runs meanwhile. The elimination waits for it before
// its first copy to a device (GpuElimination::begin); a copy from a piece not yet pinned would
// still be right, only staged and slower.
//
// Thread-safety: start() and wait() on the solve's thread; the pinning thread registers pieces
// in order and stops between two when asked; the destructor joins it and unpins every piece it
// pinned. The engine must outlive it.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <thread>

#include "backend/device_engine.h"
#include "base/status.h"

namespace stripesolve::scheduler {

class ArenaPinning {
 public:
  // Pins [base, base + bytes) in pieces of `piece` bytes (the last may be shorter).
  static std::unique_ptr<ArenaPinning> start(backend::DeviceEngine& engine, void* base,
                                             uint64_t bytes, uint64_t piece = kPiece);
  ~ArenaPinning();
  ArenaPinning(const ArenaPinning&) = delete;
  ArenaPinning& operator=(const ArenaPinning&) = delete;

  // Once the whole block is pinned: its status (the first piece that failed, by name). Joins the
  // thread; later calls return the same.
  Status wait();

  static constexpr uint64_t kPiece = uint64_t{1} << 30;

 private:
  ArenaPinning(backend::DeviceEngine& engine, char* base, uint64_t bytes, uint64_t piece)
      : engine_(engine), base_(base), bytes_(bytes), piece_(piece) {}
  void run();

  backend::DeviceEngine& engine_;
  char* const base_;
  const uint64_t bytes_;
  const uint64_t piece_;
  std::atomic<bool> stop_{false};
  // Written by the pinning thread only, read after it is joined.
  uint64_t pinned_pieces_ = 0;
  Status status_;
  std::thread thread_;
};

}  // namespace stripesolve::scheduler
