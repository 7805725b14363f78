// The RAM cache's arena pinned for the GPU tier (cudaHostRegister through DeviceEngine) on a
// thread of its own while the solve goes on: pinning tens of GiB takes seconds (it faults in and
// locks every page), and the load of A into the cache, which reads from the SSDs into the same
// pages and needs no pinning, runs meanwhile. The pages are faulted in on up to 16 threads
// first (MADV_POPULATE_WRITE, contents kept), which takes the pinning of 30 GiB on the H200
// host from 6.7-12 s to about 2: the registration alone can hold the process's memory map long
// enough that a read of the load waited 6.9 s behind it. The elimination waits for it before
// its first copy to a device (GpuElimination::begin). Bytes of the arena above the pinned span
// (the copy of A reserved for the host's residual, never copied to a device) are faulted in after
// the registration, not pinned, so that the load's copies into them do not first-touch 2 MiB
// pages on its own threads beside the reads.
//
// One registration for the whole block, never pieces: CUDA refuses a copy whose host range spans
// two registrations (cudaErrorInvalidValue), and the arena's extents fall anywhere. Pinned in
// 1 GiB pieces, a 448 MiB stripe of n = 57344 across a piece boundary failed so on the H200.
//
// Thread-safety: start() and wait() on the solve's thread; the pinning thread (with its helpers
// while it populates) touches only the page tables of the block, never its bytes; wait() returns
// once the registration has ended (the faulting of the bytes above may go on); the destructor
// joins the pinning thread (the registration cannot be interrupted: a solve cancelled during its
// load ends once the registration has, 8-15 s for a 30 GiB arena on the H200 hosts) and unpins the
// block. The engine must outlive it.
#pragma once

#include <cstdint>
#include <future>
#include <memory>
#include <thread>

#include "backend/device_engine.h"
#include "base/status.h"
#include "scheduler/trace.h"

namespace stripesolve::scheduler {

class ArenaPinning {
 public:
  // Pins [base, base + bytes) in one registration (a span "register" on the trace's "pinning"
  // row where `trace` is not null), then faults in [base + bytes, base + fault_bytes) without
  // pinning it (a span "populate above"; none where fault_bytes <= bytes).
  static std::unique_ptr<ArenaPinning> start(backend::DeviceEngine& engine, void* base,
                                             uint64_t bytes, uint64_t fault_bytes = 0,
                                             TraceRecorder* trace = nullptr);
  ~ArenaPinning();
  ArenaPinning(const ArenaPinning&) = delete;
  ArenaPinning& operator=(const ArenaPinning&) = delete;

  // Once the block is pinned: its status. Later calls return the same.
  Status wait();
  // How long the registration took (valid after wait()).
  double seconds() const { return seconds_; }
  uint64_t bytes() const { return bytes_; }

 private:
  ArenaPinning(backend::DeviceEngine& engine, void* base, uint64_t bytes, uint64_t fault_bytes,
               TraceRecorder* trace)
      : engine_(engine), base_(base), bytes_(bytes), fault_bytes_(fault_bytes), trace_(trace) {}
  void run();

  backend::DeviceEngine& engine_;
  void* const base_;
  const uint64_t bytes_;
  const uint64_t fault_bytes_;
  TraceRecorder* const trace_;
  // Written by the pinning thread before it sets `registered_`, read after that is ready.
  bool pinned_ = false;
  double seconds_ = 0;
  Status status_;
  std::promise<void> registered_;
  std::future<void> registered_ready_ = registered_.get_future();  // wait() may wait again
  std::thread thread_;
};

}  // namespace stripesolve::scheduler
