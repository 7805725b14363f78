#include "daemon/npy_file.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>

#include <fmt/format.h>

namespace stripesolve::daemon {
namespace {

using protocol::NpyDtype;
using protocol::NpyHeader;

// Bytes staged at a time when values need converting.
constexpr uint64_t kStagingBytes = 8ull << 20;
// The longest header protocol/npy accepts (1 MiB dict) plus its preamble.
constexpr uint64_t kMaxHeaderBytes = (1ull << 20) + 12;

// Reads exactly `bytes` at `offset`; a file that became shorter is an error, not a short array.
Status pread_full(int fd, void* buf, uint64_t bytes, uint64_t offset) {
  auto* p = static_cast<char*>(buf);
  uint64_t done = 0;
  while (done < bytes) {
    // At most 1 GiB a call: Linux transfers at most 0x7ffff000 bytes per read anyway.
    const size_t ask = static_cast<size_t>(std::min<uint64_t>(bytes - done, 1ull << 30));
    const ssize_t n = ::pread(fd, p + done, ask, static_cast<off_t>(offset + done));
    if (n < 0) {
      if (errno == EINTR) continue;
      return Status::from_errno(errno, fmt::format("read at offset {}", offset + done));
    }
    if (n == 0) {
      return Status::invalid_argument(
          fmt::format("the file ended at offset {} while {} bytes were read (was it truncated?)",
                      offset + done, bytes));
    }
    done += static_cast<uint64_t>(n);
  }
  return Status::ok();
}

Status pwrite_full(int fd, const void* buf, uint64_t bytes, uint64_t offset) {
  const auto* p = static_cast<const char*>(buf);
  uint64_t done = 0;
  while (done < bytes) {
    const size_t ask = static_cast<size_t>(std::min<uint64_t>(bytes - done, 1ull << 30));
    const ssize_t n = ::pwrite(fd, p + done, ask, static_cast<off_t>(offset + done));
    if (n < 0) {
      if (errno == EINTR) continue;
      return Status::from_errno(errno, fmt::format("write at offset {}", offset + done));
    }
    done += static_cast<uint64_t>(n);
  }
  return Status::ok();
}

// Converts the data through a staging buffer into C order.
template <typename T>
Status read_converted(int fd, const NpyHeader& h, T* out) {
  const uint64_t item = protocol::npy_dtype_bytes(h.dtype);
  const uint64_t total = static_cast<uint64_t>(h.elements());
  const bool transpose = h.fortran_order && h.shape.size() == 2;
  const uint64_t r = static_cast<uint64_t>(h.rows()), c = static_cast<uint64_t>(h.cols());
  std::vector<char> stage(
      static_cast<size_t>(std::min(kStagingBytes, std::max<uint64_t>(total, 1) * item)));
  const uint64_t per_pass = stage.size() / item;
  for (uint64_t k0 = 0; k0 < total; k0 += per_pass) {
    const uint64_t count = std::min(per_pass, total - k0);
    STRIPESOLVE_RETURN_IF_ERROR(
        pread_full(fd, stage.data(), count * item, h.data_offset + k0 * item));
    for (uint64_t i = 0; i < count; ++i) {
      const uint64_t k = k0 + i;  // file order
      out[transpose ? (k % r) * c + k / r : k] =
          protocol::npy_element<T>(stage.data() + i * item, h);
    }
  }
  return Status::ok();
}

}  // namespace

Result<NpyHeader> read_npy_header(int fd) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) return Status::from_errno(errno, "fstat");
  const auto size = static_cast<uint64_t>(st.st_size);
  std::string prefix(static_cast<size_t>(std::min<uint64_t>(size, 4096)), '\0');
  STRIPESOLVE_RETURN_IF_ERROR(pread_full(fd, prefix.data(), prefix.size(), 0));
  auto header = protocol::inspect_npy_header(prefix, size);
  if (!header.is_ok() && header.status().code() == StatusCode::kFailedPrecondition) {
    prefix.resize(static_cast<size_t>(std::min(size, kMaxHeaderBytes)));
    STRIPESOLVE_RETURN_IF_ERROR(pread_full(fd, prefix.data(), prefix.size(), 0));
    header = protocol::inspect_npy_header(prefix, size);
    if (!header.is_ok()) return Status::invalid_argument(header.status().message());
  }
  return header;
}

Status read_npy_floats(int fd, const NpyHeader& h, double* out) {
  if (!protocol::is_float(h.dtype)) {
    return Status::invalid_argument(
        fmt::format("npy: dtype {} where a floating-point array (float64 or float32) is needed",
                    protocol::npy_dtype_name(h.dtype)));
  }
  if (h.dtype == NpyDtype::kFloat64 && !h.big_endian && (!h.fortran_order || h.shape.size() == 1)) {
    return pread_full(fd, out, 8 * static_cast<uint64_t>(h.elements()), h.data_offset);
  }
  return read_converted(fd, h, out);
}

Result<std::vector<int64_t>> read_npy_ints(int fd, const NpyHeader& h) {
  if (protocol::is_float(h.dtype)) {
    return Status::invalid_argument(
        fmt::format("npy: dtype {} where an integer array (int64 or int32) is needed",
                    protocol::npy_dtype_name(h.dtype)));
  }
  std::vector<int64_t> out(static_cast<size_t>(h.elements()));
  STRIPESOLVE_RETURN_IF_ERROR(read_converted(fd, h, out.data()));
  return out;
}

Result<NpyOutput> NpyOutput::begin(int fd, const std::vector<int64_t>& shape) {
  const std::string header = protocol::make_npy_header(shape, false);
  uint64_t elements = 1;
  for (int64_t d : shape) elements *= static_cast<uint64_t>(d);
  NpyOutput out;
  out.fd_ = fd;
  out.data_offset_ = header.size();
  out.elements_ = elements;
  // Exactly the array's size: whatever the file held before is gone, and a job that fails half
  // way leaves a file the client removes anyway.
  if (::ftruncate(fd, static_cast<off_t>(out.file_bytes())) != 0) {
    return Status::from_errno(errno, fmt::format("size the file to {} bytes", out.file_bytes()));
  }
  STRIPESOLVE_RETURN_IF_ERROR(pwrite_full(fd, header.data(), header.size(), 0));
  return out;
}

Status NpyOutput::write(uint64_t first, const double* values, uint64_t count) const {
  if (first + count > elements_) {
    return Status::internal(fmt::format("values [{}, {}) outside the {} of the output", first,
                                        first + count, elements_));
  }
  return pwrite_full(fd_, values, 8 * count, data_offset_ + 8 * first);
}

}  // namespace stripesolve::daemon
