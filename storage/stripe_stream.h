// Streaming whole stripes of an object through one bounded, 4 KiB-aligned buffer: used by create
// (generators), import and export, so their memory is the configured buffer, not the matrix.
//
// A stripe is moved as consecutive byte windows of half the buffer's size; each window's elements
// are produced (or consumed) as a run of the stripe's column-major elements, then written (read)
// over the segments. The halves alternate: one window's disk I/O (on a task of its own) overlaps
// the production or consumption of the next on the calling thread. Segment CRC32Cs are
// accumulated window by window, so writing yields every checksum and reading verifies every
// segment (when `verify`), with no second pass.
//
// Thread-safety: one call uses its buffer alone; callers serialize use of a buffer. The producer
// and consumer run on the calling thread only; the engine is called from the I/O task.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "base/status.h"
#include "storage/data_file.h"
#include "storage/io_engine.h"
#include "storage/placement.h"

namespace stripesolve::storage {

// Element run of stripe I: out/in[k] is element e0 + k (column-major, leading dimension h_I).
using ElementProducer = std::function<Status(int64_t I, int64_t e0, int64_t count, double* out)>;
using ElementConsumer =
    std::function<Status(int64_t I, int64_t e0, int64_t count, const double* in)>;

struct StripeStream {
  const Placement* placement = nullptr;
  std::span<const DataFile> files;  // one per path of the placement
  IoEngine* engine = nullptr;
  AlignedBuffer* buffer = nullptr;  // window size = buffer size
};

// Writes stripes [0, N) from `produce`; fills `checksums` (one per segment).
Status write_stripes(const StripeStream& s, const ElementProducer& produce,
                     std::vector<std::optional<uint32_t>>& checksums);

// Bytes [begin, end) of the stored part of stripe I (4 KiB aligned, end <= stored_bytes(I)).
struct StripeWindow {
  int64_t stripe = 0;
  uint64_t begin = 0;
  uint64_t end = 0;
};

// The data elements of one window of a batch: out[k] is element e0 + k of the stripe
// (column-major, leading dimension h_I); `count` leaves out the 4 KiB padding.
struct ElementRun {
  int64_t stripe = 0;
  int64_t e0 = 0;
  int64_t count = 0;
  double* out = nullptr;
};
using BatchProducer = std::function<Status(size_t batch, std::span<const ElementRun> runs)>;

// The bytes one batch of write_stripe_batches may hold with `buffer` (half of it, 4 KiB aligned).
uint64_t batch_capacity(const AlignedBuffer& buffer);

// The size of a stream buffer for the object of `placement`, at most `budget`: no more than two
// halves that each hold all its stored stripes with their alignment slack, since a larger buffer
// is never filled. A 3 x 3 matrix's import took 0.9 s on a 2-core VM zeroing the 256 MiB default.
uint64_t stream_buffer_bytes(const Placement& placement, uint64_t budget);

// Writes stripes [0, N) as `batches` of windows, possibly of several stripes: a batch's windows
// lie one after another in a half of the buffer, are produced by one call of `produce` and written
// with all their requests in flight together, while the next batch is produced. Over all batches,
// each stripe's windows must come in order and cover [0, stored_bytes) exactly, and each batch
// must fit batch_capacity(); otherwise kInternal before anything is written for that batch.
// write_stripes is the case of one window per batch. Fills `checksums` (one per segment).
Status write_stripe_batches(const StripeStream& s,
                            std::span<const std::vector<StripeWindow>> batches,
                            const BatchProducer& produce,
                            std::vector<std::optional<uint32_t>>& checksums);

// Reads stripes [0, N) into `consume`; when `verify`, compares each segment with its known checksum
// and returns kCorruption naming segment, stripe, path and offset on a mismatch.
Status read_stripes(const StripeStream& s, const ElementConsumer& consume,
                    const std::vector<std::optional<uint32_t>>& checksums, bool verify);

// The kCorruption message of a checksum mismatch (shared with StripedMatrix reads).
Status checksum_mismatch(const Placement& placement, std::span<const DataFile> files,
                         int64_t segment, uint32_t stored, uint32_t computed);

}  // namespace stripesolve::storage
