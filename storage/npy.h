// The NumPy .npy format (versions 1.0, 2.0, 3.0) for square float matrices: reading the header of
// an existing file and making one for export. Reference: numpy/lib/format.py.
//
//   "\x93NUMPY" major minor, header length (uint16 LE for v1, uint32 LE for v2/v3), then a Python
//   dict literal {'descr': '<f8', 'fortran_order': False, 'shape': (n, n), } padded with spaces
//   and '\n' so that the data starts at a multiple of 64 bytes.
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace stripesolve::storage {

// How a dense array of floats lies in a file.
struct DenseLayout {
  uint64_t data_offset = 0;  // where element 0 starts
  std::vector<int64_t> shape;
  int item_bytes = 8;  // 8 (float64) or 4 (float32, widened on import)
  bool big_endian = false;
  bool fortran_order = false;  // column-major
};

// Parses the header at the start of `bytes` (the file's first bytes; give at least 10, and the
// whole header for success). Errors are kInvalidArgument naming `where`.
Result<DenseLayout> parse_npy_header(std::string_view bytes, const std::string& where);
// Bytes needed to parse the header whose first 12 bytes are given (0 if not an .npy file).
uint64_t npy_header_bytes(std::string_view first12);

// A version 1.0 header for a C-order little-endian float64 array of the given shape.
std::string make_npy_header(const std::vector<int64_t>& shape);

}  // namespace stripesolve::storage
