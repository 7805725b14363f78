// DenseReader (import_export.cc's dense import): the elements of a dense n x n file (.npy or raw,
// C or Fortran order, any item encoding of npy.h) read into stripe order, checked finite where
// asked. Internal to storage/.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "base/status.h"
#include "storage/column_batches.h"
#include "storage/geometry.h"
#include "storage/npy.h"
#include "storage/pread_engine.h"
#include "storage/store_shared.h"
#include "storage/transpose.h"

namespace stripesolve::storage {

// Columns c with r + c*h in [e0, e1): [first, last) (empty when first >= last).
inline std::pair<int64_t, int64_t> row_columns(int64_t r, int64_t h, int64_t e0, int64_t e1) {
  const int64_t first = e0 > r ? (e0 - r + h - 1) / h : 0;
  const int64_t last = e1 > r ? (e1 - r + h - 1) / h : 0;
  return {first, last};
}

// The columns [first, last) of a window [e0, e1) of a stripe of h rows that the window holds
// whole (empty when first >= last); the window's other elements belong to at most two partial
// columns at its ends.
inline std::pair<int64_t, int64_t> whole_columns(int64_t h, int64_t e0, int64_t e1) {
  return {(e0 + h - 1) / h, e1 / h};
}

// Reads elements of a dense n x n file into stripe order. C order: the whole columns of a window
// are h row segments read in one batch (one O_DIRECT read into the staging block when they are
// whole rows) and transposed in tiles over the cores (storage/transpose.h). Fortran order:
// fill_batch reads a range of whole columns in one sequential read and gathers every stripe's rows
// from it (column_batches.h); fill, one read per column segment, is left for buffers too small to
// plan batches.
class DenseReader {
 public:
  DenseReader(int fd, std::string path, DenseLayout layout, int64_t n, bool check_finite,
              bool direct_reads)
      : fd_(fd),
        path_(std::move(path)),
        l_(std::move(layout)),
        enc_{l_.item_bytes, l_.big_endian},
        n_(n),
        check_(check_finite),
        direct_tried_(!direct_reads) {}
  ~DenseReader();
  DenseReader(const DenseReader&) = delete;
  DenseReader& operator=(const DenseReader&) = delete;

  // Elements [e0, e0 + count) of stripe I (its stripe order) into out.
  Status fill(const StripeGeometry& g, int64_t I, int64_t e0, int64_t count, double* out);

  // Readies fill_batch for batches of at most `columns` columns (the staging block).
  Status prepare_batches(int64_t columns);

  // The windows of batch b (Fortran order): the file's whole columns [col_begin, col_end) in one
  // read into the staging block, then each window's rows copied out of it over the cores.
  Status fill_batch(const StripeGeometry& g, const ColumnBatch& b,
                    std::span<const ElementRun> runs);

 private:
  // Whole columns [cf, cl) of stripe I, C order: out[r + (c - cf) h].
  Status fill_block(const StripeGeometry& g, int64_t I, int64_t cf, int64_t cl, double* out);

  // Elements [e0, e1) of stripe I, C order, one read per row (the partial columns of a window).
  Status fill_rows(const StripeGeometry& g, int64_t I, int64_t e0, int64_t e1, double* out);

  // Elements [e0, e1) of stripe I, Fortran order: each column's segment is contiguous, read in
  // one batch for the window and decoded over the cores.
  Status fill_columns(const StripeGeometry& g, int64_t I, int64_t e0, int64_t e1, double* out);

  // A staging block for reads of up to `bytes`, and a second descriptor of the file opened with
  // O_DIRECT where the filesystem allows it (tried once), so large reads go from the disk to the
  // block without the page cache: no copy, nothing to evict, on cores the transposes need.
  Status prepare_staging(uint64_t bytes);

  // File bytes [offset, offset + bytes) into the staging block; returns where they start in it.
  // O_DIRECT reads cover the 4 KiB-aligned range around them; a read that meets the end of the
  // file before `bytes` is an error, as for the buffered read.
  Result<const unsigned char*> read_staged(uint64_t offset, uint64_t bytes);

  // The first non-finite value of the window, named by its row and column.
  Status check_finite(const StripeGeometry& g, int64_t I, int64_t e0, int64_t count,
                      const double* out) const;

  IoRequest request(uint64_t element, uint64_t bytes, unsigned char* into) const;

  Status read(int64_t element, int64_t count);

  int fd_;
  std::string path_;
  DenseLayout l_;
  ElementEncoding enc_;
  int64_t n_;
  bool check_;
  std::vector<unsigned char> tmp_;
  AlignedBuffer staging_;  // fill_batch's columns
  int direct_fd_ = -1;     // the file again, O_DIRECT (-1: buffered reads)
  bool direct_tried_ = false;
  PreadEngine engine_;
};

}  // namespace stripesolve::storage
