// The .npy header (NumPy format v1-v3) for float64 arrays, as the client writes results and the
// daemon reads uploaded right-hand sides. Only what the wire needs: little-endian float64 ('<f8'),
// 1-D or 2-D, C or Fortran order. Pure functions, no I/O.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace stripesolve::protocol {

struct NpyHeader {
  std::vector<int64_t> shape;  // 1 or 2 dimensions
  bool fortran_order = false;
  size_t data_offset = 0;      // bytes before the first element
  int64_t rows() const { return shape.empty() ? 0 : shape[0]; }
  int64_t cols() const { return shape.size() < 2 ? 1 : shape[1]; }
};

// A v1.0 header (v2.0 if the dict does not fit 65535 bytes) for '<f8' with the given shape,
// padded to a multiple of 64 bytes as NumPy writes it.
std::string make_npy_header(const std::vector<int64_t>& shape, bool fortran_order);

// Parses the header at the start of `bytes` (which may hold more than the header). Errors name
// what is wrong (magic, version, dtype, shape) and are kInvalidArgument; a header that needs more
// bytes than given is kFailedPrecondition with the needed size in the message.
Result<NpyHeader> parse_npy_header(std::string_view bytes);

// Converts a float64 .npy image (header + data) to column-major n x nrhs values.
Result<std::vector<double>> npy_to_column_major(std::string_view bytes, int64_t* rows, int64_t* cols);

}  // namespace stripesolve::protocol
