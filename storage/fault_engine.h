// A fault-injecting engine for tests: wraps a real engine and spoils the k-th request it is given
// (counting from 0 over the engine's life, in the order requests appear in batches).
//
//   kFail           the request fails with `error` (errno) without moving data;
//   kShortTransfer  half the request moves (4 KiB aligned), then the device makes no progress:
//                   a read ends in "unexpected end of file", a write in "no progress";
//   kTornWrite      a write moves its first half for real, then fails with `error`: the data on
//                   disk is torn (reads behave as kFail).
//
// Messages are those of the real engines (apply_transfer_result), naming path, offset and errno.
// The fault fires once; afterwards everything passes through. Requests after the faulty one in the
// same batch are not performed. run_batches() is IoEngine's: one request at a time through run(),
// so a stream of parts meets the fault at the same request count.
//
// Thread-safety: run() may be called concurrently (the request counter is atomic).
#pragma once

#include <atomic>
#include <cerrno>
#include <memory>

#include "storage/io_engine.h"

namespace stripesolve::storage {

struct FaultPlan {
  enum class Kind { kFail, kShortTransfer, kTornWrite };
  Kind kind = Kind::kFail;
  int64_t request = 0;  // k
  int error = EIO;
  bool writes_only = false;  // count only write requests
};

class FaultEngine final : public IoEngine {
 public:
  FaultEngine(std::shared_ptr<IoEngine> inner, FaultPlan plan)
      : inner_(std::move(inner)), plan_(plan) {}
  std::string_view name() const override { return "fault"; }
  using IoEngine::run;
  Status run(std::span<const IoRequest> requests, const IoCompletion& on_complete) override;

  bool fired() const { return fired_.load(); }
  int64_t requests_seen() const { return seen_.load(); }

 private:
  Status spoil(const IoRequest& r);

  std::shared_ptr<IoEngine> inner_;
  const FaultPlan plan_;
  std::atomic<int64_t> seen_{0};
  std::atomic<bool> fired_{false};
};

}  // namespace stripesolve::storage
