#include "client/npy_writer.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>

#include <fmt/format.h>

#include "protocol/npy.h"

namespace stripesolve::client {

Status NpyWriter::open(const std::string& path, int64_t n, int64_t nrhs,
                       const std::vector<int64_t>& array_shape) {
  if (n <= 0 || nrhs <= 0)
    return Status::invalid_argument(fmt::format("shape ({}, {}) is empty", n, nrhs));
  if (!array_shape.empty()) {
    int64_t count = array_shape.size() <= 2 ? 1 : 0;
    for (int64_t d : array_shape) count = d > 0 && count <= INT64_MAX / d ? count * d : 0;
    if (count != n * nrhs) {
      return Status::invalid_argument(
          fmt::format("result array shape {} does not hold {} x {} values",
                      protocol::format_shape(array_shape), n, nrhs));
    }
  }
  path_ = path;
  n_ = n;
  nrhs_ = nrhs;
  STRIPESOLVE_ASSIGN_OR_RETURN(out_, OutputFile::create(path, "--out"));
  const int fd = out_.fd();
  const std::string& temp = out_.temporary();
  file_shape_ = !array_shape.empty() ? array_shape
                : nrhs == 1          ? std::vector<int64_t>{n}
                                     : std::vector<int64_t>{n, nrhs};
  const std::string header = protocol::make_npy_header(file_shape_, false);
  data_offset_ = header.size();
  if (::pwrite(fd, header.data(), header.size(), 0) != static_cast<ssize_t>(header.size())) {
    return Status::from_errno(errno, "write header of " + temp);
  }
  if (::ftruncate(fd, static_cast<off_t>(data_offset_ + 8 * n * nrhs)) != 0) {
    return Status::from_errno(errno, "size " + temp);
  }
  return Status::ok();
}

Status NpyWriter::write_rows(int64_t row_begin, int64_t rows, const char* data) {
  const int fd = out_.fd();
  const std::string& temp = out_.temporary();
  if (fd < 0) return Status::failed_precondition("npy writer is not open");
  if (row_begin < 0 || rows <= 0 || row_begin + rows > n_) {
    return Status::invalid_argument(
        fmt::format("rows [{}, {}) outside [0, {}) of {}", row_begin, row_begin + rows, n_, path_));
  }
  const size_t bytes = static_cast<size_t>(8 * rows * nrhs_);
  off_t off = static_cast<off_t>(data_offset_ + 8 * row_begin * nrhs_);
  size_t done = 0;
  while (done < bytes) {
    const ssize_t w = ::pwrite(fd, data + done, bytes - done, off + static_cast<off_t>(done));
    if (w < 0) {
      if (errno == EINTR) continue;
      return Status::from_errno(errno, fmt::format("write {} at offset {}", temp, off + done));
    }
    done += static_cast<size_t>(w);
  }
  // Record [row_begin, end) among the written ranges, merging neighbours (chunks arrive in
  // back-substitution order, so the map stays tiny).
  int64_t b = row_begin, e = row_begin + rows;
  auto it = written_.upper_bound(b);
  if (it != written_.begin() && std::prev(it)->second > b) {
    return Status::invalid_argument(
        fmt::format("rows [{}, {}) of {} were written twice", b, e, path_));
  }
  if (it != written_.end() && it->first < e) {
    return Status::invalid_argument(
        fmt::format("rows [{}, {}) of {} were written twice", b, e, path_));
  }
  if (it != written_.end() && it->first == e) {
    e = it->second;
    it = written_.erase(it);
  }
  if (it != written_.begin() && std::prev(it)->second == b) {
    std::prev(it)->second = e;
  } else {
    written_[b] = e;
  }
  rows_written_ += rows;
  return Status::ok();
}

Status NpyWriter::finish() {
  if (out_.fd() < 0) return Status::failed_precondition("npy writer is not open");
  if (rows_written_ != n_) {
    return Status::failed_precondition(
        fmt::format("only {} of {} rows of {} were received", rows_written_, n_, path_));
  }
  return out_.commit();
}

}  // namespace stripesolve::client
