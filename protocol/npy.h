// The .npy header (NumPy format v1-v3), as the client writes results and the daemon reads uploads.
// Only what the wire needs: 1-D or 2-D, C or Fortran order, float64 for results (written
// little-endian, '<f8') and dense right-hand sides; float32, int64 and int32 are read too
// (tridiagonal batches widen float32 inputs; ragged batch sizes are integers), in either byte
// order, as `matrix import` reads matrices. Pure functions, no I/O.
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace stripesolve::protocol {

enum class NpyDtype { kFloat64, kFloat32, kInt64, kInt32 };
// "float64", "float32", "int64", "int32".
std::string_view npy_dtype_name(NpyDtype dtype);
bool is_float(NpyDtype dtype);

struct NpyHeader {
  std::vector<int64_t> shape;  // 1 or 2 dimensions
  bool fortran_order = false;
  size_t data_offset = 0;  // bytes before the first element
  NpyDtype dtype = NpyDtype::kFloat64;
  bool big_endian = false;  // '>f8' and the like: elements are byte-swapped as they are read
  int64_t rows() const { return shape.empty() ? 0 : shape[0]; }
  int64_t cols() const { return shape.size() < 2 ? 1 : shape[1]; }
  int64_t elements() const { return rows() * cols(); }
};

// "(5,)" or "(4, 2)", as NumPy prints a shape.
std::string format_shape(const std::vector<int64_t>& shape);

// A v1.0 header (v2.0 if the dict does not fit 65535 bytes) for '<f8' (or `dtype`) with the
// given shape, padded to a multiple of 64 bytes as NumPy writes it.
std::string make_npy_header(const std::vector<int64_t>& shape, bool fortran_order,
                            NpyDtype dtype = NpyDtype::kFloat64);

// Parses the header at the start of `bytes` (which may hold more than the header). Errors name
// what is wrong (magic, version, dtype, shape) and are kInvalidArgument; a header that needs more
// bytes than given is kFailedPrecondition with the needed size in the message.
Result<NpyHeader> parse_npy_header(std::string_view bytes);

// Converts a float64 .npy image (header + data, either byte order) to column-major n x nrhs
// values.
Result<std::vector<double>> npy_to_column_major(std::string_view bytes, int64_t* rows,
                                                int64_t* cols);

// The header of a whole .npy image of any NpyDtype, checking that `bytes` holds exactly the
// elements its shape needs ("npy: shape (3, 4) of float32 needs 176 bytes, file has 170").
// Unsupported dtypes (complex, bool, float16, ...) are kInvalidArgument naming the dtype.
Result<NpyHeader> inspect_npy(std::string_view bytes);
// The same for a file of `file_size` bytes of which `prefix` are the first: the header must lie
// in `prefix`, else kFailedPrecondition "npy: need N bytes for the header" when the file has
// more to read (kInvalidArgument when it has not). inspect_npy(b) is inspect_npy_header(b,
// b.size()).
Result<NpyHeader> inspect_npy_header(std::string_view prefix, uint64_t file_size);
// Bytes of one element of `dtype` (8 or 4).
size_t npy_dtype_bytes(NpyDtype dtype);
// The element at `element` in the header's dtype and byte order, converted to T (float32 and
// int32 widened exactly). Inline: the readers call it once an element.
template <typename T>
T npy_element(const char* element, const NpyHeader& header);
// The elements of an image inspect_npy accepted, in C (row-major) order: Fortran-ordered arrays
// are transposed, float32 is widened exactly, int32 is widened. An integer image asked for as
// floats (or the reverse) is kInvalidArgument naming both dtypes.
Result<std::vector<double>> npy_float_values(std::string_view bytes, const NpyHeader& header);
Result<std::vector<int64_t>> npy_int_values(std::string_view bytes, const NpyHeader& header);

// Elements are copied with memcpy and swapped where the file is big-endian: the host must be
// little-endian.
static_assert(std::endian::native == std::endian::little,
              "the .npy reader assumes a little-endian host");

namespace npy_detail {
// The element's bits as an unsigned integer of its width, in host (little-endian) order.
template <typename U>
U raw_bits(const char* p, bool big_endian) {
  U u;
  std::memcpy(&u, p, sizeof u);
  if (big_endian) {
    if constexpr (sizeof(U) == 8) {
      u = __builtin_bswap64(u);
    } else {
      u = __builtin_bswap32(u);
    }
  }
  return u;
}
}  // namespace npy_detail

template <typename T>
T npy_element(const char* element, const NpyHeader& header) {
  using npy_detail::raw_bits;
  switch (header.dtype) {
    case NpyDtype::kFloat64:
      return static_cast<T>(std::bit_cast<double>(raw_bits<uint64_t>(element, header.big_endian)));
    case NpyDtype::kFloat32:
      return static_cast<T>(std::bit_cast<float>(raw_bits<uint32_t>(element, header.big_endian)));
    case NpyDtype::kInt64:
      return static_cast<T>(std::bit_cast<int64_t>(raw_bits<uint64_t>(element, header.big_endian)));
    case NpyDtype::kInt32:
      return static_cast<T>(std::bit_cast<int32_t>(raw_bits<uint32_t>(element, header.big_endian)));
  }
  return T{};
}

}  // namespace stripesolve::protocol
