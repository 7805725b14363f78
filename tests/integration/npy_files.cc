#include "tests/integration/npy_files.h"

#include <fstream>
#include <sstream>

namespace stripesolve::testing {

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void write_npy(const std::string& path, const std::vector<int64_t>& shape,
               const std::vector<double>& values) {
  std::ofstream out(path, std::ios::binary);
  out << protocol::make_npy_header(shape, false);
  out.write(reinterpret_cast<const char*>(values.data()),
            static_cast<std::streamsize>(values.size() * sizeof(double)));
}

void write_npy_f32(const std::string& path, const std::vector<int64_t>& shape,
                   const std::vector<double>& values) {
  const std::vector<float> narrow(values.begin(), values.end());
  std::ofstream out(path, std::ios::binary);
  out << protocol::make_npy_header(shape, false, protocol::NpyDtype::kFloat32);
  out.write(reinterpret_cast<const char*>(narrow.data()),
            static_cast<std::streamsize>(narrow.size() * sizeof(float)));
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
