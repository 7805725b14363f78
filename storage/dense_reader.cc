// DenseReader (storage/dense_reader.h): C order by row segments transposed over the cores,
// Fortran order by batches of whole columns, through a staging block read with O_DIRECT where the
// file system allows.
#include "storage/dense_reader.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>

#include "storage/transpose.h"

namespace stripesolve::storage {

DenseReader::~DenseReader() {
  if (direct_fd_ >= 0) ::close(direct_fd_);
}

Status DenseReader::fill(const StripeGeometry& g, int64_t I, int64_t e0, int64_t count,
                         double* out) {
  const int64_t h = g.rows(I), e1 = e0 + count;
  const auto [cf, cl] = whole_columns(h, e0, e1);
  if (l_.fortran_order) {
    STRIPESOLVE_RETURN_IF_ERROR(fill_columns(g, I, e0, e1, out));
  } else if (cf >= cl) {
    STRIPESOLVE_RETURN_IF_ERROR(fill_rows(g, I, e0, e1, out));
  } else {
    STRIPESOLVE_RETURN_IF_ERROR(fill_rows(g, I, e0, cf * h, out));
    STRIPESOLVE_RETURN_IF_ERROR(fill_block(g, I, cf, cl, out + (cf * h - e0)));
    STRIPESOLVE_RETURN_IF_ERROR(fill_rows(g, I, cl * h, e1, out + (cl * h - e0)));
  }
  return check_ ? check_finite(g, I, e0, count, out) : Status::ok();
}

Status DenseReader::prepare_batches(int64_t columns) {
  return prepare_staging(static_cast<uint64_t>(columns * n_) * l_.item_bytes);
}

Status DenseReader::fill_batch(const StripeGeometry& g, const ColumnBatch& b,
                               std::span<const ElementRun> runs) {
  const uint64_t item = static_cast<uint64_t>(l_.item_bytes);
  const int64_t col0 = b.col_begin;
  const uint64_t bytes = static_cast<uint64_t>((b.col_end - col0) * n_) * item;
  const uint64_t offset = l_.data_offset + static_cast<uint64_t>(col0 * n_) * item;
  const unsigned char* cols = nullptr;
  STRIPESOLVE_ASSIGN_OR_RETURN(cols, read_staged(offset, bytes));
  std::vector<int64_t> start(runs.size() + 1, 0);  // the runs as one range of elements
  for (size_t i = 0; i < runs.size(); ++i) start[i + 1] = start[i] + runs[i].count;
  parallel_for(start.back(), 64 * 1024, [&](int64_t lo, int64_t hi) {
    size_t i = std::upper_bound(start.begin(), start.end(), lo) - start.begin() - 1;
    for (; i < runs.size() && start[i] < hi; ++i) {
      const ElementRun& run = runs[i];
      const int64_t h = g.rows(run.stripe), rb = g.row_begin(run.stripe);
      int64_t k = std::max(lo, start[i]) - start[i];
      const int64_t k_end = std::min(hi, start[i + 1]) - start[i];
      while (k < k_end) {  // one column segment of the stripe at a time
        const int64_t e = run.e0 + k, c = e / h, r = e % h;
        const int64_t len = std::min(h - r, k_end - k);
        const unsigned char* src = cols + static_cast<uint64_t>((c - col0) * n_ + rb + r) * item;
        double* out = run.out + k;
        for (int64_t j = 0; j < len; ++j) out[j] = decode(src + j * item, enc_);
        k += len;
      }
    }
  });
  if (!check_) return Status::ok();
  for (const ElementRun& run : runs) {
    STRIPESOLVE_RETURN_IF_ERROR(check_finite(g, run.stripe, run.e0, run.count, run.out));
  }
  return Status::ok();
}

Status DenseReader::fill_block(const StripeGeometry& g, int64_t I, int64_t cf, int64_t cl,
                               double* out) {
  const int64_t h = g.rows(I), rb = g.row_begin(I), w = cl - cf;
  const uint64_t item = static_cast<uint64_t>(l_.item_bytes);
  if (w == n_) {  // whole rows: one contiguous run of the file, through the staging block
    const uint64_t bytes = static_cast<uint64_t>(h * n_) * item;
    STRIPESOLVE_RETURN_IF_ERROR(prepare_staging(bytes));
    const unsigned char* rows = nullptr;
    STRIPESOLVE_ASSIGN_OR_RETURN(
        rows, read_staged(l_.data_offset + static_cast<uint64_t>(rb * n_) * item, bytes));
    rows_to_columns(rows, h, w, enc_, out, h);
    return Status::ok();
  }
  tmp_.resize(static_cast<size_t>(h * w) * item);
  std::vector<IoRequest> reqs;
  for (int64_t r = 0; r < h; ++r) {
    reqs.push_back(request(static_cast<uint64_t>((rb + r) * n_ + cf), w * item,
                           tmp_.data() + static_cast<uint64_t>(r * w) * item));
  }
  STRIPESOLVE_RETURN_IF_ERROR(engine_.run(reqs));
  rows_to_columns(tmp_.data(), h, w, enc_, out, h);
  return Status::ok();
}

Status DenseReader::fill_rows(const StripeGeometry& g, int64_t I, int64_t e0, int64_t e1,
                              double* out) {
  const int64_t h = g.rows(I), rb = g.row_begin(I);
  for (int64_t r = 0; r < h && e0 < e1; ++r) {
    const auto [first, last] = row_columns(r, h, e0, e1);
    if (first >= last) continue;
    STRIPESOLVE_RETURN_IF_ERROR(read((rb + r) * n_ + first, last - first));
    for (int64_t c = first; c < last; ++c) {
      out[r + c * h - e0] = decode(tmp_.data() + (c - first) * l_.item_bytes, enc_);
    }
  }
  return Status::ok();
}

Status DenseReader::fill_columns(const StripeGeometry& g, int64_t I, int64_t e0, int64_t e1,
                                 double* out) {
  const int64_t h = g.rows(I), rb = g.row_begin(I);
  const uint64_t item = static_cast<uint64_t>(l_.item_bytes);
  tmp_.resize(static_cast<size_t>(e1 - e0) * item);
  std::vector<IoRequest> reqs;
  for (int64_t c = e0 / h; c <= (e1 - 1) / h; ++c) {
    const int64_t lo = std::max<int64_t>(e0 - c * h, 0), hi = std::min<int64_t>(e1 - c * h, h);
    reqs.push_back(request(static_cast<uint64_t>(c * n_ + rb + lo), (hi - lo) * item,
                           tmp_.data() + static_cast<uint64_t>(c * h + lo - e0) * item));
  }
  STRIPESOLVE_RETURN_IF_ERROR(engine_.run(reqs));
  parallel_for(e1 - e0, 64 * 1024, [&](int64_t b, int64_t e) {
    for (int64_t k = b; k < e; ++k) out[k] = decode(tmp_.data() + k * item, enc_);
  });
  return Status::ok();
}

Status DenseReader::prepare_staging(uint64_t bytes) {
  if (staging_.size() < bytes + 2 * kAlignment) {
    staging_ = AlignedBuffer();
    STRIPESOLVE_ASSIGN_OR_RETURN(staging_, AlignedBuffer::allocate(bytes + 2 * kAlignment));
  }
  if (!direct_tried_) {
    // Only a descriptor open for reading is reopened (the same file, read-only): a caller's
    // write-only descriptor still fails its reads as before.
    direct_tried_ = true;
    const int flags = ::fcntl(fd_, F_GETFL);
    if (flags >= 0 && (flags & O_ACCMODE) != O_WRONLY) {
      const std::string self = "/proc/self/fd/" + std::to_string(fd_);
      direct_fd_ = ::open(self.c_str(), O_RDONLY | O_DIRECT | O_CLOEXEC);
    }
  }
  return Status::ok();
}

Result<const unsigned char*> DenseReader::read_staged(uint64_t offset, uint64_t bytes) {
  auto* block = reinterpret_cast<unsigned char*>(staging_.data());
  if (direct_fd_ >= 0) {
    const uint64_t begin = align_down(offset), need = offset + bytes - begin;
    const uint64_t length = std::min<uint64_t>(align_up(need), staging_.size());
    uint64_t done = 0;
    while (done < need) {
      const ssize_t got =
          ::pread(direct_fd_, block + done, length - done, static_cast<off_t>(begin + done));
      if (got < 0 && errno == EINTR) continue;
      if (got < 0 && errno == EINVAL && done == 0) break;  // alignment refused: buffered
      if (got < 0) {
        return Status::from_errno(errno,
                                  "read " + path_ + " at offset " + std::to_string(begin + done));
      }
      if (got == 0) {
        return Status::invalid_argument(path_ + ": unexpected end of file at offset " +
                                        std::to_string(begin + done));
      }
      done += static_cast<uint64_t>(got);
    }
    if (done >= need) return block + (offset - begin);
    ::close(direct_fd_);
    direct_fd_ = -1;
  }
  const IoRequest req{IoOp::kRead, fd_, &path_, offset, bytes, staging_.data()};
  STRIPESOLVE_RETURN_IF_ERROR(engine_.run({&req, 1}));
  return block;
}

Status DenseReader::check_finite(const StripeGeometry& g, int64_t I, int64_t e0, int64_t count,
                                 const double* out) const {
  for (int64_t k = 0; k < count; ++k) {
    if (!std::isfinite(out[k])) {
      const int64_t e = e0 + k, h = g.rows(I);
      return Status::invalid_argument(path_ + ": non-finite value " + std::to_string(out[k]) +
                                      " at row " + std::to_string(g.row_begin(I) + e % h) +
                                      ", column " + std::to_string(e / h));
    }
  }
  return Status::ok();
}

IoRequest DenseReader::request(uint64_t element, uint64_t bytes, unsigned char* into) const {
  return IoRequest{IoOp::kRead, fd_,
                   &path_,      l_.data_offset + element * l_.item_bytes,
                   bytes,       reinterpret_cast<std::byte*>(into)};
}

Status DenseReader::read(int64_t element, int64_t count) {
  tmp_.resize(static_cast<size_t>(count) * l_.item_bytes);
  const IoRequest req = request(static_cast<uint64_t>(element), tmp_.size(), tmp_.data());
  return engine_.run({&req, 1});
}

}  // namespace stripesolve::storage
