// Writes a float64 .npy file incrementally: the header with the final shape first, then row
// blocks at their offsets in any order, so a solution streamed in back-substitution order never
// has to be held in memory. The data goes to a new temporary next to <path> (OutputFile,
// client/local_files.h: created with O_EXCL, never through a symlink) and is renamed to <path>
// by finish() only when every row was written, so no half-written result is ever visible under
// the final name. The array is C-ordered: shape (n,) for one right-hand side, else (n, nrhs), or
// the `array_shape` the daemon named (a tridiagonal solution has its rhs's shape); rows are then
// consecutive runs of nrhs values of that array in C order.
// Threading: one thread.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "base/status.h"
#include "client/local_files.h"

namespace stripesolve::client {

class NpyWriter {
 public:
  ~NpyWriter() = default;  // the temporary is removed if finish() did not succeed
  // `array_shape` (1-D or 2-D, n * nrhs values) overrides the file's shape when not empty.
  Status open(const std::string& path, int64_t n, int64_t nrhs,
              const std::vector<int64_t>& array_shape = {});
  // `rows` rows starting at `row_begin`, row-major (rows x nrhs float64). Each row once.
  Status write_rows(int64_t row_begin, int64_t rows, const char* data);
  Status finish();
  int64_t rows_written() const { return rows_written_; }
  const std::vector<int64_t>& file_shape() const { return file_shape_; }

 private:
  std::string path_;
  OutputFile out_;
  int64_t n_ = 0, nrhs_ = 0;
  std::vector<int64_t> file_shape_;
  uint64_t data_offset_ = 0;
  int64_t rows_written_ = 0;
  std::map<int64_t, int64_t> written_;  // disjoint written row ranges [begin -> end), merged
};

}  // namespace stripesolve::client
