#include "storage/striped_matrix.h"

#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <deque>
#include <filesystem>
#include <optional>
#include <string>

#include "base/logging.h"
#include "storage/checksum.h"
#include "storage/store_shared.h"
#include "storage/stripe_stream.h"

namespace stripesolve::storage {

StripedMatrix::StripedMatrix(std::shared_ptr<StoreShared> store, Manifest manifest,
                             Placement placement, std::vector<DataFile> files, Mode mode)
    : store_(std::move(store)),
      info_(manifest.info),
      placement_(std::move(placement)),
      files_(std::move(files)),
      mode_(mode),
      manifest_(std::move(manifest)) {
  MutexLock lock(store_->mu);
  ++store_->open_count[info_.name];
}

StripedMatrix::~StripedMatrix() {
  bool discard = false;
  {
    MutexLock lock(mu_);
    discard = mode_ == Mode::kNewFactor && !committed_ && !kept_;
  }
  if (discard) {
    Status st = store_->remove_object_files(info_.name);
    if (!st.is_ok()) {
      logger("storage")->error("cannot remove uncommitted factor '{}': {}", info_.name,
                               st.to_string());
    }
  }
  MutexLock lock(store_->mu);
  if (--store_->open_count[info_.name] == 0) store_->open_count.erase(info_.name);
}

std::vector<std::optional<uint32_t>> StripedMatrix::checksums() const {
  MutexLock lock(mu_);
  return manifest_.checksums;
}

std::string StripedMatrix::describe() const {
  return info_.kind + " '" + info_.name + "'";
}

PartLayout StripedMatrix::part_layout(int64_t stripe, int64_t col_begin, int64_t col_end) const {
  const StripeGeometry& g = placement_.geometry();
  const auto h = static_cast<uint64_t>(g.rows(stripe));
  const int64_t c1 = std::min(col_end, g.n);
  const uint64_t first = kElementBytes * h * static_cast<uint64_t>(col_begin);
  const uint64_t begin = align_down(first);
  const uint64_t stored = placement_.stored_bytes(stripe);
  const uint64_t end =
      c1 == g.n ? stored
                : std::min(stored, align_up(kElementBytes * h * static_cast<uint64_t>(c1)));
  return PartLayout{end - begin, first - begin,
                    kElementBytes * h * static_cast<uint64_t>(c1 - col_begin)};
}

Status StripedMatrix::check_part(int64_t stripe, int64_t col_begin, int64_t col_end) const {
  const StripeGeometry& g = placement_.geometry();
  if (stripe < 0 || stripe >= g.stripes || col_begin < 0 || col_begin > g.n ||
      col_end < col_begin) {
    const std::string end = col_end >= g.n ? "" : " to column " + std::to_string(col_end);
    return Status::invalid_argument(describe() + ": stripe " + std::to_string(stripe) +
                                    " from column " + std::to_string(col_begin) + end +
                                    " is outside " + std::to_string(g.stripes) + " stripes of " +
                                    std::to_string(g.n) + " columns");
  }
  return Status::ok();
}

void StripedMatrix::part_requests(int64_t stripe, int64_t col_begin, int64_t col_end, IoOp op,
                                  std::byte* buffer, std::vector<IoPiece>& pieces,
                                  std::vector<IoRequest>& requests) const {
  const PartLayout layout = part_layout(stripe, col_begin, col_end);
  const uint64_t begin = align_down(kElementBytes * static_cast<uint64_t>(geometry().rows(stripe)) *
                                    static_cast<uint64_t>(col_begin));
  placement_.pieces(stripe, begin, begin + layout.buffer_bytes, pieces);
  requests.reserve(pieces.size());
  for (const IoPiece& p : pieces) {
    requests.push_back(IoRequest{op, files_[p.path].fd(), &files_[p.path].path(), p.file_offset,
                                 p.length, buffer + p.buffer_offset});
  }
}

// Gives the engine one batch per part, in list order, and verifies each segment as its request
// completes, while the other requests are still in flight.
class StripedMatrix::PartSource final : public IoBatchSource {
 public:
  PartSource(StripedMatrix& m, std::span<const PartRead> parts, const PartDone& on_done)
      : m_(m), parts_(parts), on_done_(on_done) {}

  bool next_batch(std::span<const IoRequest>& batch) override {
    batch = {};
    while (next_ < parts_.size()) {
      const PartRead& part = parts_[next_];
      for (const Batch& b : open_) {
        if (b.requests_left > 0 && parts_[b.part].buffer == part.buffer) return true;  // busy
      }
      const size_t index = next_++;
      Batch& b = open_.emplace_back();
      b.part = index;
      m_.part_requests(part.stripe, part.col_begin, part.col_end, IoOp::kRead, part.buffer,
                       b.pieces, b.requests);
      if (b.requests.empty()) {  // a part of zero bytes, when 8 * h * n is a multiple of 4 KiB
        open_.pop_back();
        if (on_done_) on_done_(index);
        continue;
      }
      b.requests_left = b.requests.size();
      if (m_.store_->config.verify_checksums) {
        MutexLock lock(m_.mu_);
        for (const IoPiece& p : b.pieces) {
          b.stored.push_back(p.whole_segment ? m_.manifest_.checksums[p.segment] : std::nullopt);
        }
      }
      batch = b.requests;
      return true;
    }
    return false;
  }

  Status completed(size_t batch, size_t index, Status result) override {
    Batch& b = open_[batch - first_batch_];
    const PartRead& part = parts_[b.part];
    Status st = std::move(result);
    if (!st.is_ok()) {
      st = st.with_context(m_.describe() + " stripe " + std::to_string(part.stripe));
    } else if (!b.stored.empty() && b.stored[index]) {
      const IoPiece& p = b.pieces[index];
      const uint32_t computed = crc32c_extend(0, part.buffer + p.buffer_offset, p.length);
      if (computed != *b.stored[index]) {
        st = checksum_mismatch(m_.placement_, m_.files_, p.segment, *b.stored[index], computed)
                 .with_context(m_.describe());
      }
    }
    if (!st.is_ok()) b.failed = true;
    if (--b.requests_left == 0 && !b.failed && on_done_) on_done_(b.part);
    while (!open_.empty() && open_.front().requests_left == 0) {
      open_.pop_front();
      ++first_batch_;
    }
    return st;
  }

 private:
  struct Batch {
    size_t part = 0;
    std::vector<IoPiece> pieces;
    std::vector<IoRequest> requests;              // one per piece; stays put until completed
    std::vector<std::optional<uint32_t>> stored;  // per piece when verifying
    size_t requests_left = 0;
    bool failed = false;
  };

  StripedMatrix& m_;
  const std::span<const PartRead> parts_;
  const PartDone& on_done_;
  size_t next_ = 0;         // first part not started
  std::deque<Batch> open_;  // batches first_batch_, first_batch_ + 1, ... (not all finished)
  size_t first_batch_ = 0;
};

Status StripedMatrix::read_part(int64_t stripe, int64_t col_begin, std::byte* buffer,
                                int64_t col_end) {
  const PartRead part{stripe, col_begin, buffer, col_end};
  return read_parts({&part, 1}, PartDone());
}

Status StripedMatrix::read_parts(std::span<const PartRead> parts, const PartDone& on_done) {
  for (const PartRead& p : parts) {
    STRIPESOLVE_RETURN_IF_ERROR(check_part(p.stripe, p.col_begin, p.col_end));
  }
  PartSource source(*this, parts, on_done);
  return store_->engine->run_batches(source);
}

Status StripedMatrix::write_part(int64_t stripe, int64_t col_begin, const std::byte* buffer) {
  if (!writable()) return Status::failed_precondition(describe() + " is open read-only");
  STRIPESOLVE_RETURN_IF_ERROR(check_part(stripe, col_begin, kThroughN));
  {
    MutexLock lock(mu_);
    if (committed_) return Status::failed_precondition(describe() + " is already committed");
  }
  std::vector<IoPiece> pieces;
  std::vector<IoRequest> requests;
  // The engine only reads from write buffers; IoRequest has one pointer type for both directions.
  part_requests(stripe, col_begin, kThroughN, IoOp::kWrite, const_cast<std::byte*>(buffer), pieces,
                requests);
  // Checksums of whole segments, computed as each write completes (the buffer does not change).
  std::vector<std::optional<uint32_t>> sums(pieces.size());
  const auto record = [&](size_t k) {
    if (pieces[k].whole_segment) {
      sums[k] = crc32c_extend(0, buffer + pieces[k].buffer_offset, pieces[k].length);
    }
  };
  Status st = store_->engine->run(requests, record);
  MutexLock lock(mu_);
  for (size_t k = 0; k < pieces.size(); ++k) {
    manifest_.checksums[pieces[k].segment] = st.is_ok() ? sums[k] : std::nullopt;
  }
  if (!st.is_ok()) {
    return st.with_context(describe() + " stripe " + std::to_string(stripe)).set_data_lost();
  }
  return Status::ok();
}

Status StripedMatrix::write_blob(std::string_view key, std::span<const std::byte> bytes) {
  const std::string k(key);
  STRIPESOLVE_RETURN_IF_ERROR(check_object_name(k, "blob key"));
  if (!writable()) return Status::failed_precondition(describe() + " is open read-only");
  MutexLock lock(mu_);
  if (committed_) return Status::failed_precondition(describe() + " is already committed");
  STRIPESOLVE_RETURN_IF_ERROR(write_file_atomically(
      store_->blob_path(info_.name, k),
      std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()),
      store_->file_mode()));
  manifest_.blobs[k] = BlobEntry{bytes.size(), crc32c(bytes)};
  return Status::ok();
}

Result<std::vector<std::byte>> StripedMatrix::read_blob(std::string_view key) const {
  const std::string k(key);
  STRIPESOLVE_RETURN_IF_ERROR(check_object_name(k, "blob key"));
  BlobEntry entry;
  {
    MutexLock lock(mu_);
    auto it = manifest_.blobs.find(k);
    if (it == manifest_.blobs.end()) {
      return Status::not_found(describe() + " has no blob '" + k + "'");
    }
    entry = it->second;
  }
  const std::string path = store_->blob_path(info_.name, k);
  STRIPESOLVE_ASSIGN_OR_RETURN(std::string text, read_whole_file(path, entry.bytes));
  std::vector<std::byte> out(text.size());
  if (!text.empty()) std::memcpy(out.data(), text.data(), text.size());
  if (out.size() != entry.bytes || crc32c(out) != entry.crc32c) {
    return Status::corruption("blob " + path + " does not match its manifest entry (" +
                              std::to_string(out.size()) + " of " + std::to_string(entry.bytes) +
                              " bytes, or checksum mismatch)");
  }
  return out;
}

void StripedMatrix::keep_uncommitted() {
  MutexLock lock(mu_);
  kept_ = true;
}

void StripedMatrix::set_factor_of(const FactorOf& of) {
  MutexLock lock(mu_);
  manifest_.info.factor_of = of;
}

Status StripedMatrix::sync_data() const {
  for (const DataFile& f : files_) STRIPESOLVE_RETURN_IF_ERROR(f.sync());
  return Status::ok();
}

std::string StripedMatrix::progress_path() const {
  return store_->progress_path(info_.name);
}

Status StripedMatrix::commit() {
  if (!writable()) return Status::failed_precondition(describe() + " is open read-only");
  MutexLock lock(mu_);
  if (committed_) return Status::failed_precondition(describe() + " is already committed");
  // Checksums of partly written segments: read those segments back, one at a time.
  uint64_t longest = 0;
  for (int64_t s = 0; s < placement_.segment_count(); ++s) {
    if (!manifest_.checksums[s]) longest = std::max(longest, placement_.segment(s).length);
  }
  if (longest > 0) {
    STRIPESOLVE_ASSIGN_OR_RETURN(AlignedBuffer buffer, AlignedBuffer::allocate(longest));
    for (int64_t s = 0; s < placement_.segment_count(); ++s) {
      if (manifest_.checksums[s]) continue;
      const Segment& seg = placement_.segment(s);
      const IoRequest req{
          IoOp::kRead, files_[seg.path].fd(), &files_[seg.path].path(), seg.file_offset,
          seg.length,  buffer.data()};
      STRIPESOLVE_RETURN_IF_ERROR(store_->engine->run({&req, 1}));
      manifest_.checksums[s] = crc32c_extend(0, buffer.data(), seg.length);
    }
  }
  for (const DataFile& f : files_) STRIPESOLVE_RETURN_IF_ERROR(f.sync());
  Manifest next = manifest_;
  next.info.kind = "factor";
  next.info.state = ObjectState::kComplete;
  // In place, the matrix becomes its own factor: it records what it was.
  if (mode_ == Mode::kInPlace && !next.info.factor_of) {
    next.info.factor_of = FactorOf{info_.id, info_.geometry.n, info_.checksum_summary};
  }
  next.info.checksum_summary = checksum_summary(next.checksums);
  // The progress log (if any) goes before the manifest says complete, so that a factor with a
  // log is always an incomplete one: a crash between the two leaves a half-made factor without
  // a log (it is removed and its solve factors again, as one crashed before its first record),
  // never a complete factor with a stale log (the crash test read such a log as a factorization
  // under way; the directory is synced so that a power cut keeps that order too). The data is
  // synced above, so nothing the log vouched for is lost.
  const std::string progress = store_->progress_path(info_.name);
  if (::unlink(progress.c_str()) == 0) {
    STRIPESOLVE_RETURN_IF_ERROR(
        sync_directory(std::filesystem::path(progress).parent_path().string()));
  }
  STRIPESOLVE_RETURN_IF_ERROR(store_->write_manifest(next));
  manifest_ = std::move(next);
  committed_ = true;
  logger("storage")->info("committed factor '{}'", info_.name);
  return Status::ok();
}

}  // namespace stripesolve::storage
