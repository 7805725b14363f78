// One stored object (a matrix or a factor) opened for stripe-part I/O.
//
// read_part/write_part move "stripe I from column c0 to n" (002 §7.1) between a 4 KiB-aligned
// buffer and the object's segments on all paths in one engine batch, so every path is busy at once
// (002 §7.3). The buffer layout is PartLayout: the part starts at buffer + data_offset,
// column-major with leading dimension h_I; the bytes before it are columns < c0 of the same stripe
// (read from disk, written back unchanged), the bytes after it up to buffer_bytes are zero padding
// (or, for a read that ends at a column c1 < n, the columns after c1 up to the next 4 KiB).
//
// read_parts() reads a list of parts as one stream over the engine (run_batches): the requests of
// the next part are queued while the current part is in flight, so the disk does not idle between
// parts (issue 3). read_part() is read_parts() of one part.
//
// Checksums: a read verifies every segment it covers entirely against the manifest's CRC32C (when
// the store's verify_checksums is on and the CRC is known). A write records the CRC of every
// segment it covers entirely and marks partly written ones unknown; commit() computes the unknown
// ones by reading them back, then publishes the manifest.
//
// Lifetime: made by MatrixStore. A factor from create_factor() that is destroyed without commit()
// is deleted (unless keep_uncommitted() was called); an object opened for in-place factorization
// and never committed stays in state "being_factored" (its data is neither A nor the factors).
//
// Thread-safety: read_part/write_part of different stripes may run concurrently (also concurrent
// reads of one stripe); write_blob/read_blob/commit may be called from any thread. `mu_` guards
// manifest_ and committed_.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "base/mutex.h"
#include "base/status.h"
#include "storage/data_file.h"
#include "storage/geometry.h"
#include "storage/io_engine.h"
#include "storage/manifest.h"
#include "storage/placement.h"

namespace stripesolve::storage {

struct StoreShared;

struct PartLayout {
  uint64_t buffer_bytes = 0;  // multiple of 4 KiB
  uint64_t data_offset = 0;   // where element (row_begin(I), c0) lies in the buffer
  uint64_t data_bytes = 0;    // 8 * h_I * (c1 - c0)
};

// One stripe part to read: columns [col_begin, col_end) of stripe `stripe` into `buffer`
// (PartLayout); col_end at or past n (kThroughN) reads through column n.
struct PartRead {
  int64_t stripe = 0;
  int64_t col_begin = 0;
  std::byte* buffer = nullptr;
  int64_t col_end = kThroughN;
};

// Called on the thread of read_parts() when part `index` of the list has arrived and its checksums
// are verified; the part's buffer is not touched by read_parts() again after this returns.
using PartDone = std::function<void(size_t index)>;

class StripedMatrix {
 public:
  enum class Mode { kReadOnly, kNewFactor, kInPlace };

  // Made by MatrixStore; `files` holds one open data file per placement path.
  StripedMatrix(std::shared_ptr<StoreShared> store, Manifest manifest, Placement placement,
                std::vector<DataFile> files, Mode mode);
  ~StripedMatrix();
  StripedMatrix(const StripedMatrix&) = delete;
  StripedMatrix& operator=(const StripedMatrix&) = delete;

  const MatrixInfo& info() const { return info_; }
  const StripeGeometry& geometry() const { return placement_.geometry(); }
  const Placement& placement() const { return placement_; }
  bool writable() const { return mode_ != Mode::kReadOnly; }
  // For storage's own streaming (export): the open data files and the current segment checksums.
  const std::vector<DataFile>& files() const { return files_; }
  std::vector<std::optional<uint32_t>> checksums() const;

  // The buffer of columns [col_begin, col_end) of a stripe (col_end past n: through n). Parts are
  // written only through n.
  PartLayout part_layout(int64_t stripe, int64_t col_begin, int64_t col_end = kThroughN) const;
  Status read_part(int64_t stripe, int64_t col_begin, std::byte* buffer,
                   int64_t col_end = kThroughN);
  // Reads `parts` in list order as one stream, calling `on_done` (may be empty) as each arrives;
  // with io_uring, parts complete in about list order but not necessarily in it. Entries may share
  // a buffer (a ring of buffers): a part starts only after every earlier part with the same buffer
  // is done and its on_done returned; buffers that are not the same must not overlap. Every part
  // is checked before any I/O. Returns the first error (kCorruption on a checksum mismatch, the
  // engine's error naming path, offset and errno otherwise); on_done is not called for a failed
  // part, and parts after it may or may not have been read. Nothing is in flight on return.
  Status read_parts(std::span<const PartRead> parts, const PartDone& on_done);
  Status write_part(int64_t stripe, int64_t col_begin, const std::byte* buffer);

  Status write_blob(std::string_view key, std::span<const std::byte> bytes);
  Result<std::vector<std::byte>> read_blob(std::string_view key) const;

  // A factor: records the matrix it factors (published at commit()).
  void set_factor_of(const FactorOf& of);
  // A new factor that has a progress log: when destroyed uncommitted, leave it as a crash would
  // (incomplete, kept by the next open of the store for its factorization to resume) instead of
  // removing it.
  void keep_uncommitted();
  // fdatasync of every data file: the parts written so far are durable (a progress record may
  // name them).
  Status sync_data() const;
  // Where this factor's progress log lies (storage/progress_log.h; read by reopen_factor).
  std::string progress_path() const;

  // Writable objects: completes unknown checksums, syncs the data files and atomically publishes
  // the manifest as kind "factor", state "complete". Fails on read-only objects and when called
  // twice.
  Status commit();

 private:
  class PartSource;
  Status check_part(int64_t stripe, int64_t col_begin, int64_t col_end) const;
  void part_requests(int64_t stripe, int64_t col_begin, int64_t col_end, IoOp op, std::byte* buffer,
                     std::vector<IoPiece>& pieces, std::vector<IoRequest>& requests) const;
  std::string describe() const;

  std::shared_ptr<StoreShared> store_;
  const MatrixInfo info_;
  const Placement placement_;
  const std::vector<DataFile> files_;
  const Mode mode_;

  mutable Mutex mu_;
  Manifest manifest_;       // GUARDED_BY(mu_): checksums and blobs as they change
  bool committed_ = false;  // GUARDED_BY(mu_)
  bool kept_ = false;       // GUARDED_BY(mu_): keep_uncommitted()
};

}  // namespace stripesolve::storage
