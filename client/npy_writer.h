// Writes a float64 .npy file incrementally: the header with the final shape first, then row
// blocks at their offsets in any order, so a solution streamed in back-substitution order never
// has to be held in memory. The data goes to "<path>.partial" and is renamed to <path> by
// finish() only when every row was written, so no half-written result is ever visible under the
// final name. The array is C-ordered: shape (n,) for one right-hand side, else (n, nrhs).
// Threading: one thread.
#pragma once

#include <cstdint>
#include <string>
#include <map>
#include <vector>

#include "base/status.h"

namespace stripesolve::client {

class NpyWriter {
 public:
  ~NpyWriter();  // removes the .partial file if finish() did not succeed
  Status open(const std::string& path, int64_t n, int64_t nrhs);
  // `rows` rows starting at `row_begin`, row-major (rows x nrhs float64). Each row once.
  Status write_rows(int64_t row_begin, int64_t rows, const char* data);
  Status finish();
  int64_t rows_written() const { return rows_written_; }

 private:
  std::string path_, partial_;
  int fd_ = -1;
  int64_t n_ = 0, nrhs_ = 0;
  uint64_t data_offset_ = 0;
  int64_t rows_written_ = 0;
  std::map<int64_t, int64_t> written_;  // disjoint written row ranges [begin -> end), merged
};

}  // namespace stripesolve::client
