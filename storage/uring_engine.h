// The io_uring engine (liburing): all requests of a batch go to one ring, up to queue_depth in
// flight, so the segments on every path are transferred at once (002 §7.3). Requests are cut into
// chunks (io_engine.h's chunk_bytes: as large as the store's request_bytes for reads and
// write_request_bytes for writes, but small enough that a batch fills the queue,
// down to 1 MiB) and ordered chunk 0 of every request, then chunk 1, ..., which spreads the queue
// over all paths (consecutive segments lie on consecutive paths).
//
// run_batches() takes the source's next batch whenever fewer than queue_depth chunks wait to be
// submitted, so the chunks of the next stripe part are queued while the current one is still in
// flight; chunks are submitted as soon as a completion frees a slot. run() is one batch.
//
// Plain request values become SQEs in one function (prepare_sqe); a chunk's state rides in
// user_data (its index). Completions go through apply_transfer_result (io_engine.h) like the pread
// engine: short transfers and -EAGAIN/-EINTR are resubmitted for the rest, other errors end the
// batch after the in-flight chunks have completed.
//
// Thread-safety: run() may be called concurrently; each call takes a ring from a pool (creating
// one when none is idle) and returns it afterwards, so calls never share a ring.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <vector>

#include "base/mutex.h"
#include "storage/io_engine.h"

namespace stripesolve::storage {

class UringEngine final : public IoEngine {
 public:
  // Reads are cut into pieces of at most read_request_bytes, writes of write_request_bytes.
  UringEngine(unsigned queue_depth, uint64_t read_request_bytes, uint64_t write_request_bytes);
  ~UringEngine() override;

  // OK when a ring can be created and a no-op completes in this process.
  static Status probe();

  std::string_view name() const override { return "io_uring"; }
  using IoEngine::run;
  Status run(std::span<const IoRequest> requests, const IoCompletion& on_complete) override;
  Status run_batches(IoBatchSource& source) override;

 private:
  struct Ring;
  struct Chunk;
  // Appends the chunks of one batch to `pending` in submission order; counts them per request.
  void cut_batch(std::span<const IoRequest> requests, size_t batch,
                 std::vector<uint32_t>& chunks_left, std::deque<Chunk>& pending) const;
  Result<std::unique_ptr<Ring>> acquire();
  void release(std::unique_ptr<Ring> ring);

  const unsigned queue_depth_;
  const uint64_t read_request_bytes_;
  const uint64_t write_request_bytes_;
  Mutex mu_;
  std::vector<std::unique_ptr<Ring>> idle_;  // GUARDED_BY(mu_)
};

}  // namespace stripesolve::storage
