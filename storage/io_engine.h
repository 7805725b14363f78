// The I/O engine interface: plain request values in, one Status out.
//
// A request names an open file descriptor (with its path, for messages), a file offset, a length
// and a buffer. With O_DIRECT files the offset, length and buffer address must be 4 KiB aligned
// (placement.h guarantees it for stripe data). run() performs every request of a batch, keeping
// as many in flight as the engine allows, and returns only when none is in flight any more, so the
// caller may reuse or free the buffers afterwards even after an error.
//
// Errors name the operation, path, offset and errno: "read /s0/objects/A/data at offset 8192
// (length 4096): Input/output error (errno 5)". Short transfers are continued where they stopped;
// -EAGAIN and -EINTR are retried (at most kMaxRetries times per request, then a retryable error);
// a read that meets end of file is kCorruption ("unexpected end of file"), since store files are
// preallocated to their full size.
//
// Engines (make_io_engine in engine_select.h): io_uring (uring_engine.h), pread/pwrite
// (pread_engine.h, the fallback and test oracle), and a fault-injecting wrapper for tests
// (fault_engine.h).
//
// run_batches() streams batches from an IoBatchSource: the engine asks for the next batch while
// the current one is still in flight, so a sequence of stripe parts keeps the disk busy across part
// boundaries instead of draining the queue after each (issue 3). The io_uring engine overlaps
// batches; the base implementation runs them one request at a time, in order.
//
// Thread-safety: every engine's run() and run_batches() may be called from several threads at
// once.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>

#include "base/status.h"

namespace stripesolve::storage {

enum class IoOp { kRead, kWrite };

struct IoRequest {
  IoOp op = IoOp::kRead;
  int fd = -1;
  const std::string* path = nullptr;  // for messages; must outlive run()
  uint64_t offset = 0;
  uint64_t length = 0;
  std::byte* buffer = nullptr;  // written for reads, only read for writes
};

// Called on the thread of run(), before run() returns, when request `index` has moved all its
// bytes, while later requests may still be in flight: checksums computed here overlap the I/O.
using IoCompletion = std::function<void(size_t index)>;

// What IoEngine::run_batches() pulls its requests from. All calls come from the thread of
// run_batches(), one at a time.
class IoBatchSource {
 public:
  virtual ~IoBatchSource() = default;
  // Returns false when there are no more batches. Otherwise sets `batch`: the next requests, or
  // empty when none can be given before one of the requests in flight completes (the engine asks
  // again after the next completion; empty with nothing in flight is a bug, reported as kInternal).
  // The requests must stay valid until each has been passed to completed() or the run returned.
  virtual bool next_batch(std::span<const IoRequest>& batch) = 0;
  // Request `index` of batch `batch` (numbered from 0 in the order next_batch gave non-empty ones)
  // has moved all its bytes (`result` ok), or failed with `result`. A non-ok return ends the run
  // with that status, after what is in flight has completed (checksum mismatches, error context).
  virtual Status completed(size_t batch, size_t index, Status result) = 0;
};

class IoEngine {
 public:
  virtual ~IoEngine() = default;
  virtual std::string_view name() const = 0;
  // Performs all requests; on failure returns the first error after every request has finished
  // or been abandoned (requests after a failure may or may not have been performed).
  // `on_complete` (may be empty) is called once per request that completed.
  virtual Status run(std::span<const IoRequest> requests, const IoCompletion& on_complete) = 0;
  Status run(std::span<const IoRequest> requests) { return run(requests, IoCompletion()); }
  // Runs every batch `source` gives; returns the first non-ok status completed() returned (no
  // request is in flight any more then). This base version runs one request at a time through
  // run(), so a failure is attributed to its request; the io_uring engine overrides it.
  virtual Status run_batches(IoBatchSource& source);
};

inline constexpr int kMaxRetries = 64;

// Progress of one request (or chunk of one) through short transfers and retries; the engines share
// this so that both handle results identically.
struct Transfer {
  const IoRequest* request = nullptr;
  uint64_t offset = 0;  // start of this transfer within the file
  uint64_t length = 0;  // bytes this transfer must move
  std::byte* buffer = nullptr;
  uint64_t done = 0;  // bytes moved so far
  int retries = 0;
};

enum class TransferStep { kDone, kContinue, kFailed };

// Applies one system call result (bytes moved, or -errno) to `t`: kDone when all bytes moved,
// kContinue to issue the rest again (after a short transfer, -EAGAIN or -EINTR), kFailed with
// *error set otherwise.
TransferStep apply_transfer_result(Transfer& t, int64_t result, Status* error);

// "read <path> at offset <off> (length <len>)": the context of a transfer's messages.
std::string describe_transfer(const Transfer& t);

// The size of the pieces a queued engine cuts a batch of `batch_bytes` into: the batch spread over
// the queue's depth, rounded up to 4 KiB, at most request_bytes and at least min(request_bytes,
// 1 MiB). Depth and size both count on the GPU hosts' disks (a raw loop read 0.80 / 1.37 / 1.51
// GB/s with 32 requests of 1 / 4 / 16 MiB in flight, 1.17 with 8 of 16 MiB; the defaults' figures
// are in store_config.h), so a 448 MiB part of the load goes in 14 MiB pieces and a 128 MiB batch
// still keeps 32 requests in flight.
uint64_t chunk_bytes(uint64_t batch_bytes, unsigned queue_depth, uint64_t request_bytes);

}  // namespace stripesolve::storage
