// .npy files for the integration tests: written as NumPy would (C order, little-endian, unless
// a format says otherwise) and read back through protocol/npy.h, the daemon's own reader.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "protocol/npy.h"

namespace stripesolve::testing {

// How write_npy_as lays the elements out.
struct NpyFormat {
  protocol::NpyDtype dtype = protocol::NpyDtype::kFloat64;  // float64 or float32
  bool big_endian = false;                                  // '>f8' / '>f4'
  bool fortran_order = false;
};
// `values` (C order of `shape`) in `format`.
void write_npy_as(const std::string& path, const std::vector<int64_t>& shape,
                  const std::vector<double>& values, const NpyFormat& format);

// `values` in C order of `shape`.
void write_npy(const std::string& path, const std::vector<int64_t>& shape,
               const std::vector<double>& values);
void write_npy_f32(const std::string& path, const std::vector<int64_t>& shape,
                   const std::vector<double>& values);
void write_npy_i64(const std::string& path, const std::vector<int64_t>& values);

struct NpyArray {
  std::vector<int64_t> shape;
  protocol::NpyDtype dtype = protocol::NpyDtype::kFloat64;
  std::vector<double> values;  // C order
};
// Reads a float .npy; an unreadable or malformed file gives an empty shape.
NpyArray read_npy(const std::string& path);

std::string read_file(const std::string& path);

}  // namespace stripesolve::testing
