// .npy arrays read from and written to the descriptors a client passed (daemon/job_files.h).
//
// read_npy_header(): the header at the start of the file and the file's size checked against
//   the shape ("npy: shape (3, 4) of float64 needs 224 bytes, file has 200"), before anything
//   is allocated for the data.
// read_npy_floats(): the elements in C order as float64 into the caller's buffer: '<f8' data in
//   C order (every 1-D array) is read straight into it, so a batch's inputs cost one copy from
//   the page cache; float32 is widened and Fortran order transposed through a bounded buffer.
// read_npy_ints(): int64 / int32 (ragged batch sizes).
// NpyOutput: sizes the file exactly (header + data), writes the header, then values at their
//   offsets, so a solution goes from the solver's buffer into the client's file in one copy.
//
// pread, never mmap: the client owns the file and may truncate it while the job runs; touching
// a mapped page beyond the new end raises SIGBUS in the daemon, a read only comes back short
// (an error naming the array). Errors are prefixed with the array's name by the callers.
// Pure functions over descriptors; no threads.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "protocol/npy.h"

namespace stripesolve::daemon {

Result<protocol::NpyHeader> read_npy_header(int fd);

// `out` holds header.elements() values.
Status read_npy_floats(int fd, const protocol::NpyHeader& header, double* out);
Result<std::vector<int64_t>> read_npy_ints(int fd, const protocol::NpyHeader& header);

class NpyOutput {
 public:
  // A C-order float64 array of `shape` (1-D or 2-D) in the file behind `fd`.
  static Result<NpyOutput> begin(int fd, const std::vector<int64_t>& shape);
  // Writes `count` values at flat (C-order) element `first`.
  Status write(uint64_t first, const double* values, uint64_t count) const;
  uint64_t file_bytes() const { return data_offset_ + 8 * elements_; }
  uint64_t data_offset() const { return data_offset_; }

 private:
  int fd_ = -1;
  uint64_t data_offset_ = 0;
  uint64_t elements_ = 0;
};

}  // namespace stripesolve::daemon
