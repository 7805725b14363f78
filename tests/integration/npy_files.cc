#include "tests/integration/npy_files.h"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <sstream>

namespace stripesolve::testing {

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void write_npy_as(const std::string& path, const std::vector<int64_t>& shape,
                  const std::vector<double>& values, const NpyFormat& format) {
  std::string header = protocol::make_npy_header(shape, format.fortran_order, format.dtype);
  if (format.big_endian) header[header.find("'<") + 1] = '>';
  const int64_t rows = shape[0], cols = shape.size() == 2 ? shape[1] : 1;
  const bool wide = format.dtype == protocol::NpyDtype::kFloat64;
  std::string data;
  for (int64_t k = 0; k < rows * cols; ++k) {  // file order
    const int64_t c_index = format.fortran_order ? (k % rows) * cols + k / rows : k;
    const double v = values[static_cast<size_t>(c_index)];
    char bytes[8];
    if (wide) {
      std::memcpy(bytes, &v, 8);
    } else {
      const float f = static_cast<float>(v);
      std::memcpy(bytes, &f, 4);
    }
    const size_t width = wide ? 8 : 4;
    if (format.big_endian) std::reverse(bytes, bytes + width);
    data.append(bytes, width);
  }
  std::ofstream out(path, std::ios::binary);
  out << header << data;
}

void write_npy(const std::string& path, const std::vector<int64_t>& shape,
               const std::vector<double>& values) {
  write_npy_as(path, shape, values, {});
}

void write_npy_f32(const std::string& path, const std::vector<int64_t>& shape,
                   const std::vector<double>& values) {
  write_npy_as(path, shape, values, {.dtype = protocol::NpyDtype::kFloat32});
}

void write_npy_i64(const std::string& path, const std::vector<int64_t>& values) {
  std::ofstream out(path, std::ios::binary);
  out << protocol::make_npy_header({static_cast<int64_t>(values.size())}, false,
                                   protocol::NpyDtype::kInt64);
  out.write(reinterpret_cast<const char*>(values.data()),
            static_cast<std::streamsize>(values.size() * sizeof(int64_t)));
}

NpyArray read_npy(const std::string& path) {
  NpyArray a;
  const std::string bytes = read_file(path);
  auto h = protocol::inspect_npy(bytes);
  if (!h.is_ok()) return a;
  auto values = protocol::npy_float_values(bytes, *h);
  if (!values.is_ok()) return a;
  a.shape = h->shape;
  a.dtype = h->dtype;
  a.values = std::move(values).value();
  return a;
}

}  // namespace stripesolve::testing
