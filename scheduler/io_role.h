// The I/O role (002 §8.2 "SSDA thread"): one thread (or engine.io_threads) that serves the cache's
// transfer requests.
// Downloads read stripe parts into their cells with StripedMatrix::read_parts; uploads write an
// evicted dirty cell back with write_part (storage fans each transfer out over all paths).
//
// Streaming (issue 3): the role takes every download already waiting (up to kMaxBatch, from
// StripeCache::next_io_batch) and reads each run of consecutive parts from the same object as one
// read_parts stream, so the disk does not idle between parts. Each part is reported to the cache
// (finish_io) as soon as it has arrived, so compute starts on it while later parts are in flight.
// On an error every part not yet reported gets finish_io with that error, each exactly once.
// Uploads run one at a time and are never batched with downloads (the cache hands them out alone).
//
// Copy on first write (STORAGE_API.md): during a factorization the factor object starts empty;
// a stripe is read from `original` until it has been written to `factor` once, then from
// `factor`. (In place, both are the same object.)
//
// Thread-safety: set_sources() only while no transfer is pending (the cache is empty); `mu_`
// guards the sources and the written flags against the role's thread.
#pragma once

#include <cstddef>
#include <functional>
#include <span>
#include <thread>
#include <vector>

#include "base/mutex.h"
#include "cache/stripe_cache.h"
#include "scheduler/progress.h"
#include "scheduler/trace.h"
#include "storage/striped_matrix.h"

namespace stripesolve::scheduler {

class IoRole {
 public:
  // The most downloads in one stream: bounds how long a waiting upload (which frees memory) waits.
  static constexpr size_t kMaxBatch = 16;

  // `threads` >= 1 serve the queue side by side (engine.io_threads: a write-back beside the
  // reads; storage reads and writes different stripes concurrently, and a stripe's upload and
  // download never overlap, its cell being in one state at a time).
  IoRole(cache::StripeCache& cache, ProgressMeter& progress, TraceRecorder* trace, int threads = 1);
  ~IoRole();  // shuts the cache's I/O queue down and joins
  IoRole(const IoRole&) = delete;
  IoRole& operator=(const IoRole&) = delete;

  // Reads come from `factor` for stripes written since this call, else from `original`;
  // uploads go to `factor` (nullptr: read-only phase, an upload is a bug).
  void set_sources(storage::StripedMatrix* original, storage::StripedMatrix* factor);
  // After set_sources(): stripes already written to `factor` (a resumed factorization's durable
  // ones) are read from it.
  void mark_written(const std::vector<bool>& written);
  // What each upload is followed by (a factorization's progress record: factor_progress.h).
  // `checksum` runs on a helper thread while the part is being written (it may only read the
  // cell's buffer, which the write also only reads); `written` on the role's thread once the
  // write has returned, before the cache hears of the upload, with checksum's value; its error
  // fails the upload. Empty: none. Set only while no transfer is pending, as set_sources().
  struct WriteHook {
    std::function<uint32_t(const cache::CellView&)> checksum;
    std::function<Status(const cache::CellView&, uint32_t)> written;
    explicit operator bool() const { return checksum && written; }
  };
  void set_write_hook(WriteHook hook);
  // What each part read from `original` is followed by, on the role's thread before the cache
  // hears of it: the CPU tier's copy of A for the residual (ram_original.h) takes the stripes
  // as the factorization first reads them. It may only read the cell's buffer; several I/O
  // threads may call it at once for different stripes. Empty: none. Settable at any time; it
  // returns once no stream runs the hook it replaces (a stream takes the hook when it starts),
  // so that what the old hook points to may then go (the GPU tier's, after a failed
  // factorization whose last reads were still arriving).
  using ReadHook = std::function<void(const cache::CellView&, const storage::PartLayout&)>;
  void set_read_hook(ReadHook hook);

 private:
  void run();
  Status upload(const cache::IoWork& work);
  // Splits `works` into runs of consecutive parts from the same object and streams each run.
  void download(std::span<const cache::IoWork> works);
  // Reads `works` from `object` as one stream; reports every part to the cache exactly once,
  // each after `hook` where given. Returns the stream's status.
  Status read_stream(storage::StripedMatrix& object, std::span<const cache::IoWork> works,
                     const ReadHook& hook);

  cache::StripeCache& cache_;
  ProgressMeter& progress_;
  TraceRecorder* trace_;
  Mutex mu_;
  storage::StripedMatrix* original_ GUARDED_BY(mu_) = nullptr;
  storage::StripedMatrix* factor_ GUARDED_BY(mu_) = nullptr;
  std::vector<bool> written_ GUARDED_BY(mu_);
  WriteHook write_hook_ GUARDED_BY(mu_);
  ReadHook read_hook_ GUARDED_BY(mu_);
  int64_t read_hook_streams_ GUARDED_BY(mu_) = 0;  // streams running read_hook_ (a copy)
  CondVar read_hook_done_;                         // read_hook_streams_ went down
  std::vector<std::thread> threads_;
};

}  // namespace stripesolve::scheduler
